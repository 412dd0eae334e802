package local

import (
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"herald/internal/notify"
)

// TestConsoleExportsInBrowser drives the console's Exports page in headless Chromium: ask for an
// export of a notification's deliveries from the form, see the job go to DONE in the list
// without reloading, and fetch its file through the page's download link (one row per delivery,
// addresses masked); the form shows each kind's own filters, and a suppressions export is asked
// for and done the same way. It runs when HERALD_CHROMIUM names the browser.
func TestConsoleExportsInBrowser(t *testing.T) {
	e := setup(t)
	_, run, shot := browserTab(t, 1400, 900, "")
	base := e.rt.URL + "/console"

	const email, phone = "console-export@example.com", "+821033334444"
	id := e.send(notify.SendRequest{IdempotencyKey: "console-export-1", Channels: []notify.Channel{"email", "sms"},
		Content: notify.Content{Title: "Hi", Body: "Hello"}, Recipients: []notify.Recipient{{Email: email}, {Phone: phone}}})
	e.waitFinal(id)

	run("sign in", chromedp.Navigate(base), chromedp.WaitVisible("#key"), chromedp.SendKeys("#key", "dev-demo-key"),
		chromedp.Click(`#key-form button`), chromedp.WaitVisible(`tr[data-queue]`))
	var text string
	run("exports page", chromedp.Navigate(base+"#/exports"), chromedp.WaitVisible("#export-form"),
		chromedp.Text("#page", &text, chromedp.ByQuery))
	if !strings.Contains(text, "No exports yet.") {
		t.Fatalf("the exports page before any export shows %q", text)
	}

	// A deliveries export from the form: its row appears, PENDING or further, and reaches DONE
	// by the page's own refresh.
	run("create a deliveries export", chromedp.WaitVisible("#export-notification_id"),
		chromedp.SendKeys("#export-notification_id", id), chromedp.Click("#export-create"),
		chromedp.WaitVisible(`#status.ok`), chromedp.WaitVisible(`tbody tr[data-id]`))
	done := `tbody tr[data-status="DONE"] a.download`
	run("the export is done", chromedp.WaitVisible(done))
	var href string
	var ok bool
	run("its link", chromedp.AttributeValue(done, "href", &href, &ok), chromedp.Text("tbody tr[data-id]", &text, chromedp.ByQuery))
	if !ok || !strings.Contains(href, "/exports/x_") || !strings.Contains(text, "deliveries") || !strings.Contains(text, "notification_id="+id) {
		t.Fatalf("the DONE row %q links to %q", text, href)
	}
	shot("exports")
	res, err := http.Get(href)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the page's download link = %d %s", res.StatusCode, raw)
	}
	recs, err := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
	if err != nil || len(recs) != 3 || recs[0][0] != "delivery_id" {
		t.Fatalf("downloaded %q (%v), want a header and 2 deliveries", raw, err)
	}
	if strings.Contains(string(raw), email) || strings.Contains(string(raw), phone) || !strings.Contains(string(raw), notify.MaskEmail(email)) {
		t.Fatalf("the file does not hold the addresses masked only:\n%s", raw)
	}

	// The form shows each kind's filters only: a suppressions export has no notification id.
	run("choose suppressions", chromedp.Evaluate(`(() => { const k = document.getElementById("export-kind");
		k.value = "suppressions"; k.dispatchEvent(new Event("change")); })()`, nil),
		chromedp.WaitNotVisible("#export-notification_id"), chromedp.WaitVisible("#export-reason"),
		chromedp.Click("#export-create"))
	run("two exports done", chromedp.WaitVisible(`tbody tr:nth-of-type(2)[data-status="DONE"]`),
		chromedp.WaitVisible(`tbody tr:nth-of-type(1)[data-status="DONE"] a.download`),
		chromedp.Text("tbody tr:nth-of-type(1)", &text, chromedp.ByQuery))
	if !strings.Contains(text, "suppressions") {
		t.Fatalf("the newest export row is %q, want the suppressions export", text)
	}
	var jobs struct {
		Exports []struct {
			Kind, Status string
		} `json:"exports"`
	}
	if code := e.do("GET", "/v1/admin/exports", nil, &jobs); code != 200 || len(jobs.Exports) != 2 {
		t.Fatalf("GET /v1/admin/exports = %d %+v", code, jobs)
	}
	if got := fmt.Sprint(jobs.Exports); got != "[{suppressions DONE} {deliveries DONE}]" {
		t.Fatalf("jobs %s", got)
	}
}
