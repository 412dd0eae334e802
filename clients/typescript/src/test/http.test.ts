import assert from "node:assert/strict";
import { after, describe, test } from "node:test";

import { Sha256 } from "@aws-crypto/sha256-js";
import { HttpRequest } from "@smithy/protocol-http";
import { SignatureV4 } from "@smithy/signature-v4";

import { HeraldClient, HeraldError, HttpTransport, type SendRequest } from "../index.js";
import { backoff, parseRetryAfter, resolveRetry } from "../retry.js";
import { accepted, errorReply, sendRequest, startHerald, type FakeServer, type Recorded } from "./helpers.js";

const servers: FakeServer[] = [];
after(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

async function herald(handler: Parameters<typeof startHerald>[0]): Promise<FakeServer> {
  const s = await startHerald(handler);
  servers.push(s);
  return s;
}

function apiKeyClient(url: string, extra: Partial<ConstructorParameters<typeof HttpTransport>[0]> = {}): HeraldClient {
  return new HeraldClient(new HttpTransport({ baseUrl: url, auth: { apiKey: "dev-demo-key" }, retry: { baseMs: 1, maxMs: 5 }, ...extra }));
}

describe("HTTP send", () => {
  test("send answers 202 with the id and status", async () => {
    const s = await herald(() => accepted("n_abc", "ACCEPTED"));
    const req = sendRequest("order-1001-shipped");
    const res = await apiKeyClient(s.url).send(req);
    assert.deepEqual(res, { id: "n_abc", status: "ACCEPTED" });
    assert.equal(s.requests.length, 1);
    const r = s.requests[0]!;
    assert.equal(r.method, "POST");
    assert.equal(r.path, "/v1/notifications");
    assert.equal(r.headers.authorization, "Bearer dev-demo-key");
    assert.equal(r.headers["content-type"], "application/json");
    assert.deepEqual(JSON.parse(r.body), req);
  });

  test("a 200 retry answer (same key, same body) is returned as it is", async () => {
    const s = await herald(() => accepted("n_same", "PROCESSING", 200));
    assert.deepEqual(await apiKeyClient(s.url).send(sendRequest("k1")), { id: "n_same", status: "PROCESSING" });
  });

  test("429 with Retry-After is retried after that long, with the same body and key", async () => {
    const s = await herald((_, n) => (n === 1 ? errorReply(429, "throttled", "slow down", undefined, { "retry-after": "1" }) : accepted("n_retry")));
    const started = Date.now();
    const res = await apiKeyClient(s.url).send(sendRequest("order-1001-shipped"));
    const waited = Date.now() - started;
    assert.deepEqual(res, { id: "n_retry", status: "ACCEPTED" });
    assert.equal(s.requests.length, 2);
    assert.ok(waited >= 950, `waited ${waited} ms, Retry-After asked for 1000`);
    assert.equal(s.requests[1]!.body, s.requests[0]!.body);
    assert.equal(JSON.parse(s.requests[1]!.body).idempotency_key, "order-1001-shipped");
  });

  test("5xx is retried up to maxAttempts, then the last error is thrown", async () => {
    const s = await herald(() => errorReply(503, "unavailable", "down for maintenance"));
    const client = apiKeyClient(s.url, { retry: { maxAttempts: 3, baseMs: 1, maxMs: 2 } });
    await assert.rejects(client.send(sendRequest("k-5xx")), (e: unknown) => {
      assert.ok(e instanceof HeraldError);
      assert.equal(e.status, 503);
      assert.equal(e.code, "unavailable");
      return true;
    });
    assert.equal(s.requests.length, 3);
    assert.ok(s.requests.every((r) => r.body === s.requests[0]!.body));
  });

  test("500, 502 and 504 are retried too", async () => {
    const codes = [500, 502, 504];
    const s = await herald((_, n) => (n <= codes.length ? errorReply(codes[n - 1]!, "internal", "oops") : accepted("n_ok")));
    const res = await apiKeyClient(s.url, { retry: { maxAttempts: 5, baseMs: 1, maxMs: 2 } }).send(sendRequest("k-5xx-mix"));
    assert.equal(res.id, "n_ok");
    assert.equal(s.requests.length, 4);
  });

  test("400 surfaces the code and field, and is not retried", async () => {
    const s = await herald(() => errorReply(400, "invalid", "user_id must be printable ASCII", "recipients[0].user_id"));
    await assert.rejects(apiKeyClient(s.url).send(sendRequest("k-bad")), (e: unknown) => {
      assert.ok(e instanceof HeraldError);
      assert.equal(e.name, "HeraldError");
      assert.equal(e.status, 400);
      assert.equal(e.code, "invalid");
      assert.equal(e.field, "recipients[0].user_id");
      assert.equal(e.message, "user_id must be printable ASCII");
      return true;
    });
    assert.equal(s.requests.length, 1);
  });

  test("409 idempotency_key_reused is not retried", async () => {
    const s = await herald(() => errorReply(409, "idempotency_key_reused", "the key was used for another request", "idempotency_key"));
    await assert.rejects(apiKeyClient(s.url).send(sendRequest("k-used")), (e: unknown) => {
      assert.ok(e instanceof HeraldError);
      assert.equal(e.status, 409);
      assert.equal(e.code, "idempotency_key_reused");
      assert.equal(e.field, "idempotency_key");
      return true;
    });
    assert.equal(s.requests.length, 1);
  });

  test("a request without an idempotency key is refused before anything is sent", async () => {
    const s = await herald(() => accepted());
    const client = apiKeyClient(s.url);
    await assert.rejects(client.send(sendRequest(undefined) as SendRequest), (e: unknown) => {
      assert.ok(e instanceof HeraldError);
      assert.equal(e.code, "invalid");
      assert.equal(e.field, "idempotency_key");
      return true;
    });
    await assert.rejects(client.send(sendRequest("") as SendRequest), { code: "invalid", field: "idempotency_key" });
    await assert.rejects(client.send(sendRequest("has space")), { code: "invalid", field: "idempotency_key" });
    await assert.rejects(client.send(sendRequest("x".repeat(257))), { code: "invalid", field: "idempotency_key" });
    await assert.rejects(client.sendBatch([sendRequest("a"), sendRequest(undefined) as SendRequest]), {
      code: "invalid",
      field: "notifications[1].idempotency_key",
    });
    // The transport checks too, for callers that use it directly.
    await assert.rejects(client.sender.send(sendRequest(undefined) as SendRequest), { code: "invalid", field: "idempotency_key" });
    assert.equal(s.requests.length, 0);
  });

  test("Retry-After above maxRetryAfterMs fails at once, telling how long to wait", async () => {
    const s = await herald(() => errorReply(503, "unavailable", "later", undefined, { "retry-after": "120" }));
    await assert.rejects(apiKeyClient(s.url).send(sendRequest("k-long")), (e: unknown) => {
      assert.ok(e instanceof HeraldError);
      assert.equal(e.retryAfterMs, 120_000);
      return true;
    });
    assert.equal(s.requests.length, 1);
  });

  test("a network failure is status 0, code unavailable, and is retried", async () => {
    const s = await herald(() => accepted());
    const url = s.url;
    await s.close();
    servers.splice(servers.indexOf(s), 1);
    const client = apiKeyClient(url, { retry: { maxAttempts: 2, baseMs: 1, maxMs: 1 } });
    await assert.rejects(client.send(sendRequest("k-net")), (e: unknown) => {
      assert.ok(e instanceof HeraldError);
      assert.equal(e.status, 0);
      assert.equal(e.code, "unavailable");
      return true;
    });
  });

  test("an attempt that takes longer than timeoutMs is status 0, code unavailable", async () => {
    const s = await herald(() => ({ status: 200, hang: true }));
    const client = apiKeyClient(s.url, { timeoutMs: 100, retry: { maxAttempts: 2, baseMs: 1, maxMs: 1 } });
    await assert.rejects(client.send(sendRequest("k-slow")), (e: unknown) => {
      assert.ok(e instanceof HeraldError);
      assert.equal(e.status, 0);
      assert.equal(e.code, "unavailable");
      assert.match(e.message, /100 ms/);
      return true;
    });
    assert.equal(s.requests.length, 2);
  });

  test("abort cancels a backoff wait", async () => {
    const s = await herald(() => errorReply(503, "unavailable", "later", undefined, { "retry-after": "30" }));
    const ac = new AbortController();
    const started = Date.now();
    setTimeout(() => ac.abort(), 100);
    await assert.rejects(apiKeyClient(s.url).send(sendRequest("k-abort"), { signal: ac.signal }), { name: "AbortError" });
    assert.ok(Date.now() - started < 5000, "the 30 s wait was cut short");
    assert.equal(s.requests.length, 1);
  });

  test("abort cancels a request in flight", async () => {
    const s = await herald(() => ({ status: 200, hang: true }));
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 50);
    await assert.rejects(apiKeyClient(s.url).getNotification("n_1", { signal: ac.signal }), { name: "AbortError" });
    assert.equal(s.requests.length, 1);
  });

  test("an already aborted signal sends nothing", async () => {
    const s = await herald(() => accepted());
    await assert.rejects(apiKeyClient(s.url).send(sendRequest("k"), { signal: AbortSignal.abort() }), { name: "AbortError" });
    assert.equal(s.requests.length, 0);
  });

  test("an error body of another shape (API Gateway's) still gives a code", async () => {
    const s = await herald(() => ({ status: 403, body: { message: "User is not authorized to access this resource" } }));
    await assert.rejects(apiKeyClient(s.url).send(sendRequest("k-gw")), {
      status: 403,
      code: "forbidden",
      message: "User is not authorized to access this resource",
    });
  });

  test("API Gateway's own 429 is retried, and its code comes from the status", async () => {
    const s = await herald((_, n) => (n === 1 ? { status: 429, body: { message: "Too Many Requests" } } : accepted("n_gw")));
    assert.equal((await apiKeyClient(s.url).send(sendRequest("k-gw-429"))).id, "n_gw");
    assert.equal(s.requests.length, 2);
    const e = HeraldError.fromResponse(429, { message: "Too Many Requests" }, 2000);
    assert.deepEqual([e.status, e.code, e.message, e.retryAfterMs, e.field], [429, "throttled", "Too Many Requests", 2000, undefined]);
    const html = HeraldError.fromResponse(502, "<html>Bad Gateway</html>");
    assert.deepEqual([html.code, html.message], ["unavailable", "HTTP 502: <html>Bad Gateway</html>"]);
  });

  test("sendBatch posts {notifications}, 50 a request, and numbers errors in the caller's array", async () => {
    let calls = 0;
    const s = await herald((r) => {
      calls++;
      const n = (JSON.parse(r.body) as { notifications: SendRequest[] }).notifications;
      if (calls === 4) return errorReply(400, "invalid", "not an email address", "notifications[4].recipients[0].email");
      return { status: 202, body: { notifications: n.map((x) => ({ id: `n_${x.idempotency_key}`, status: "ACCEPTED" })) } };
    });
    const client = apiKeyClient(s.url);
    const reqs = Array.from({ length: 100 }, (_, i) => sendRequest(`k${i}`));
    const res = await client.sendBatch(reqs);
    assert.equal(res.length, 100);
    assert.equal(res[73]!.id, "n_k73");
    assert.deepEqual(s.requests.map((r) => (JSON.parse(r.body) as { notifications: unknown[] }).notifications.length), [50, 50]);
    assert.ok(s.requests.every((r) => r.path === "/v1/notifications/batch"));
    // The fourth call (the second of this batch) fails: its notifications[4] is the caller's notifications[54].
    await assert.rejects(client.sendBatch(Array.from({ length: 60 }, (_, i) => sendRequest(`b${i}`))), (e: unknown) => {
      assert.ok(e instanceof HeraldError);
      assert.equal(e.field, "notifications[54].recipients[0].email");
      return true;
    });
    assert.deepEqual(await client.sendBatch([]), []);
  });
});

