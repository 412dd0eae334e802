// Herald's operator console: hash-routed pages over the operator routes (/console/api/… is
// /v1/admin/…). The key or token is kept in sessionStorage for this browser tab only and sent as
// the bearer token; nothing else is stored. Every value from the server is put in the page as
// text, never as HTML.
"use strict";

const keyName = "herald.console.key";
let timer = null;

function key() { return sessionStorage.getItem(keyName) || ""; }

// el builds an element: attrs are properties (on* handlers included); children are nodes or text.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

function status(text, ok) {
  const s = document.getElementById("status");
  s.textContent = text || "";
  s.className = ok ? "ok" : "";
}

class HTTPError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || "HTTP " + status);
    this.status = status;
  }
}

// api calls an operator route: path is relative to /v1/admin/.
async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (key()) headers["Authorization"] = "Bearer " + key();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch("/console/api/" + path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store",
  });
  const data = await res.json().catch(() => null);
  if (!res.ok) throw new HTTPError(res.status, data);
  return data;
}

function when(t) { return t ? new Date(t).toISOString().replace(".000Z", "Z") : "—"; }

// th is a column header; an empty one (a column of buttons) is named for screen readers.
function th(h) { return el("th", { scope: "col" }, h === "" ? el("span", { class: "vh" }, "Actions") : h); }

// scroll wraps a wide table in a box of its own, so the page never scrolls sideways.
// It can take focus, so a keyboard can scroll it too.
function scroll(t) { return el("div", { class: "scroll", tabIndex: 0, role: "region", ariaLabel: "table (scrolls sideways)" }, t); }

function table(headers, rows, empty) {
  if (rows.length === 0) return el("p", { class: "muted" }, empty || "None.");
  return scroll(el("table", {}, el("thead", {}, el("tr", {}, headers.map(th))), el("tbody", {}, rows)));
}

function num(n, warn) { return el("td", { class: "num" + (warn && n > 0 ? " warn" : "") }, String(n)); }

function reasons(m) {
  const entries = Object.entries(m || {});
  return entries.length ? entries.map(([k, v]) => k + ": " + v).join(", ") : "—";
}

// ---- pages ----

async function queuesPage(main) {
  const data = await api("GET", "queues");
  const canPause = data.queues.some(q => q.paused !== undefined);
  const consumers = (q) => {
    if (q.paused === undefined) return el("td", {}, "—");
    const box = el("span", {});
    const set = (verb) => async () => {
      try {
        await api("POST", "queues/" + encodeURIComponent(q.name) + "/" + verb);
        status(q.name + (verb === "pause" ? " paused: its messages wait." : " resumed."), true);
      } catch (e) { status(e.message); }
      route();
    };
    if (q.paused) {
      box.append(el("strong", { class: "warn-text" }, "paused"), " ", el("button", { class: "resume", onclick: set("resume") }, "Resume"));
    } else {
      box.append("running ", el("button", { class: "pause", onclick: () => {
        box.replaceChildren(el("span", { class: "confirming" }, "Pause " + q.name + "? Its messages wait until it resumes. "),
          el("button", { class: "danger pause-confirm", onclick: set("pause") }, "Pause"), " ",
          el("button", { onclick: () => route() }, "Cancel"));
      } }, "Pause"));
    }
    return el("td", {}, box);
  };
  main.replaceChildren(
    el("h1", {}, "Queues"),
    el("p", { class: "muted" }, "Refreshes every 3 seconds. Dead letters link to the queue's dead-letter page." +
      (canPause ? " Pausing a queue stops its consumers: its messages wait until it resumes." : "")),
    table(["Queue", "Visible", "In flight", "Delayed", "Oldest message", "Dead letters"].concat(canPause ? ["Consumers"] : []),
      data.queues.map(q => el("tr", { "data-queue": q.name, "data-paused": String(!!q.paused) },
        el("td", {}, el("a", { class: "messages", href: "#/queues/" + encodeURIComponent(q.name) + "/messages" }, q.name)),
        num(q.stats.visible), num(q.stats.in_flight), num(q.stats.delayed),
        el("td", { class: "num" }, q.stats.oldest_age_seconds === undefined ? "—" : q.stats.oldest_age_seconds + " s"),
        el("td", { class: "num" + (q.dead_letters > 0 ? " warn" : "") },
          el("a", { href: "#/queues/" + encodeURIComponent(q.name) }, String(q.dead_letters))),
        canPause ? consumers(q) : null))));
  return 3000;
}

