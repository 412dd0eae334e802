package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestProgressLine(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var st campaignStatus
	st.State = "RUNNING"
	st.Totals.Total, st.Totals.Sent, st.Totals.Skipped, st.Totals.Remaining = 10, 4, 1, 5
	if got, want := progressLine(st, 12.4, 10, now), "RUNNING            [#####.....] 4/~10 sent  0 failed  1 skipped  12/s"; got != want {
		t.Fatalf("progressLine =\n%q, want\n%q", got, want)
	}
	eta := now.Add(90*time.Minute + 20*time.Second)
	st.ETA = &eta
	if got, want := progressLine(st, 12.4, 10, now), "RUNNING            [#####.....] 4/~10 sent  0 failed  1 skipped  12/s  eta 1h30m"; got != want {
		t.Fatalf("progressLine =\n%q, want\n%q", got, want)
	}
	st.ETA = nil
	st.State = "PAUSED_QUIET_HOURS"
	until := now.Add(9*time.Hour + 10*time.Minute)
	st.PausedUntil = &until
	want := "PAUSED_QUIET_HOURS [#####.....] 4/~10 sent  0 failed  1 skipped  0/s  resumes " + until.Local().Format("2006-01-02 15:04 MST") + " (in 9h10m)"
	if got := progressLine(st, 0, 10, now); got != want {
		t.Fatalf("progressLine =\n%q, want\n%q", got, want)
	}
	st.State, st.PausedUntil = "COMPLETED", nil
	st.Totals.Sent, st.Totals.Remaining, st.Totals.RemainingExact = 9, 0, true
	if got, want := progressLine(st, 0, 10, now), "COMPLETED          [##########] 9/10 sent  0 failed  1 skipped  0/s"; got != want {
		t.Fatalf("progressLine =\n%q, want\n%q", got, want)
	}
}

// scriptedCampaign serves GET /v1/campaigns/c1 from a script of states, one per request, and
// repeats the last one.
func scriptedCampaign(t *testing.T, script []map[string]any) (*httptest.Server, func() int) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/campaigns/c1" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, `{"error":{"code":"not_found"}}`, http.StatusNotFound)
			return
		}
		mu.Lock()
		st := script[min(n, len(script)-1)]
		n++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)
	return srv, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

func campaignState(state string, sent, remaining int, extra map[string]any) map[string]any {
	m := map[string]any{"id": "c1", "state": state, "totals": map[string]any{"sent": sent, "remaining": remaining, "remaining_exact": remaining == 0}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// TestCampaignWatch: quiet hours show when the campaign resumes, once however long they last;
// watch ends on the final state with exit 0 for COMPLETED and 3 for CANCELED or FAILED.
func TestCampaignWatch(t *testing.T) {
	t.Parallel()
	until := time.Now().Add(10 * time.Hour).Truncate(time.Minute).UTC()
	quiet := campaignState("PAUSED_QUIET_HOURS", 40, 60, map[string]any{"paused_until": until})
	srv, polls := scriptedCampaign(t, []map[string]any{
		campaignState("RUNNING", 10, 90, nil),
		quiet, quiet, quiet, quiet, quiet,
		campaignState("RUNNING", 70, 30, nil),
		campaignState("COMPLETED", 100, 0, nil),
		campaignState("RUNNING", 0, 0, nil), // never read: watch stopped
	})
	var out strings.Builder
	err := runCampaignWatch([]string{"c1", "--api", srv.URL + "/", "--key", "k", "--every", "1ms"}, &out)
	if err != nil || exitCode(err) != 0 {
		t.Fatalf("watch = %v (exit %d), want nil for COMPLETED\n%s", err, exitCode(err), out.String())
	}
	if n := polls(); n != 8 {
		t.Errorf("%d polls, want 8 (stop at COMPLETED)", n)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	var states []string
	for _, l := range lines {
		states = append(states, strings.Fields(l)[0])
	}
	if got, want := strings.Join(states, " "), "RUNNING PAUSED_QUIET_HOURS RUNNING COMPLETED"; got != want {
		t.Fatalf("printed states %q, want %q (one line per change)\n%s", got, want, out.String())
	}
	if want := "resumes " + until.Local().Format("2006-01-02 15:04 MST"); !strings.Contains(lines[1], want) {
		t.Errorf("quiet-hours line %q does not say %q", lines[1], want)
	}
	if strings.ContainsAny(out.String(), "\r\x1b") {
		t.Errorf("output that is not a terminal has terminal controls: %q", out.String())
	}

	for _, c := range []struct {
		final map[string]any
		want  string
	}{
		{campaignState("FAILED", 5, 95, map[string]any{"error": "audience list vip has no members"}), "campaign c1 FAILED: audience list vip has no members"},
		{campaignState("CANCELED", 5, 95, nil), "campaign c1 ended CANCELED"},
	} {
		srv, _ := scriptedCampaign(t, []map[string]any{campaignState("RUNNING", 5, 95, nil), c.final})
		out.Reset()
		err := runCampaignWatch([]string{"--api", srv.URL, "--key", "k", "--every", "1ms", "c1"}, &out)
		if exitCode(err) != exitNotDone || err.Error() != c.want {
			t.Errorf("watch of %s = %v (exit %d), want %q, exit %d", c.final["state"], err, exitCode(err), c.want, exitNotDone)
		}
	}

	// An unknown campaign is the API's error, exit 1.
	err = runCampaignWatch([]string{"--api", srv.URL, "--key", "k", "nope"}, &out)
	if exitCode(err) != exitError || !strings.Contains(err.Error(), "404") {
		t.Errorf("watch of an unknown campaign = %v (exit %d), want a 404 error, exit 1", err, exitCode(err))
	}
	var ue usageError
	if err := runCampaignWatch([]string{"--api", srv.URL}, &out); !errors.As(err, &ue) || exitCode(err) != exitUsage {
		t.Errorf("watch without an id = %v, want a usage error", err)
	}
}
