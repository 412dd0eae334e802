import { createHash } from "node:crypto";

import { HeraldError } from "./errors.js";
import type { SendRequest } from "./types.gen.js";

/** The longest idempotency key Herald takes. */
export const MAX_KEY_LENGTH = 256;

// Herald's idempotency keys (SendRequest.idempotency_key): printable ASCII, no space.
const KEY_PATTERN = /^[\x21-\x7e]+$/;

// Herald's id alphabet: Crockford-like base32, lower case, without i, l, o and u.
const ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

/**
 * checkKey returns the error of a request whose idempotency key is missing or one Herald would
 * refuse (longer than 256 characters, or not printable ASCII), or undefined for a good one.
 * `field` names the key in the error (`idempotency_key`, `notifications[2].idempotency_key`).
 */
export function checkKey(req: SendRequest | undefined, field = "idempotency_key"): HeraldError | undefined {
  if (typeof req !== "object" || req === null) {
    return HeraldError.invalid(field.replace(/\.?idempotency_key$/, ""), "a send request must be an object");
  }
  const key: unknown = req.idempotency_key;
  if (key === undefined || key === null || key === "") {
    return HeraldError.invalid(field, "an idempotency key is required: retries of a request without one may send it twice (see deriveKey)");
  }
  if (typeof key !== "string") return HeraldError.invalid(field, "the idempotency key must be a string");
  if (key.length > MAX_KEY_LENGTH) return HeraldError.invalid(field, `the idempotency key is longer than ${MAX_KEY_LENGTH} characters`);
  if (!KEY_PATTERN.test(key)) return HeraldError.invalid(field, "the idempotency key may hold printable ASCII characters only, no space");
  return undefined;
}

/** requireKeys throws the error of the first request of reqs without a good idempotency key. */
export function requireKeys(reqs: readonly SendRequest[]): void {
  if (!Array.isArray(reqs)) throw HeraldError.invalid("notifications", "sendBatch takes an array of send requests");
  reqs.forEach((req, i) => {
    const err = checkKey(req, `notifications[${i}].idempotency_key`);
    if (err) throw err;
  });
}

/**
 * deriveKey derives a deterministic idempotency key from a caller's key — the business event,
 * such as `order-1001-shipped` — and parts that tell its sends apart, such as a user id: one
 * event sent to many users gets one stable key per user, the same on every retry and from every
 * process. The key is printable ASCII of at most 256 characters: the caller's key (characters
 * outside printable ASCII made `_`, cut to fit), `:`, and 32 hex digits of a SHA-256 of the
 * caller's key and the parts, each length-prefixed so that `("a:b", "c")` and `("a", "b:c")`
 * differ; a caller's key given alone that is already a good key is returned as it is. It is the
 * Go client's DeriveKey, so both clients derive the same key from the same inputs.
 */
export function deriveKey(callerKey: string, ...parts: string[]): string {
  if (typeof callerKey !== "string" || callerKey === "") {
    // An empty caller key would give every event of a user the same key, and Herald would
    // send only the first of them.
    throw HeraldError.invalid("idempotency_key", "deriveKey needs a non-empty caller key");
  }
  for (const p of parts) {
    if (typeof p !== "string") throw HeraldError.invalid("idempotency_key", "deriveKey takes string parts");
  }
  const h = createHash("sha256");
  h.update(`${Buffer.byteLength(callerKey, "utf8")}:${callerKey}`, "utf8");
  for (const p of parts) h.update(`|${Buffer.byteLength(p, "utf8")}:${p}`, "utf8");
  const digest = h.digest("hex").slice(0, 32);
  let prefix = "";
  for (const ch of callerKey) {
    const c = ch.codePointAt(0)!;
    prefix += c >= 0x21 && c <= 0x7e ? ch : "_";
  }
  const max = MAX_KEY_LENGTH - 1 - digest.length;
  if (prefix.length > max) prefix = prefix.slice(0, max);
  if (parts.length === 0 && prefix === callerKey) return callerKey;
  return `${prefix}:${digest}`;
}

/**
 * deriveNotificationId is the id Herald gives the notification that `service` sends with
 * `idempotencyKey`: "n_" and the first 16 bytes of SHA-256(service NUL key) in Herald's base32.
 * A request sent over SQS gets no answer from Herald, so this is how its id is known.
 */
export function deriveNotificationId(service: string, idempotencyKey: string): string {
  const h = createHash("sha256").update(`${service}\x00${idempotencyKey}`, "utf8").digest();
  return "n_" + base32(h.subarray(0, 16));
}

/** base32 encodes bytes with Herald's alphabet, no padding (Go's base32 bit order). */
export function base32(bytes: Uint8Array): string {
  let out = "";
  let buffer = 0;
  let bits = 0;
  for (const b of bytes) {
    buffer = (buffer << 8) | b;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += ID_ALPHABET[(buffer >>> bits) & 31];
    }
    buffer &= (1 << bits) - 1;
  }
  if (bits > 0) out += ID_ALPHABET[(buffer << (5 - bits)) & 31];
  return out;
}