// deadLettersPage lists a queue's dead letters, oldest first, 100 more at a time up to the
// 1,000 one listing shows (#/queues/<queue>?limit=…), and offers redrive and a purge that the
// queue's name, typed again, confirms.
async function deadLettersPage(main, queue) {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const limit = Math.min(1000, Math.max(100, parseInt(params.get("limit") || "100", 10) || 100));
  const [data, queues] = await Promise.all([
    api("GET", "queues/" + encodeURIComponent(queue) + "/dead-letters?limit=" + limit), api("GET", "queues")]);
  const known = (queues.queues || []).find(q => q.name === queue);
  const total = known ? known.dead_letters : undefined;
  const confirmBox = el("span", {});
  const redrive = el("button", {
    id: "redrive-all", disabled: data.dead_letters.length === 0, onclick: () => {
      confirmBox.replaceChildren(
        "Move every dead letter of " + queue + " back to it? ",
        el("button", { id: "redrive-confirm", class: "danger", onclick: async () => {
          try {
            const r = await api("POST", "queues/" + encodeURIComponent(queue) + "/redrive");
            status("Moved " + r.moved + " message(s) back to " + queue + ".", true);
          } catch (e) { status(e.message); }
          route();
        } }, "Redrive"),
        " ",
        el("button", { onclick: () => confirmBox.replaceChildren() }, "Cancel"));
    },
  }, "Redrive all");
  const purge = el("button", {
    id: "purge", class: "danger", disabled: data.dead_letters.length === 0, onclick: () => {
      const typed = el("input", { id: "purge-name", ariaLabel: "type the queue's name to confirm the purge", placeholder: queue, size: 24 });
      const go = el("button", { id: "purge-confirm", class: "danger", disabled: true, onclick: async () => {
        try {
          const r = await api("DELETE", "queues/" + encodeURIComponent(queue) + "/dead-letters?confirm=" + encodeURIComponent(typed.value));
          status("Purged " + r.purged + " dead letter(s) of " + queue + ".", true);
        } catch (e) { status(e.message); }
        route();
      } }, "Purge for good");
      typed.oninput = () => { go.disabled = typed.value !== queue; };
      confirmBox.replaceChildren("Every dead letter of " + queue + " is removed for good. Type the queue's name to confirm: ",
        typed, " ", go, " ", el("button", { onclick: () => confirmBox.replaceChildren() }, "Cancel"));
      typed.focus();
    },
  }, "Purge…");
  const shown = data.dead_letters.length;
  const more = shown >= limit && limit < 1000 ?
    el("a", { id: "more", href: "#/queues/" + encodeURIComponent(queue) + "?limit=" + (limit + 100) }, "Show 100 more") : null;
  main.replaceChildren(
    el("h1", {}, "Dead letters of " + queue),
    el("p", {}, el("a", { href: "#/queues" }, "← queues"), " ", el("button", { onclick: () => route() }, "Refresh"), " ", redrive, " ", purge, " ", confirmBox),
    el("p", { class: "muted", id: "dl-count" }, "Showing " + shown + (total !== undefined ? " of " + total : "") + " dead letters, oldest first." +
      (limit >= 1000 && total > 1000 ? " A listing shows at most 1,000: redrive or purge to reach the rest." : "")),
    table(["Id", "Error code", "Reason", "Receive count", "Sent", "Payload (masked)", ""],
      data.dead_letters.map(d => el("tr", { "data-id": d.id },
        el("td", {}, d.id), el("td", {}, d.code || "—"), el("td", { class: "reason" }, d.error || "—"),
        num(d.receive_count), el("td", {}, when(d.sent_at)),
        el("td", {}, el("pre", {}, JSON.stringify(d.payload, null, 1))),
        el("td", {}, oneDeadLetter(queue, d.id)))),
      "No dead letters."),
    more ? el("p", {}, more) : null);
  return 0; // no refresh by itself: it would close a confirmation being answered
}

// messagesPage lists a queue's messages in one state (#/queues/<queue>/messages?state=…),
// oldest first, 50 at a time, payloads masked. Where the queue cannot be browsed without taking
// messages from their consumers (SQS) it says so, and the queues page's depths are what there is.
async function messagesPage(main, queue) {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const state = params.get("state") || "visible";
  const base = "queues/" + encodeURIComponent(queue) + "/messages?state=" + encodeURIComponent(state) + "&limit=50";
  const tabs = el("p", {}, el("a", { href: "#/queues" }, "← queues"), " ",
    ["visible", "in_flight", "delayed"].map(st => [el("a", { href: "#/queues/" + encodeURIComponent(queue) + "/messages?state=" + st,
      class: st === state ? "active-tab" : "", ariaCurrent: st === state ? "page" : null }, st.replace("_", " ")), " "]));
  let first;
  try {
    first = await api("GET", base);
  } catch (e) {
    if (e.status !== 501) throw e;
    main.replaceChildren(el("h1", {}, "Messages of " + queue), tabs,
      el("p", {}, "SQS shows a message only by receiving it, which would take it from its consumers: in AWS the console shows queue depths only (the queues page)."));
    return 0;
  }
  const body = el("tbody", {});
  const more = el("button", { id: "more-messages", hidden: true }, "More");
  let cursor = "";
  const add = (page) => {
    body.append(...page.messages.map(m => el("tr", { "data-id": m.id },
      el("td", {}, m.id), num(m.receive_count), el("td", {}, when(m.sent_at)),
      el("td", {}, el("pre", {}, JSON.stringify(m.payload, null, 1))))));
    cursor = page.next_cursor;
    more.hidden = !cursor;
  };
  more.onclick = async () => {
    try { add(await api("GET", base + "&cursor=" + encodeURIComponent(cursor))); } catch (e) { status(e.message); }
  };
  add(first);
  main.replaceChildren(el("h1", {}, "Messages of " + queue + ": " + state.replace("_", " ")), tabs,
    first.messages.length === 0 ? el("p", { class: "muted" }, "None.") :
      scroll(el("table", {}, el("thead", {}, el("tr", {}, ["Id", "Receive count", "Sent", "Payload (masked)"].map(th))), body)),
    el("p", {}, more));
  return 0; // paging appends: a refresh would drop what was fetched
}

