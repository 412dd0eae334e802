package ddb

import (
	"testing"
	"time"

	"herald/internal/notify"
)

// ListScheduledNotifications bounds each call to scanPagesPerCall Scan requests: with requests
// of one item, a call over a table of many items returns few (or no) entries and a cursor, and
// paging on lists every SCHEDULED notification exactly once.
func TestListScheduledNotificationsBoundsEachCall(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := t.Context()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	want := map[string]bool{}
	for i := range 12 {
		n := &notify.Notification{ID: notify.NewID("n_", now), Service: "shop", Channels: []notify.Channel{notify.ChannelPush},
			Content: notify.Content{Body: "x"}, Recipients: []notify.Recipient{{UserID: "u"}}, Status: notify.StatusAccepted,
			CreatedAt: now, UpdatedAt: now}
		if i%3 == 0 {
			at := now.Add(time.Hour)
			n.Status, n.SendAt = notify.StatusScheduled, &at
			want[n.ID] = true
		}
		if _, _, err := s.CreateNotification(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	scanItemsPerRequest = 1
	t.Cleanup(func() { scanItemsPerRequest = 0 })
	got := map[string]bool{}
	cursor, calls := "", 0
	for {
		page, next, err := s.ListScheduledNotifications(ctx, cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			if got[r.ID] || !want[r.ID] {
				t.Fatalf("%s listed twice or not SCHEDULED", r.ID)
			}
			got[r.ID] = true
		}
		calls++
		if next == "" {
			break
		}
		if calls > 100 {
			t.Fatal("listing does not end")
		}
		cursor = next
	}
	// 12 main items, their counter shard items and key claims: well over 4 one-item requests.
	if len(got) != len(want) || calls < 3 {
		t.Fatalf("listed %d of %d in %d calls; want all, over several bounded calls", len(got), len(want), calls)
	}
}
