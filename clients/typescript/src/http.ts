import { Sha256 } from "@aws-crypto/sha256-js";
import { HttpRequest } from "@smithy/protocol-http";
import { SignatureV4 } from "@smithy/signature-v4";

import { HeraldError } from "./errors.js";
import { requireKeys, checkKey } from "./idempotency.js";
import { abortReason, backoff, parseRetryAfter, resolveRetry, sleep, type ResolvedRetry, type RetryOptions } from "./retry.js";
import type { CallOptions, Sender } from "./sender.js";
import type { Accepted, SendBatchResponse, SendRequest } from "./types.gen.js";

/** AwsCredentials are the IAM credentials a SigV4 signature is made with. */
export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/** HttpAuth is how requests authenticate. */
export type HttpAuth =
  /** A service's API key, sent as `Authorization: Bearer <key>` (`herald dev`, self-hosted). */
  | { apiKey: string }
  /**
   * IAM: requests signed with SigV4 for API Gateway (service `execute-api`). `credentials` is
   * a fixed set or a provider called for every request, such as `fromNodeProviderChain()` of
   * `@aws-sdk/credential-providers`, which caches and refreshes them.
   */
  | { sigv4: { region: string; credentials: AwsCredentials | (() => Promise<AwsCredentials>); service?: string } }
  /** An end user's JWT, sent as `Authorization: Bearer <token>`: the inbox routes of its `sub`. */
  | { jwt: string | (() => string | Promise<string>) };

export interface HttpTransportOptions {
  /** Where Herald answers, with any stage path: `http://127.0.0.1:8080`, `https://…/prod`. */
  baseUrl: string;
  auth: HttpAuth;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** Retries of 429, 500, 502, 503, 504 and network failures (defaults 5 attempts, 100 ms, 5 s). */
  retry?: RetryOptions;
  /** How long one attempt may take, answer body included (default 10000 ms). */
  timeoutMs?: number;
  /** Headers added to every request. */
  headers?: Record<string, string>;
}

/** RequestOptions are the options of HttpTransport.request. */
export interface RequestOptions extends CallOptions {
  /** Query parameters; undefined ones are left out. */
  query?: Record<string, string | number | boolean | undefined>;
  /** The JSON body. */
  body?: unknown;
  /**
   * Whether the request may be repeated without a second effect (default: true for GET, PUT
   * and DELETE, false for POST and PATCH). One that is not is retried only when the server
   * cannot have acted on it: a 429, or a connection refused.
   */
  idempotent?: boolean;
}

const RETRY_STATUSES = new Set([429, 500, 502, 503, 504]);

// Errors of attempts that never reached the server (connection refused): safe to retry even
// for a request that is not idempotent.
const notSent = new WeakSet<HeraldError>();

/**
 * HttpTransport calls Herald's HTTP API: JSON bodies, one of three kinds of authentication,
 * retries with full-jitter exponential backoff (honouring Retry-After as the shortest wait), a
 * timeout per attempt, and an AbortSignal on every call. As a Sender it sends through
 * POST /v1/notifications and POST /v1/notifications/batch.
 */
export class HttpTransport implements Sender {
  readonly baseUrl: string;
  private readonly auth: HttpAuth;
  private readonly fetchImpl: typeof fetch;
  private readonly retry: ResolvedRetry;
  private readonly timeoutMs: number;
  private readonly headers: Record<string, string>;
  private readonly signer: SignatureV4 | undefined;

