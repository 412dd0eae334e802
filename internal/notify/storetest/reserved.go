package storetest

import (
	"maps"
	"slices"
	"testing"
	"time"

	"herald/internal/notify"
)

var reservedCases = []storeCase{
	{"Reserved/SendAtRoundTripsWholeSeconds", testReservedSendAtRoundTrips},
	{"Reserved/RescheduleAndFire", testRescheduleAndFire},
	{"Reserved/ListScheduledPages", testListScheduledPages},
	{"Reserved/ListScheduledRefusesBadArguments", testListScheduledBadArguments},
}

func rescheduler(t *testing.T, s notify.Store) notify.Rescheduler {
	t.Helper()
	rs, ok := s.(notify.Rescheduler)
	if !ok {
		t.Fatalf("%T does not implement notify.Rescheduler", s)
	}
	return rs
}

func scheduledNotification(service string, at time.Time) *notify.Notification {
	n := newNotification(service, "")
	n.Status = notify.StatusScheduled
	n.SendAt = &at
	return n
}

// A send_at kept in whole seconds (notify.ReservedTime, what the fire names) comes back as the
// same instant, in any zone it was given in.
func testReservedSendAtRoundTrips(t *testing.T, s notify.Store) {
	seoul := time.FixedZone("KST", 9*3600)
	at := notify.ReservedTime(t0.Add(36*time.Hour + 400*time.Millisecond).In(seoul))
	if at.Nanosecond() != 0 || !at.After(t0.Add(36*time.Hour)) {
		t.Fatalf("ReservedTime = %v, want the next whole second", at)
	}
	n := mustCreateNotification(t, s, scheduledNotification("shop", at.In(seoul)))
	got, err := s.GetNotification(t.Context(), n.ID)
	noErr(t, err)
	sameTimePtr(t, "SendAt", got.SendAt, &at)
	page, _, err := s.ListScheduledNotifications(t.Context(), "", 10)
	noErr(t, err)
	if len(page) != 1 || !page[0].SendAt.Equal(at) || page[0].SendAt.Nanosecond() != 0 {
		t.Fatalf("listed %+v, want send_at %v", page, at)
	}
}

func testRescheduleAndFire(t *testing.T, s notify.Store) {
	ctx := t.Context()
	rs := rescheduler(t, s)
	first := t0.Add(2 * time.Hour)
	n := mustCreateNotification(t, s, scheduledNotification("shop", first))

	later := t0.Add(5 * time.Hour)
	noErr(t, rs.RescheduleNotification(ctx, n.ID, later))
	got, err := s.GetNotification(ctx, n.ID)
	noErr(t, err)
	if got.Status != notify.StatusScheduled {
		t.Fatalf("status after reschedule = %s, want SCHEDULED", got.Status)
	}
	sameTimePtr(t, "SendAt after reschedule", got.SendAt, &later)

	// The fire came at another time (the schedule was edited in the console): the status and
	// send_at move together.
	fired := t0.Add(time.Hour)
	noErr(t, rs.FireScheduled(ctx, n.ID, fired))
	got, err = s.GetNotification(ctx, n.ID)
	noErr(t, err)
	if got.Status != notify.StatusAccepted {
		t.Fatalf("status after fire = %s, want ACCEPTED", got.Status)
	}
	sameTimePtr(t, "SendAt after fire", got.SendAt, &fired)
	if got.Content.Body != n.Content.Body || got.Service != n.Service || got.RecipientCount != 1 {
		t.Fatalf("fire changed more than status and send_at: %+v", got)
	}

	// Neither applies once the notification left SCHEDULED, nor to an unknown one.
	wantCode(t, rs.FireScheduled(ctx, n.ID, later), notify.ECONFLICT)
	wantCode(t, rs.RescheduleNotification(ctx, n.ID, later), notify.ECONFLICT)
	got, err = s.GetNotification(ctx, n.ID)
	noErr(t, err)
	sameTimePtr(t, "SendAt after refused moves", got.SendAt, &fired)
	wantCode(t, rs.FireScheduled(ctx, "n_unknown", later), notify.ENOTFOUND)
	wantCode(t, rs.RescheduleNotification(ctx, "n_unknown", later), notify.ENOTFOUND)

	canceled := mustCreateNotification(t, s, scheduledNotification("shop", first))
	noErr(t, s.SetNotificationStatus(ctx, canceled.ID, notify.StatusCanceled, notify.StatusScheduled))
	wantCode(t, rs.FireScheduled(ctx, canceled.ID, fired), notify.ECONFLICT)
}

func testListScheduledPages(t *testing.T, s notify.Store) {
	ctx := t.Context()
	want := map[string]notify.Reserved{}
	for i := range 7 {
		service := []string{"shop", "news"}[i%2]
		at := t0.Add(time.Duration(i+1) * time.Hour)
		n := mustCreateNotification(t, s, scheduledNotification(service, at))
		want[n.ID] = notify.Reserved{ID: n.ID, Service: service, SendAt: at}
	}
	mustCreateNotification(t, s, newNotification("shop", "")) // ACCEPTED: never listed
	fired := mustCreateNotification(t, s, scheduledNotification("shop", t0.Add(time.Hour)))
	noErr(t, rescheduler(t, s).FireScheduled(ctx, fired.ID, t0))
	canceled := mustCreateNotification(t, s, scheduledNotification("news", t0.Add(time.Hour)))
	noErr(t, s.SetNotificationStatus(ctx, canceled.ID, notify.StatusCanceled))

	got := map[string]notify.Reserved{}
	cursor, calls := "", 0
	for {
		page, next, err := s.ListScheduledNotifications(ctx, cursor, 3)
		noErr(t, err)
		if len(page) > 3 {
			t.Fatalf("page of %d, limit 3", len(page))
		}
		for _, r := range page {
			if _, dup := got[r.ID]; dup {
				t.Fatalf("%s listed twice", r.ID)
			}
			got[r.ID] = r
		}
		if calls++; calls > 100 {
			t.Fatal("listing does not end")
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("listed %v\nwant %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for id, w := range want {
		if g := got[id]; g.Service != w.Service || !g.SendAt.Equal(w.SendAt) {
			t.Fatalf("%s listed as %+v, want %+v", id, g, w)
		}
	}
}

func testListScheduledBadArguments(t *testing.T, s notify.Store) {
	ctx := t.Context()
	page, next, err := s.ListScheduledNotifications(ctx, "", 10)
	noErr(t, err)
	if len(page) != 0 || next != "" {
		t.Fatalf("empty store listed %+v, next %q", page, next)
	}
	for _, limit := range []int{0, -1, notify.MaxReservedPage + 1} {
		_, _, err := s.ListScheduledNotifications(ctx, "", limit)
		wantCode(t, err, notify.EINVALID)
	}
	_, _, err = s.ListScheduledNotifications(ctx, "not a cursor!", 10)
	wantCode(t, err, notify.EINVALID)
}
