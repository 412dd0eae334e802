package local

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herald/internal/config"
	"herald/internal/notify"
	"herald/internal/pipeline"
)

// TestConsoleInBrowser drives the operator console in headless Chromium against the local
// runtime: sign in with the admin key, see every queue, find a dead letter with its reason,
// redrive it with a click and see the delivery arrive, follow a campaign to 100 %. It runs when
// HERALD_CHROMIUM names the browser (`make test` installs Debian's chromium and sets it) and
// keeps a screenshot of each page in HERALD_SCREENSHOTS (default: the test's temporary
// directory).
func TestConsoleInBrowser(t *testing.T) {
	e := setup(t)
	_, run, shot := browserTab(t, 1400, 900, "")
	ctx := context.Background()
	base := e.rt.URL + "/console"

	// Without a key the page loads and its data routes answer 401.
	for _, path := range []string{"/console/api/queues", "/console/api/queues/ingest-demo/dead-letters"} {
		resp, err := http.Get(e.rt.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET %s without a key = %d, want 401", path, resp.StatusCode)
		}
	}

	// Sign in: the page asks for the key, and then lists every queue.
	var text string
	run("open the console", chromedp.Navigate(base), chromedp.WaitVisible("#key"),
		chromedp.Text("#page", &text, chromedp.ByQuery))
	if !strings.Contains(text, "Sign in") {
		t.Fatalf("console without a key shows %q, want the sign-in prompt", text)
	}
	run("sign in", chromedp.SendKeys("#key", "dev-demo-key"), chromedp.Click(`#key-form button`),
		chromedp.WaitVisible(`tr[data-queue="ingest-demo"]`))
	names := config.Dev().QueueNames()
	run("queues", chromedp.WaitVisible(fmt.Sprintf(`tr[data-queue=%q]`, names[len(names)-1])),
		chromedp.Text("#page", &text, chromedp.ByQuery))
	for _, q := range names {
		if !strings.Contains(text, q) {
			t.Errorf("the queues page lacks queue %s", q)
		}
	}
	shot("queues")

	// A poison message is dead-lettered by ingest with its reason; a request that could not be
	// processed waits in the same DLQ. Both are on the dead-letters page.
	const token = "fcm-console-redrive-0001"
	if err := e.rt.Queue.Send(ctx, notify.IngestQueue("demo"), notify.OutMessage{Body: []byte(`{"channels": "push"`)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		msgs, err := e.rt.Queue.Peek(ctx, notify.DLQName(notify.IngestQueue("demo")), 10)
		return err == nil && len(msgs) == 1
	})
	msgs, _ := e.rt.Queue.Peek(ctx, notify.DLQName(notify.IngestQueue("demo")), 10)
	reason := msgs[0].Attributes[pipeline.AttrErrorReason]
	if reason == "" {
		t.Fatalf("the poison message was dead-lettered without a reason: %+v", msgs[0].Attributes)
	}
	valid := `{"channels":["push"],"content":{"title":"Back","body":"Redriven"},"recipients":[{"fcm_token":"` + token + `"}]}`
	if err := e.rt.Queue.Send(ctx, notify.DLQName(notify.IngestQueue("demo")), notify.OutMessage{Body: []byte(valid), Attributes: map[string]string{
		pipeline.AttrErrorCode: notify.EUNAVAILABLE, pipeline.AttrErrorReason: "store unavailable", pipeline.AttrSourceQueue: notify.IngestQueue("demo"),
	}}); err != nil {
		t.Fatal(err)
	}
	run("dead letters", chromedp.Navigate(base+"#/queues/ingest-demo"), chromedp.WaitVisible(`#redrive-all:enabled`),
		chromedp.WaitVisible(`tr[data-id]:nth-of-type(2)`), chromedp.Text("#page", &text, chromedp.ByQuery))
	if !strings.Contains(text, reason) || !strings.Contains(text, "store unavailable") {
		t.Fatalf("the dead-letters page lacks the reasons %q and %q: %s", reason, "store unavailable", text)
	}
	if strings.Contains(text, token) {
		t.Fatalf("the dead-letters page shows the device token unmasked: %s", text)
	}
	shot("dead-letters")
	// Redrive the request that can succeed now, delete the poison: each from its row, confirmed.
	validID := ""
	for _, m := range mustPeek(t, e, notify.DLQName(notify.IngestQueue("demo"))) {
		if string(m.Body) == valid {
			validID = m.ID
		}
	}
	validRow, poisonRow := fmt.Sprintf(`tr[data-id=%q]`, validID), fmt.Sprintf(`tr[data-id=%q]`, msgs[0].ID)
	run("redrive one", chromedp.Click(validRow+" button.redrive"), chromedp.WaitVisible(validRow+" button.redrive-confirm"),
		chromedp.Click(validRow+" button.redrive-confirm"), chromedp.WaitVisible(`#status.ok`),
		chromedp.WaitNotPresent(validRow), chromedp.Text("#status", &text, chromedp.ByQuery))
	if !strings.Contains(text, "Redrive: "+validID) {
		t.Fatalf("after the redrive the console says %q", text)
	}
	run("delete one", chromedp.Click(poisonRow+" button.delete"), chromedp.WaitVisible(poisonRow+" button.delete-confirm"),
		chromedp.Click(poisonRow+" button.delete-confirm"), chromedp.WaitNotPresent(poisonRow), chromedp.WaitVisible(`#redrive-all:disabled`))
	if left := mustPeek(t, e, notify.DLQName(notify.IngestQueue("demo"))); len(left) != 0 {
		t.Fatalf("the DLQ still holds %d messages", len(left))
	}
	waitFor(t, func() bool { return e.deliveredTo(token) == 1 })
	run("sandbox", chromedp.Navigate(base+"#/sandbox"), chromedp.WaitVisible(fmt.Sprintf(`tr[data-address=%q]`, token)))
	shot("sandbox")

	// The redriven request's notification is listed under its status, and opens with its counts.
	run("notifications", chromedp.Navigate(base+"#/notifications?status=SENT&service=demo"), chromedp.WaitVisible(`tbody tr[data-id] a`))
	shot("notifications")
	run("one notification", chromedp.Click(`tbody tr[data-id] a`), chromedp.WaitVisible("#n-status"),
		chromedp.Text("#page", &text, chromedp.ByQuery))
	if !strings.Contains(text, "SENT") || !strings.Contains(text, "Per channel") || !strings.Contains(text, "push") {
		t.Fatalf("the notification page shows %q", text)
	}
	shot("notification")

	// A reserved send is listed with its time, and cancelled from the page.
	var reserved struct {
		ID string `json:"id"`
	}
	if code := e.do("POST", "/v1/notifications", map[string]any{
		"channels": []string{"push"}, "content": map[string]any{"body": "Later"}, "send_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"recipients": []map[string]any{{"fcm_token": "fcm-console-reserved-0001"}},
	}, &reserved); code != http.StatusAccepted {
		t.Fatalf("POST /v1/notifications (reserved) = %d", code)
	}
	waitFor(t, func() bool {
		n, err := e.rt.Store.GetNotification(ctx, reserved.ID)
		return err == nil && n.Status == notify.StatusScheduled
	})
	row := fmt.Sprintf(`tr[data-id=%q]`, reserved.ID)
	run("reserved", chromedp.Navigate(base+"#/reserved"), chromedp.WaitVisible(row))
	shot("reserved")
	run("cancel reserved", chromedp.Click(row+" button.cancel"), chromedp.WaitVisible(row+" button.cancel-confirm"),
		chromedp.Click(row+" button.cancel-confirm"), chromedp.WaitVisible(`#status.ok`))
	if n, err := e.rt.Store.GetNotification(ctx, reserved.ID); err != nil || n.Status != notify.StatusCanceled {
		t.Fatalf("after cancelling from the console the notification is %+v (%v)", n, err)
	}

	// A small campaign, paced so that its progress can be watched, reaches 100 %.
	for i := range 20 {
		e.mustDo("PUT", fmt.Sprintf("/v1/users/cc%02d/devices/fcm-console-campaign-%02d", i, i), map[string]any{"platform": "fcm"}, 200)
	}
	var created struct {
		ID string `json:"id"`
	}
	if code := e.do("POST", "/v1/campaigns", map[string]any{
		"category": "transactional", "channels": []string{"push"}, "max_rate": 10,
		"content":  map[string]any{"title": "Maintenance", "body": "Tonight"},
		"audience": map[string]any{"sources": []map[string]any{{"kind": "app_devices", "app": "default"}}},
	}, &created); code != http.StatusAccepted {
		t.Fatalf("POST /v1/campaigns = %d", code)
	}
	run("campaigns", chromedp.Navigate(base+"#/campaigns"), chromedp.WaitVisible(fmt.Sprintf(`tr[data-id=%q] a`, created.ID)))
	shot("campaigns")
	run("campaign", chromedp.Click(fmt.Sprintf(`tr[data-id=%q] a`, created.ID)), chromedp.WaitVisible("#progress"),
		chromedp.WaitVisible(`#progress[data-percent="100"]`),
		chromedp.Text("#page", &text, chromedp.ByQuery))
	// Progress in recipients against the audience; the rate in the unit of its limit.
	if !strings.Contains(text, "20 of 20 recipients reached") || !strings.Contains(text, "100 %") ||
		!strings.Contains(text, "recipients/s (limit 10 recipients/s)") {
		t.Fatalf("the campaign page at 100 %% shows %q", text)
	}
	shot("campaign")
}