describe("HTTP authentication", () => {
  test("SigV4 signs method, path, query, host and body for execute-api", async () => {
    const s = await herald(() => ({ status: 204 }));
    const client = new HeraldClient(
      new HttpTransport({
        baseUrl: s.url + "/prod",
        auth: { sigv4: { region: "us-east-1", credentials: { accessKeyId: "AKID", secretAccessKey: "secret", sessionToken: "session" } } },
      }),
    );
    await client.deleteWebPushSubscription("user/1 ü", { endpoint: "https://push.example.net/send/abc?x=1&y=(2)*" });
    const r = s.requests[0]!;
    assert.equal(r.method, "DELETE");
    assert.equal(r.path, "/prod/v1/users/user%2F1%20%C3%BC/web-push-subscriptions");
    assert.equal(r.query.get("endpoint"), "https://push.example.net/send/abc?x=1&y=(2)*");
    const auth = String(r.headers.authorization);
    assert.match(auth, /^AWS4-HMAC-SHA256 Credential=AKID\/\d{8}\/us-east-1\/execute-api\/aws4_request, SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$/);
    assert.ok(auth.startsWith("AWS4-HMAC-SHA256 Credential=AKID/"));
    assert.match(String(r.headers["x-amz-date"]), /^\d{8}T\d{6}Z$/);
    assert.equal(r.headers["x-amz-security-token"], "session");
    const signed = auth.split("SignedHeaders=")[1]!.split(",")[0]!.split(";");
    assert.ok(signed.includes("host") && signed.includes("x-amz-date"), `signed headers ${signed.join(";")}`);
    assert.equal(await resign(r, "secret", "session"), auth, "the server's signature of what arrived matches");
  });

  test("SigV4 with a credentials provider signs the body's SHA-256", async () => {
    const s = await herald(() => accepted("n_sig"));
    let asked = 0;
    const client = new HeraldClient(
      new HttpTransport({
        baseUrl: s.url,
        auth: {
          sigv4: {
            region: "eu-west-1",
            credentials: async () => {
              asked++;
              return { accessKeyId: "AKID2", secretAccessKey: "secret2" };
            },
          },
        },
      }),
    );
    await client.send(sendRequest("k-sig", { content: { title: "Ünïcode ✓", body: "b" } }));
    const r = s.requests[0]!;
    assert.equal(asked, 1);
    assert.match(String(r.headers.authorization), /^AWS4-HMAC-SHA256 Credential=AKID2\/\d{8}\/eu-west-1\/execute-api\/aws4_request/);
    assert.equal(r.headers["x-amz-security-token"], undefined);
    const { createHash } = await import("node:crypto");
    assert.equal(r.headers["x-amz-content-sha256"], createHash("sha256").update(r.body, "utf8").digest("hex"));
    assert.equal(await resign(r, "secret2", undefined, "eu-west-1"), r.headers.authorization);
  });

  test("every retry is signed again", async () => {
    const s = await herald((_, n) => (n === 1 ? errorReply(503, "unavailable", "again") : accepted()));
    const client = new HeraldClient(
      new HttpTransport({ baseUrl: s.url, retry: { baseMs: 1, maxMs: 1 }, auth: { sigv4: { region: "us-east-1", credentials: { accessKeyId: "AKID", secretAccessKey: "secret" } } } }),
    );
    await client.send(sendRequest("k-resign"));
    assert.equal(s.requests.length, 2);
    for (const r of s.requests) assert.equal(await resign(r, "secret"), r.headers.authorization);
  });

  test("a JWT is sent as a Bearer token, from a string or a function", async () => {
    const s = await herald(() => ({ status: 200, body: { unread: 3 } }));
    const fixed = new HeraldClient(new HttpTransport({ baseUrl: s.url, auth: { jwt: "eyJ.fixed.sig" } }));
    assert.deepEqual(await fixed.unreadCount("u1"), { unread: 3 });
    let n = 0;
    const fresh = new HeraldClient(new HttpTransport({ baseUrl: s.url, auth: { jwt: async () => `eyJ.fresh${++n}.sig` } }));
    await fresh.unreadCount("u1");
    await fresh.unreadCount("u1");
    assert.deepEqual(
      s.requests.map((r) => r.headers.authorization),
      ["Bearer eyJ.fixed.sig", "Bearer eyJ.fresh1.sig", "Bearer eyJ.fresh2.sig"],
    );
    assert.equal(s.requests[0]!.path, "/v1/users/u1/inbox/unread-count");
  });
});

