import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { HeraldClient, HeraldError, HttpTransport, SqsTransport, type Sender } from "../index.js";
import { startHerald, type FakeServer } from "./helpers.js";

let s: FakeServer;
let client: HeraldClient;

before(async () => {
  s = await startHerald((r) => {
    if (r.method === "DELETE" && /\/(devices|inbox|web-push-subscriptions)/.test(r.path)) return { status: 204 };
    if (r.path.endsWith("/read") && r.method === "POST") return { status: 204 };
    return { status: r.method === "PUT" && r.path.startsWith("/v1/templates/") ? 201 : 200, body: { echo: `${r.method} ${r.url}` } };
  });
  client = new HeraldClient(new HttpTransport({ baseUrl: s.url + "/", auth: { apiKey: "dev-demo-key" } }));
});

after(async () => {
  await s.close();
});

type Case = [name: string, call: (c: HeraldClient) => Promise<unknown>, method: string, url: string, body?: unknown];

const cases: Case[] = [
  ["getNotification", (c) => c.getNotification("n_1"), "GET", "/v1/notifications/n_1"],
  ["getNotification paged", (c) => c.getNotification("n_1", { cursor: "abc=", limit: 50 }), "GET", "/v1/notifications/n_1?cursor=abc%3D&limit=50"],
  ["cancelNotification", (c) => c.cancelNotification("n_1"), "DELETE", "/v1/notifications/n_1"],
  ["rescheduleNotification", (c) => c.rescheduleNotification("n_1", new Date("2030-01-02T03:04:05Z")), "PATCH", "/v1/notifications/n_1", { send_at: "2030-01-02T03:04:05.000Z" }],
  ["createCampaign", (c) => c.createCampaign({ idempotency_key: "c-1", channels: ["push"], audience: { sources: [{ kind: "app_devices", app: "default" }] } }), "POST", "/v1/campaigns", { idempotency_key: "c-1", channels: ["push"], audience: { sources: [{ kind: "app_devices", app: "default" }] } }],
  ["getCampaign", (c) => c.getCampaign("c_1"), "GET", "/v1/campaigns/c_1"],
  ["cancelCampaign", (c) => c.cancelCampaign("c_1"), "DELETE", "/v1/campaigns/c_1"],
  ["pauseCampaign", (c) => c.pauseCampaign("c_1"), "POST", "/v1/campaigns/c_1/pause"],
  ["resumeCampaign", (c) => c.resumeCampaign("c_1"), "POST", "/v1/campaigns/c_1/resume"],
  ["rescheduleCampaign", (c) => c.rescheduleCampaign("c_1", "2030-01-01T00:00:00Z"), "PATCH", "/v1/campaigns/c_1", { send_at: "2030-01-01T00:00:00Z" }],
  ["putDevice", (c) => c.putDevice("u 1", "tok/en:1", { platform: "fcm", app: "default" }), "PUT", "/v1/users/u%201/devices/tok%2Fen%3A1", { platform: "fcm", app: "default" }],
  ["deleteDevice", (c) => c.deleteDevice("u1", "tok"), "DELETE", "/v1/users/u1/devices/tok"],
  ["listDevices", (c) => c.listDevices("u1"), "GET", "/v1/users/u1/devices"],
  ["getContacts", (c) => c.getContacts("u1"), "GET", "/v1/users/u1/contacts"],
  ["putContacts", (c) => c.putContacts("u1", { email: "a@example.com" }), "PUT", "/v1/users/u1/contacts", { email: "a@example.com" }],
  ["getPreferences", (c) => c.getPreferences("u1"), "GET", "/v1/users/u1/preferences"],
  ["putPreferences", (c) => c.putPreferences("u1", { opt_out: { sms: ["marketing"] }, marketing_consent: true }), "PUT", "/v1/users/u1/preferences", { opt_out: { sms: ["marketing"] }, marketing_consent: true }],
  ["listWebPushSubscriptions", (c) => c.listWebPushSubscriptions("u1"), "GET", "/v1/users/u1/web-push-subscriptions"],
  ["putWebPushSubscription", (c) => c.putWebPushSubscription("u1", { endpoint: "https://push.example.net/x", keys: { p256dh: "BP", auth: "au" } }), "PUT", "/v1/users/u1/web-push-subscriptions", { endpoint: "https://push.example.net/x", keys: { p256dh: "BP", auth: "au" } }],
  ["deleteWebPushSubscription by id", (c) => c.deleteWebPushSubscription("u1", { id: "wp_1" }), "DELETE", "/v1/users/u1/web-push-subscriptions?id=wp_1"],
  ["deleteWebPushSubscription by endpoint", (c) => c.deleteWebPushSubscription("u1", { endpoint: "https://p.example/a b" }), "DELETE", "/v1/users/u1/web-push-subscriptions?endpoint=https%3A%2F%2Fp.example%2Fa%20b"],
  ["getVapidPublicKey", (c) => c.getVapidPublicKey(), "GET", "/v1/web-push/vapid-public-key"],
  ["putTemplate", (c) => c.putTemplate("order.shipped", { channels: { push: { title: "{{id}}" } }, variables: [{ name: "id" }] }), "PUT", "/v1/templates/order.shipped", { channels: { push: { title: "{{id}}" } }, variables: [{ name: "id" }] }],
  ["getTemplate", (c) => c.getTemplate("order.shipped"), "GET", "/v1/templates/order.shipped"],
  ["getTemplate version", (c) => c.getTemplate("order.shipped", { version: 2 }), "GET", "/v1/templates/order.shipped?version=2"],
  ["listTemplates", (c) => c.listTemplates({ cursor: "c" }), "GET", "/v1/templates?cursor=c"],
  ["previewTemplate", (c) => c.previewTemplate("t", { data: { id: "1" } }, { version: 1 }), "POST", "/v1/templates/t/preview?version=1", { data: { id: "1" } }],
  ["listInbox", (c) => c.listInbox("u1", { cursor: "next", limit: 20 }), "GET", "/v1/users/u1/inbox?cursor=next&limit=20"],
  ["unreadCount", (c) => c.unreadCount("u1"), "GET", "/v1/users/u1/inbox/unread-count"],
  ["markAllRead", (c) => c.markAllRead("u1"), "POST", "/v1/users/u1/inbox/read-all"],
  ["markRead", (c) => c.markRead("u1", "n_9"), "POST", "/v1/users/u1/inbox/n_9/read"],
  ["deleteInboxItem", (c) => c.deleteInboxItem("u1", "n_9"), "DELETE", "/v1/users/u1/inbox/n_9"],
];

