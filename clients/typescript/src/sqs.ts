import { SendMessageBatchCommand, SQSClient, type SendMessageBatchRequestEntry, type SQSClientConfig } from "@aws-sdk/client-sqs";

import { HeraldBatchError, HeraldError, type BatchResult } from "./errors.js";
import { checkKey, deriveNotificationId, requireKeys } from "./idempotency.js";
import { abortReason, backoff, resolveRetry, type ResolvedRetry, type RetryOptions } from "./retry.js";
import type { CallOptions, Sender } from "./sender.js";
import type { Accepted, SendRequest } from "./types.gen.js";

/** The message attribute that tells Herald's ingest which lane a request takes. */
export const LANE_ATTRIBUTE = "herald-lane";

export interface SqsTransportOptions {
  /** The URL of the service's ingest queue, `herald-<env>-ingest-<service>`. */
  queueUrl: string;
  /** The service the queue belongs to: the MessageGroupId, and part of every notification id. */
  service: string;
  /** The SQS client to use; without one, a client is made from region, endpoint and credentials. */
  client?: SQSClient;
  region?: string;
  endpoint?: string;
  credentials?: SQSClientConfig["credentials"];
  /** Messages per SendMessageBatch, at most 10 (default 10). */
  maxBatch?: number;
  /** Bytes per SendMessageBatch, bodies and attributes (default 262144, SQS's 256 KiB). */
  maxBatchBytes?: number;
  /** How long a message waits for others before its batch goes (default 20 ms). */
  flushIntervalMs?: number;
  /** Requests buffered, in flight or waiting for a retry, at most (default 1000). */
  maxBuffered?: number;
  /** With maxBuffered reached, send waits for room ("block", the default) or fails at once ("fail"). */
  whenFull?: "block" | "fail";
  /** Retries of a message SQS failed for its own reasons or throttled (defaults 8 attempts, 100 ms, 5 s). */
  retry?: RetryOptions;
  /** SendMessageBatch calls in flight at once (default 4). */
  maxInFlight?: number;
}

interface Entry {
  id: string;
  body: string;
  lane: "bulk" | "realtime";
  size: number;
  accepted: Accepted;
  attempts: number;
  state: "queued" | "inflight" | "waiting" | "done";
  timer?: ReturnType<typeof setTimeout>;
  resolve: (a: Accepted) => void;
  reject: (e: unknown) => void;
  promise: Promise<Accepted>;
  detach?: () => void;
}

interface Waiter {
  resolve: () => void;
  reject: (e: unknown) => void;
  detach?: () => void;
}

// Codes of a throttled entry or call: retried even when SQS calls it the sender's fault.
const THROTTLING = /thrott|toomanyrequests|requestlimitexceeded|slowdown/i;

/**
 * SqsTransport sends each request as one message to the service's ingest queue, with the
 * `herald-lane` attribute ("bulk" for marketing, else "realtime") and the service as its
 * MessageGroupId. A background batcher groups messages into SendMessageBatch calls (10
 * messages, 256 KiB, or 20 ms, whichever comes first); a send resolves once its message is
 * on the queue, with the id Herald derives from its idempotency key. Messages that SQS fails
 * or throttles are retried alone with backoff; one it refuses as the sender's fault rejects its
 * own send only. Nothing is dropped silently: every send resolves or rejects.
 */
export class SqsTransport implements Sender {
  readonly queueUrl: string;
  readonly service: string;
  private readonly client: SQSClient;
  private readonly ownsClient: boolean;
  private readonly maxBatch: number;
  private readonly maxBatchBytes: number;
  private readonly flushIntervalMs: number;
  private readonly maxBuffered: number;
  private readonly whenFull: "block" | "fail";
  private readonly retry: ResolvedRetry;
  private readonly maxInFlight: number;