describe("retry policy", () => {
  test("Retry-After is read as seconds or as an HTTP date", () => {
    const now = Date.parse("2025-01-01T00:00:00Z");
    assert.equal(parseRetryAfter("3", now), 3000);
    assert.equal(parseRetryAfter("0", now), 0);
    assert.equal(parseRetryAfter("Wed, 01 Jan 2025 00:00:05 GMT", now), 5000);
    assert.equal(parseRetryAfter("Tue, 31 Dec 2024 23:00:00 GMT", now), 0);
    assert.equal(parseRetryAfter("soon", now), undefined);
    assert.equal(parseRetryAfter(null, now), undefined);
  });

  test("backoff is full jitter, capped at maxMs, never under Retry-After", () => {
    const r = resolveRetry({ baseMs: 100, maxMs: 5000 });
    assert.equal(r.maxAttempts, 5);
    assert.equal(backoff(r, 1, 0, () => 0.999999), 100);
    assert.equal(backoff(r, 3, 0, () => 0.999999), 400);
    assert.equal(backoff(r, 20, 0, () => 0.999999), 5000);
    assert.equal(backoff(r, 3, 0, () => 0), 0);
    assert.equal(backoff(r, 1, 2000, () => 0.5), 2000);
  });

  test("a request that is not idempotent is retried after 429 but not after 503", async () => {
    const s = await herald((r, n) => {
      if (r.path.startsWith("/v1/templates/a")) return n === 1 ? errorReply(429, "throttled", "slow") : { status: 201, body: { name: "a", version: 1 } };
      return errorReply(503, "unavailable", "down");
    });
    const client = apiKeyClient(s.url);
    const t = await client.putTemplate("a", { channels: { push: { title: "{{x}}" } }, variables: [{ name: "x" }] });
    assert.equal(t.version, 1);
    assert.equal(s.requests.length, 2);
    await assert.rejects(client.putTemplate("b", { variables: [] }), { status: 503 });
    assert.equal(s.requests.length, 3);
    // A campaign without an idempotency key is not retried on 503 either; with one it is.
    await assert.rejects(client.createCampaign({ channels: ["push"], audience: { sources: [{ kind: "app_devices" }] } }), { status: 503 });
    assert.equal(s.requests.length, 4);
    await assert.rejects(
      new HeraldClient(new HttpTransport({ baseUrl: s.url, auth: { apiKey: "k" }, retry: { maxAttempts: 2, baseMs: 1, maxMs: 1 } })).createCampaign({
        idempotency_key: "c1",
        channels: ["push"],
        audience: { sources: [{ kind: "app_devices" }] },
      }),
      { status: 503 },
    );
    assert.equal(s.requests.length, 6);
  });
});

/** resign signs what the server received, at the time it says, as API Gateway would check it. */
async function resign(r: Recorded, secret: string, sessionToken?: string, region = "us-east-1"): Promise<string> {
  const auth = String(r.headers.authorization);
  const signedHeaders = auth.split("SignedHeaders=")[1]!.split(",")[0]!.split(";");
  const headers: Record<string, string> = {};
  for (const h of signedHeaders) headers[h] = String(r.headers[h]);
  const query: Record<string, string> = {};
  for (const [k, v] of r.query) query[k] = v;
  const amzDate = String(r.headers["x-amz-date"]);
  const signingDate = new Date(`${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`);
  const signer = new SignatureV4({
    service: "execute-api",
    region,
    credentials: { accessKeyId: /Credential=([^/]+)/.exec(auth)![1]!, secretAccessKey: secret, ...(sessionToken ? { sessionToken } : {}) },
    sha256: Sha256,
  });
  const req = new HttpRequest({ method: r.method, protocol: "http:", hostname: "127.0.0.1", path: r.path, query, headers, body: r.body });
  const signed = await signer.sign(req, { signingDate, signableHeaders: new Set(signedHeaders) });
  return String(signed.headers["authorization"]);
}