  constructor(options: HttpTransportOptions) {
    if (!options || typeof options.baseUrl !== "string" || options.baseUrl === "") throw new TypeError("HttpTransport needs a baseUrl");
    const base = new URL(options.baseUrl);
    if (base.protocol !== "http:" && base.protocol !== "https:") throw new TypeError("HttpTransport's baseUrl must be an http(s) URL");
    this.baseUrl = (base.origin + base.pathname).replace(/\/+$/, "");
    this.auth = options.auth;
    if (!options.auth || typeof options.auth !== "object") throw new TypeError("HttpTransport needs auth: {apiKey}, {sigv4} or {jwt}");
    if ("sigv4" in options.auth) {
      const { region, credentials, service } = options.auth.sigv4;
      if (!region) throw new TypeError("sigv4 auth needs a region");
      this.signer = new SignatureV4({
        service: service ?? "execute-api",
        region,
        credentials: typeof credentials === "function" ? credentials : async () => credentials,
        sha256: Sha256,
        uriEscapePath: true,
        applyChecksum: true,
      });
    } else if (!("apiKey" in options.auth) && !("jwt" in options.auth)) {
      throw new TypeError("HttpTransport needs auth: {apiKey}, {sigv4} or {jwt}");
    }
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("no fetch: pass options.fetch");
    this.fetchImpl = f;
    this.retry = resolveRetry(options.retry);
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.headers = { ...(options.headers ?? {}) };
  }

  /** send sends one notification: POST /v1/notifications. */
  async send(req: SendRequest, opts: CallOptions = {}): Promise<Accepted> {
    const err = checkKey(req);
    if (err) throw err;
    return this.request<Accepted>("POST", "/v1/notifications", { body: req, signal: opts.signal, idempotent: true });
  }

  /**
   * sendBatch sends notifications through POST /v1/notifications/batch, 50 a request (the
   * API's limit); the answers come in the order of reqs. The API refuses a batch whole when one
   * request is bad, naming it (`notifications[2].recipients[0].email`, counted in reqs).
   */
  async sendBatch(reqs: readonly SendRequest[], opts: CallOptions = {}): Promise<Accepted[]> {
    requireKeys(reqs);
    const out: Accepted[] = [];
    for (let start = 0; start < reqs.length; start += 50) {
      const chunk = reqs.slice(start, start + 50);
      let res: SendBatchResponse;
      try {
        res = await this.request<SendBatchResponse>("POST", "/v1/notifications/batch", {
          body: { notifications: chunk },
          signal: opts.signal,
          idempotent: true,
        });
      } catch (e) {
        if (e instanceof HeraldError && start > 0 && e.field) {
          e.field = e.field.replace(/^notifications\[(\d+)\]/, (_, i: string) => `notifications[${start + Number(i)}]`);
        }
        throw e;
      }
      if (!res || !Array.isArray(res.notifications) || res.notifications.length !== chunk.length) {
        throw new HeraldError({ status: 200, code: "invalid_response", message: `the batch answer does not hold ${chunk.length} notifications` });
      }
      out.push(...res.notifications);
    }
    return out;
  }