  private readonly queue: Entry[] = [];
  private readonly pending = new Set<Entry>();
  private readonly waiters: Waiter[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  private due = false;
  private inFlight = 0;
  private seq = 0;
  private reserved = 0;
  private closed = false;

  constructor(options: SqsTransportOptions) {
    if (!options?.queueUrl) throw new TypeError("SqsTransport needs a queueUrl");
    if (!options.service) throw new TypeError("SqsTransport needs the service the queue belongs to");
    this.queueUrl = options.queueUrl;
    this.service = options.service;
    if (options.client) {
      this.client = options.client;
      this.ownsClient = false;
    } else {
      const config: SQSClientConfig = {};
      if (options.region) config.region = options.region;
      if (options.endpoint) config.endpoint = options.endpoint;
      if (options.credentials) config.credentials = options.credentials;
      this.client = new SQSClient(config);
      this.ownsClient = true;
    }
    this.maxBatch = options.maxBatch ?? 10;
    if (!Number.isInteger(this.maxBatch) || this.maxBatch < 1 || this.maxBatch > 10) throw new RangeError("maxBatch must be 1 to 10");
    this.maxBatchBytes = options.maxBatchBytes ?? 262_144;
    this.flushIntervalMs = options.flushIntervalMs ?? 20;
    this.maxBuffered = options.maxBuffered ?? 1000;
    if (!(this.maxBuffered >= 1)) throw new RangeError("maxBuffered must be ≥ 1");
    this.whenFull = options.whenFull ?? "block";
    this.retry = resolveRetry(options.retry, { maxAttempts: 8 });
    this.maxInFlight = options.maxInFlight ?? 4;
  }

  /**
   * send queues req as one message and resolves with {id, status: "ACCEPTED"} once SQS holds
   * it; the id is the one Herald gives it (deriveNotificationId). Aborting signal before the
   * message went out takes it back; after that, the promise rejects but the message may still
   * arrive (its idempotency key keeps a later retry from sending twice).
   */
  async send(req: SendRequest, opts: CallOptions = {}): Promise<Accepted> {
    const err = checkKey(req);
    if (err) throw err;
    const entry = this.prepare(req, "");
    return this.enqueue(entry, opts.signal);
  }

  /**
   * sendBatch sends every request as its own message (10 to a SendMessageBatch), so a bad one
   * fails alone. It resolves with the answers in order once all are on the queue; if any
   * failed, it rejects with a HeraldBatchError whose `results` tell which.
   */
  async sendBatch(reqs: readonly SendRequest[], opts: CallOptions = {}): Promise<Accepted[]> {
    requireKeys(reqs);
    const entries = reqs.map((req, i) => this.prepare(req, `notifications[${i}]`));
    // Each enqueue takes its place (or its turn to wait for room) at once, so they go in order.
    const promises = entries.map((entry) => this.enqueue(entry, opts.signal));
    const settled = await Promise.allSettled(promises);
    const results: BatchResult[] = settled.map((s) =>
      s.status === "fulfilled" ? { ok: true, value: s.value } : { ok: false, error: toHeraldError(s.reason) },
    );
    const first = results.findIndex((r) => !r.ok);
    if (first < 0) return results.map((r) => (r as { value: Accepted }).value);
    if (opts.signal?.aborted) throw abortReason(opts.signal);
    throw new HeraldBatchError((results[first] as { error: HeraldError }).error, first, results);
  }

  /** flush sends what is buffered now and resolves once every request queued so far is settled. */
  async flush(): Promise<void> {
    while (this.pending.size > 0 || this.waiters.length > 0) {
      this.due = true;
      this.pump();
      const waiting = [...this.pending].map((e) => e.promise.catch(() => undefined));
      if (waiting.length === 0) await new Promise((r) => setTimeout(r, 1));
      else await Promise.all(waiting);
    }
  }

  /** close flushes, then refuses new sends (code "closed") and releases a client it made. */
  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
    if (this.ownsClient) this.client.destroy();
  }

  /** buffered is how many requests are queued, in flight or waiting for a retry. */
  get buffered(): number {
    return this.pending.size;
  }

  private prepare(req: SendRequest, field: string): Entry {
    const body = JSON.stringify(req);
    const lane = req.category === "marketing" ? "bulk" : "realtime";
    const size = Buffer.byteLength(body, "utf8") + Buffer.byteLength(LANE_ATTRIBUTE) + "String".length + lane.length;
    if (size > this.maxBatchBytes) {
      throw new HeraldError({
        status: 0,
        code: "too_large",
        field,
        message: `the request is ${size} bytes as an SQS message, over the limit of ${this.maxBatchBytes}; send it over HTTP or make it smaller`,
      });
    }
    let resolve!: (a: Accepted) => void;
    let reject!: (e: unknown) => void;
    const promise = new Promise<Accepted>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return {
      id: `m${++this.seq}`,
      body,
      lane,
      size,
      accepted: { id: deriveNotificationId(this.service, req.idempotency_key as string), status: "ACCEPTED" },
      attempts: 0,
      state: "queued",
      resolve,
      reject,
      promise,
    };
  }

