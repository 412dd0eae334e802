"use strict";
// Herald's example web app: what a page does to get Web Push and the live inbox for its user.
// Plain JS, no framework, no build step. Every value from the API is inserted as text.
//
//  1. Push: register sw.js, subscribe with the deployment's VAPID public key
//     (GET /v1/web-push/vapid-public-key) and register the subscription for the user
//     (PUT /v1/users/{user}/web-push-subscriptions). Where the browser has no push service
//     (headless, offline) subscribing fails: the page says so and carries on.
//  2. Inbox: open ws://…/v1/users/{user}/inbox/stream?access_token=…, send
//     {"action":"resume","last_event_id":…} on every open, reconnect with backoff, render the
//     items and the unread count as the events arrive; "Mark read" is
//     POST /v1/users/{user}/inbox/{id}/read, and the count follows from the inbox.unread event.
//
// The user id and the service's API key are kept in this tab's sessionStorage only. A real app
// keeps the service key on its backend: the backend registers the subscription, and the page
// streams with a token for its user.

const KEY_USER = "herald-example-user";
const KEY_KEY = "herald-example-key";
const KEY_LAST = "herald-example-last-event:"; // + user: the last event id seen, for resume

const $ = (id) => document.getElementById(id);
const user = () => sessionStorage.getItem(KEY_USER) || "";
const apiKey = () => sessionStorage.getItem(KEY_KEY) || "";
const userPath = () => "/v1/users/" + encodeURIComponent(user());

// api calls Herald with the key as the bearer token; it throws an Error with Herald's message.
async function api(method, path, body) {
  const init = { method, cache: "no-store", headers: { "Authorization": "Bearer " + apiKey() } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!res.ok) {
    let msg = res.status + " " + res.statusText;
    if (data && data.error) msg = data.error.message + (data.error.field ? " (" + data.error.field + ")" : "");
    const err = new Error(msg);
    err.status = res.status;
    throw err;
  }
  return data;
}

function say(id, cls, text) {
  const el = $(id);
  el.className = cls;
  el.textContent = text;
}

// ---- Web Push ----

function b64urlBytes(s) {
  const b = atob(s.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - s.length % 4) % 4));
  return Uint8Array.from(b, (c) => c.charCodeAt(0));
}

function sameBytes(a, b) {
  if (!a) return false;
  const x = new Uint8Array(a);
  return x.length === b.length && x.every((v, i) => v === b[i]);
}

// within rejects when p has not settled after ms: a browser without a push service may never
// answer subscribe.
function within(p, ms, what) {
  return Promise.race([p, new Promise((_, reject) => setTimeout(() => reject(new Error(what + ": no answer after " + ms / 1000 + " s")), ms))]);
}

function pushUnavailable(why) {
  say("push-status", "unavailable", "Push unavailable: " + why + ". The live inbox below works without it.");
}

async function setUpPush() {
  if (!window.isSecureContext || !("serviceWorker" in navigator) || !("PushManager" in window)) {
    pushUnavailable("this browser has no service workers or Push API here (they need https, or http on localhost)");
    return;
  }
  say("push-status", "pending", "Registering the service worker…");
  let reg;
  try {
    await navigator.serviceWorker.register("sw.js"); // served beside the page: its scope covers it
    reg = await within(navigator.serviceWorker.ready, 10000, "service worker");
  } catch (e) {
    pushUnavailable("the service worker did not start (" + e.message + ")");
    return;
  }
  let key;
  try {
    key = b64urlBytes((await api("GET", "/v1/web-push/vapid-public-key")).public_key);
  } catch (e) {
    pushUnavailable("no VAPID public key (" + e.message + ")");
    return;
  }
  say("push-status", "pending", "Subscribing…");
  let sub;
  try {
    sub = await reg.pushManager.getSubscription();
    // A subscription made with another key (the deployment's key changed) can never be pushed to.
    if (sub && !sameBytes(sub.options.applicationServerKey, key)) {
      await sub.unsubscribe();
      sub = null;
    }
    if (!sub) {
      sub = await within(reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key }), 15000, "subscribe");
    }
  } catch (e) {
    pushUnavailable("the browser could not subscribe (" + (e.name ? e.name + ": " : "") + e.message +
      "); headless browsers and browsers offline have no push service, and a denied notification permission refuses it");
    return;
  }
  try {
    await api("PUT", userPath() + "/web-push-subscriptions", sub.toJSON());
  } catch (e) {
    pushUnavailable("Herald did not register the subscription (" + e.message + ")");
    return;
  }
  say("push-status", "ok", "Push on: this browser's subscription is registered for " + user() +
    "; a notification on the push channel shows here even with the page closed.");
}

// dropPush unregisters this browser's subscription at sign-out, so the next user of the browser
// does not get the previous one's pushes.
async function dropPush() {
  try {
    const reg = await navigator.serviceWorker.getRegistration();
    const sub = reg && await reg.pushManager.getSubscription();
    if (!sub) return;
    await api("DELETE", userPath() + "/web-push-subscriptions?endpoint=" + encodeURIComponent(sub.endpoint));
    await sub.unsubscribe();
  } catch (e) {
    // best effort: a subscription left behind is removed when its push service answers 410
  }
}

// ---- Live inbox ----

let items = new Map(); // id → inbox item as GET …/inbox lists it
let unread = 0;
const heard = new Set(); // item ids heard on the stream
const when = (it) => Date.parse(it.created_at) || 0;
let socket = null;
let retry = null;
let backoff = 500;

function lastEventKey() { return KEY_LAST + user(); }

// remember keeps the greatest event id seen: ids sort by time ("<19-digit ns>-<item id>").
function remember(id) {
  if (!id) return;
  const last = sessionStorage.getItem(lastEventKey()) || "";
  if (id > last) sessionStorage.setItem(lastEventKey(), id);
}