// oneDeadLetter is a dead letter's Redrive and Delete buttons, each confirmed in the page.
function oneDeadLetter(queue, id) {
  const box = el("span", {});
  const path = "queues/" + encodeURIComponent(queue) + "/dead-letters/" + encodeURIComponent(id);
  const ask = (verb, method, suffix) => () => box.replaceChildren(verb + " " + id + "? ",
    el("button", { class: "danger " + verb.toLowerCase() + "-confirm", onclick: async () => {
      try {
        await api(method, path + suffix);
        status(verb + ": " + id + " done.", true);
      } catch (e) { status(e.message); }
      route();
    } }, "Yes"), " ", el("button", { onclick: () => box.replaceChildren(buttons()) }, "No"));
  const buttons = () => el("span", {},
    el("button", { class: "redrive", onclick: ask("Redrive", "POST", "/redrive") }, "Redrive"), " ",
    el("button", { class: "danger delete", onclick: ask("Delete", "DELETE", "") }, "Delete"));
  box.append(buttons());
  return box;
}

function findForm(label, go) {
  const input = el("input", { id: "find", placeholder: label, size: 40, ariaLabel: label });
  return el("form", { onsubmit: (ev) => { ev.preventDefault(); if (input.value.trim()) go(input.value.trim()); } },
    input, " ", el("button", { type: "submit" }, "Open"));
}

// notificationsPage lists every service's notifications matching the filters in the hash
// (#/notifications?status=…&service=…), newest first as far as fetched; "More" fetches on.
async function notificationsPage(main) {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const field = (name, input) => { input.name = name; input.value = params.get(name) || ""; return el("label", {}, name + " ", input, " "); };
  const select = (options) => el("select", {}, el("option", { value: "" }, "any"), options.map(o => el("option", { value: o }, o)));
  const form = el("form", { id: "filter", onsubmit: (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const i of form.querySelectorAll("input, select")) {
      if (!i.value) continue;
      q.set(i.name, i.type === "datetime-local" ? i.value + (i.value.length === 16 ? ":00Z" : "Z") : i.value);
    }
    location.hash = "#/notifications?" + q.toString();
  } },
    field("status", select(["ACCEPTED", "SCHEDULED", "PROCESSING", "SENT", "PARTIALLY_SENT", "FAILED", "SKIPPED", "CANCELED"])),
    field("service", el("input", { size: 12 })),
    field("category", select(["transactional", "marketing"])),
    field("idempotency_key", el("input", { size: 16 })),
    field("user", el("input", { size: 12 })),
    field("from", el("input", { type: "datetime-local", step: 1 })),
    field("to", el("input", { type: "datetime-local", step: 1 })),
    el("button", { type: "submit" }, "Filter"));
  for (const name of ["from", "to"]) { // the inputs hold UTC without the zone
    const i = form.querySelector(`[name="${name}"]`);
    if (params.get(name)) i.value = params.get(name).replace(/Z$/, "").slice(0, 19);
  }
  const body = el("tbody", {});
  const more = el("button", { id: "more", hidden: true }, "More");
  let cursor = "", rows = [];
  const fetchPage = async () => {
    const q = new URLSearchParams(params);
    q.set("limit", "100");
    if (cursor) q.set("cursor", cursor);
    for (let calls = 0; calls < 10; calls++) { // a DynamoDB page may be empty while the scan goes on
      const p = await api("GET", "notifications?" + q.toString());
      rows = rows.concat(p.notifications);
      cursor = p.next_cursor;
      if (!cursor || p.notifications.length > 0) break;
      q.set("cursor", cursor);
    }
    rows.sort((a, b) => b.created_at.localeCompare(a.created_at));
    body.replaceChildren(...rows.map(n => el("tr", { "data-id": n.id },
      el("td", {}, el("a", { href: "#/notifications/" + encodeURIComponent(n.id) }, n.id)), el("td", {}, n.service),
      el("td", {}, n.status), el("td", {}, n.category || "—"), el("td", {}, n.idempotency_key || "—"), el("td", {}, when(n.created_at)))));
    more.hidden = !cursor;
  };
  more.onclick = () => fetchPage().catch(e => status(e.message));
  main.replaceChildren(el("h1", {}, "Notifications"),
    form,
    el("p", {}, findForm("notification id", id => { location.hash = "#/notifications/" + encodeURIComponent(id); })),
    scroll(el("table", {}, el("thead", {}, el("tr", {}, ["Id", "Service", "Status", "Category", "Idempotency key", "Created"].map(th))), body)),
    el("p", {}, more));
  await fetchPage();
  return 0;
}

