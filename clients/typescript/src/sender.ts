import type { Accepted, SendRequest } from "./types.gen.js";

/** CallOptions are the options of every call. */
export interface CallOptions {
  /** Aborting it cancels the call: its request, and any wait before a retry. */
  signal?: AbortSignal;
}

/**
 * Sender sends notifications: HttpTransport (POST /v1/notifications) and SqsTransport (the
 * service's ingest queue) are both one. Every request must carry an idempotency_key.
 */
export interface Sender {
  send(req: SendRequest, opts?: CallOptions): Promise<Accepted>;
  sendBatch(reqs: readonly SendRequest[], opts?: CallOptions): Promise<Accepted[]>;
  /** Sends what is buffered and releases what the sender holds (SqsTransport). */
  close?(): Promise<void>;
}