func mustPeek(t *testing.T, e *env, queue string) []notify.Message {
	t.Helper()
	msgs, err := e.rt.Queue.Peek(context.Background(), queue, 10)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// TestConsoleFailedPageReplacesThePrevious: a page that cannot load (an unknown notification id)
// replaces the page before it with what went wrong, and a 404 is not fetched again and again.
func TestConsoleFailedPageReplacesThePrevious(t *testing.T) {
	e := setup(t)
	_, run, shot := browserTab(t, 1200, 800, "failed-page-")
	var text string
	run("sign in", chromedp.Navigate(e.rt.URL+"/console"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", "dev-demo-key"), chromedp.Click(`#key-form button`),
		chromedp.WaitVisible(`tr[data-queue="ingest-demo"]`))
	run("an unknown notification", chromedp.Navigate(e.rt.URL+"/console#/notifications/n_nosuchnotification00000000"),
		chromedp.WaitVisible(`#page p[role="alert"]`), chromedp.Text("#page", &text, chromedp.ByQuery))
	shot("not-found")
	if !strings.Contains(text, "Not found") || strings.Contains(text, "ingest-demo") {
		t.Fatalf("the failed page shows %q: want its error, and nothing of the queues page before it", text)
	}
	time.Sleep(5500 * time.Millisecond) // the console used to fetch a failed page again every 5 s
	var fetched int
	run("count fetches", chromedp.Evaluate(`performance.getEntriesByType("resource").filter(r => r.name.includes("n_nosuchnotification")).length`, &fetched))
	if fetched != 1 {
		t.Fatalf("the missing notification was fetched %d times, want once", fetched)
	}
}

// TestConsoleRefreshMannersAndRefusedKey: a refresh never takes the focus away (it waits while the
// operator is on a control of the page), the header's toggle stops refreshing, and a key that is
// no admin's (a 403) brings the sign-in form back, saying so.
func TestConsoleRefreshMannersAndRefusedKey(t *testing.T) {
	cfg := config.Dev()
	shop := cfg.Services[0] // the demo service's settings, under another name and key, not an admin
	shop.Name, shop.APIKeys, shop.Admin = "shop", []string{"dev-shop-key-123"}, false
	cfg.Services = append(cfg.Services, shop)
	e := startWithClock(t, cfg, notify.SystemClock{})
	_, run, _ := browserTab(t, 1200, 800, "manners-")
	link := `tr[data-queue="ingest-demo"] a`
	var focused bool
	var fetches int
	count := `performance.getEntriesByType("resource").filter(r => r.name.includes("/console/api/queues")).length`
	run("sign in and focus a link", chromedp.Navigate(e.rt.URL+"/console"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", "dev-demo-key"), chromedp.Click(`#key-form button`), chromedp.WaitVisible(link),
		chromedp.Evaluate(`document.querySelector('`+link+`').focus(); window.kept = document.activeElement; true`, nil),
		chromedp.Sleep(4*time.Second), chromedp.Evaluate(`document.activeElement === window.kept && document.contains(window.kept)`, &focused))
	if !focused {
		t.Fatal("a refresh took the focus away from the link the operator was on")
	}
	run("blur, let it refresh, then turn refreshing off", chromedp.Evaluate(`document.activeElement.blur(); true`, nil), chromedp.Sleep(3500*time.Millisecond),
		chromedp.Click("#auto-refresh"), chromedp.Evaluate(count, &fetches))
	before := fetches
	if before < 2 {
		t.Fatalf("the queues page was fetched %d times in 7 s: it did not refresh at all", before)
	}
	run("wait", chromedp.Sleep(4*time.Second), chromedp.Evaluate(count, &fetches))
	if fetches != before {
		t.Fatalf("with auto-refresh off the page was fetched %d more times", fetches-before)
	}

	var text string
	run("a service's key that is no admin's", chromedp.Click("#sign-out"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", "dev-shop-key-123"), chromedp.Click(`#key-form button`),
		chromedp.WaitVisible("#key"), chromedp.Text("#status", &text, chromedp.ByQuery))
	if !strings.Contains(text, "not an admin") {
		t.Fatalf("after a 403 the console says %q, want it to say the key is not an admin's", text)
	}
}

// TestConsolePagesAndPurgesDeadLetters: 150 dead letters show 100 at first and the rest on "Show
// 100 more"; a purge waits for the queue's name typed exactly, then empties the DLQ and is
// audited.
func TestConsolePagesAndPurgesDeadLetters(t *testing.T) {
	e := setup(t)
	_, run, shot := browserTab(t, 1200, 800, "purge-")
	dlq := notify.DLQName(notify.IngestQueue("demo"))
	msgs := make([]notify.OutMessage, 150)
	for i := range msgs {
		msgs[i] = notify.OutMessage{Body: fmt.Appendf(nil, `{"n": %d}`, i), Attributes: map[string]string{pipeline.AttrErrorCode: notify.EINVALID}}
	}
	if err := e.rt.Queue.Send(context.Background(), dlq, msgs...); err != nil {
		t.Fatal(err)
	}
	var rows int
	rowCount := `document.querySelectorAll("tr[data-id]").length`
	run("sign in and open the dead letters", chromedp.Navigate(e.rt.URL+"/console#/queues/ingest-demo"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", "dev-demo-key"), chromedp.Click(`#key-form button`), chromedp.WaitVisible("#more"),
		chromedp.Evaluate(rowCount, &rows))
	if rows != 100 {
		t.Fatalf("%d dead letters shown at first, want 100", rows)
	}
	run("show more", chromedp.Click("#more"), chromedp.WaitNotPresent("#more"), chromedp.Evaluate(rowCount, &rows))
	if rows != 150 {
		t.Fatalf("%d dead letters shown after more, want 150", rows)
	}
	var disabled bool
	run("purge, the name mistyped", chromedp.Click("#purge"), chromedp.WaitVisible("#purge-name"),
		chromedp.SendKeys("#purge-name", "ingest-dem"), chromedp.Evaluate(`document.getElementById("purge-confirm").disabled`, &disabled))
	if !disabled {
		t.Fatal("the purge could be confirmed with the queue's name mistyped")
	}
	shot("confirm")
	var text string
	run("purge, the name typed", chromedp.SendKeys("#purge-name", "o"), chromedp.Click("#purge-confirm"),
		chromedp.WaitVisible(`#status.ok`), chromedp.Text("#status", &text, chromedp.ByQuery), chromedp.WaitNotPresent("tr[data-id]"))
	if !strings.Contains(text, "Purged 150 dead letter(s) of ingest-demo") {
		t.Fatalf("after the purge the console says %q", text)
	}
	if e.deadLetters() != 0 {
		t.Fatalf("the DLQ holds %d after the purge", e.deadLetters())
	}
	if got := string(e.auditJSON("?action=dead_letter.purge")); !strings.Contains(got, `"purged":"150"`) {
		t.Fatalf("the purge is not audited: %s", got)
	}
}

// TestConsolePausesAQueue: an operator pauses the ingest queue's consumers from the console; a
// notification sent meanwhile waits on the queue (nothing reaches the phone), and goes out once
// the queue is resumed. Both are audited.
func TestConsolePausesAQueue(t *testing.T) {
	e := setup(t)
	_, run, shot := browserTab(t, 1200, 800, "pause-")
	e.mustDo("PUT", "/v1/users/paz/devices/fcm-pause-paz-0001", map[string]any{"platform": "fcm"}, 200)
	row := `tr[data-queue="ingest-demo"]`
	run("sign in and pause ingest-demo", chromedp.Navigate(e.rt.URL+"/console"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", "dev-demo-key"), chromedp.Click(`#key-form button`), chromedp.WaitVisible(row+" button.pause"),
		chromedp.Click(row+" button.pause"), chromedp.WaitVisible(row+" button.pause-confirm"), chromedp.Sleep(3500*time.Millisecond),
		chromedp.WaitVisible(row+" button.pause-confirm"), // the question survives a refresh
		chromedp.Click(row+" button.pause-confirm"), chromedp.WaitVisible(row+`[data-paused="true"] button.resume`))
	shot("paused")
	id := e.send(notify.SendRequest{IdempotencyKey: "pause-1", Channels: []notify.Channel{"push"},
		Content: notify.Content{Title: "Waits", Body: "until resumed"}, Recipients: []notify.Recipient{{UserID: "paz"}}})
	time.Sleep(1500 * time.Millisecond)
	if n := e.deliveredTo("fcm-pause-paz-0001"); n != 0 {
		t.Fatalf("%d pushes while ingest-demo was paused", n)
	}
	msgs := mustPeek(t, e, notify.IngestQueue("demo"))
	if len(msgs) != 1 {
		t.Fatalf("ingest-demo holds %d messages while paused, want the notification waiting", len(msgs))
	}
	// The waiting message is on the queue's messages page, its payload masked.
	var text string
	run("the waiting message", chromedp.Click(row+" a.messages"), chromedp.WaitVisible(fmt.Sprintf(`tr[data-id=%q]`, msgs[0].ID)),
		chromedp.Text("#page", &text, chromedp.ByQuery))
	shot("messages")
	if !strings.Contains(text, "pause-1") || strings.Contains(text, "fcm-pause-paz-0001") {
		t.Fatalf("the messages page shows %q", text)
	}
	run("back to the queues", chromedp.Navigate(e.rt.URL+"/console#/queues"), chromedp.WaitVisible(row+" button.resume"))
	run("resume", chromedp.Click(row+" button.resume"), chromedp.WaitVisible(row+`[data-paused="false"] button.pause`))
	if st := e.waitFinal(id); st.Status != "SENT" {
		t.Fatalf("after the resume the notification is %s", st.Status)
	}
	got := string(e.auditJSON("?target_id=ingest-demo"))
	if !strings.Contains(got, `"action":"queue.pause"`) || !strings.Contains(got, `"action":"queue.resume"`) {
		t.Fatalf("pause and resume are not audited: %s", got)
	}
}

// TestConsoleFindsAUserAndTheirTimeline: an operator finds a user on the Recipients page, sees
// the notifications sent to that one user (not one sent to several users), and opens one's
// timeline: the request, a push whose first attempt the provider answered 503 (retried, and
// when), sent on its second, and one to a dead token with the provider's answer.
func TestConsoleFindsAUserAndTheirTimeline(t *testing.T) {
	e := setup(t)
	_, run, shot := browserTab(t, 1200, 900, "recipient-")
	e.mustDo("PUT", "/v1/users/rita/devices/apns-rita-unavailable1-0001", map[string]any{"platform": "apns"}, 200)
	e.mustDo("PUT", "/v1/users/rita/devices/fcm-rita-unregistered-0002", map[string]any{"platform": "fcm"}, 200)
	e.mustDo("PUT", "/v1/users/bo/devices/fcm-bo-0001", map[string]any{"platform": "fcm"}, 200)
	// One after the other: the sandbox answers the token's first push 503, and that must be
	// the first notification's.
	first := e.send(notify.SendRequest{IdempotencyKey: "rita-1", Channels: []notify.Channel{"push"},
		Content: notify.Content{Title: "Hello", Body: "first"}, Recipients: []notify.Recipient{{UserID: "rita"}}})
	e.waitFinal(first)
	both := e.send(notify.SendRequest{IdempotencyKey: "rita-bo", Channels: []notify.Channel{"push"},
		Content: notify.Content{Title: "Hello", Body: "both"}, Recipients: []notify.Recipient{{UserID: "rita"}, {UserID: "bo"}}})
	e.waitFinal(both)
	var text string
	run("find rita", chromedp.Navigate(e.rt.URL+"/console"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", "dev-demo-key"), chromedp.Click(`#key-form button`),
		chromedp.WaitVisible(`tr[data-queue="ingest-demo"]`),
		chromedp.Click(`header nav a[href="#/recipients"]`), chromedp.WaitVisible("#find"),
		chromedp.SendKeys("#find", "rita"), chromedp.Click(`#page form button[type="submit"]`),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-id=%q]`, first)), chromedp.Text("#page", &text, chromedp.ByQuery))
	shot("found")
	if strings.Contains(text, both) {
		t.Fatalf("a notification to two users is listed under one of them: %q", text)
	}
	run("open the timeline", chromedp.Click(fmt.Sprintf(`tr[data-id=%q] a`, first)),
		chromedp.WaitVisible(`#timeline li[data-status="SENT"]`), chromedp.WaitVisible(`#timeline li[data-status="FAILED"]`),
		chromedp.Evaluate(`document.getElementById("timeline").innerText`, &text))
	shot("timeline")
	for _, want := range []string{"Timeline for rita", "Accepted from demo", "attempt 1 — unavailable", "retried at",
		"SENT after 2 attempts", "FAILED after 1 attempt", "unregistered"} {
		if !strings.Contains(text, want) {
			t.Errorf("the timeline lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "fcm-rita-unregistered-0002") {
		t.Errorf("the timeline shows a token unmasked:\n%s", text)
	}
	var back string
	run("back to rita's notifications", chromedp.AttributeValue(`#page a[href^="#/recipients/"]`, "href", &back, nil, chromedp.ByQuery))
	if back != "#/recipients/rita" {
		t.Errorf("the timeline links back to %q", back)
	}
	// By address: her email finds her, without the address in the URL.
	e.mustDo("PUT", "/v1/users/rita/contacts", map[string]any{"email": "rita@example.com"}, 200)
	var hash string
	run("find rita by email", chromedp.Navigate(e.rt.URL+"/console#/recipients"), chromedp.WaitVisible("#find-address"),
		chromedp.SendKeys("#find-address", "Rita@Example.com"), chromedp.Click(`#find-address + button`),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-id=%q]`, first)), chromedp.Evaluate(`location.hash`, &hash))
	if hash != "#/recipients/rita" {
		t.Errorf("finding by email lands on %q", hash)
	}
}