async function notificationPage(main, id) {
  const n = await api("GET", "notifications/" + encodeURIComponent(id));
  const user = new URLSearchParams(location.hash.split("?")[1] || "").get("user");
  const deliveries = n.deliveries || [];
  main.replaceChildren(
    el("h1", {}, "Notification " + n.id),
    user ? el("p", {}, el("a", { href: "#/recipients/" + encodeURIComponent(user) }, "← " + user + "'s notifications")) : "",
    el("dl", {},
      el("dt", {}, "Status"), el("dd", { id: "n-status" }, n.status),
      el("dt", {}, "Service"), el("dd", {}, n.service || "—"),
      el("dt", {}, "Category"), el("dd", {}, n.category || "—"),
      el("dt", {}, "Idempotency key"), el("dd", {}, n.idempotency_key || "—"),
      el("dt", {}, "Created"), el("dd", {}, when(n.created_at)),
      el("dt", {}, "Send at"), el("dd", {}, when(n.send_at)),
      el("dt", {}, "Skipped by reason"), el("dd", {}, reasons(n.skipped_by_reason)),
      el("dt", {}, "Failed by reason"), el("dd", {}, reasons(n.failed_by_reason))),
    user ? timeline(n, user, deliveries.filter(d => d.user_id === user)) : "",
    el("h2", {}, "Per channel"),
    table(["Channel", "Total", "Sent", "Failed", "Skipped", "Pending"],
      Object.entries(n.stats || {}).map(([c, s]) => el("tr", {},
        el("td", {}, c), num(s.total), num(s.sent), num(s.failed, true), num(s.skipped), num(s.pending)))),
    el("h2", {}, "Deliveries"),
    table(["User", "Channel", "Provider", "Address", "Status", "Reason", "Attempts", "Updated"],
      deliveries.map(d => el("tr", {},
        el("td", {}, d.user_id ? el("a", { href: "#/recipients/" + encodeURIComponent(d.user_id) }, d.user_id) : "—"),
        el("td", {}, d.channel), el("td", {}, d.provider), el("td", {}, d.address),
        el("td", {}, d.status), el("td", {}, d.reason || "—"), num(d.attempts), el("td", {}, when(d.updated_at)))),
      "No deliveries yet."));
  return n.status === "ACCEPTED" || n.status === "SENDING" || n.status === "PROCESSING" ? 3000 : 0;
}

// timeline is what happened to one user's part of a notification, in time order: the request,
// then each of the user's deliveries — every retried attempt with the provider's answer and when
// the retry was due, and the last attempt's outcome (an AlimTalk's SMS fallback is a delivery of
// its own, on the sms channel).
function timeline(n, user, ds) {
  const events = [{ at: n.created_at, what: "Accepted from " + (n.service || "?") + " (" + (n.category || "—") + ")" }];
  if (n.send_at) events.push({ at: n.send_at, what: "Reserved for this time" });
  for (const d of ds) {
    for (const h of d.history || []) { // an earlier attempt, retried
      const was = [h.reason, h.detail].filter(Boolean).join(": ");
      events.push({ at: h.at, status: "RETRIED", what: d.channel + " via " + d.provider + " to " + d.address + ": attempt " + h.attempt +
        (was ? " — " + was : "") + (h.retry_at ? "; retried at " + when(h.retry_at) : "") });
    }
    const answer = [d.reason, d.detail].filter(Boolean).join(": ");
    const attempts = d.attempts === 1 ? "1 attempt" : d.attempts + " attempts";
    events.push({ at: d.updated_at, what: d.channel + " via " + d.provider + " to " + d.address + ": " + d.status +
      (d.attempts ? " after " + attempts : "") + (answer ? " — " + answer : "") +
      (d.provider_message_id ? " (provider id " + d.provider_message_id + ")" : ""), status: d.status });
  }
  events.sort((a, b) => (a.at || "").localeCompare(b.at || ""));
  return el("section", { id: "timeline", ariaLabel: "timeline for " + user },
    el("h2", {}, "Timeline for " + user),
    ds.length === 0 ? el("p", { class: "muted" }, "No delivery of this notification is " + user + "'s yet (a bulk send keeps counts only).") : "",
    el("ol", {}, events.map(e => el("li", { "data-status": e.status || "" }, el("time", {}, when(e.at)), " ", e.what))));
}

