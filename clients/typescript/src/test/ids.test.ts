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

// Reference values from the Go client's DeriveKey (clients/go/keys.go), for the same inputs.
const GO_DERIVED: Array<[inputs: string[], key: string]> = [
  [["order-1001-shipped", "u42"], "order-1001-shipped:46ac2d938b70c5470eb7cc0c3b4e5c83"],
  [["order-1001-shipped"], "order-1001-shipped"],
  [["évènement 7", "user 1", "ü"], "_v_nement_7:f4fa107ac4dd8c665dd4d8ced36d336c"],
  [["x".repeat(300), "u1"], "x".repeat(223) + ":d44bc8d1609644b2d21b23d448eb9e16"],
  [["a:b", "c"], "a:b:83ca019c8d4fafa9058f715af96d7285"],
  [["a", "b:c"], "a:11dc0d90697ae7cba49f5dd72379bc86"],
  [["k", ""], "k:0fae5bbe4d848e9b4c26d289fbd4d71e"],
];

describe("deriveKey", () => {
  test("derives what the Go client derives", () => {
    for (const [[callerKey, ...parts], key] of GO_DERIVED) assert.equal(deriveKey(callerKey!, ...parts), key, JSON.stringify([callerKey, ...parts]));
  });

  test("is deterministic, and one key per part", () => {
    assert.equal(deriveKey("order-1001-shipped", "u42"), deriveKey("order-1001-shipped", "u42"));
    assert.notEqual(deriveKey("order-1001-shipped", "u42"), deriveKey("order-1001-shipped", "u43"));
    assert.notEqual(deriveKey("order-1001-shipped", "u42"), deriveKey("order-1002-shipped", "u42"));
  });

  test("does not confuse where the parts split", () => {
    const keys = [deriveKey("a:b", "c"), deriveKey("a", "b:c"), deriveKey("a", "b", "c"), deriveKey("a", "bc"), deriveKey("a", "b|1:c"), deriveKey("a"), deriveKey("a", "")];
    assert.equal(new Set(keys).size, keys.length);
  });

  test("is printable ASCII of at most 256 characters, whatever it is given", () => {
    const long = "évènement-" + "x".repeat(400);
    for (const k of [deriveKey("k", "user 1", "ü", "\n"), deriveKey(long, "u1"), deriveKey("k", "y".repeat(1000)), deriveKey("key with spaces"), deriveKey("z".repeat(256))]) {
      assert.match(k, /^[\x21-\x7e]+$/);
      assert.ok(k.length <= MAX_KEY_LENGTH, `${k.length} characters`);
    }
    assert.equal(deriveKey(long, "u1").length, MAX_KEY_LENGTH);
    assert.notEqual(deriveKey(long, "u1"), deriveKey(long, "u2"));
  });

  test("needs a caller key", () => {
    assert.throws(() => deriveKey(""), { code: "invalid" });
  });
});
