package local

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"herald/internal/config"
	"herald/internal/notify"
)

// TestOneClickUnsubscribe crosses the seam between a marketing email and the preferences: the
// email the sandbox's SES received carries RFC 8058's two headers, a mailbox provider's POST to
// its URL opts the user out (once, audited, under the user), and the next marketing email to
// them is skipped as opted_out while a transactional one still goes. A link altered by one
// character is a 404, and a GET changes nothing.
func TestOneClickUnsubscribe(t *testing.T) {
	e := setup(t)
	e.mustDo("PUT", "/v1/users/uma/contacts", map[string]any{"email": "uma@example.com"}, 200)
	e.mustDo("PUT", "/v1/users/uma/preferences", map[string]any{"marketing_consent": true, "night_consent": true}, 200)
	marketing := func(key string) notify.SendRequest {
		return notify.SendRequest{IdempotencyKey: key, Category: notify.CategoryMarketing, Channels: []notify.Channel{"email"},
			Content: notify.Content{Title: "Spring sale", Body: "50% off"}, Recipients: []notify.Recipient{{UserID: "uma"}}}
	}
	e.waitFinal(e.send(marketing("sale-1")))
	got := e.rt.Sandbox.Recorder.List("ses", "uma@example.com")
	if len(got) != 1 {
		t.Fatalf("the sandbox's SES received %d emails, want 1", len(got))
	}
	list, post := got[0].Data["header:List-Unsubscribe"], got[0].Data["header:List-Unsubscribe-Post"]
	if post != "List-Unsubscribe=One-Click" || !strings.HasPrefix(list, "<"+e.rt.URL+"/u/") || !strings.HasSuffix(list, ">") {
		t.Fatalf("List-Unsubscribe %q, List-Unsubscribe-Post %q", list, post)
	}
	link := strings.Trim(list, "<>")

	// A scanner's GET shows the page and changes nothing.
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `<form method="post">`) {
		t.Fatalf("GET %s = %d %s", link, resp.StatusCode, page)
	}
	// An altered token is a 404.
	bad := link[:len(link)-1] + map[bool]string{true: "A", false: "B"}[!strings.HasSuffix(link, "A")]
	if code := postOneClick(t, bad); code != 404 {
		t.Fatalf("POST of an altered link = %d, want 404", code)
	}
	// The mailbox provider's one-click POST, twice.
	for range 2 {
		if code := postOneClick(t, link); code != 200 {
			t.Fatalf("POST %s = %d, want 200", link, code)
		}
	}
	var prefs notify.Preferences
	e.do("GET", "/v1/users/uma/preferences", nil, &prefs)
	if ok, reason := prefs.Allows(notify.ChannelEmail, notify.CategoryMarketing); ok || reason != notify.ReasonOptedOut || len(prefs.OptOut[notify.ChannelEmail]) != 1 {
		t.Fatalf("after the unsubscribe: %+v", prefs)
	}
	next := e.waitFinal(e.send(marketing("sale-2"))).ID
	var st struct {
		Status          string         `json:"status"`
		SkippedByReason map[string]int `json:"skipped_by_reason"`
	}
	e.do("GET", "/v1/notifications/"+next, nil, &st)
	if st.Status != "SKIPPED" || st.SkippedByReason[notify.ReasonOptedOut] != 1 {
		t.Fatalf("the next marketing email: %+v, want skipped opted_out", st)
	}
	receipt := e.send(notify.SendRequest{IdempotencyKey: "receipt-1", Channels: []notify.Channel{"email"},
		Content: notify.Content{Title: "Your receipt", Body: "Thanks"}, Recipients: []notify.Recipient{{UserID: "uma"}}})
	e.waitFinal(receipt)
	got = e.rt.Sandbox.Recorder.List("ses", "uma@example.com")
	if len(got) != 2 || got[1].Data["header:List-Unsubscribe"] != "" {
		t.Fatalf("the transactional email: %d emails, headers %v", len(got), got[len(got)-1].Data)
	}
	audit := string(e.auditJSON("?action=user.unsubscribe"))
	if strings.Count(audit, `"action":"user.unsubscribe"`) != 2 || !strings.Contains(audit, `"actor":"uma"`) {
		t.Fatalf("the audit log: %s", audit)
	}
}

// postOneClick posts what RFC 8058 says a mailbox provider posts.
func postOneClick(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Post(url, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A marketing SMS ends with the configured free refusal line after its "(광고)" title; a
// transactional one carries neither.
func TestMarketingSMSEndsWithTheRefusalLine(t *testing.T) {
	t.Parallel()
	seoul, _ := time.LoadLocation("Asia/Seoul")
	cfg := config.Dev()
	cfg.Marketing.AdPrefix = true
	cfg.Marketing.OptOutSMS = "무료수신거부 080-123-4567"
	e := startWithClock(t, cfg, &settableClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, seoul)})
	e.mustDo("PUT", "/v1/users/sam/contacts", map[string]any{"phone": "+821055501234"}, 200)
	e.mustDo("PUT", "/v1/users/sam/preferences", map[string]any{"marketing_consent": true}, 200)
	e.waitFinal(e.send(notify.SendRequest{IdempotencyKey: "sms-sale", Category: notify.CategoryMarketing, Channels: []notify.Channel{"sms"},
		Content: notify.Content{Title: "봄 세일", Body: "50% 할인"}, Recipients: []notify.Recipient{{UserID: "sam"}}}))
	e.waitFinal(e.send(notify.SendRequest{IdempotencyKey: "sms-code", Channels: []notify.Channel{"sms"},
		Content: notify.Content{Body: "인증번호 123456"}, Recipients: []notify.Recipient{{UserID: "sam"}}}))
	got := e.rt.Sandbox.Recorder.List("twilio", "+821055501234")
	if len(got) != 2 {
		t.Fatalf("the sandbox's Twilio received %d messages, want 2", len(got))
	}
	if got[0].Body != "(광고) 봄 세일\n50% 할인\n무료수신거부 080-123-4567" {
		t.Errorf("the marketing SMS = %q", got[0].Body)
	}
	if strings.Contains(got[1].Body, "무료수신거부") || strings.Contains(got[1].Body, "(광고)") {
		t.Errorf("the transactional SMS = %q", got[1].Body)
	}
}
