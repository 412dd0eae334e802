package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"herald/internal/notify"
)

// TestConsoleAccessibleAtEveryWidth visits every console page, with data on it, at 1366 and at
// 390 px: axe-core (pinned in .tools/axe-core, HERALD_AXE) finds no serious or critical
// violation on any, no page is wider than the window, and each is kept as a screenshot
// (HERALD_SCREENSHOTS: .build/screenshots under make test) at both widths.
func TestConsoleAccessibleAtEveryWidth(t *testing.T) {
	axePath := os.Getenv("HERALD_AXE")
	if axePath == "" {
		t.Skip("HERALD_AXE is not set: make tools installs axe-core and make test sets it")
	}
	axe, err := os.ReadFile(axePath)
	if err != nil {
		t.Fatal(err)
	}
	e := setup(t)
	// Something on every page: a delivered notification, a dead letter, a reserved send, a
	// reserved campaign, an export, audit entries, sandbox deliveries.
	e.mustDo("PUT", "/v1/users/ana/devices/fcm-a11y-ana-0001", map[string]any{"platform": "fcm"}, 200)
	sent := e.send(notify.SendRequest{IdempotencyKey: "a11y-1", Channels: []notify.Channel{"push", "inbox"},
		Content: notify.Content{Title: "Hello", Body: "Accessible"}, Recipients: []notify.Recipient{{UserID: "ana"}}})
	e.waitFinal(sent)
	if err := e.rt.Queue.Send(context.Background(), notify.IngestQueue("demo"), notify.OutMessage{Body: []byte(`{"channels": "push"`)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return e.deadLetters() == 1 })
	e.scheduleAt("a11y-later", "fcm-a11y-later-0001", time.Now().Add(time.Hour).UTC())
	var c struct {
		ID string `json:"id"`
	}
	if code := e.do("POST", "/v1/campaigns", map[string]any{"channels": []string{"push"}, "content": map[string]any{"body": "Sale"},
		"send_at": time.Now().Add(2 * time.Hour).UTC(), "audience": map[string]any{"sources": []map[string]any{{"kind": "app_devices", "app": "default"}}},
	}, &c); code != 202 {
		t.Fatalf("POST /v1/campaigns = %d", code)
	}
	e.mustDo("POST", "/v1/admin/exports", map[string]any{"kind": "notifications", "format": "csv"}, 202)

	pages := []struct{ name, hash, ready string }{
		{"queues", "#/queues", `tr[data-queue="ingest-demo"]`},
		{"dead-letters", "#/queues/ingest-demo", `tr[data-id]`},
		{"messages", "#/queues/ingest-demo/messages?state=delayed", `#page h1`},
		{"notifications", "#/notifications", `tr[data-id]`},
		{"notification", "#/notifications/" + sent, `#n-status`},
		{"recipients", "#/recipients", `#find`},
		{"recipient", "#/recipients/ana", `tr[data-id]`},
		{"timeline", "#/notifications/" + sent + "?user=ana", `#timeline li`},
		{"campaigns", "#/campaigns", `tr[data-id]`},
		{"campaign", "#/campaigns/" + c.ID, `#c-state`},
		{"reserved", "#/reserved", `tr[data-id]`},
		{"exports", "#/exports", `tr[data-id]`},
		{"audit", "#/audit", `#page table`},
		{"sandbox", "#/sandbox", `tr[data-address]`},
	}
	for _, width := range []int64{1366, 390} {
		_, run, shot := browserTab(t, int(width), 900, fmt.Sprintf("%d-", width))
		run("sign in", chromedp.EmulateViewport(width, 900), chromedp.Navigate(e.rt.URL+"/console"), chromedp.WaitVisible("#key"),
			chromedp.SendKeys("#key", "dev-demo-key"), chromedp.Click(`#key-form button`),
			chromedp.WaitVisible(`tr[data-queue="ingest-demo"]`), chromedp.Evaluate(string(axe), nil))
		for _, p := range pages {
			run(p.name+" at "+fmt.Sprint(width), chromedp.Navigate(e.rt.URL+"/console"+p.hash), chromedp.WaitVisible(p.ready))
			shot(p.name)
			var found string
			run("axe on "+p.name, chromedp.Evaluate(string(axe), nil), chromedp.Evaluate(`axe.run(document, {resultTypes: ["violations"]}).then(r =>
				JSON.stringify(r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
					.map(v => v.impact + " " + v.id + ": " + v.nodes.map(n => n.target.join(" ")).join(", "))))`, &found,
				func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
			var violations []string
			if err := json.Unmarshal([]byte(found), &violations); err != nil {
				t.Fatalf("axe on %s: %q", p.name, found)
			}
			if len(violations) > 0 {
				t.Errorf("%s at %d px: axe-core finds %s", p.name, width, strings.Join(violations, "; "))
			}
			var wide bool
			run("width of "+p.name, chromedp.Evaluate(`document.documentElement.scrollWidth > window.innerWidth`, &wide))
			if wide {
				var sw, iw int
				var culprits string
				run("widths", chromedp.Evaluate(`document.documentElement.scrollWidth`, &sw), chromedp.Evaluate(`window.innerWidth`, &iw),
					chromedp.Evaluate(`[...document.querySelectorAll("body *")].filter(x => x.getBoundingClientRect().right > window.innerWidth + 1 && !x.closest(".scroll"))
						.slice(0, 5).map(x => x.tagName + (x.id ? "#" + x.id : "") + "." + x.className).join(", ")`, &culprits))
				t.Errorf("%s at %d px: the page is %d px wide in a %d px window (it scrolls sideways): %s", p.name, width, sw, iw, culprits)
			}
		}
	}
}
