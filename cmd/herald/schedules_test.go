package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	heraldapi "herald/internal/api"
	"herald/internal/notify"
	"herald/internal/sqlite"
)

// TestSchedulesRearm runs `herald schedules rearm` against the API on SQLite, with reserved sends
// whose schedules were lost: it pages to the end, counts them, and they fire again.
func TestSchedulesRearm(t *testing.T) {
	t.Parallel()
	db, store, queue := openSQLite(t, notify.QueueConfig{Name: "ingest-demo"})
	sched, err := sqlite.NewScheduler(db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 5 {
		at := now.Add(time.Duration(i+1) * time.Hour)
		sr := notify.SendRequest{Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Body: "later"},
			Recipients: []notify.Recipient{{UserID: "u"}}, SendAt: &at}
		if _, _, err := store.CreateNotification(t.Context(), sr.Notification(notify.NewID("n_", now), "demo", now)); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(heraldapi.New(heraldapi.Options{Store: store, Queue: queue, Scheduler: sched,
		Keys: map[string]string{"k": "demo", "other": "shop"}, AdminServices: []string{"demo"}}))
	t.Cleanup(srv.Close)

	var progress strings.Builder
	do := func(u string, out any) error { return call(http.MethodPost, u, "k", nil, out) }
	for range 2 { // idempotent: the second run arms the same schedules again
		n, c, err := rearm(srv.URL, 2, do, &progress)
		if err != nil || n != 5 || c != 0 {
			t.Fatalf("rearm = %d notifications, %d campaigns, %v; want 5, 0", n, c, err)
		}
	}
	if fired, err := sched.Fire(t.Context(), now.Add(24*time.Hour), queue); err != nil || fired != 5 {
		t.Fatalf("fired %d (%v), want each of the 5 once", fired, err)
	}
	if err := runSchedules([]string{"rearm", "--api", srv.URL, "--key", "other"}, io.Discard); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("rearm as a non-admin service: %v, want 403", err)
	}
	if err := runSchedules([]string{"rearm", "--api", srv.URL, "--key", "k", "--limit", "3"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := runSchedules([]string{"bogus"}, io.Discard); err == nil {
		t.Fatal("an unknown subcommand was accepted")
	}
}