  /**
   * request calls one route and returns its JSON answer (undefined for 204). path is the
   * route's path with its parameters already escaped (see `routePath`).
   */
  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const { signal } = opts;
    if (signal?.aborted) throw abortReason(signal);
    const idempotent = opts.idempotent ?? (method === "GET" || method === "PUT" || method === "DELETE" || method === "HEAD");
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const query = opts.query ?? {};
    for (let attempt = 1; ; attempt++) {
      let err: HeraldError;
      try {
        return await this.attempt<T>(method, path, query, body, signal);
      } catch (e) {
        if (signal?.aborted) throw abortReason(signal);
        if (!(e instanceof HeraldError)) throw e;
        err = e;
      }
      const retryable = idempotent ? RETRY_STATUSES.has(err.status) || err.status === 0 : err.status === 429 || notSent.has(err);
      if (!retryable || attempt >= this.retry.maxAttempts) throw err;
      if (err.retryAfterMs !== undefined && err.retryAfterMs > this.retry.maxRetryAfterMs) throw err;
      await sleep(backoff(this.retry, attempt, err.retryAfterMs ?? 0), signal);
    }
  }

  private async attempt<T>(method: string, path: string, query: NonNullable<RequestOptions["query"]>, body: string | undefined, signal: AbortSignal | undefined): Promise<T> {
    const decoded: Record<string, string> = {};
    for (const [k, v] of Object.entries(query)) if (v !== undefined) decoded[k] = String(v);
    const qs = Object.entries(decoded)
      .map(([k, v]) => `${escapeQuery(k)}=${escapeQuery(v)}`)
      .join("&");
    const url = this.baseUrl + path + (qs ? "?" + qs : "");
    let headers: Record<string, string> = { accept: "application/json", ...this.headers };
    if (body !== undefined) headers["content-type"] = "application/json";
    headers = await this.authorize(method, url, decoded, headers, body);

    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, this.timeoutMs);
    const onAbort = () => controller.abort(signal!.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    let status: number;
    let text: string;
    let retryAfter: string | null;
    try {
      const f = this.fetchImpl;
      const init: RequestInit = { method, headers, signal: controller.signal };
      if (body !== undefined) init.body = body;
      const res = await f(url, init);
      status = res.status;
      retryAfter = res.headers.get("retry-after");
      text = await res.text();
    } catch (e) {
      if (signal?.aborted) throw abortReason(signal);
      if (timedOut) throw HeraldError.unavailable(`${method} ${path}: no answer within ${this.timeoutMs} ms`, e);
      const err = HeraldError.unavailable(`${method} ${path}: ${describeNetworkError(e)}`, e);
      if (causeCode(e) === "ECONNREFUSED") notSent.add(err);
      throw err;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }

    let json: unknown = undefined;
    let parsed = false;
    if (text !== "") {
      try {
        json = JSON.parse(text);
        parsed = true;
      } catch {
        // judged below
      }
    }
    if (status >= 200 && status < 300) {
      if (text === "" || status === 204) return undefined as T;
      if (!parsed) throw new HeraldError({ status, code: "invalid_response", message: `${method} ${path}: the answer is not JSON` });
      return json as T;
    }
    throw HeraldError.fromResponse(status, parsed ? json : text, parseRetryAfter(retryAfter));
  }

  private async authorize(method: string, url: string, query: Record<string, string>, headers: Record<string, string>, body: string | undefined): Promise<Record<string, string>> {
    const auth = this.auth;
    if ("apiKey" in auth) return { ...headers, authorization: `Bearer ${auth.apiKey}` };
    if ("jwt" in auth) {
      const token = typeof auth.jwt === "function" ? await auth.jwt() : auth.jwt;
      return { ...headers, authorization: `Bearer ${token}` };
    }
    const u = new URL(url);
    const req = new HttpRequest({
      method,
      protocol: u.protocol,
      hostname: u.hostname,
      ...(u.port ? { port: Number(u.port) } : {}),
      path: u.pathname,
      query,
      headers: { ...headers, host: u.host },
      ...(body !== undefined ? { body } : {}),
    });
    const signed = await this.signer!.sign(req);
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(signed.headers)) {
      // fetch sets Host from the URL itself, to the value signed here.
      if (k.toLowerCase() !== "host") out[k] = v;
    }
    return out;
  }
}

/** escapeQuery escapes a query key or value as SigV4 does (RFC 3986: only A-Z a-z 0-9 - _ . ~ stay). */
function escapeQuery(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
}

/**
 * path builds a route's path from literal pieces and parameters, each parameter escaped as one
 * segment with encodeURIComponent: routePath`/v1/users/${user}/devices/${token}`. A parameter that
 * is empty, `.` or `..` (which URLs would drop or resolve) is refused before anything is sent.
 */
export function routePath(strings: TemplateStringsArray, ...params: Array<{ name: string; value: string } | string>): string {
  let out = strings[0] ?? "";
  params.forEach((p, i) => {
    const { name, value } = typeof p === "string" ? { name: "path", value: p } : p;
    if (typeof value !== "string" || value === "" || value === "." || value === "..") {
      throw HeraldError.invalid(name, `${name} must be a non-empty string other than "." and ".."`);
    }
    out += encodeURIComponent(value) + (strings[i + 1] ?? "");
  });
  return out;
}

function causeCode(e: unknown): string | undefined {
  const cause = (e as { cause?: { code?: unknown } } | undefined)?.cause;
  return typeof cause?.code === "string" ? cause.code : undefined;
}

function describeNetworkError(e: unknown): string {
  const code = causeCode(e);
  const cause = (e as { cause?: { message?: unknown } } | undefined)?.cause;
  const msg = typeof cause?.message === "string" && cause.message ? cause.message : e instanceof Error ? e.message : String(e);
  return code && !msg.includes(code) ? `${code}: ${msg}` : msg;
}
