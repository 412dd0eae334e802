package campaigntest

import (
	"fmt"
	"testing"
	"time"

	"herald/internal/notify"
)

func init() {
	cases = append(cases, campaignCase{"ListReservedCampaignsPages", testListReservedCampaigns},
		campaignCase{"ListReservedCampaignsRefusesBadArguments", testListReservedCampaignsBadArguments})
}

// Only SCHEDULED campaigns are listed, each once across pages, with their service and send_at
// (as a reschedule or a fire that started them early left it).
func testListReservedCampaigns(t *testing.T, s Store) {
	ctx := t.Context()
	want := map[string]notify.Reserved{}
	for i := range 5 {
		c := newCampaign(fmt.Sprintf("c_reserved%d", i))
		at := t0.Add(time.Duration(i+1) * time.Hour)
		c.State, c.SendAt, c.CreatedAt = notify.CampaignScheduled, &at, t0.Add(time.Duration(i)*time.Second)
		mustCreate(t, s, c)
		want[c.ID] = notify.Reserved{ID: c.ID, Service: c.Service, SendAt: at}
	}
	moved := t0.Add(72 * time.Hour)
	noErr(t, s.SetCampaignState(ctx, "c_reserved1", notify.CampaignTransition{To: notify.CampaignScheduled, SendAt: &moved, At: t0},
		notify.CampaignScheduled))
	want["c_reserved1"] = notify.Reserved{ID: "c_reserved1", Service: "marketing", SendAt: moved}
	started := t0.Add(10 * time.Minute) // started early by its fire: RUNNING, no longer reserved
	noErr(t, s.SetCampaignState(ctx, "c_reserved3", notify.CampaignTransition{To: notify.CampaignRunning, SendAt: &started, At: started},
		notify.CampaignScheduled))
	delete(want, "c_reserved3")
	noErr(t, s.SetCampaignState(ctx, "c_reserved4", notify.CampaignTransition{To: notify.CampaignCanceled, At: t0}))
	delete(want, "c_reserved4")
	mustCreate(t, s, newCampaign("c_running")) // RUNNING from the start

	got := map[string]notify.Reserved{}
	cursor := ""
	for calls := 0; ; calls++ {
		if calls > 50 {
			t.Fatal("listing does not end")
		}
		page, next, err := s.ListReservedCampaigns(ctx, cursor, 2)
		noErr(t, err)
		if len(page) > 2 {
			t.Fatalf("page of %d, limit 2", len(page))
		}
		for _, r := range page {
			if _, dup := got[r.ID]; dup {
				t.Fatalf("%s listed twice", r.ID)
			}
			got[r.ID] = r
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != len(want) {
		t.Fatalf("listed %+v\nwant %+v", got, want)
	}
	for id, w := range want {
		if g, ok := got[id]; !ok || g.Service != w.Service || !g.SendAt.Equal(w.SendAt) {
			t.Fatalf("%s listed as %+v, want %+v", id, g, w)
		}
	}
	c, err := s.GetCampaign(ctx, "c_reserved3")
	noErr(t, err)
	if c.State != notify.CampaignRunning || c.SendAt == nil || !c.SendAt.Equal(started) || c.StartedAt == nil {
		t.Fatalf("campaign started by an early fire: state %s send_at %v started_at %v; want RUNNING at %v",
			c.State, c.SendAt, c.StartedAt, started)
	}
}

func testListReservedCampaignsBadArguments(t *testing.T, s Store) {
	ctx := t.Context()
	page, next, err := s.ListReservedCampaigns(ctx, "", 10)
	noErr(t, err)
	if len(page) != 0 || next != "" {
		t.Fatalf("empty store listed %+v, next %q", page, next)
	}
	for _, limit := range []int{0, notify.MaxReservedPage + 1} {
		_, _, err := s.ListReservedCampaigns(ctx, "", limit)
		wantCode(t, err, notify.EINVALID)
	}
	_, _, err = s.ListReservedCampaigns(ctx, "not a cursor!", 10)
	wantCode(t, err, notify.EINVALID)
}
