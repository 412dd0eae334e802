package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/chromedp"

	"herald/internal/notify"
)

// The example web app is served on the API's origin in sandbox mode: the page, its script and
// the service worker as JavaScript from the page's directory (so its scope covers the page),
// each under the strict CSP; other names are 404.
func TestWebAppServed(t *testing.T) {
	e := setup(t)
	for path, ct := range map[string]string{
		"/sandbox/web":  "text/html", // redirected to /sandbox/web/
		"/sandbox/web/": "text/html", "/sandbox/web/app.js": "text/javascript", "/sandbox/web/sw.js": "text/javascript",
		"/sandbox/web/style.css": "text/css",
	} {
		resp, err := http.Get(e.rt.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ct) || len(b) == 0 {
			t.Errorf("GET %s = %d %q (%d bytes), want 200 %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(b), ct)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	resp, err := http.Get(e.rt.URL + "/sandbox/web/other.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /sandbox/web/other.js = %d, want 404", resp.StatusCode)
	}
}

// TestWebAppInBrowser drives the example web app in headless Chromium against the local runtime:
// connect as a user, see a notification's inbox item and the unread count arrive live, mark it
// read and see the count drop, reload and resume; push is unavailable in a headless browser and
// the page says so; and the service worker shows a push delivered to it with Herald's payload.
// Like TestConsoleInBrowser it runs when HERALD_CHROMIUM names the browser and keeps screenshots
// in HERALD_SCREENSHOTS.
func TestWebAppInBrowser(t *testing.T) {
	e := setup(t)
	bctx, run, shot := browserTab(t, 1100, 800, "webapp-")
	page := e.rt.URL + "/sandbox/web/"

	var mu sync.Mutex
	var registration serviceworker.RegistrationID
	chromedp.ListenTarget(bctx, func(ev any) {
		if u, ok := ev.(*serviceworker.EventWorkerRegistrationUpdated); ok {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range u.Registrations {
				if r.ScopeURL == page && !r.IsDeleted {
					registration = r.RegistrationID
				}
			}
		}
	})

	// Connect: the stream opens, and push is unavailable (no push service in headless Chromium):
	// the page says so instead of breaking.
	const user = "webby"
	var text string
	run("open the page", chromedp.Navigate(page), chromedp.WaitVisible("#user"))
	run("connect", chromedp.SendKeys("#user", user), chromedp.SendKeys("#key", "dev-demo-key"),
		chromedp.Click(`#sign-in button`), chromedp.WaitVisible(`#stream-status.ok`),
		chromedp.WaitVisible(`#push-status.unavailable`), chromedp.Text("#push-status", &text, chromedp.ByQuery))
	if !strings.HasPrefix(text, "Push unavailable: ") {
		t.Fatalf("push status in headless Chromium: %q", text)
	}
	run("unread", chromedp.Text("#unread", &text, chromedp.ByQuery))
	if text != "0" {
		t.Fatalf("unread count of a new user: %q", text)
	}

	// A notification with the inbox channel appears without a reload, with the count.
	send := func(key, title string) string {
		t.Helper()
		return e.send(notify.SendRequest{IdempotencyKey: key, Channels: []notify.Channel{notify.ChannelInbox},
			Content:    notify.Content{Title: title, Body: "Order #1001 is on its way.", Link: "https://example.com/orders/1001"},
			Recipients: []notify.Recipient{{UserID: user}}})
	}
	first := send("webapp-1", "Your order shipped")
	row := fmt.Sprintf(`li[data-id=%q]`, first)
	run("live item", chromedp.WaitVisible(row+".unread"), chromedp.Text(row, &text, chromedp.ByQuery))
	if !strings.Contains(text, "Your order shipped") || !strings.Contains(text, "Order #1001 is on its way.") {
		t.Fatalf("the item reads %q", text)
	}
	run("count 1", chromedp.WaitVisible(`#unread:not(.zero)`), chromedp.Text("#unread", &text, chromedp.ByQuery))
	if text != "1" {
		t.Fatalf("unread after one item: %q", text)
	}
	shot("item")

	// Mark read: the API call, then the stream's inbox.read and inbox.unread update the page.
	run("mark read", chromedp.Click(row+" button.mark-read"), chromedp.WaitVisible(row+".read"),
		chromedp.WaitVisible(`#unread.zero`), chromedp.Text("#unread", &text, chromedp.ByQuery))
	if text != "0" {
		t.Fatalf("unread after mark read: %q", text)
	}
	if n, err := e.rt.Store.UnreadCount(context.Background(), user, time.Now()); err != nil || n != 0 {
		t.Fatalf("store unread count after mark read = %d, %v", n, err)
	}
	shot("read")

	// A second item, then a reload: the page reconnects with the tab's user, key and last event
	// id, and shows both items and the count.
	second := send("webapp-2", "Your order arrived")
	run("second item", chromedp.WaitVisible(fmt.Sprintf(`li[data-id=%q].unread`, second)))
	run("reload", chromedp.Reload(), chromedp.WaitVisible(`#stream-status.ok`),
		chromedp.WaitVisible(fmt.Sprintf(`li[data-id=%q].unread`, second)), chromedp.WaitVisible(row+".read"),
		chromedp.WaitVisible(`#unread:not(.zero)`), chromedp.Text("#unread", &text, chromedp.ByQuery))
	if text != "1" {
		t.Fatalf("unread after reload: %q", text)
	}
	var last string
	run("last event id", chromedp.Evaluate(`sessionStorage.getItem("herald-example-last-event:`+user+`") || ""`, &last))
	if _, err := notify.ParseInboxEventID(last); err != nil {
		t.Fatalf("the page keeps last event id %q: %v", last, err)
	}

	// A dropped stream reconnects by itself (with backoff) and resumes: an item sent meanwhile
	// shows, and the count with it.
	var closed bool
	run("drop the stream", chromedp.Evaluate(`socket.close(4000, "test"); true`, &closed))
	third := send("webapp-3", "Your invoice")
	run("after reconnect", chromedp.WaitVisible(fmt.Sprintf(`li[data-id=%q].unread`, third)), chromedp.WaitVisible(`#stream-status.ok`))
	waitFor(t, func() bool {
		return chromedp.Run(bctx, chromedp.Text("#unread", &text, chromedp.ByQuery)) == nil && text == "2"
	})
	shot("reconnected")

	// The service worker shows a push with Herald's payload: title, body, the collapse id as tag
	// and the link in its data. (Chromium delivers it through DevTools; there is no push service.)
	run("service worker", serviceworker.Enable(),
		browser.GrantPermissions([]browser.PermissionType{browser.PermissionTypeNotifications}).WithOrigin(e.rt.URL))
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return registration != "" })
	payload, _ := json.Marshal(map[string]any{"notification_id": "n_push1", "title": "Flash sale", "body": "Ends tonight",
		"link": "https://example.com/sale", "collapse_id": "sale-1", "data": map[string]string{"k": "v"}})
	mu.Lock()
	reg := registration
	mu.Unlock()
	run("deliver a push", serviceworker.DeliverPushMessage(e.rt.URL, reg, string(payload)))
	var shown []struct {
		Title, Body, Tag, Link string
	}
	waitFor(t, func() bool {
		err := chromedp.Run(bctx, chromedp.Evaluate(`navigator.serviceWorker.ready.then(r => r.getNotifications()).then(ns =>
			ns.map(n => ({Title: n.title, Body: n.body, Tag: n.tag, Link: n.data && n.data.link})))`, &shown,
			func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) }))
		if err == nil && len(shown) > 0 {
			return true
		}
		// A push delivered before the worker was ready to show it is dropped (headless Chromium,
		// under load): deliver it again; the same tag replaces, never adds, a notification.
		_ = chromedp.Run(bctx, serviceworker.DeliverPushMessage(e.rt.URL, reg, string(payload)))
		time.Sleep(500 * time.Millisecond)
		return false
	})
	if len(shown) != 1 || shown[0].Title != "Flash sale" || shown[0].Body != "Ends tonight" || shown[0].Tag != "sale-1" ||
		shown[0].Link != "https://example.com/sale" {
		t.Fatalf("the service worker showed %+v", shown)
	}
}
