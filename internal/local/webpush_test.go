package local

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"herald/internal/config"
	"herald/internal/notify"
)

// TestWebPushEndToEnd registers subscriptions minted by the sandbox's push service (as a page
// would: the VAPID key from the API, pushManager.subscribe, PUT), sends to their user's push
// channel, and reads what the sandbox decrypted; a "gone" subscription is removed after one send.
func TestWebPushEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var key struct {
		PublicKey string `json:"public_key"`
	}
	if code := e.do("GET", "/v1/web-push/vapid-public-key", nil, &key); code != http.StatusOK || key.PublicKey == "" {
		t.Fatalf("vapid key: %d %+v", code, key)
	}
	mint := func(label string) map[string]any {
		var sub map[string]any
		if code := e.do("POST", "/sandbox/webpush/subscriptions", map[string]any{"label": label, "application_server_key": key.PublicKey}, &sub); code != http.StatusCreated {
			t.Fatalf("mint %s: %d", label, code)
		}
		return sub
	}
	ok, gone, throttled := mint("laptop"), mint("gone"), mint("throttle2")
	for _, s := range []map[string]any{ok, gone, throttled} {
		e.mustDo("PUT", "/v1/users/carol/web-push-subscriptions", s, http.StatusOK)
	}
	e.mustDo("PUT", "/v1/users/carol/devices/fcm-carol-phone", map[string]any{"platform": "fcm"}, http.StatusOK)

	id := e.send(notify.SendRequest{
		Channels:   []notify.Channel{"push"},
		Content:    notify.Content{Title: "Your order shipped", Body: "Order #1001 is on its way.", Data: map[string]string{"order": "1001"}},
		Recipients: []notify.Recipient{{UserID: "carol"}},
	})
	st := e.waitFinal(id)
	if st.Status != "PARTIALLY_SENT" || len(st.Deliveries) != 4 {
		t.Fatalf("status %s, deliveries %+v: want PARTIALLY_SENT with 4", st.Status, st.Deliveries)
	}
	var sent, dead int
	for _, d := range st.Deliveries {
		if strings.Contains(d.Address, "p256dh") || strings.Contains(d.Address, "/sandbox/webpush/push/") {
			t.Errorf("delivery address not masked: %q", d.Address)
		}
		switch {
		case d.Status == "SENT":
			sent++
		case d.Status == "FAILED" && d.Reason == notify.ReasonUnregistered && strings.Contains(d.Detail, "410"):
			dead++
		default:
			t.Errorf("unexpected delivery %+v", d)
		}
	}
	if sent != 3 || dead != 1 {
		t.Fatalf("%d sent and %d dead, want 3 and 1: %+v", sent, dead, st.Deliveries)
	}

	// The sandbox decrypted what the browser's service worker would get.
	for _, s := range []map[string]any{ok, throttled} {
		got := e.rt.Sandbox.Recorder.List("webpush", s["endpoint"].(string))
		if len(got) != 1 {
			t.Fatalf("%s received %d messages, want 1", s["endpoint"], len(got))
		}
		if got[0].Title != "Your order shipped" || got[0].Body != "Order #1001 is on its way." || got[0].Data["order"] != "1001" || got[0].CollapseID != id {
			t.Errorf("decrypted %+v", got[0])
		}
	}
	if n := e.deliveredTo(gone["endpoint"].(string)); n != 0 {
		t.Errorf("gone subscription recorded %d messages", n)
	}

	// Cleanup removes the gone subscription, and only it.
	var list struct {
		Subscriptions []struct {
			ID string `json:"id"`
		} `json:"subscriptions"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		list.Subscriptions = nil
		e.do("GET", "/v1/users/carol/web-push-subscriptions", nil, &list)
		if len(list.Subscriptions) == 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	goneID := notify.WebPushID(gone["endpoint"].(string))
	if len(list.Subscriptions) != 2 || list.Subscriptions[0].ID == goneID || list.Subscriptions[1].ID == goneID {
		t.Fatalf("subscriptions after cleanup %+v, want the two live ones", list.Subscriptions)
	}
	devs, _ := e.rt.Store.ListDevices(context.Background(), []string{"carol"})
	if len(devs["carol"]) != 3 {
		t.Fatalf("carol has %d devices after cleanup, want 3", len(devs["carol"]))
	}

	// The next send reaches the three live devices and nothing else.
	st2 := e.waitFinal(e.send(notify.SendRequest{
		Channels:   []notify.Channel{"push"},
		Content:    notify.Content{Title: "Again", Body: "Second"},
		Recipients: []notify.Recipient{{UserID: "carol"}},
	}))
	if st2.Status != "SENT" || len(st2.Deliveries) != 3 {
		t.Fatalf("second send %s %+v", st2.Status, st2.Deliveries)
	}

	// No endpoint or key of a subscription reaches the log.
	logs := e.log.String()
	for _, s := range []map[string]any{ok, gone, throttled} {
		keys := s["keys"].(map[string]any)
		if strings.Contains(logs, keys["auth"].(string)) || strings.Contains(logs, keys["p256dh"].(string)) ||
			strings.Contains(logs, s["endpoint"].(string)) {
			t.Fatal("a subscription's endpoint or key is in the log")
		}
	}
}

type limitedSender struct {
	notify.Sender
	got notify.RateLimiter
}

func (s *limitedSender) SetRateLimiter(l notify.RateLimiter) { s.got = l }

type waitNone struct{}

func (waitNone) Wait(context.Context, string, int) error { return nil }

// The runtime's yielding wrapper hands the pipeline's limiter on to a sender that paces itself.
func TestYieldingPassesTheLimiterOn(t *testing.T) {
	s := &limitedSender{}
	var y notify.Sender = yielding{s}
	sl, ok := y.(notify.SelfLimiting)
	if !ok {
		t.Fatal("yielding hides SetRateLimiter")
	}
	sl.SetRateLimiter(waitNone{})
	if s.got != (waitNone{}) {
		t.Fatalf("the sender got %v", s.got)
	}
}

// A campaign to an app's browsers (app_devices, platform webpush) reaches each web subscription
// through the webpush sender, and no phone.
func TestWebPushCampaign(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	var endpoints []string
	for _, user := range []string{"wu1", "wu2"} {
		raw, err := e.rt.Sandbox.MintWebPushSubscription("", "")
		if err != nil {
			t.Fatal(err)
		}
		var sub map[string]any
		if err := json.Unmarshal(raw, &sub); err != nil {
			t.Fatal(err)
		}
		endpoints = append(endpoints, sub["endpoint"].(string))
		e.mustDo("PUT", "/v1/users/"+user+"/web-push-subscriptions", sub, http.StatusOK)
		e.mustDo("PUT", "/v1/users/"+user+"/devices/fcm-"+user, map[string]any{"platform": "fcm"}, http.StatusOK)
	}
	c := &notify.Campaign{
		ID: notify.NewID("n_", time.Now()), Service: "demo",
		Notification: notify.Notification{Category: notify.CategoryTransactional,
			Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Title: "Sale", Body: "In your browser"}},
		Audience:   notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceAppDevices, App: "default", Platform: notify.PlatformWebPush}}},
		QuietHours: notify.DefaultQuietHours(), State: notify.CampaignRunning,
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.rt.Store.CreateCampaign(ctx, c); err != nil {
		t.Fatal(err)
	}
	if st := e.waitFinal(c.ID); st.Status != "SENT" {
		t.Fatalf("campaign %s, want SENT", st.Status)
	}
	for _, ep := range endpoints {
		got := e.rt.Sandbox.Recorder.List("webpush", ep)
		if len(got) != 1 || got[0].Title != "Sale" || got[0].Body != "In your browser" {
			t.Fatalf("%s received %+v", ep, got)
		}
	}
	if n := len(e.rt.Sandbox.Recorder.List("fcm", "")); n != 0 {
		t.Fatalf("phones got %d pushes from a browsers-only campaign", n)
	}
}

// A subscription minted through the API's address still works after a restart on that address
// (the sandbox's own port changes; the endpoint is on the API's).
func TestWebPushSubscriptionSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := func(addr string) *env {
		rt, err := Start(context.Background(), Options{Config: config.Dev(), DataDir: dir, Addr: addr, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return &env{t: t, rt: rt, log: &syncBuffer{}}
	}
	stop := func(e *env) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.rt.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	e := start("127.0.0.1:0")
	var sub map[string]any
	if code := e.do("POST", "/sandbox/webpush/subscriptions", nil, &sub); code != http.StatusCreated {
		t.Fatalf("mint: %d", code)
	}
	e.mustDo("PUT", "/v1/users/dora/web-push-subscriptions", sub, http.StatusOK)
	addr := strings.TrimPrefix(e.rt.URL, "http://")
	stop(e)

	e = start(addr)
	defer stop(e)
	st := e.waitFinal(e.send(notify.SendRequest{Channels: []notify.Channel{"push"},
		Content: notify.Content{Title: "After", Body: "a restart"}, Recipients: []notify.Recipient{{UserID: "dora"}}}))
	if st.Status != "SENT" {
		t.Fatalf("status %s %+v", st.Status, st.Deliveries)
	}
	if got := e.rt.Sandbox.Recorder.List("webpush", sub["endpoint"].(string)); len(got) != 1 || got[0].Title != "After" {
		t.Fatalf("recorded %+v", got)
	}
}
