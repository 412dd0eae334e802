import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import type { ContactsRequest, PreferencesRequest, SendRequest } from "../index.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const script = join(root, "scripts", "gen-types.mjs");
const openapi = join(root, "..", "..", "internal", "api", "openapi.json");

function gen(...args: string[]) {
  return spawnSync(process.execPath, [script, ...args], { cwd: root, encoding: "utf8", timeout: 30_000 });
}

describe("generated types", () => {
  test("src/types.gen.ts matches the OpenAPI document (--check)", () => {
    const r = gen("--check");
    assert.equal(r.status, 0, r.stderr);
  });

  test("--check fails, saying so, once the document changes", () => {
    const dir = mkdtempSync(join(tmpdir(), "herald-gen-"));
    try {
      const doc = JSON.parse(readFileSync(openapi, "utf8"));
      doc.components.schemas.SendRequest.properties.new_field = { type: "string" };
      const changed = join(dir, "openapi.json");
      writeFileSync(changed, JSON.stringify(doc));
      const r = gen("--check", "--openapi", changed);
      assert.equal(r.status, 1);
      assert.match(r.stderr, /out of date/);
      assert.match(r.stderr, /npm run gen-types/);
      // Generating into another file and checking it against the changed document passes.
      const out = join(dir, "types.gen.ts");
      assert.equal(gen("--openapi", changed, "--out", out).status, 0);
      assert.equal(gen("--check", "--openapi", changed, "--out", out).status, 0);
      assert.match(readFileSync(out, "utf8"), /new_field\?: string;/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("every schema the client uses is generated", () => {
    const text = readFileSync(join(root, "src", "types.gen.ts"), "utf8");
    const wanted = [
      "SendRequest", "Content", "Recipient", "TemplateRef", "Accepted", "NotificationStatus", "Error", "CampaignRequest", "QuietHours",
      "CampaignAccepted", "CampaignState", "DeviceRequest", "Device", "DeviceList", "ContactsRequest", "Contacts", "PreferencesRequest",
      "Preferences", "WebPushSubscriptionRequest", "WebPushSubscription", "WebPushSubscriptionList", "TemplateRequest", "Template",
      "InboxItem", "InboxPage", "Notification", "Campaign", "SendBatchRequest", "SendBatchResponse", "UnreadCount", "ReadAllResult",
    ];
    for (const name of wanted) assert.match(text, new RegExp(`^export type ${name} = `, "m"), name);
  });

  test("the types say what the document says (checked by tsc)", () => {
    const ok: SendRequest = { idempotency_key: "k", channels: ["push", "inbox"], recipients: [{ user_id: "u" }], category: "marketing", channel_content: { push: { title: "t" } } };
    // @ts-expect-error channels is required
    const noChannels: SendRequest = { recipients: [{ user_id: "u" }] };
    // @ts-expect-error not a channel
    const badChannel: SendRequest = { channels: ["fax"], recipients: [] };
    const contacts: ContactsRequest = { phone: "+821012345678" };
    // @ts-expect-error at least one of email and phone
    const noContact: ContactsRequest = { locale: "ko" };
    const prefs: PreferencesRequest = { opt_out: { "*": ["marketing"], sms: ["*"] } };
    assert.ok(ok && noChannels && badChannel && contacts && noContact && prefs);
  });
});
