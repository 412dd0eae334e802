import type { Accepted } from "./types.gen.js";

/**
 * HeraldError is every failure the client reports: an error answer of the API (its status, and
 * the `code`, `message` and `field` of its `{"error": {…}}` body), a request refused before it
 * was sent (a missing idempotency key: code "invalid"), or a transport failure (code
 * "unavailable": the network failed or timed out, or SQS kept failing). `status` is the HTTP
 * status of Herald's answer, 0 when none came: for every error the client or SQS made.
 *
 * Codes the API answers: invalid (400), unauthorized (401), forbidden (403), not_found (404),
 * conflict, idempotency_key_reused, already_finished (409), too_large (413), and internal ones
 * (5xx). Codes of the client itself: unavailable (status 0), too_many_buffered and closed (the
 * SQS transport's buffer), unsupported (a route called on a client without an HTTP transport).
 */
export class HeraldError extends Error {
  /** The HTTP status of Herald's answer; 0 when none came (refused before sending, network, timeout, SQS). */
  status: number;
  /** Herald's error code: `invalid`, `not_found`, `idempotency_key_reused`, `unavailable`… */
  code: string;
  /** The offending input, as a JSON path (`recipients[0].user_id`), path or query parameter. */
  field?: string;
  /** How long the server asked to wait before retrying (its Retry-After), in milliseconds. */
  retryAfterMs?: number;

  constructor(init: { status: number; code: string; message: string; field?: string; retryAfterMs?: number; cause?: unknown }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = "HeraldError";
    this.status = init.status;
    this.code = init.code;
    if (init.field !== undefined) this.field = init.field;
    if (init.retryAfterMs !== undefined) this.retryAfterMs = init.retryAfterMs;
  }

  /**
   * fromResponse builds the error of an HTTP answer from its status and body: Herald's
   * `{"error": {"code", "message", "field"}}`, or, for a body of another shape (API Gateway's
   * `{"message": …}`, a proxy's HTML page), a code that the status implies.
   */
  static fromResponse(status: number, body: unknown, retryAfterMs?: number): HeraldError {
    const init: { status: number; code: string; message: string; field?: string; retryAfterMs?: number } = {
      status,
      code: codeForStatus(status),
      message: `HTTP ${status}`,
    };
    if (retryAfterMs !== undefined) init.retryAfterMs = retryAfterMs;
    const obj = asObject(body);
    const inner = asObject(obj?.["error"]);
    if (inner && typeof inner["code"] === "string") {
      init.code = inner["code"];
      if (typeof inner["message"] === "string") init.message = inner["message"];
      if (typeof inner["field"] === "string" && inner["field"] !== "") init.field = inner["field"];
    } else if (obj && typeof obj["message"] === "string") {
      init.message = obj["message"];
    } else if (typeof body === "string" && body.trim() !== "") {
      init.message = `HTTP ${status}: ${body.trim().slice(0, 200)}`;
    }
    return new HeraldError(init);
  }

  /** unavailable is the error of a request that got no answer: status 0, code "unavailable". */
  static unavailable(message: string, cause?: unknown): HeraldError {
    return new HeraldError({ status: 0, code: "unavailable", message, cause });
  }

  /** invalid is the error of a request refused before it was sent (status 0: no answer came). */
  static invalid(field: string, message: string): HeraldError {
    return new HeraldError({ status: 0, code: "invalid", field, message });
  }
}

/**
 * HeraldBatchError is the error of a sendBatch in which some requests failed while others may
 * have been accepted (over SQS, where each request is its own message and fails alone). Its
 * code, status and field are those of the first failure, the field prefixed with
 * `notifications[i]`; `results` holds every request's outcome, in order.
 */
export class HeraldBatchError extends HeraldError {
  results: BatchResult[];

  constructor(first: HeraldError, index: number, results: BatchResult[]) {
    const init: { status: number; code: string; message: string; field: string; retryAfterMs?: number; cause: unknown } = {
      status: first.status,
      code: first.code,
      message: `notifications[${index}]: ${first.message} (${results.filter((r) => !r.ok).length} of ${results.length} failed)`,
      field: first.field ? `notifications[${index}].${first.field}` : `notifications[${index}]`,
      cause: first,
    };
    if (first.retryAfterMs !== undefined) init.retryAfterMs = first.retryAfterMs;
    super(init);
    this.name = "HeraldBatchError";
    this.results = results;
  }
}

/** BatchResult is the outcome of one request of a batch. */
export type BatchResult = { ok: true; value: Accepted } | { ok: false; error: HeraldError };

function asObject(v: unknown): Record<string, unknown> | undefined {
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

function codeForStatus(status: number): string {
  switch (status) {
    case 400:
      return "invalid";
    case 401:
      return "unauthorized";
    case 403:
      return "forbidden";
    case 404:
      return "not_found";
    case 405:
      return "method_not_allowed";
    case 408:
      return "request_timeout";
    case 409:
      return "conflict";
    case 413:
    case 431:
      return "too_large";
    case 429:
      return "throttled";
    case 502:
    case 503:
    case 504:
      return "unavailable";
    default:
      return status >= 500 ? "internal" : "http_" + status;
  }
}
