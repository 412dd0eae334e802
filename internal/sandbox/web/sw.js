"use strict";
// The service worker a web app registers for Herald's Web Push — this is the part to copy. The
// browser shows nothing by itself: on each push the worker must show a notification (the page
// subscribed with userVisibleOnly: true). Herald's payload is JSON:
//   {"notification_id", "title", "body", "data", "link", "image", "collapse_id"}
// collapse_id becomes the notification's tag, so a resend replaces the first on screen.

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  let p = {};
  if (event.data) {
    try { p = event.data.json(); } catch (e) { p = { body: event.data.text() }; }
  }
  const options = {
    body: p.body || "",
    data: { link: p.link || "", notification_id: p.notification_id || "", data: p.data || {} },
  };
  if (p.collapse_id) {
    options.tag = p.collapse_id;
    options.renotify = true; // a replacement still alerts
  }
  if (p.image) options.image = p.image;
  event.waitUntil(self.registration.showNotification(p.title || "Notification", options));
});

// A click focuses a window already showing the link, or opens it (the app's page without one).
self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const link = (event.notification.data && event.notification.data.link) || self.registration.scope;
  const url = new URL(link, self.registration.scope).href;
  event.waitUntil((async () => {
    const wins = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    for (const w of wins) {
      if (w.url === url && "focus" in w) return w.focus();
    }
    return self.clients.openWindow(url);
  })());
});
