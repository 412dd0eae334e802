import assert from "node:assert/strict";
import { after, describe, test } from "node:test";

import { deriveNotificationId, HeraldBatchError, HeraldClient, HeraldError, SqsTransport, type SendRequest, type SqsTransportOptions } from "../index.js";
import { gate, sendRequest, sqsError, startSqs, type FakeSqs, type FakeSqsOptions } from "./helpers.js";

const fakes: FakeSqs[] = [];
after(async () => {
  await Promise.all(fakes.map((f) => f.close()));
});

async function fake(opts: FakeSqsOptions = {}): Promise<FakeSqs> {
  const f = await startSqs(opts);
  fakes.push(f);
  return f;
}

function transport(f: FakeSqs, extra: Partial<SqsTransportOptions> = {}): SqsTransport {
  return new SqsTransport({ queueUrl: f.queueUrl, service: "orders", client: f.client(), retry: { baseMs: 1, maxMs: 5 }, ...extra });
}

function keyOf(body: string): string {
  return (JSON.parse(body) as SendRequest).idempotency_key!;
}

describe("SQS transport", () => {
  test("25 sends become 3 SendMessageBatch calls of at most 10, with the lane and the group", async () => {
    const f = await fake();
    const t = transport(f);
    const reqs = Array.from({ length: 25 }, (_, i) => sendRequest(`order-${i}`, i % 5 === 0 ? { category: "marketing" } : {}));
    const res = await Promise.all(reqs.map((r) => t.send(r)));
    assert.equal(f.calls.length, 3);
    assert.deepEqual(f.calls.map((c) => c.entries.length), [10, 10, 5]);
    const entries = f.calls.flatMap((c) => c.entries);
    assert.equal(new Set(entries.map((e) => e.Id)).size, 25);
    for (const c of f.calls) assert.equal(c.queueUrl, f.queueUrl);
    for (const [i, e] of entries.entries()) {
      assert.deepEqual(JSON.parse(e.MessageBody), reqs[i], "one SendRequest per message, not an array");
      assert.equal(e.MessageGroupId, "orders");
      const lane = i % 5 === 0 ? "bulk" : "realtime";
      assert.deepEqual(e.MessageAttributes, { "herald-lane": { DataType: "String", StringValue: lane } });
    }
    for (const [i, a] of res.entries()) assert.deepEqual(a, { id: deriveNotificationId("orders", `order-${i}`), status: "ACCEPTED" });
    await t.close();
  });

  test("a throttled entry is retried alone, then succeeds", async () => {
    let throttled = 0;
    const f = await fake({
      entry: (e) => {
        if (keyOf(e.MessageBody) === "k-throttle" && throttled === 0) {
          throttled++;
          return { Code: "ThrottlingException", SenderFault: false, Message: "Rate exceeded" };
        }
        return "ok";
      },
    });
    const t = transport(f);
    const keys = ["k-a", "k-throttle", "k-b"];
    const res = await Promise.all(keys.map((k) => t.send(sendRequest(k))));
    assert.deepEqual(res.map((r) => r.id), keys.map((k) => deriveNotificationId("orders", k)));
    assert.equal(f.calls.length, 2);
    assert.deepEqual(f.calls[0]!.entries.map((e) => keyOf(e.MessageBody)), keys);
    assert.deepEqual(f.calls[1]!.entries.map((e) => keyOf(e.MessageBody)), ["k-throttle"]);
    assert.equal(f.calls[1]!.entries[0]!.MessageBody, f.calls[0]!.entries[1]!.MessageBody);
    await t.close();
  });

  test("throttling is retried even when SQS calls it the sender's fault; a server fault too", async () => {
    const failures = new Map<string, number>();
    const f = await fake({
      entry: (e) => {
        const k = keyOf(e.MessageBody);
        const n = (failures.get(k) ?? 0) + 1;
        failures.set(k, n);
        if (k === "k-kms" && n === 1) return { Code: "KmsThrottled", SenderFault: true };
        if (k === "k-500" && n <= 2) return { Code: "InternalError", SenderFault: false };
        return "ok";
      },
    });
    const t = transport(f);
    await Promise.all([t.send(sendRequest("k-kms")), t.send(sendRequest("k-500"))]);
    assert.equal(failures.get("k-kms"), 2);
    assert.equal(failures.get("k-500"), 3);
    await t.close();
  });

  test("an entry the sender is at fault for rejects its own promise only", async () => {
    const f = await fake({
      entry: (e) => (keyOf(e.MessageBody) === "k-bad" ? { Code: "InvalidMessageContents", SenderFault: true, Message: "bad characters" } : "ok"),
    });
    const t = transport(f);
    const results = await Promise.allSettled(["k-1", "k-bad", "k-2"].map((k) => t.send(sendRequest(k))));
    assert.equal(results[0]!.status, "fulfilled");
    assert.equal(results[2]!.status, "fulfilled");
    const r = results[1]!;
    assert.equal(r.status, "rejected");
    const err = (r as PromiseRejectedResult).reason as HeraldError;
    assert.ok(err instanceof HeraldError);
    assert.equal(err.code, "invalid");
    assert.match(err.message, /InvalidMessageContents/);
    assert.equal(f.calls.length, 1, "not retried");
    await t.close();
  });

  test("an entry that keeps failing rejects once its attempts are spent, never silently", async () => {
    const f = await fake({ entry: () => ({ Code: "ServiceUnavailable", SenderFault: false }) });
    const t = transport(f, { retry: { maxAttempts: 3, baseMs: 1, maxMs: 2 } });
    await assert.rejects(t.send(sendRequest("k-doomed")), (e: unknown) => {
      assert.ok(e instanceof HeraldError);
      assert.equal(e.code, "unavailable");
      assert.equal(e.status, 0);
      assert.match(e.message, /3 attempts.*ServiceUnavailable/);
      return true;
    });
    assert.equal(f.calls.length, 3);
    await t.close();
  });

  test("a call refused whole for a transient reason is retried; for a permanent one, every entry rejects", async () => {
    const f = await fake({
      call: (c, n) => {
        if (n === 1) return sqsError(500, "InternalError", "try again");
        if (c.entries.some((e) => keyOf(e.MessageBody).startsWith("gone"))) {
          return sqsError(400, "QueueDoesNotExist", "The specified queue does not exist.", "AWS.SimpleQueueService.NonExistentQueue;Sender");
        }
        return undefined;
      },
    });
    const t = transport(f);
    const ok = await t.send(sendRequest("k-after-500"));
    assert.equal(ok.id, deriveNotificationId("orders", "k-after-500"));
    assert.equal(f.calls.length, 2);
    const gone = await Promise.allSettled([t.send(sendRequest("gone-1")), t.send(sendRequest("gone-2"))]);
    for (const g of gone) {
      assert.equal(g.status, "rejected");
      const e = (g as PromiseRejectedResult).reason as HeraldError;
      assert.equal(e.code, "not_found");
      assert.equal(e.status, 0);
    }
    assert.equal(f.calls.length, 3);
    await t.close();
  });

  test('whenFull "fail" rejects at once with too_many_buffered', async () => {
    const g = gate();
    const f = await fake({ delay: () => g.wait });
    const t = transport(f, { maxBuffered: 2, whenFull: "fail" });
    const a = t.send(sendRequest("k-1"));
    const b = t.send(sendRequest("k-2"));
    await assert.rejects(t.send(sendRequest("k-3")), (e: unknown) => e instanceof HeraldError && e.code === "too_many_buffered");
    g.open();
    await Promise.all([a, b]);
    assert.ok(await t.send(sendRequest("k-4")));
    await t.close();
  });

  test('whenFull "block" waits for room', async () => {
    const g = gate();
    const f = await fake({ delay: (_, n) => (n === 1 ? g.wait : undefined) });
    const t = transport(f, { maxBuffered: 2, whenFull: "block", flushIntervalMs: 1 });
    const a = t.send(sendRequest("k-1"));
    const b = t.send(sendRequest("k-2"));
    let cDone = false;
    const c = t.send(sendRequest("k-3")).then((r) => {
      cDone = true;
      return r;
    });
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(cDone, false, "the third send waits while two are buffered");
    assert.equal(t.buffered, 2);
    g.open();
    await Promise.all([a, b, c]);
    assert.deepEqual(f.calls.flatMap((x) => x.entries.map((e) => keyOf(e.MessageBody))), ["k-1", "k-2", "k-3"]);
    await t.close();
  });

  test("a request over 256 KiB is refused before sending", async () => {
    const f = await fake();
    const t = transport(f);
    const big = sendRequest("k-big", { content: { title: "t", body: "x".repeat(262_144) } });
    await assert.rejects(t.send(big), (e: unknown) => {
      assert.ok(e instanceof HeraldError);
      assert.equal(e.code, "too_large");
      assert.equal(e.field, "");
      return true;
    });
    assert.equal(f.calls.length, 0);
    await t.close();
  });

  test("batches stay under maxBatchBytes", async () => {
    const f = await fake();
    const t = transport(f);
    // Each message is about 100 KiB: two fit in a batch, three do not.
    const reqs = Array.from({ length: 5 }, (_, i) => sendRequest(`k-${i}`, { content: { body: "y".repeat(100_000) } }));
    await Promise.all(reqs.map((r) => t.send(r)));
    assert.deepEqual(f.calls.map((c) => c.entries.length), [2, 2, 1]);
    for (const c of f.calls) assert.ok(c.entries.reduce((n, e) => n + Buffer.byteLength(e.MessageBody) + 25, 0) <= 262_144);
    await t.close();
  });

  test("a missing idempotency key is refused before anything is sent", async () => {
    const f = await fake();
    const t = transport(f);
    await assert.rejects(t.send(sendRequest(undefined) as SendRequest), { code: "invalid", field: "idempotency_key" });
    await assert.rejects(t.sendBatch([sendRequest("a"), sendRequest("b"), sendRequest(undefined) as SendRequest]), {
      code: "invalid",
      field: "notifications[2].idempotency_key",
    });
    await t.flush();
    assert.equal(f.calls.length, 0);
    await t.close();
  });

  test("sendBatch sends each request as its own message; a bad one fails alone", async () => {
    const f = await fake({
      entry: (e) => (keyOf(e.MessageBody) === "b-3" ? { Code: "InvalidMessageContents", SenderFault: true } : "ok"),
    });
    const client = new HeraldClient(transport(f));
    const reqs = Array.from({ length: 12 }, (_, i) => sendRequest(`b-${i}`));
    await assert.rejects(client.sendBatch(reqs), (e: unknown) => {
      assert.ok(e instanceof HeraldBatchError);
      assert.equal(e.code, "invalid");
      assert.equal(e.field, "notifications[3]");
      assert.equal(e.results.length, 12);
      assert.deepEqual(e.results.map((r) => r.ok), reqs.map((_, i) => i !== 3));
      const r0 = e.results[0]!;
      assert.ok(r0.ok && r0.value.id === deriveNotificationId("orders", "b-0"));
      return true;
    });
    assert.deepEqual(f.calls.map((c) => c.entries.length), [10, 2]);
    const ok = await client.sendBatch(reqs.slice(4, 8));
    assert.deepEqual(ok.map((a) => a.id), reqs.slice(4, 8).map((r) => deriveNotificationId("orders", r.idempotency_key!)));
    await client.close();
  });

  test("flush sends at once; close flushes, then refuses new sends", async () => {
    const f = await fake();
    const t = transport(f, { flushIntervalMs: 60_000 });
    const p = t.send(sendRequest("k-flush"));
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(f.calls.length, 0, "held for the flush interval");
    await t.flush();
    assert.equal(f.calls.length, 1);
    await p;
    const q = t.send(sendRequest("k-close"));
    await t.close();
    assert.equal(f.calls.length, 2);
    assert.ok(await q);
    await assert.rejects(t.send(sendRequest("k-late")), { code: "closed" });
  });

  test("abort takes back a message not yet sent", async () => {
    const f = await fake();
    const t = transport(f, { flushIntervalMs: 50 });
    const ac = new AbortController();
    const p = t.send(sendRequest("k-abort"), { signal: ac.signal });
    const kept = t.send(sendRequest("k-kept"));
    ac.abort();
    await assert.rejects(p, { name: "AbortError" });
    await kept;
    assert.deepEqual(f.calls.flatMap((c) => c.entries.map((e) => keyOf(e.MessageBody))), ["k-kept"]);
    await t.close();
  });
});
