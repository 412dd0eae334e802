// Test doubles: a local HTTP server standing in for Herald, and one speaking SQS's JSON protocol.
// Both listen on 127.0.0.1, port 0; nothing leaves the machine.

import { createHash } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

import { SQSClient } from "@aws-sdk/client-sqs";

export interface Recorded {
  method: string;
  url: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
  /** Never answer (the test aborts or times out). */
  hang?: boolean;
}

export type Handler = (req: Recorded, n: number) => Reply | Promise<Reply>;

export interface FakeServer {
  url: string;
  requests: Recorded[];
  close(): Promise<void>;
}

function listen(server: Server): Promise<string> {
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      resolve(`http://127.0.0.1:${port}`);
    });
  });
}

function shut(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

function readBody(req: import("node:http").IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function write(res: ServerResponse, reply: Reply, contentType = "application/json"): void {
  const headers: Record<string, string> = { ...(reply.headers ?? {}) };
  let text = "";
  if (reply.body !== undefined) {
    text = typeof reply.body === "string" ? reply.body : JSON.stringify(reply.body);
    if (!Object.keys(headers).some((h) => h.toLowerCase() === "content-type")) headers["content-type"] = contentType;
  }
  res.writeHead(reply.status, headers);
  res.end(text);
}

/** startHerald serves handler's replies, recording every request. */
export async function startHerald(handler: Handler): Promise<FakeServer> {
  const requests: Recorded[] = [];
  const server = createServer(async (req, res) => {
    const body = await readBody(req);
    const u = new URL(req.url ?? "/", "http://127.0.0.1");
    const rec: Recorded = { method: req.method ?? "", url: req.url ?? "", path: u.pathname, query: u.searchParams, headers: req.headers, body };
    requests.push(rec);
    const reply = await handler(rec, requests.length);
    if (reply.hang) return;
    write(res, reply);
  });
  const url = await listen(server);
  return { url, requests, close: () => shut(server) };
}

export function accepted(id = "n_test", status = "ACCEPTED", code = 202): Reply {
  return { status: code, body: { id, status } };
}

export function errorReply(status: number, code: string, message: string, field?: string, headers?: Record<string, string>): Reply {
  const r: Reply = { status, body: { error: { code, message, ...(field ? { field } : {}) } } };
  if (headers) r.headers = headers;
  return r;
}

// ---- SQS ----

export interface SqsEntry {
  Id: string;
  MessageBody: string;
  MessageGroupId?: string;
  MessageAttributes?: Record<string, { DataType: string; StringValue?: string }>;
}

export interface SqsCall {
  target: string;
  queueUrl: string;
  entries: SqsEntry[];
}

/** What the fake does with one entry: take it, or fail it as SQS would. */
export type EntryOutcome = "ok" | { Code: string; SenderFault: boolean; Message?: string };

export interface FakeSqsOptions {
  /** Per entry: "ok" or a failure (default "ok"). n counts the calls, from 1. */
  entry?: (e: SqsEntry, n: number) => EntryOutcome;
  /** A reply for the whole call instead (an error), or undefined to go on. */
  call?: (c: SqsCall, n: number) => Reply | undefined;
  /** Awaited before answering each call. */
  delay?: (c: SqsCall, n: number) => Promise<void> | void;
}

export interface FakeSqs {
  endpoint: string;
  queueUrl: string;
  calls: SqsCall[];
  client(): SQSClient;
  close(): Promise<void>;
}

export async function startSqs(opts: FakeSqsOptions = {}): Promise<FakeSqs> {
  const calls: SqsCall[] = [];
  const clients: SQSClient[] = [];
  const server = createServer(async (req, res) => {
    const text = await readBody(req);
    const target = String(req.headers["x-amz-target"] ?? "");
    if (target !== "AmazonSQS.SendMessageBatch") {
      write(res, { status: 400, body: { __type: "com.amazonaws.sqs#InvalidAction", message: `unsupported ${target}` } }, "application/x-amz-json-1.0");
      return;
    }
    const input = JSON.parse(text) as { QueueUrl: string; Entries: SqsEntry[] };
    const call: SqsCall = { target, queueUrl: input.QueueUrl, entries: input.Entries };
    calls.push(call);
    const n = calls.length;
    await opts.delay?.(call, n);
    const whole = opts.call?.(call, n);
    if (whole) {
      write(res, whole, "application/x-amz-json-1.0");
      return;
    }
    const Successful: unknown[] = [];
    const Failed: unknown[] = [];
    for (const e of input.Entries) {
      const outcome = opts.entry?.(e, n) ?? "ok";
      if (outcome === "ok") {
        Successful.push({ Id: e.Id, MessageId: `msg-${n}-${e.Id}`, MD5OfMessageBody: createHash("md5").update(e.MessageBody, "utf8").digest("hex") });
      } else {
        Failed.push({ Id: e.Id, SenderFault: outcome.SenderFault, Code: outcome.Code, Message: outcome.Message ?? outcome.Code });
      }
    }
    write(res, { status: 200, body: { Successful, Failed } }, "application/x-amz-json-1.0");
  });
  const endpoint = await listen(server);
  return {
    endpoint,
    queueUrl: `${endpoint}/000000000000/herald-test-ingest-orders`,
    calls,
    client() {
      const c = new SQSClient({
        endpoint,
        region: "us-east-1",
        credentials: { accessKeyId: "AKID", secretAccessKey: "test-secret" },
        maxAttempts: 1,
      });
      clients.push(c);
      return c;
    },
    async close() {
      for (const c of clients) c.destroy();
      await shut(server);
    },
  };
}

/** sqsError is a whole-call error reply as SQS's JSON protocol gives it. */
export function sqsError(status: number, type: string, message: string, queryError?: string): Reply {
  const r: Reply = { status, body: { __type: `com.amazonaws.sqs#${type}`, message } };
  if (queryError) r.headers = { "x-amzn-query-error": queryError };
  return r;
}

/** gate is a promise released from outside. */
export function gate(): { wait: Promise<void>; open(): void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

/** sendRequest is a minimal valid push SendRequest. */
export function sendRequest(key: string | undefined, extra: Record<string, unknown> = {}) {
  return {
    ...(key === undefined ? {} : { idempotency_key: key }),
    channels: ["push" as const],
    recipients: [{ user_id: "u1" }],
    content: { title: "Shipped", body: "Your order is on its way" },
    ...extra,
  };
}
