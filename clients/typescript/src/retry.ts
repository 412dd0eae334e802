/** RetryOptions bound the retries of a transport. */
export interface RetryOptions {
  /** Attempts in all, the first included (default 5; 1 never retries). */
  maxAttempts?: number;
  /** The backoff's base: the n-th retry waits up to baseMs·2^(n-1) (default 100). */
  baseMs?: number;
  /** The longest backoff (default 5000). A server's Retry-After may ask for longer. */
  maxMs?: number;
  /**
   * The longest Retry-After honoured (default 60000): a server asking for a longer wait fails
   * the call at once with that error (its retryAfterMs set) rather than holding it.
   */
  maxRetryAfterMs?: number;
}

export interface ResolvedRetry {
  maxAttempts: number;
  baseMs: number;
  maxMs: number;
  maxRetryAfterMs: number;
}

export function resolveRetry(o: RetryOptions | undefined, defaults: Partial<ResolvedRetry> = {}): ResolvedRetry {
  const r: ResolvedRetry = {
    maxAttempts: o?.maxAttempts ?? defaults.maxAttempts ?? 5,
    baseMs: o?.baseMs ?? defaults.baseMs ?? 100,
    maxMs: o?.maxMs ?? defaults.maxMs ?? 5000,
    maxRetryAfterMs: o?.maxRetryAfterMs ?? defaults.maxRetryAfterMs ?? 60_000,
  };
  if (!Number.isInteger(r.maxAttempts) || r.maxAttempts < 1) throw new RangeError("retry.maxAttempts must be an integer ≥ 1");
  if (!(r.baseMs >= 0) || !(r.maxMs >= 0) || !(r.maxRetryAfterMs >= 0)) throw new RangeError("retry delays must be ≥ 0");
  return r;
}

/**
 * backoff is the wait before retry number `retry` (1 for the first retry): full jitter, a
 * uniform draw in [0, min(maxMs, baseMs·2^(retry-1))], and at least `minMs` (a Retry-After).
 */
export function backoff(r: ResolvedRetry, retry: number, minMs = 0, random: () => number = Math.random): number {
  const cap = Math.min(r.maxMs, r.baseMs * 2 ** Math.min(retry - 1, 30));
  return Math.max(minMs, Math.floor(random() * (cap + 1)));
}

/**
 * parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date. It returns the wait
 * in milliseconds (0 for a date in the past), or undefined for a missing or unreadable header.
 */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (value == null) return undefined;
  const v = value.trim();
  if (v === "") return undefined;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

/** sleep waits ms milliseconds; an abort of signal ends it at once, rejecting with its reason. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  if (ms <= 0 && !signal) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortReason(signal!));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** abortReason is what a call aborted through signal rejects with: the signal's reason. */
export function abortReason(signal: AbortSignal): unknown {
  if (signal.reason !== undefined) return signal.reason;
  const err = new Error("This operation was aborted");
  err.name = "AbortError";
  return err;
}
