package main

import "testing"

func TestProgressLine(t *testing.T) {
	t.Parallel()
	var st campaignStatus
	st.State = "RUNNING"
	st.Totals.Total, st.Totals.Sent, st.Totals.Skipped, st.Totals.Remaining = 10, 4, 1, 5
	if got, want := progressLine(st, 12.4, 10), "RUNNING            [#####.....] 4/~10 sent  0 failed  1 skipped  12/s"; got != want {
		t.Fatalf("progressLine =\n%q, want\n%q", got, want)
	}
	st.State = "COMPLETED"
	st.Totals.Sent, st.Totals.Remaining, st.Totals.RemainingExact = 9, 0, true
	if got, want := progressLine(st, 0, 10), "COMPLETED          [##########] 9/10 sent  0 failed  1 skipped  0/s"; got != want {
		t.Fatalf("progressLine =\n%q, want\n%q", got, want)
	}
}
