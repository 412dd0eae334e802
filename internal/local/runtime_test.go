package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/config"
	"herald/internal/notify"
)

// syncBuffer collects the runtime's JSON log for the no-personal-data check.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	t   *testing.T
	rt  *Runtime
	log *syncBuffer
}

func setup(t *testing.T) *env {
	t.Helper()
	cfg := config.Dev()
	cfg.Retry.Base = config.Duration(100 * time.Millisecond)
	cfg.Retry.Max = config.Duration(2 * time.Second)
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rt, err := Start(context.Background(), Options{Config: cfg, DataDir: t.TempDir(), Addr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &env{t: t, rt: rt, log: logs}
}

// do calls the API with the demo key and decodes the JSON answer into out (if not nil).
func (e *env) do(method, path string, body any, out any) int {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.rt.URL+path, r)
	req.Header.Set("Authorization", "Bearer dev-demo-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	if resp.StatusCode >= 300 && out == nil {
		e.t.Logf("%s %s → %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

func (e *env) mustDo(method, path string, body any, want int) {
	e.t.Helper()
	if got := e.do(method, path, body, nil); got != want {
		e.t.Fatalf("%s %s = %d, want %d", method, path, got, want)
	}
}

type statusResp struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Deliveries []struct {
		Channel string `json:"channel"`
		Address string `json:"address"`
		Status  string `json:"status"`
		Reason  string `json:"reason"`
		Detail  string `json:"detail"`
	} `json:"deliveries"`
}

func (e *env) send(req notify.SendRequest) string {
	e.t.Helper()
	var acc struct {
		ID string `json:"id"`
	}
	if code := e.do("POST", "/v1/notifications", req, &acc); code != http.StatusAccepted && code != http.StatusOK {
		e.t.Fatalf("POST /v1/notifications = %d", code)
	}
	return acc.ID
}

// waitFinal polls the notification until it reaches a final status.
func (e *env) waitFinal(id string) statusResp {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var st statusResp
	for time.Now().Before(deadline) {
		st = statusResp{}
		if e.do("GET", "/v1/notifications/"+id+"?limit=1000", nil, &st) == http.StatusOK && notify.NotificationStatus(st.Status).Final() {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("notification %s not final after 30s: %+v", id, st)
	return st
}

func (e *env) deliveredTo(address string) int {
	return len(e.rt.Sandbox.Recorder.List("", address))
}

func TestAllChannelsEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.mustDo("PUT", "/v1/users/alice/devices/fcm-alice-phone-0001", map[string]any{"platform": "fcm"}, 200)
	e.mustDo("PUT", "/v1/users/alice/devices/apns-alice-ipad-0001", map[string]any{"platform": "apns"}, 200)
	e.mustDo("PUT", "/v1/users/alice/contacts", map[string]any{"email": "alice@example.com", "phone": "+821012345678"}, 200)

	start := time.Now()
	id := e.send(notify.SendRequest{
		IdempotencyKey: "order-1001-shipped",
		Channels:       []notify.Channel{"push", "email", "sms", "inbox"},
		Content:        notify.Content{Title: "Your order shipped", Body: "Order #1001 is on its way."},
		Recipients:     []notify.Recipient{{UserID: "alice"}},
	})
	st := e.waitFinal(id)
	t.Logf("final status after %v", time.Since(start))
	if st.Status != "SENT" {
		t.Fatalf("status = %s, want SENT; deliveries %+v", st.Status, st.Deliveries)
	}
	for _, a := range []string{"fcm-alice-phone-0001", "apns-alice-ipad-0001", "alice@example.com", "+821012345678"} {
		if n := e.deliveredTo(a); n != 1 {
			t.Errorf("sandbox got %d deliveries for %s, want 1", n, a)
		}
	}
	for _, d := range e.rt.Sandbox.Recorder.List("fcm", "fcm-alice-phone-0001") {
		if d.CollapseID != id {
			t.Errorf("fcm collapse id = %q, want the notification id %q", d.CollapseID, id)
		}
	}
	var inbox struct {
		Items []notify.InboxItem `json:"items"`
	}
	e.do("GET", "/v1/users/alice/inbox", nil, &inbox)
	if len(inbox.Items) != 1 || inbox.Items[0].ID != id || inbox.Items[0].Title != "Your order shipped" {
		t.Fatalf("inbox = %+v, want the notification", inbox.Items)
	}

	// The same request again: same id, no new deliveries.
	again := e.send(notify.SendRequest{
		IdempotencyKey: "order-1001-shipped",
		Channels:       []notify.Channel{"push", "email", "sms", "inbox"},
		Content:        notify.Content{Title: "Your order shipped", Body: "Order #1001 is on its way."},
		Recipients:     []notify.Recipient{{UserID: "alice"}},
	})
	if again != id {
		t.Fatalf("repeated request got id %s, want %s", again, id)
	}
	time.Sleep(300 * time.Millisecond) // give a wrongly re-processed request time to show up
	if n := e.deliveredTo("fcm-alice-phone-0001"); n != 1 {
		t.Fatalf("after the repeat the token has %d deliveries, want 1", n)
	}

	logs := e.log.String()
	for _, secret := range []string{"fcm-alice-phone-0001", "apns-alice-ipad-0001", "alice@example.com", "+821012345678", "dev-demo-key"} {
		if strings.Contains(logs, secret) {
			t.Errorf("log contains raw %q", secret)
		}
	}
}

func TestFailurePaths(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.mustDo("PUT", "/v1/users/bob/devices/fcm-bob-unregistered-01", map[string]any{"platform": "fcm"}, 200)
	e.mustDo("PUT", "/v1/users/bob/devices/fcm-bob-throttle2-0001", map[string]any{"platform": "fcm"}, 200)
	e.mustDo("PUT", "/v1/users/bob/contacts", map[string]any{"email": "bob+bounce@example.com", "phone": "+15005550001"}, 200)

	id := e.send(notify.SendRequest{
		Channels:   []notify.Channel{"push", "email", "sms"},
		Content:    notify.Content{Title: "Hi", Body: "Testing failure paths"},
		Recipients: []notify.Recipient{{UserID: "bob"}},
	})
	st := e.waitFinal(id)
	if st.Status != "PARTIALLY_SENT" {
		t.Fatalf("status = %s, want PARTIALLY_SENT: %+v", st.Status, st.Deliveries)
	}
	byAddr := map[string]string{}
	for _, d := range st.Deliveries {
		byAddr[d.Channel+"/"+d.Status+"/"+d.Reason] = d.Detail
	}
	for _, want := range []string{"push/FAILED/unregistered", "push/SENT/", "email/SENT/", "sms/FAILED/rejected"} {
		if _, ok := byAddr[want]; !ok {
			t.Errorf("no delivery %s among %v", want, byAddr)
		}
	}
	if d := byAddr["sms/FAILED/rejected"]; !strings.Contains(d, "21211") {
		t.Errorf("sms failure detail %q does not carry Twilio's code", d)
	}
	if n := e.deliveredTo("fcm-bob-throttle2-0001"); n != 1 {
		t.Errorf("throttled token delivered %d times, want 1 after retries", n)
	}

	// The dead token is removed and the bounce suppresses the address: wait for cleanup/bounce.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		devs, _ := e.rt.Store.ListDevices(context.Background(), []string{"bob"})
		sup, _ := e.rt.Store.Suppressed(context.Background(), []string{notify.AddressKey(notify.ChannelEmail, "bob+bounce@example.com")})
		if len(devs["bob"]) == 1 && len(sup) == 1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	devs, _ := e.rt.Store.ListDevices(context.Background(), []string{"bob"})
	if len(devs["bob"]) != 1 || devs["bob"][0].Token != "fcm-bob-throttle2-0001" {
		t.Fatalf("devices after cleanup = %+v, want only the live token", devs["bob"])
	}

	id2 := e.send(notify.SendRequest{
		Channels:   []notify.Channel{"email"},
		Content:    notify.Content{Title: "Again", Body: "Second email"},
		Recipients: []notify.Recipient{{UserID: "bob"}},
	})
	st2 := e.waitFinal(id2)
	if len(st2.Deliveries) != 1 || st2.Deliveries[0].Status != "SKIPPED" || st2.Deliveries[0].Reason != "suppressed" {
		t.Fatalf("second email deliveries = %+v, want one SKIPPED suppressed", st2.Deliveries)
	}
	// Nothing was sent and nothing failed: the notification says SKIPPED, not FAILED.
	if st2.Status != "SKIPPED" {
		t.Fatalf("second email status = %s, want SKIPPED", st2.Status)
	}
	if n := e.deliveredTo("bob+bounce@example.com"); n != 1 {
		t.Fatalf("bounced address got %d emails, want only the first", n)
	}
}

func TestDirectAddressesAndPoisonMessages(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var rs []notify.Recipient
	for i := range 1200 {
		rs = append(rs, notify.Recipient{FCMToken: fmt.Sprintf("fcm-direct-%05d", i)})
	}
	id := e.send(notify.SendRequest{Channels: []notify.Channel{"push"}, Content: notify.Content{Body: "bulk"}, Recipients: rs})
	if st := e.waitFinal(id); st.Status != "SENT" {
		t.Fatalf("status = %s", st.Status)
	}
	if got := len(e.rt.Sandbox.Recorder.List("fcm", "")); got != 1200 {
		t.Fatalf("sandbox got %d fcm deliveries, want 1200", got)
	}

	// A malformed message put straight on the ingest queue is dead-lettered with its reason.
	ctx := context.Background()
	if err := e.rt.Queue.Send(ctx, notify.IngestQueue("demo"), notify.OutMessage{Body: []byte(`{"channels": "push"`)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		msgs, err := e.rt.Queue.Peek(ctx, notify.DLQName(notify.IngestQueue("demo")), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 1 {
			if msgs[0].Attributes["herald-error-code"] != notify.EINVALID || msgs[0].Attributes["herald-error"] == "" {
				t.Fatalf("dead-lettered attributes = %v", msgs[0].Attributes)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("malformed message never reached the DLQ")
}

// TestCampaignEndToEnd: a campaign over every device of an app, driven by the runtime's
// campaign runner through the bulk lane to the sandbox, reaches each device exactly once.
func TestCampaignEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	var tokens []string
	for i := range 1100 {
		tok := fmt.Sprintf("fcm-campaign-%05d", i)
		tokens = append(tokens, tok)
		if err := e.rt.Store.PutDevice(ctx, notify.Device{UserID: fmt.Sprintf("cu%05d", i), Platform: notify.PlatformFCM,
			App: "default", Token: tok, Environment: "production"}); err != nil {
			t.Fatal(err)
		}
	}
	// Transactional, so the test does not depend on the wall clock being outside quiet hours.
	c := &notify.Campaign{
		ID: notify.NewID("n_", time.Now()), Service: "demo",
		Notification: notify.Notification{Category: notify.CategoryTransactional,
			Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Title: "Maintenance", Body: "Tonight"}},
		Audience:   notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceAppDevices, App: "default"}}},
		QuietHours: notify.DefaultQuietHours(), State: notify.CampaignRunning,
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.rt.Store.CreateCampaign(ctx, c); err != nil {
		t.Fatal(err)
	}
	st := e.waitFinal(c.ID)
	if st.Status != "SENT" {
		t.Fatalf("campaign notification %s, want SENT", st.Status)
	}
	got, err := e.rt.Store.GetCampaign(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != notify.CampaignCompleted || got.Progress.Sent != len(tokens) {
		t.Fatalf("campaign %s progress %+v, want COMPLETED with %d sent", got.State, got.Progress, len(tokens))
	}
	for _, tok := range tokens {
		if n := e.deliveredTo(tok); n != 1 {
			t.Fatalf("sandbox got %d deliveries for %s, want 1", n, tok)
		}
	}
	// The operator events, as the local runtime emits them: one log line each.
	evs := e.events(c.ID)
	if len(evs) != 2 || evs[0].Event != notify.EventLargeSendStarted || evs[1].Event != notify.EventCampaignFinished ||
		evs[1].Recipients != len(tokens) || evs[1].Service != "demo" {
		t.Fatalf("operator events for %s = %+v, want large_send_started then campaign_finished with %d recipients", c.ID, evs, len(tokens))
	}
}

type eventLine struct {
	Event      string `json:"event"`
	Service    string `json:"service"`
	CampaignID string `json:"campaign_id"`
	Recipients int    `json:"recipients"`
}

// events returns the operator event lines the runtime logged for campaign id, in order.
func (e *env) events(id string) []eventLine {
	e.t.Helper()
	var out []eventLine
	for _, line := range strings.Split(strings.TrimSpace(e.log.String()), "\n") {
		var l eventLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			e.t.Fatalf("log line %q: %v", line, err)
		}
		if l.Event != "" && l.CampaignID == id {
			out = append(out, l)
		}
	}
	return out
}

func TestReservedSendFiresOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	at := time.Now().Add(1500 * time.Millisecond).UTC()
	var acc struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	req := notify.SendRequest{
		IdempotencyKey: "reserved-1", Channels: []notify.Channel{"push"}, SendAt: &at,
		Content: notify.Content{Body: "later"}, Recipients: []notify.Recipient{{FCMToken: "fcm-reserved-000001"}},
	}
	if code := e.do("POST", "/v1/notifications", req, &acc); code != http.StatusAccepted || acc.Status != "SCHEDULED" {
		t.Fatalf("POST = %d %+v, want 202 SCHEDULED", code, acc)
	}
	time.Sleep(300 * time.Millisecond)
	if n := e.deliveredTo("fcm-reserved-000001"); n != 0 {
		t.Fatalf("delivered %d times before send_at", n)
	}
	if st := e.waitFinal(acc.ID); st.Status != "SENT" {
		t.Fatalf("status = %s", st.Status)
	}
	// A stray second fire (a redelivered schedule) does nothing.
	armed := notify.ReservedTime(at)
	body, _ := json.Marshal(notify.FireMessage{Fire: acc.ID, At: &armed})
	if err := e.rt.Queue.Send(context.Background(), notify.IngestQueue("demo"), notify.OutMessage{Body: body}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if n := e.deliveredTo("fcm-reserved-000001"); n != 1 {
		t.Fatalf("delivered %d times, want exactly 1", n)
	}
}