function connect() {
  clearTimeout(retry);
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + userPath() +
    "/inbox/stream?access_token=" + encodeURIComponent(apiKey());
  say("stream-status", "connecting", "Connecting to the live inbox…");
  const ws = new WebSocket(url);
  socket = ws;
  ws.onopen = () => {
    backoff = 500;
    say("stream-status", "ok", "Live: new items, reads and the unread count arrive as they happen.");
    // On every open: what was missed since the last event seen (or just the count), then the
    // list again, which also brings reads and deletes missed while away.
    ws.send(JSON.stringify({ action: "resume", last_event_id: sessionStorage.getItem(lastEventKey()) || "" }));
    loadList();
  };
  ws.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch (e) { return; }
    handle(ev);
  };
  ws.onclose = (c) => {
    if (socket !== ws) return; // signed out, or replaced
    socket = null;
    const wait = Math.round(backoff * (1 + Math.random() / 2));
    backoff = Math.min(backoff * 2, 30000);
    say("stream-status", "closed", "Disconnected (" + c.code + "); reconnecting in " + Math.ceil(wait / 1000) + " s…");
    retry = setTimeout(connect, wait);
  };
}

function handle(ev) {
  remember(ev.id);
  switch (ev.type) {
    case "inbox.item":
    case "inbox.broadcast": // an item arriving twice (live and in a resume) is the same id
      // The count at the stream's open excludes an item created after it: count each item the
      // first time it is heard (a resume's replay is followed by the absolute count anyway).
      if (ev.item && !heard.has(ev.item.id)) {
        heard.add(ev.item.id);
        if (!ev.item.read_at) unread++;
      }
      if (ev.item && !items.has(ev.item.id)) items.set(ev.item.id, ev.item);
      break;
    case "inbox.read": { // item_id "" is read-all
      const now = new Date().toISOString();
      for (const it of items.values()) {
        if ((ev.item_id === "" || it.id === ev.item_id) && !it.read_at) it.read_at = now;
      }
      break;
    }
    case "inbox.deleted":
      items.delete(ev.item_id);
      break;
    case "inbox.unread":
      unread = ev.unread || 0;
      break;
    case "error":
      say("error", "", "The stream refused a message: " + ev.error);
      break;
  }
  render();
}

async function loadList() {
  try {
    const page = await api("GET", userPath() + "/inbox?limit=50");
    const fresh = new Map(page.items.map((it) => [it.id, it]));
    // Keep the items heard live that the page does not hold: created after it was read (or, if
    // it is full, newer than its oldest item).
    const oldest = page.items.length === 50 ? when(page.items[page.items.length - 1]) : -Infinity;
    for (const [id, it] of items) {
      if (!fresh.has(id) && when(it) >= oldest) fresh.set(id, it);
    }
    items = fresh;
    render();
  } catch (e) {
    say("error", "", "Could not read the inbox: " + e.message);
  }
}

async function markRead(id, button) {
  button.disabled = true;
  try {
    await api("POST", userPath() + "/inbox/" + encodeURIComponent(id) + "/read");
    // The stream answers with inbox.read and inbox.unread: the row and the count follow from them.
  } catch (e) {
    button.disabled = false;
    say("error", "", "Mark read: " + e.message);
  }
}

function render() {
  const badge = $("unread");
  badge.textContent = String(unread);
  badge.classList.toggle("zero", unread === 0);
  const list = $("items");
  list.replaceChildren();
  const sorted = [...items.values()].sort((a, b) => when(b) - when(a) || (a.id < b.id ? 1 : -1));
  for (const it of sorted) {
    const li = document.createElement("li");
    li.dataset.id = it.id;
    li.className = it.read_at ? "read" : "unread";
    const text = document.createElement("div");
    const title = document.createElement("div");
    title.className = "title";
    title.textContent = it.title || "(no title)";
    const body = document.createElement("div");
    body.textContent = it.body || "";
    const meta = document.createElement("div");
    meta.className = "meta";
    meta.textContent = new Date(it.created_at).toLocaleString() + " · " + it.category + (it.link ? " · " + it.link : "");
    text.append(title, body, meta);
    li.append(text);
    if (!it.read_at) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "mark-read";
      b.textContent = "Mark read";
      b.addEventListener("click", () => markRead(it.id, b));
      li.append(b);
    }
    list.append(li);
  }
  $("empty").hidden = items.size > 0;
}

// ---- Sign in and out ----

async function start() {
  $("sign-in").hidden = true;
  $("session").hidden = false;
  $("who").textContent = user();
  say("error", "", "");
  try {
    await api("GET", userPath() + "/inbox/unread-count"); // checks the key before streaming with it
  } catch (e) {
    say("error", "", "Could not connect: " + e.message);
    if (e.status === 401 || e.status === 403) signOut(false);
    return;
  }
  connect();
  setUpPush();
}

function signOut(clear) {
  const ws = socket;
  socket = null;
  clearTimeout(retry);
  if (ws) ws.close(1000);
  items = new Map();
  unread = 0;
  heard.clear();
  if (clear) sessionStorage.removeItem(lastEventKey());
  sessionStorage.removeItem(KEY_USER);
  sessionStorage.removeItem(KEY_KEY);
  $("session").hidden = true;
  $("sign-in").hidden = false;
  $("push-status").textContent = "";
}

$("sign-in").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem(KEY_USER, $("user").value.trim());
  sessionStorage.setItem(KEY_KEY, $("key").value.trim());
  start();
});

$("sign-out").addEventListener("click", async () => {
  await dropPush();
  signOut(true);
});

if (user() && apiKey()) start();
else $("sign-in").hidden = false;
