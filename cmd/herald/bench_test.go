package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
)

// TestBenchLargeSend runs `herald bench` on a few recipients: each lane is preceded by a raw run
// of its own payload's priority, every pipeline run reaches all recipients (the bench fails
// otherwise), each prints its timeline, both medians are printed, and --cpuprofile writes the
// four profiles.
func TestBenchLargeSend(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the local runtime")
	}
	prof := filepath.Join(t.TempDir(), "cpu")
	var out bytes.Buffer
	if err := runBench([]string{"--recipients", "1000", "--per-notification", "500", "--rounds", "1", "--cpuprofile", prof}, &out); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	got := out.String()
	order := regexp.MustCompile(`(?s)raw SDK .*high priority .*pipeline +realtime .*first push .*raw SDK .*normal priority .*pipeline +bulk .*first push `)
	if !order.MatchString(got) {
		t.Errorf("want a high-priority raw run before the realtime lane and a normal-priority one before the bulk lane:\n%s", got)
	}
	for _, want := range []string{"efficiency   realtime median", "efficiency   bulk     median"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, suffix := range []string{"realtime", "bulk", "raw-realtime", "raw-bulk"} {
		if fi, err := os.Stat(prof + "." + suffix); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s: %v", suffix, err)
		}
	}
}

// TestBenchNotificationIsItsLanes: the request the bench sends on a lane makes a notification
// that lane takes, with the priority its raw run is given.
func TestBenchNotificationIsItsLanes(t *testing.T) {
	want := map[notify.Lane]notify.Priority{notify.LaneRealtime: notify.PriorityHigh, notify.LaneBulk: notify.PriorityNormal}
	for _, lane := range notify.Lanes {
		n := benchRequest(lane).Notification("n_bench", "bench", time.Now())
		if n.Lane != lane || n.Priority != want[lane] {
			t.Errorf("bench request on %s: lane %s, priority %s; want lane %s, priority %s", lane, n.Lane, n.Priority, lane, want[lane])
		}
	}
}