// recipientsPage finds a user (#/recipients), and lists the notifications sent to that one user,
// newest first (#/recipients/<user>), each linked to its timeline for the user.
async function recipientsPage(main, user) {
  const find = findForm("user id", u => { location.hash = "#/recipients/" + encodeURIComponent(u); });
  // By address: the server says whose it is (the address stays out of the URL and the history).
  const address = el("input", { id: "find-address", type: "search", size: 32, autocomplete: "off",
    placeholder: "email, phone or push token", ariaLabel: "email, phone or push token" });
  const byAddress = el("form", { onsubmit: async (ev) => {
    ev.preventDefault();
    if (!address.value.trim()) return;
    try {
      const r = await api("GET", "recipients?address=" + encodeURIComponent(address.value.trim()));
      location.hash = "#/recipients/" + encodeURIComponent(r.user_id);
    } catch (e) { status(e.message); }
  } }, address, " ", el("button", { type: "submit" }, "Find"));
  const finders = el("div", { class: "finders" }, find, byAddress);
  if (!user) {
    main.replaceChildren(el("h1", {}, "Recipients"),
      el("p", { class: "muted" }, "Find a user by id, or by an email, phone number or push token of theirs: the notifications sent to them, newest first, and each delivery's timeline."),
      finders);
    return 0;
  }
  const body = el("tbody", {});
  const more = el("button", { id: "more", hidden: true }, "More");
  let cursor = "", rows = [];
  const fetchPage = async () => {
    const q = new URLSearchParams({ user, limit: "100" });
    if (cursor) q.set("cursor", cursor);
    const p = await api("GET", "notifications?" + q.toString());
    rows = rows.concat(p.notifications);
    cursor = p.next_cursor;
    body.replaceChildren(...rows.map(n => el("tr", { "data-id": n.id },
      el("td", {}, el("a", { href: "#/notifications/" + encodeURIComponent(n.id) + "?user=" + encodeURIComponent(user) }, n.id)),
      el("td", {}, n.service), el("td", {}, n.status), el("td", {}, n.category || "—"), el("td", {}, when(n.created_at)))));
    more.hidden = !cursor;
  };
  more.onclick = () => fetchPage().catch(e => status(e.message));
  main.replaceChildren(el("h1", {}, "Recipient " + user),
    finders,
    el("p", { class: "muted" }, "Notifications sent to this one user, newest first. A notification to several users, and a campaign, are not filed under a user: find those by id."),
    scroll(el("table", {}, el("thead", {}, el("tr", {}, ["Id", "Service", "Status", "Category", "Created"].map(th))), body)),
    el("p", {}, more));
  await fetchPage();
  if (rows.length === 0) body.replaceChildren(el("tr", {}, el("td", { colSpan: 5, class: "muted" }, "No notification filed under " + user + ".")));
  return 0;
}

async function campaignsPage(main) {
  const data = await api("GET", "campaigns?limit=200");
  main.replaceChildren(el("h1", {}, "Campaigns"),
    el("p", { class: "muted" }, "Every service's campaigns, newest first (the latest 200); open one for its progress and to pause, resume or cancel it. Refreshes every 5 seconds."),
    findForm("campaign id", id => { location.hash = "#/campaigns/" + encodeURIComponent(id); }),
    el("h2", {}, "Campaigns"),
    table(["Id", "Service", "State", "Category", "Created", "Send at", "Paused until"],
      data.campaigns.map(c => el("tr", { "data-id": c.id },
        el("td", {}, el("a", { href: "#/campaigns/" + encodeURIComponent(c.id) }, c.id)), el("td", {}, c.service),
        el("td", {}, c.state), el("td", {}, c.category || "—"), el("td", {}, when(c.created_at)),
        el("td", {}, when(c.send_at)), el("td", {}, when(c.paused_until)))),
      "No campaigns."));
  return 5000;
}

function bar(pct) {
  const fill = el("div", {}, pct + " %");
  fill.style.width = pct + "%"; // through the CSSOM: the page's policy allows no inline style
  const b = el("div", { class: "bar", id: "progress", "data-percent": String(pct), role: "progressbar", ariaLabel: "progress" }, fill);
  b.setAttribute("aria-valuenow", String(pct));
  b.setAttribute("aria-valuemin", "0");
  b.setAttribute("aria-valuemax", "100");
  return b;
}

async function campaignPage(main, id) {
  const c = await api("GET", "campaigns/" + encodeURIComponent(id));
  const t = c.totals;
  // Progress is in recipients, against the audience's size (estimated until every source has
  // been read): the members dispatched, scaled by how many of their deliveries have ended.
  const done = t.sent + t.failed + t.skipped;
  const reached = c.state === "COMPLETED" ? t.members : t.total > 0 ? Math.min(t.members, Math.round(t.members * done / t.total)) : 0;
  const audience = Math.max(t.audience, reached);
  const pct = c.state === "COMPLETED" ? 100 : audience > 0 ? Math.floor(reached / audience * 100) : 0;
  const about = t.remaining_exact ? "" : "about ";
  const act = (verb) => el("button", { id: "campaign-" + verb, class: verb === "cancel" ? "danger" : "", onclick: async () => {
    if (verb === "cancel" && !window.confirm("Cancel campaign " + c.id + "? This cannot be undone.")) return;
    try {
      const r = await api("POST", "campaigns/" + encodeURIComponent(c.id) + "/" + verb);
      status("Campaign " + c.id + " is " + r.state + ".", true);
    } catch (e) { status(e.message); }
    route();
  } }, verb);
  main.replaceChildren(
    el("h1", {}, "Campaign " + c.id),
    bar(pct),
    el("p", { id: "c-progress" }, (t.total > 0 && t.total !== t.members ? "about " : "") + reached + " of " + about + audience + " recipients reached (" +
      done + " of " + t.total + " deliveries ended)"),
    el("dl", {},
      el("dt", {}, "State"), el("dd", { id: "c-state" }, c.state),
      el("dt", {}, "Rate"), el("dd", { id: "c-rate" }, c.recipients_per_second + " recipients/s" + (c.max_rate ? " (limit " + c.max_rate + " recipients/s)" : "")),
      el("dt", {}, "ETA"), el("dd", {}, when(c.eta)),
      el("dt", {}, "Paused until (quiet hours)"), el("dd", {}, when(c.paused_until)),
      el("dt", {}, "Send at"), el("dd", {}, when(c.send_at)),
      el("dt", {}, "Sent / failed / skipped"), el("dd", {}, t.sent + " / " + t.failed + " / " + t.skipped),
      el("dt", {}, "Skipped by reason"), el("dd", {}, reasons(t.skipped_by_reason)),
      el("dt", {}, "Failed by reason"), el("dd", {}, reasons(t.failed_by_reason)),
      el("dt", {}, "Error"), el("dd", {}, c.error || "—")),
    el("p", {}, act("pause"), " ", act("resume"), " ", act("cancel")));
  return ["COMPLETED", "CANCELED", "FAILED"].includes(c.state) ? 0 : 2000;
}

