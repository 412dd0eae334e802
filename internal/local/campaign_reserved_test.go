package local

import (
	"context"
	"fmt"
	"testing"
	"time"

	"herald/internal/config"
	"herald/internal/notify"
)

// A reserved campaign moved later with PATCH starts at the new time, not the old one; DELETE
// of another reserved campaign means it never sends.
func TestReservedCampaignRescheduleAndCancel(t *testing.T) {
	t.Parallel()
	clock := &settableClock{now: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)}
	e := startWithClock(t, config.Dev(), clock)
	rt := e.rt
	for i := range 3 {
		if err := rt.Store.PutDevice(context.Background(), notify.Device{UserID: fmt.Sprintf("ru%d", i), Platform: notify.PlatformFCM,
			App: "default", Token: fmt.Sprintf("fcm-reserved-%02d", i), Environment: "production"}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(at time.Time) string {
		var c struct {
			ID string `json:"id"`
		}
		if code := e.do("POST", "/v1/campaigns", map[string]any{
			"category": "transactional", "channels": []string{"push"}, "send_at": at.Format(time.RFC3339),
			"content":  map[string]any{"title": "Maintenance", "body": "Tonight"},
			"audience": map[string]any{"sources": []map[string]any{{"kind": "app_devices", "app": "default"}}},
		}, &c); code != 202 {
			t.Fatalf("POST /v1/campaigns = %d", code)
		}
		return c.ID
	}
	moved := create(clock.Now().Add(time.Hour))
	canceled := create(clock.Now().Add(time.Hour))
	e.mustDo("PATCH", "/v1/campaigns/"+moved, map[string]any{"send_at": clock.Now().Add(3 * time.Hour).Format(time.RFC3339)}, 200)
	e.mustDo("DELETE", "/v1/campaigns/"+canceled, nil, 200)

	state := func(id string) notify.CampaignState {
		c, err := rt.Store.GetCampaign(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return c.State
	}
	clock.Set(clock.Now().Add(90 * time.Minute)) // past the old time
	time.Sleep(time.Second)                      // four runner polls
	if n := e.deliveredTo("fcm-reserved-00"); n != 0 || state(moved) != notify.CampaignScheduled {
		t.Fatalf("at the old send_at: %d deliveries, campaign %s; want none, SCHEDULED", n, state(moved))
	}
	clock.Set(clock.Now().Add(2 * time.Hour)) // past the new time
	waitFor(t, func() bool { return state(moved) == notify.CampaignCompleted })
	waitFor(t, func() bool { return e.deliveredTo("fcm-reserved-02") == 1 })
	time.Sleep(300 * time.Millisecond)
	for i := range 3 {
		if n := e.deliveredTo(fmt.Sprintf("fcm-reserved-%02d", i)); n != 1 {
			t.Fatalf("device %d got %d deliveries, want 1 (the moved campaign once, the canceled one never)", i, n)
		}
	}
	if st := state(canceled); st != notify.CampaignCanceled {
		t.Fatalf("canceled campaign is %s", st)
	}
}
