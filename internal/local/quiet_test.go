package local

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"herald/internal/config"
	"herald/internal/notify"
)

// settableClock is a clock the test moves.
type settableClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *settableClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *settableClock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// At 22:00 in Seoul a marketing push reaches the user who consented to night-time ads at once;
// the other waits, in the queue, until 08:00 — and then gets it exactly once. Both carry "(광고)".
func TestMarketingWaitsForQuietHoursToEnd(t *testing.T) {
	t.Parallel()
	seoul, _ := time.LoadLocation("Asia/Seoul")
	clock := &settableClock{now: time.Date(2026, 12, 1, 22, 0, 0, 0, seoul)}
	cfg := config.Dev()
	cfg.Marketing.AdPrefix = true
	cfg.Marketing.OptOutSMS = "무료수신거부 080-000-0000"
	e := startWithClock(t, cfg, clock)
	rt := e.rt
	for _, u := range []struct {
		user, token string
		night       bool
	}{{"night-owl", "fcm-night-owl-000001", true}, {"early-bird", "fcm-early-bird-00001", false}} {
		e.mustDo("PUT", "/v1/users/"+u.user+"/devices/"+u.token, map[string]any{"platform": "fcm", "time_zone": "Asia/Seoul"}, 200)
		prefs := map[string]any{"marketing_consent": true, "night_consent": u.night}
		e.mustDo("PUT", "/v1/users/"+u.user+"/preferences", prefs, 200)
	}
	e.send(notify.SendRequest{
		Category: notify.CategoryMarketing, Channels: []notify.Channel{"push"},
		Content:    notify.Content{Title: "Weekend sale", Body: "30% off"},
		Recipients: []notify.Recipient{{UserID: "night-owl"}, {UserID: "early-bird"}},
	})
	waitFor(t, func() bool { return e.deliveredTo("fcm-night-owl-000001") == 1 })
	if got := rt.Sandbox.Recorder.List("fcm", "fcm-night-owl-000001")[0].Title; got != "(광고) Weekend sale" {
		t.Fatalf("title = %q, want the (광고) prefix", got)
	}
	time.Sleep(500 * time.Millisecond)
	if n := e.deliveredTo("fcm-early-bird-00001"); n != 0 {
		t.Fatalf("a user without night-time consent got %d ads at 22:00", n)
	}
	clock.Set(time.Date(2026, 12, 2, 8, 0, 30, 0, seoul))
	waitFor(t, func() bool { return e.deliveredTo("fcm-early-bird-00001") == 1 })
	time.Sleep(300 * time.Millisecond)
	if a, b := e.deliveredTo("fcm-night-owl-000001"), e.deliveredTo("fcm-early-bird-00001"); a != 1 || b != 1 {
		t.Fatalf("deliveries night-owl %d, early-bird %d; want 1 each", a, b)
	}
}

// startWithClock runs a local Herald on cfg whose clock the test moves, stopped when the test ends.
func startWithClock(t *testing.T, cfg *config.Config, clock notify.Clock) *env {
	t.Helper()
	rt, err := Start(context.Background(), Options{Config: cfg, DataDir: t.TempDir(), Addr: "127.0.0.1:0",
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Clock: clock, SandboxInMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})
	return &env{t: t, rt: rt, log: &syncBuffer{}}
}

// waitFor polls cond until it holds. The bound only stops a stuck test: on a loaded 2-core
// machine a 12,000-device page can take well over 15 s, so it is generous.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("condition not met within 90s")
}
