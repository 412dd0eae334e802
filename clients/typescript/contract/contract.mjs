// The TypeScript half of the producer clients' contract suite (clients/contract): run by its Go
// test against a running Herald, it plays each case through this package's built client and
// prints one JSON line per case — {"case", "ok", "detail"} — which the Go test reports and
// checks against what Herald did. Usage: node contract/contract.mjs http|sqs|box (settings from
// the environment the Go test sets).
import { HeraldClient, HeraldError, HttpTransport, SqsTransport, deriveNotificationId } from "../dist/index.js";

const env = process.env;
const out = (c, ok, detail = "", extra = {}) => console.log(JSON.stringify({ case: c, ok, detail, ...extra }));

async function run(name, fn) {
  try {
    const extra = await fn();
    out(name, true, "", extra ?? {});
  } catch (e) {
    out(name, false, String(e && e.stack ? e.stack : e));
  }
}

function check(cond, what) {
  if (!cond) throw new Error(what);
}

const push = (key, user, body = "It is on its way.") => ({
  idempotency_key: key, channels: ["push"], content: { title: "Your order shipped", body }, recipients: [{ user_id: user }],
});

async function waitSent(c, id) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const n = await c.getNotification(id).catch(() => null);
    if (n && n.status === "SENT") return;
    if (Date.now() > deadline) throw new Error(`notification ${id} is ${n && n.status}, want SENT`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function http() {
  const service = env.HERALD_SERVICE;
  const c = new HeraldClient(new HttpTransport({ baseUrl: env.HERALD_URL, auth: { apiKey: env.HERALD_API_KEY } }));
  await c.putDevice("jun", "fcm-contract-ts-jun-0001", { platform: "fcm" });
  await run("send", async () => {
    const a = await c.send(push("ts-contract-order-1", "jun"));
    check(a.id === deriveNotificationId(service, "ts-contract-order-1") && a.status === "ACCEPTED", `send answered ${JSON.stringify(a)}`);
    await waitSent(c, a.id);
  });
  await run("batch", async () => {
    const got = await c.sendBatch([push("ts-contract-b-1", "jun"), push("ts-contract-b-2", "jun"), push("ts-contract-b-3", "jun")]);
    check(got.length === 3 && new Set(got.map((a) => a.id)).size === 3, `batch answered ${JSON.stringify(got)}`);
    for (const a of got) await waitSent(c, a.id);
  });
  await run("idempotent retry", async () => {
    const a = await c.send(push("ts-contract-order-1", "jun"));
    check(a.id === deriveNotificationId(service, "ts-contract-order-1"), `the retry answered ${JSON.stringify(a)}`);
  });
  await run("409 on key reuse", async () => {
    try {
      await c.send(push("ts-contract-order-1", "jun", "Another text."));
    } catch (e) {
      check(e instanceof HeraldError && e.status === 409 && e.code === "idempotency_key_reused" && e.field === "idempotency_key", `reuse: ${e}`);
      return;
    }
    throw new Error("another body under a used key was accepted");
  });
  await run("400 with its field", async () => {
    try {
      await c.send({ idempotency_key: "ts-contract-bad-1", channels: ["email"], content: { title: "Hi", body: "x" }, recipients: [{ email: "not-an-address" }] });
    } catch (e) {
      check(e instanceof HeraldError && e.status === 400 && e.code === "invalid" && e.field === "recipients[0].email", `bad request: ${e} (field ${e.field})`);
      return;
    }
    throw new Error("a bad request was accepted");
  });
  await run("429 backoff", async () => {
    const t = new HeraldClient(new HttpTransport({ baseUrl: env.HERALD_THROTTLED_URL, auth: { apiKey: env.HERALD_API_KEY } }));
    const a = await t.send(push("ts-contract-throttled-1", "jun"));
    check(a.status === "ACCEPTED", `through a 429: ${JSON.stringify(a)}`);
  });
}

async function sqs() {
  const q = new SqsTransport({
    queueUrl: env.HERALD_QUEUE_URL, service: env.HERALD_SERVICE, endpoint: env.AWS_ENDPOINT_URL_SQS, region: env.AWS_REGION,
    credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY },
  });
  const c = new HeraldClient(q);
  await run("sqs batch sent", async () => {
    const poison = { idempotency_key: "ts-contract-sqs-poison", channels: ["email"], content: { title: "Hi", body: "x" }, recipients: [{ email: "not-an-address" }] };
    const got = await c.sendBatch([push("ts-contract-sqs-1", "dave"), poison, push("ts-contract-sqs-2", "dave")]);
    check(got.length === 3, `sendBatch answered ${JSON.stringify(got)}`);
    return { ids: got.map((a) => a.id) };
  });
  await c.close();
}

// box: against the stack in a box (internal/stackbox/run) — the API Gateway signed with SigV4 as
// the service's role, the ingest queue as its producer's; each call is checked against IAM there.
async function box() {
  const c = new HeraldClient(new HttpTransport({ baseUrl: env.HERALD_URL, auth: { sigv4: { region: env.HERALD_REGION,
    credentials: { accessKeyId: env.HERALD_SERVICE_KEY_ID, secretAccessKey: env.HERALD_SERVICE_SECRET } } } }));
  await run("signed send", async () => {
    const a = await c.send(push("stackbox-tsclient-1", "tomo"));
    return { ids: [a.id] };
  });
  const q = new SqsTransport({ queueUrl: env.HERALD_QUEUE_URL, service: env.HERALD_SERVICE, endpoint: env.HERALD_SQS_ENDPOINT,
    region: env.HERALD_REGION, credentials: { accessKeyId: env.HERALD_PRODUCER_KEY_ID, secretAccessKey: env.HERALD_PRODUCER_SECRET } });
  await run("queue send", async () => {
    const a = await q.send(push("stackbox-tsclient-2", "tomo"));
    return { ids: [a.id] };
  });
  await q.close();
}

const mode = process.argv[2];
if (mode === "http") await http();
else if (mode === "sqs") await sqs();
else if (mode === "box") await box();
else {
  console.error("usage: node contract/contract.mjs http|sqs|box");
  process.exit(2);
}
