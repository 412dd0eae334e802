package ddb

import (
	"fmt"
	"testing"
	"time"

	"herald/internal/notify"
)

// ListSuppressions bounds each call to scanPagesPerCall Scan requests: with requests of one
// item, a call returns few (or no) entries and a cursor, and paging on lists every match once.
func TestListSuppressionsBoundsEachCall(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := t.Context()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	want := map[string]bool{}
	for i := range 12 {
		addr := fmt.Sprintf("user%02d@example.com", i)
		reason := "bounce"
		if i%3 == 0 {
			reason = "complaint"
			want[notify.AddressKey(notify.ChannelEmail, addr)] = true
		}
		if err := s.Suppress(ctx, notify.Suppression{AddressKey: notify.AddressKey(notify.ChannelEmail, addr),
			Masked: notify.MaskEmail(addr), Channel: notify.ChannelEmail, Reason: reason, CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	scanItemsPerRequest = 1
	t.Cleanup(func() { scanItemsPerRequest = 0 })
	got := map[string]bool{}
	cursor, calls := "", 0
	for {
		page, next, err := s.ListSuppressions(ctx, notify.SuppressionFilter{Reason: "complaint"}, cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range page {
			if got[sp.AddressKey] || !want[sp.AddressKey] {
				t.Fatalf("%s listed twice or not a complaint", sp.Masked)
			}
			got[sp.AddressKey] = true
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
	if len(got) != len(want) || calls < 3 {
		t.Fatalf("listed %d of %d in %d calls; want all, over several bounded calls", len(got), len(want), calls)
	}
}
