import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, test } from "node:test";

import { deriveKey, deriveNotificationId, MAX_KEY_LENGTH } from "../index.js";

// Reference values from Herald's Go implementation (internal/notify/id.go), computed with:
//   h := sha256.Sum256([]byte(service + "\x00" + key))
//   "n_" + strings.ToLower(base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding).EncodeToString(h[:16]))
const GO_REFERENCE: Array<[service: string, key: string, id: string]> = [
  ["orders", "order-1001-shipped", "n_q41xs0dbsn3jv1prrbfscfjas8"],
  ["demo", "welcome-u42", "n_prwq9ty1eywam1hxgwhh5r7nz0"],
  ["billing", "invoice-2024-07/user:7~retry", "n_jxch26fyw74bzdxnmzqsse8090"],
];

// An independent derivation for the test: the digest's bits, five at a time.
function viaBits(service: string, key: string): string {
  const digest = createHash("sha256").update(`${service}\x00${key}`).digest().subarray(0, 16);
  const bits = [...digest].map((b) => b.toString(2).padStart(8, "0")).join("").padEnd(130, "0");
  let out = "";
  for (let i = 0; i < 130; i += 5) out += "0123456789abcdefghjkmnpqrstvwxyz"[parseInt(bits.slice(i, i + 5), 2)];
  return "n_" + out;
}

describe("notification ids over SQS", () => {
  test("match Herald's Go reference values", () => {
    for (const [service, key, id] of GO_REFERENCE) {
      assert.equal(deriveNotificationId(service, key), id, `${service}/${key}`);
      assert.equal(viaBits(service, key), id, `${service}/${key} (node:crypto, bit by bit)`);
    }
  });

  test("are n_ and 26 characters of Herald's alphabet", () => {
    for (const k of ["a", "ключ", "x".repeat(256)]) {
      assert.match(deriveNotificationId("svc", k), /^n_[0-9a-hjkmnp-tv-z]{26}$/);
      assert.equal(deriveNotificationId("svc", k), viaBits("svc", k));
    }
  });
});

describe("deriveKey", () => {
  test("is deterministic, readable, and one key per part", () => {
    assert.equal(deriveKey("order-1001-shipped", "u42"), "order-1001-shipped:u42");
    assert.equal(deriveKey("order-1001-shipped", "u42"), deriveKey("order-1001-shipped", "u42"));
    assert.notEqual(deriveKey("order-1001-shipped", "u42"), deriveKey("order-1001-shipped", "u43"));
    assert.equal(deriveKey("order-1001-shipped"), "order-1001-shipped");
  });

  test("does not confuse where the parts split", () => {
    const keys = [deriveKey("a:b", "c"), deriveKey("a", "b:c"), deriveKey("a", "b", "c"), deriveKey("a", "b c"), deriveKey("a", "b%3Ac")];
    assert.equal(new Set(keys).size, keys.length);
  });

  test("is printable ASCII of at most 256 characters, whatever it is given", () => {
    const long = "évènement-" + "x".repeat(400);
    for (const k of [deriveKey("k", "user 1", "ü", "\n"), deriveKey(long, "u1"), deriveKey("k", "y".repeat(1000))]) {
      assert.match(k, /^[\x21-\x7e]+$/);
      assert.ok(k.length <= MAX_KEY_LENGTH, `${k.length} characters`);
    }
    assert.equal(deriveKey(long, "u1").length, MAX_KEY_LENGTH);
    assert.notEqual(deriveKey(long, "u1"), deriveKey(long, "u2"));
    assert.equal(deriveKey(long, "u1"), deriveKey(long, "u1"));
  });

  test("needs a caller key", () => {
    assert.throws(() => deriveKey(""), { code: "invalid" });
  });
});
