package notify

import (
	"testing"
	"time"
)

func TestBatchClaimBusyFor(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		until time.Time
		want  time.Duration
	}{
		{now.Add(15 * time.Second), 16 * time.Second}, // the holder's lease, and a second
		{time.Time{}, time.Minute},                    // not known: the caller's bound
		{now.Add(-time.Second), time.Second},          // ended already: a second
		{now.Add(time.Hour), time.Minute},             // never beyond the bound
	} {
		if got := (BatchClaim{State: BatchBusy, LeaseUntil: c.until}).BusyFor(now, time.Minute); got != c.want {
			t.Errorf("BusyFor with the lease until %v = %v, want %v", c.until, got, c.want)
		}
	}
}
