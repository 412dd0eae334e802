package api

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"herald/internal/campaign"
	"herald/internal/notify"
	"herald/internal/sqlite"
)

// noRuns is campaign.Executions for a Control whose runs never matter here.
type noRuns struct{}

func (noRuns) Start(context.Context, string, int) error { return nil }
func (noRuns) Started(context.Context, string, int) (bool, bool, error) {
	return false, false, nil
}

// rearmAll pages POST /v1/admin/schedules/rearm to the end and sums what it re-armed.
func rearmAll(t *testing.T, e *env, limit string) (notifications, campaigns, calls int) {
	t.Helper()
	cursor := ""
	for {
		rec := e.do(t, "POST", "/v1/admin/schedules/rearm?limit="+limit+"&cursor="+cursor, ordersKey, nil)
		wantStatus(t, rec, http.StatusOK)
		wantDocumented(t, "POST", "/v1/admin/schedules/rearm", rec)
		got := decodeBody[rearmResponse](t, rec)
		notifications, campaigns, calls = notifications+got.Notifications, campaigns+got.Campaigns, calls+1
		if got.NextCursor == "" {
			return
		}
		if calls > 50 {
			t.Fatal("re-arming does not end")
		}
		cursor = got.NextCursor
	}
}

// The schedules were lost (the schedule group replaced): re-arming from the tables arms every
// SCHEDULED notification and reserved campaign again, for its stored send_at, of every service;
// doing it twice arms each once.
func TestRearmSchedules(t *testing.T) {
	t.Parallel()
	var sched *sqlite.Scheduler
	e := setup(t, withScheduler(t, &sched), func(o *Options) {
		o.AdminServices = []string{"orders"}
		store := o.Store.(*sqlite.Store)
		steps := campaign.New(campaign.Deps{Campaigns: store, Audience: store, Notifications: store,
			Dispatcher: noDispatch{}, Clock: o.Clock}, campaign.Config{})
		o.Campaigns = &campaign.Control{Steps: steps, Executions: noRuns{}, Scheduler: o.Scheduler}
	})
	ctx := context.Background()
	now := e.clock.Now()
	var want []string
	for i, at := range []time.Time{now.Add(time.Hour), now.Add(2 * time.Hour), now.Add(time.Minute), now.Add(3 * time.Hour)} {
		id := []string{"n_r1", "n_r2", "n_overdue", "n_r3"}[i]
		seedScheduled(t, e, nil, id, at) // stored SCHEDULED, schedule lost
		want = append(want, id)
	}
	e.clock.Advance(2 * time.Minute) // n_overdue's send_at passed while it had no schedule
	now = e.clock.Now()
	seedNotification(t, e, "n_sent") // not reserved
	c := &notify.Campaign{ID: "c_reserved", Service: "orders", State: notify.CampaignScheduled, SendAt: ptrTo(notify.ReservedTime(now.Add(time.Hour))),
		Notification: notify.Notification{Category: notify.CategoryTransactional, Channels: []notify.Channel{notify.ChannelPush},
			Content: notify.Content{Body: "hi"}},
		Audience: notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceUserList, ListID: "l"}}}}
	if _, _, err := e.store.CreateCampaign(ctx, c); err != nil {
		t.Fatal(err)
	}
	want = append(want, "c_reserved")
	if ids := fires(t, e, sched, now.Add(24*time.Hour)); len(ids) != 0 {
		t.Fatalf("armed before re-arming: %v", ids)
	}

	for range 2 {
		n, c, calls := rearmAll(t, e, "2")
		if n != 4 || c != 1 || calls < 3 {
			t.Fatalf("re-armed %d notifications and %d campaigns in %d calls; want 4 and 1, over several pages", n, c, calls)
		}
	}
	// Nothing fires before its send_at (the overdue one fires at once)…
	if ids := fires(t, e, sched, now); !slices.Equal(ids, []string{"n_overdue"}) {
		t.Fatalf("due now: %v, want [n_overdue]", ids)
	}
	// … and each fires once, for its stored send_at.
	ids := fires(t, e, sched, now.Add(24*time.Hour))
	slices.Sort(ids)
	slices.Sort(want)
	if !slices.Equal(ids, slices.DeleteFunc(slices.Clone(want), func(id string) bool { return id == "n_overdue" })) {
		t.Fatalf("fired %v, want each reserved send once: %v", ids, want)
	}
}

func TestRearmSchedulesErrors(t *testing.T) {
	t.Parallel()
	var sched *sqlite.Scheduler
	e := setup(t, withScheduler(t, &sched), func(o *Options) { o.AdminServices = []string{"orders"} })
	wantError(t, e.do(t, "POST", "/v1/admin/schedules/rearm", billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	wantError(t, e.do(t, "POST", "/v1/admin/schedules/rearm?cursor=x.y", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "cursor")
	wantError(t, e.do(t, "POST", "/v1/admin/schedules/rearm?cursor=n.!!", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "cursor")
	wantError(t, e.do(t, "POST", "/v1/admin/schedules/rearm?limit=0", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "limit")
	// Locally, campaigns are not armed: a run over notifications alone ends there.
	rec := e.do(t, "POST", "/v1/admin/schedules/rearm", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	if got := decodeBody[rearmResponse](t, rec); got != (rearmResponse{}) {
		t.Fatalf("empty store: %+v", got)
	}

	none := setup(t, func(o *Options) { o.AdminServices = []string{"orders"} })
	rec = none.do(t, "POST", "/v1/admin/schedules/rearm", ordersKey, nil)
	wantStatus(t, rec, http.StatusNotImplemented)
	wantDocumented(t, "POST", "/v1/admin/schedules/rearm", rec)
}

func ptrTo[T any](v T) *T { return &v }