  private async enqueue(entry: Entry, signal: AbortSignal | undefined): Promise<Accepted> {
    if (signal?.aborted) throw abortReason(signal);
    if (this.closed) throw new HeraldError({ status: 0, code: "closed", message: "the SQS transport is closed" });
    if (this.pending.size + this.reserved >= this.maxBuffered || this.waiters.length > 0) {
      if (this.whenFull === "fail") {
        throw new HeraldError({ status: 0, code: "too_many_buffered", message: `${this.pending.size} requests are buffered already (maxBuffered ${this.maxBuffered})` });
      }
      await this.waitForRoom(signal);
      // settle reserved this room for us.
      this.reserved--;
      if (signal?.aborted) {
        this.wake();
        throw abortReason(signal);
      }
    }
    this.pending.add(entry);
    if (signal) {
      const onAbort = () => this.abortEntry(entry, abortReason(signal));
      signal.addEventListener("abort", onAbort, { once: true });
      entry.detach = () => signal.removeEventListener("abort", onAbort);
    }
    this.push(entry);
    return entry.promise;
  }

  private waitForRoom(signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve, reject) => {
      const w: Waiter = { resolve, reject };
      if (signal) {
        const onAbort = () => {
          const i = this.waiters.indexOf(w);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(abortReason(signal));
        };
        signal.addEventListener("abort", onAbort, { once: true });
        w.detach = () => signal.removeEventListener("abort", onAbort);
      }
      this.waiters.push(w);
    });
  }

  // push puts entry on the queue: a batch goes at once when it is full (maxBatch messages, or
  // the next one would not fit in maxBatchBytes), else after flushIntervalMs.
  private push(entry: Entry, front = false): void {
    entry.state = "queued";
    if (front) this.queue.unshift(entry);
    else this.queue.push(entry);
    this.pump();
  }

  private pump(): void {
    while (this.queue.length > 0 && this.inFlight < this.maxInFlight) {
      let n = 0;
      let bytes = 0;
      while (n < this.queue.length && n < this.maxBatch && bytes + this.queue[n]!.size <= this.maxBatchBytes) {
        bytes += this.queue[n]!.size;
        n++;
      }
      if (n === 0) n = 1; // cannot happen: prepare refuses a message larger than a batch
      const full = n === this.maxBatch || n < this.queue.length;
      if (!full && !this.due) break;
      void this.dispatch(this.queue.splice(0, n));
    }
    if (this.queue.length === 0) {
      this.due = false;
      if (this.timer) {
        clearTimeout(this.timer);
        this.timer = undefined;
      }
    } else if (!this.timer && !this.due) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.due = true;
        this.pump();
      }, this.flushIntervalMs);
    }
  }

  private async dispatch(batch: Entry[]): Promise<void> {
    this.inFlight++;
    for (const e of batch) e.state = "inflight";
    const entries: SendMessageBatchRequestEntry[] = batch.map((e) => ({
      Id: e.id,
      MessageBody: e.body,
      MessageGroupId: this.service,
      MessageAttributes: { [LANE_ATTRIBUTE]: { DataType: "String", StringValue: e.lane } },
    }));
    try {
      let out;
      try {
        out = await this.client.send(new SendMessageBatchCommand({ QueueUrl: this.queueUrl, Entries: entries }));
      } catch (err) {
        const transient = isTransient(err);
        for (const e of batch) {
          if (transient) this.retryEntry(e, describeAwsError(err), err);
          else this.fail(e, callError(err));
        }
        return;
      }
      const byId = new Map(batch.map((e) => [e.id, e]));
      for (const ok of out.Successful ?? []) {
        const e = ok.Id === undefined ? undefined : byId.get(ok.Id);
        if (!e) continue;
        byId.delete(e.id);
        this.succeed(e);
      }
      for (const f of out.Failed ?? []) {
        const e = f.Id === undefined ? undefined : byId.get(f.Id);
        if (!e) continue;
        byId.delete(e.id);
        const code = f.Code ?? "unknown";
        const what = `${code}${f.Message ? ": " + f.Message : ""}`;
        if (!f.SenderFault || THROTTLING.test(code)) {
          this.retryEntry(e, what);
        } else {
          this.fail(e, new HeraldError({ status: 0, code: "invalid", message: `SQS refused the message: ${what}` }));
        }
      }
      // An entry the answer does not mention: not known to be on the queue, so sent again.
      for (const e of byId.values()) this.retryEntry(e, "missing from the SendMessageBatch answer");
    } catch (err) {
      // Not expected; whatever happened, no entry is left without an outcome (below).
      for (const e of batch) if (e.state === "inflight") this.retryEntry(e, describeAwsError(err), err);
    } finally {
      for (const e of batch) if (e.state === "inflight") this.retryEntry(e, "no outcome from SendMessageBatch");
      this.inFlight--;
      this.pump();
    }
  }

  private retryEntry(e: Entry, why: string, cause?: unknown): void {
    if (e.state === "done") return;
    e.attempts++;
    if (e.attempts >= this.retry.maxAttempts) {
      this.fail(e, HeraldError.unavailable(`SQS did not take the message after ${e.attempts} attempts: ${why}`, cause));
      return;
    }
    e.state = "waiting";
    e.timer = setTimeout(() => {
      e.timer = undefined;
      if (e.state === "waiting") this.push(e, true);
    }, backoff(this.retry, e.attempts));
  }

  private abortEntry(e: Entry, reason: unknown): void {
    if (e.state === "done") return;
    if (e.state === "queued") {
      const i = this.queue.indexOf(e);
      if (i >= 0) this.queue.splice(i, 1);
    }
    if (e.timer) clearTimeout(e.timer);
    this.settle(e);
    e.reject(reason);
  }

  private succeed(e: Entry): void {
    if (e.state === "done") return;
    this.settle(e);
    e.resolve(e.accepted);
  }

  private fail(e: Entry, err: HeraldError): void {
    if (e.state === "done") return;
    this.settle(e);
    e.reject(err);
  }

  private settle(e: Entry): void {
    e.state = "done";
    e.detach?.();
    this.pending.delete(e);
    this.wake();
  }

  // wake lets the first sender waiting for room go on, if there is room.
  private wake(): void {
    if (this.waiters.length > 0 && this.pending.size + this.reserved < this.maxBuffered) {
      const w = this.waiters.shift()!;
      w.detach?.();
      // Reserve the room now: the waiter adds its entry when its promise continues.
      this.reserved++;
      w.resolve();
    }
  }
}