// reservedPage lists the upcoming reserved sends, soonest first, fetching store pages until
// there are 200 or the listing ends (on DynamoDB each page is a bounded scan).
async function reservedPage(main) {
  let list = [], cursor = "", more = false;
  for (let pages = 0; ; pages++) {
    const p = await api("GET", "reserved?limit=200" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
    list = list.concat(p.reserved);
    cursor = p.next_cursor;
    if (!cursor) break;
    if (list.length >= 200 || pages >= 20) { more = true; break; }
  }
  list.sort((a, b) => a.send_at.localeCompare(b.send_at));
  const path = (r) => (r.kind === "campaign" ? "campaigns/" : "notifications/") + encodeURIComponent(r.id);
  const row = (r) => {
    const at = el("input", { type: "datetime-local", step: 1, value: r.send_at.slice(0, 19), ariaLabel: "new send_at of " + r.id + " (UTC)" });
    const box = el("span", {});
    return el("tr", { "data-id": r.id },
      el("td", {}, r.kind), el("td", {}, el("a", { href: "#/" + path(r) }, r.id)), el("td", {}, r.service),
      el("td", {}, when(r.send_at)),
      el("td", {}, at, " UTC ", el("button", { class: "reschedule", onclick: async () => {
        try {
          await api("PATCH", path(r), { send_at: at.value.length === 16 ? at.value + ":00Z" : at.value + "Z" });
          status(r.id + " rescheduled.", true);
        } catch (e) { status(e.message); }
        route();
      } }, "Reschedule"), " ", box, el("button", { class: "danger cancel", onclick: () => {
        box.replaceChildren("Cancel " + r.id + "? ", el("button", { class: "danger cancel-confirm", onclick: async () => {
          try {
            await api(r.kind === "campaign" ? "POST" : "DELETE", path(r) + (r.kind === "campaign" ? "/cancel" : ""));
            status(r.id + " canceled.", true);
          } catch (e) { status(e.message); }
          route();
        } }, "Yes, cancel"), " ");
      } }, "Cancel")));
  };
  main.replaceChildren(el("h1", {}, "Reserved sends"),
    el("p", { class: "muted" }, "Notifications and campaigns of every service waiting for their send_at, soonest first. Times are UTC." +
      (more ? " Only the first " + list.length + " found are shown." : "")),
    table(["Kind", "Id", "Service", "Send at", "Reschedule (UTC) / cancel"], list.map(row), "No reserved sends."));
  return 0;
}

// The filters each export kind takes besides from and to (POST /v1/admin/exports refuses others).
const exportFilters = {
  deliveries: ["notification_id", "status", "channel", "reason"],
  notifications: ["status", "channel"],
  suppressions: ["channel", "reason"],
  audit: ["action"],
};

// exportsPage asks for export files and lists the latest jobs, newest first. Only the list
// refreshes (every 2 seconds while a job is PENDING or PROCESSING, else every 10), so the form
// keeps what is being typed; a DONE job links to its file (a link valid for minutes, minted anew
// at every refresh).
async function exportsPage(main) {
  const input = (name, attrs) => el("input", Object.assign({ name, id: "export-" + name }, attrs || {}));
  const select = (name, options) => el("select", { name, id: "export-" + name }, options.map(o => el("option", { value: o }, o || "any")));
  const fields = {
    notification_id: input("notification_id", { size: 30, placeholder: "n_…" }),
    status: input("status", { size: 12, placeholder: "SENT, FAILED…" }),
    channel: select("channel", ["", "push", "email", "sms", "inbox", "alimtalk"]),
    reason: input("reason", { size: 14 }),
    action: input("action", { size: 16, placeholder: "export.create…" }),
    from: input("from", { type: "datetime-local", step: 1 }),
    to: input("to", { type: "datetime-local", step: 1 }),
  };
  const kind = select("kind", Object.keys(exportFilters));
  const format = select("format", ["csv", "jsonl"]);
  const labels = {};
  for (const [name, i] of Object.entries(fields)) {
    labels[name] = el("label", {}, name + (i.type === "datetime-local" ? " (UTC) " : " "), i, " ");
  }
  const showFields = () => {
    for (const [name, l] of Object.entries(labels)) {
      l.hidden = !(name === "from" || name === "to" || exportFilters[kind.value].includes(name));
    }
  };
  kind.onchange = showFields;
  showFields();
  const body = el("tbody", {});
  const form = el("form", { id: "export-form", onsubmit: async (ev) => {
    ev.preventDefault();
    const req = { kind: kind.value, format: format.value };
    for (const [name, i] of Object.entries(fields)) {
      if (labels[name].hidden || !i.value.trim()) continue;
      req[name] = i.type === "datetime-local" ? i.value + (i.value.length === 16 ? ":00Z" : "Z") : i.value.trim();
    }
    try {
      const j = await api("POST", "exports", req);
      status("Export " + j.id + " (" + j.kind + ") asked for: " + j.status + ".", true);
    } catch (e) { status(e.message); }
    refresh();
  } },
    el("label", {}, "kind ", kind, " "), el("label", {}, "format ", format, " "),
    Object.values(labels), el("button", { type: "submit", id: "export-create" }, "Create export"));
  const filters = (f) => Object.entries(f || {}).map(([k, v]) => k + "=" + v).join(" ") || "—";
  const row = (j) => {
    const box = el("span", {});
    const busy = j.status === "PENDING" || j.status === "PROCESSING";
    return el("tr", { "data-id": j.id, "data-status": j.status },
      el("td", {}, j.id), el("td", {}, j.kind), el("td", {}, j.format), el("td", {}, filters(j.filter)),
      el("td", { class: "export-status" + (j.status === "FAILED" ? " warn" : "") }, j.status + (j.error ? ": " + j.error : "")),
      num(j.rows), el("td", {}, when(j.created_at)),
      el("td", {}, j.download_url ? el("a", { class: "download", href: j.download_url, download: j.id + "." + j.format }, "Download") : "",
        busy ? el("button", { class: "danger cancel", onclick: async () => {
          try {
            await api("DELETE", "exports/" + encodeURIComponent(j.id));
            status("Export " + j.id + " canceled.", true);
          } catch (e) { status(e.message); }
          refresh();
        } }, "Cancel") : "", box));
  };
  // refresh redraws the list; the first load's failure is the page's (a refused key signs out).
  const refresh = async (first) => {
    clearTimeout(timer);
    let again = 10000;
    try {
      const data = await api("GET", "exports?limit=50");
      body.replaceChildren(...data.exports.map(row));
      empty.hidden = data.exports.length > 0;
      if (data.exports.some(j => j.status === "PENDING" || j.status === "PROCESSING")) again = 2000;
    } catch (e) {
      if (first === true) throw e;
      status(e.message);
    }
    if (location.hash.replace(/^#/, "").split("?")[0] === "/exports" && autoRefresh()) timer = setTimeout(refresh, again);
  };
  const empty = el("p", { class: "muted", hidden: true }, "No exports yet.");
  main.replaceChildren(el("h1", {}, "Exports"),
    el("p", { class: "muted" }, "Report files of every service's requests: a notification's deliveries, the asking service's notifications, the suppression list, the audit log. Addresses are masked. Files are kept 7 days."),
    form,
    el("h2", {}, "Latest exports"),
    scroll(el("table", {}, el("thead", {}, el("tr", {}, ["Id", "Kind", "Format", "Filters", "Status", "Rows", "Created", ""].map(th))), body)),
    empty);
  await refresh(true);
  return 0; // refresh reschedules itself
}

async function auditPage(main) {
  const data = await api("GET", "audit?limit=50");
  main.replaceChildren(el("h1", {}, "Audit log"),
    table(["When", "Actor", "Action", "Target", "Result", "Params"],
      data.entries.map(a => el("tr", {},
        el("td", {}, when(a.at)), el("td", {}, a.actor), el("td", {}, a.action),
        el("td", {}, a.target_type + " " + a.target_id), el("td", {}, a.result),
        el("td", {}, el("pre", {}, JSON.stringify(a.params || {})))))));
  return 10000;
}

async function sandboxPage(main) {
  const res = await fetch("/sandbox/deliveries?limit=50", { cache: "no-store" });
  if (!res.ok) {
    main.replaceChildren(el("h1", {}, "Sandbox"), el("p", {}, "The sandbox providers run only locally (herald dev)."));
    return 0;
  }
  const data = await res.json();
  main.replaceChildren(el("h1", {}, "Sandbox: what the fake providers received"),
    el("p", { class: "muted" }, data.total + " in all; the latest 50 first. Refreshes every 3 seconds."),
    table(["#", "Provider", "Address", "Title", "Body", "At"],
      data.deliveries.slice().reverse().map(d => el("tr", { "data-address": d.address },
        el("td", { class: "num" }, String(d.seq)), el("td", {}, d.provider), el("td", {}, d.address),
        el("td", {}, d.title || ""), el("td", {}, d.body || ""), el("td", {}, when(d.at)))),
      "Nothing received yet."));
  return 3000;
}

const pages = [
  [/^\/queues$/, queuesPage],
  [/^\/queues\/([^/]+)$/, deadLettersPage],
  [/^\/queues\/([^/]+)\/messages$/, messagesPage],
  [/^\/dead-letters\/([^/]+)$/, deadLettersPage], // links of alerts posted before they named #/queues/<queue>
  [/^\/notifications$/, notificationsPage],
  [/^\/notifications\/([^/]+)$/, notificationPage],
  [/^\/recipients$/, recipientsPage],
  [/^\/recipients\/([^/]+)$/, recipientsPage],
  [/^\/campaigns$/, campaignsPage],
  [/^\/campaigns\/([^/]+)$/, campaignPage],
  [/^\/reserved$/, reservedPage],
  [/^\/exports$/, exportsPage],
  [/^\/audit$/, auditPage],
  [/^\/sandbox$/, sandboxPage],
];

// autoRefresh reports whether pages refresh by themselves (the header's toggle, kept for the tab).
function autoRefresh() { return sessionStorage.getItem("herald.console.refresh") !== "off"; }

// busy reports whether the operator is in the middle of something on the page — focus in one of
// its controls, or text selected in it — which a refresh would take away.
function busy(main) {
  const a = document.activeElement;
  if (a && a !== main && main.contains(a) && a.matches("input, select, textarea, button, a, [tabindex]")) return true;
  if (main.querySelector(".confirming")) return true; // a question is waiting for its answer
  const sel = window.getSelection();
  return !!(sel && !sel.isCollapsed && main.contains(sel.anchorNode));
}

// refreshLater asks route to draw the page again in ms, unless auto-refresh is off; a refresh
// that comes while the operator is busy waits, and one that happens keeps the scroll position.
function refreshLater(ms) {
  clearTimeout(timer);
  if (!autoRefresh()) return;
  timer = setTimeout(() => {
    if (busy(document.getElementById("page"))) return refreshLater(1000);
    route(true);
  }, ms);
}

async function route(refreshing) {
  clearTimeout(timer);
  const path = location.hash.replace(/^#/, "").split("?")[0] || "/queues";
  const main = document.getElementById("page");
  for (const a of document.querySelectorAll("header nav a")) {
    const on = path.startsWith(a.getAttribute("href").slice(1));
    a.classList.toggle("active", on);
    if (on) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  const signedIn = key() !== "";
  document.getElementById("key-form").hidden = signedIn;
  document.getElementById("sign-out").hidden = !signedIn;
  const scrollY = refreshing === true ? window.scrollY : 0;
  for (const [re, page] of pages) {
    const m = path.match(re);
    if (!m) continue;
    if (!signedIn) {
      main.replaceChildren(el("h1", {}, "Sign in"),
        el("p", {}, "Enter an admin service's API key (locally) or your operator token (in AWS) above. It is kept for this browser tab only."));
      return;
    }
    try {
      const again = await page(main, ...m.slice(1).map(decodeURIComponent));
      if (refreshing === true) window.scrollTo(0, scrollY);
      if (again > 0) refreshLater(again);
    } catch (e) {
      if (e.status === 401 || e.status === 403) {
        // Refused, or a key that is no admin's (every console route is an operator's): sign in again.
        sessionStorage.removeItem(keyName);
        status(e.status === 401 ? "The key was refused: sign in again." :
          "This key is not an admin's: sign in with an admin service's API key or an operator token.");
        route();
        return;
      }
      // The page that failed replaces the one before it: a stale page under a red line reads as
      // this one's data. A refusal or a missing id (4xx) is final until the operator moves on; a
      // server or network failure is tried again.
      const title = e.status === 404 ? "Not found" : e.status === 403 ? "Not allowed" : "Could not load this page";
      main.replaceChildren(el("h1", {}, title), el("p", { role: "alert" }, e.message));
      status(e.message);
      if (!(e.status >= 400 && e.status < 500)) refreshLater(5000);
    }
    return;
  }
  main.replaceChildren(el("h1", {}, "Not found"), el("p", {}, "No console page here."));
}

document.getElementById("key-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const input = document.getElementById("key");
  sessionStorage.setItem(keyName, input.value.trim());
  input.value = "";
  status("");
  route();
});
document.getElementById("sign-out").addEventListener("click", () => {
  sessionStorage.removeItem(keyName);
  route();
});
window.addEventListener("hashchange", () => { status(""); route(); });
document.getElementById("skip").addEventListener("click", () => document.getElementById("page").focus());
const refreshToggle = document.getElementById("auto-refresh");
refreshToggle.checked = autoRefresh();
refreshToggle.addEventListener("change", () => {
  sessionStorage.setItem("herald.console.refresh", refreshToggle.checked ? "on" : "off");
  if (refreshToggle.checked) route(true); else clearTimeout(timer);
});
route();
