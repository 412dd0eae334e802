package local

import (
	"context"
	"fmt"
	"testing"
	"time"

	"herald/internal/config"
	"herald/internal/notify"
)

// A marketing campaign to 12,000 devices, paced at 500 a second, crosses 21:00 in Seoul after
// its first page: from then on the devices of users without night-time consent get nothing while
// those who consented keep receiving it, the campaign pauses (PAUSED_QUIET_HOURS) with its cursor
// saved after the first page, and at 08:00 it resumes from that cursor — the held devices get it
// and the rest of the audience is paged — every device exactly once.
func TestCampaignCrossingQuietHours(t *testing.T) {
	t.Parallel()
	seoul, _ := time.LoadLocation("Asia/Seoul")
	clock := &settableClock{now: time.Date(2026, 12, 4, 20, 59, 50, 0, seoul)}
	e := startWithClock(t, config.Dev(), clock)
	rt := e.rt
	ctx := context.Background()
	const devices, page = 12000, 5000 // three pages: 5,000, 5,000, 2,000
	consent := clock.Now().Add(-24 * time.Hour)
	night := func(i int) bool { return i%2 == 0 }
	token := func(i int) string { return fmt.Sprintf("fcm-quiet-%06d", i) }
	for i := range devices {
		user := fmt.Sprintf("qu%06d", i)
		if err := rt.Store.PutDevice(ctx, notify.Device{UserID: user, Platform: notify.PlatformFCM, App: "default",
			Token: token(i), Environment: "production", TimeZone: "Asia/Seoul", UpdatedAt: consent}); err != nil {
			t.Fatal(err)
		}
		p := notify.Preferences{UserID: user, MarketingConsent: &consent, UpdatedAt: consent}
		if night(i) {
			p.NightConsent = &consent
		}
		if err := rt.Store.PutPreferences(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	var created struct {
		ID string `json:"id"`
	}
	if code := e.do("POST", "/v1/campaigns", map[string]any{
		"category": "marketing", "channels": []string{"push"}, "max_rate": 500,
		"content":  map[string]any{"title": "Winter sale", "body": "Tonight only"},
		"audience": map[string]any{"sources": []map[string]any{{"kind": "app_devices", "app": "default"}}},
	}, &created); code != 202 {
		t.Fatalf("POST /v1/campaigns = %d", code)
	}
	delivered := func(from, to int, want func(i int) bool) int {
		n := 0
		for i := from; i < to; i++ {
			if want(i) && e.deliveredTo(token(i)) > 0 {
				n++
			}
		}
		return n
	}
	all := func(int) bool { return true }

	// 20:59:50: the first page is dispatched, one chunk of 500 a second (the queue's delays run on
	// this clock, so only chunk 0 is due); it reaches all its devices.
	waitFor(t, func() bool { return delivered(0, 500, all) == 500 })
	c, err := rt.Store.GetCampaign(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Cursor.Members != page {
		t.Fatalf("before 21:00 the cursor is at %d members, want the first page (%d)", c.Cursor.Members, page)
	}

	// 21:00:30: the rest of the first page comes due. Only night-time consent gets it now.
	clock.Set(time.Date(2026, 12, 4, 21, 0, 30, 0, seoul))
	waitFor(t, func() bool { return delivered(500, page, night) == (page-500)/2 })
	waitFor(t, func() bool {
		c, err := rt.Store.GetCampaign(ctx, created.ID)
		return err == nil && c.State == notify.CampaignPausedQuietHours
	})
	time.Sleep(500 * time.Millisecond)
	if n := delivered(500, devices, func(i int) bool { return !night(i) }); n != 0 {
		t.Fatalf("%d devices without night-time consent got the ad after 21:00", n)
	}
	if n := delivered(page, devices, all); n != 0 {
		t.Fatalf("%d devices past the saved cursor got it while paused", n)
	}
	c, _ = rt.Store.GetCampaign(ctx, created.ID)
	if c.Cursor.Members != page || c.PausedUntil == nil || !c.PausedUntil.Equal(time.Date(2026, 12, 5, 8, 0, 0, 0, seoul)) {
		t.Fatalf("paused with cursor at %d members until %v, want %d until 08:00", c.Cursor.Members, c.PausedUntil, page)
	}

	// 08:00:30: the held devices get it and paging resumes from the saved cursor.
	clock.Set(time.Date(2026, 12, 5, 8, 0, 30, 0, seoul))
	deadline := time.Now().Add(60 * time.Second)
	for delivered(0, devices, all) < devices && time.Now().Before(deadline) {
		clock.Set(clock.Now().Add(2 * time.Second)) // the pacing of the later pages
		time.Sleep(100 * time.Millisecond)
	}
	waitFor(t, func() bool {
		c, err := rt.Store.GetCampaign(ctx, created.ID)
		return err == nil && c.State == notify.CampaignCompleted
	})
	for i := range devices {
		if n := e.deliveredTo(token(i)); n != 1 {
			t.Fatalf("device %d got %d deliveries, want exactly 1", i, n)
		}
	}
	c, _ = rt.Store.GetCampaign(ctx, created.ID)
	if c.Progress.Sent != devices || c.Progress.Members != devices {
		t.Fatalf("progress %+v, want %d members, all sent", c.Progress, devices)
	}
}