type AwsError = { name?: string; message?: string; $fault?: string; $metadata?: { httpStatusCode?: number }; $retryable?: unknown };

function isTransient(err: unknown): boolean {
  const e = err as AwsError;
  const status = e?.$metadata?.httpStatusCode;
  if (e?.$retryable) return true;
  if (THROTTLING.test(e?.name ?? "")) return true;
  if (status === 429 || (status !== undefined && status >= 500)) return true;
  if (e?.$fault === "client") return false;
  // No answer (network), a server fault, or a failure of the client itself (a checksum).
  return true;
}

function callError(err: unknown): HeraldError {
  const e = err as AwsError;
  const status = e?.$metadata?.httpStatusCode ?? 0;
  const name = e?.name ?? "Error";
  let code = "invalid";
  if (status === 401 || status === 403 || /AccessDenied|InvalidClientTokenId|UnrecognizedClient|SignatureDoesNotMatch|InvalidSecurity|ExpiredToken/i.test(name)) code = "forbidden";
  else if (/QueueDoesNotExist|NonExistentQueue/i.test(name)) code = "not_found";
  return new HeraldError({ status: 0, code, message: `SQS refused SendMessageBatch (HTTP ${status}): ${describeAwsError(err)}`, cause: err });
}

function describeAwsError(err: unknown): string {
  const e = err as AwsError;
  return `${e?.name ?? "Error"}${e?.message ? ": " + e.message : ""}`;
}

function toHeraldError(e: unknown): HeraldError {
  if (e instanceof HeraldError) return e;
  if (e instanceof Error && e.name === "AbortError") return new HeraldError({ status: 0, code: "aborted", message: e.message, cause: e });
  return new HeraldError({ status: 0, code: "unavailable", message: String((e as Error)?.message ?? e), cause: e });
}