describe("routes", () => {
  for (const [name, call, method, url, body] of cases) {
    test(`${name}: ${method} ${url}`, async () => {
      const before = s.requests.length;
      const res = await call(client);
      assert.equal(s.requests.length, before + 1);
      const r = s.requests[before]!;
      assert.equal(r.method, method);
      assert.equal(r.url, url);
      assert.equal(r.headers.authorization, "Bearer dev-demo-key");
      if (body === undefined) assert.equal(r.body, "");
      else assert.deepEqual(JSON.parse(r.body), body);
      if (r.method === "DELETE" && /\/(devices|inbox|web-push-subscriptions)/.test(r.path)) assert.equal(res, undefined);
      else if (!r.path.endsWith("/read")) assert.deepEqual(res, { echo: `${method} ${url}` });
    });
  }

  test("path parameters that URLs would drop or resolve are refused before sending", async () => {
    const before = s.requests.length;
    await assert.rejects(client.getContacts(".."), { code: "invalid", field: "user" });
    await assert.rejects(client.getContacts(""), { code: "invalid", field: "user" });
    await assert.rejects(client.deleteDevice("u1", "."), { code: "invalid", field: "token" });
    await assert.rejects(client.deleteWebPushSubscription("u1", {} as { id: string }), { code: "invalid" });
    assert.equal(s.requests.length, before);
  });
});

describe("HeraldClient", () => {
  test("over SQS, the other routes need an HttpTransport", async () => {
    const sqs = new SqsTransport({ queueUrl: "http://127.0.0.1:9/000000000000/q", service: "orders", region: "us-east-1", credentials: { accessKeyId: "AKID", secretAccessKey: "x" } });
    const c = new HeraldClient(sqs);
    await assert.rejects(c.getNotification("n_1"), (e: unknown) => e instanceof HeraldError && e.code === "unsupported");
    const withHttp = new HeraldClient(sqs, { http: new HttpTransport({ baseUrl: s.url, auth: { apiKey: "dev-demo-key" } }) });
    assert.deepEqual(await withHttp.getNotification("n_2"), { echo: "GET /v1/notifications/n_2" });
    await c.close();
  });

  test("takes any Sender, and checks keys before calling it", async () => {
    const seen: unknown[] = [];
    const sender: Sender = {
      async send(req) {
        seen.push(req);
        return { id: "n_x", status: "ACCEPTED" };
      },
      async sendBatch(reqs) {
        seen.push(...reqs);
        return reqs.map(() => ({ id: "n_x", status: "ACCEPTED" as const }));
      },
    };
    const c = new HeraldClient(sender);
    await assert.rejects(c.send({ channels: ["push"], recipients: [{ user_id: "u" }] }), { code: "invalid", field: "idempotency_key" });
    assert.equal(seen.length, 0);
    assert.deepEqual(await c.sendBatch([{ idempotency_key: "k", channels: ["push"], recipients: [{ user_id: "u" }] }]), [{ id: "n_x", status: "ACCEPTED" }]);
    assert.equal(seen.length, 1);
  });
});
