package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBenchCampaign runs `herald bench campaign` on a small audience: the campaign completes with
// exactly one sandbox delivery per device, and every figure line is printed.
func TestBenchCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the local runtime")
	}
	var out bytes.Buffer
	if err := runBenchCampaign([]string{"--devices", "2000", "--idle-probes", "40", "--max-probes", "200", "--timeout", "2m"}, &out); err != nil {
		t.Fatalf("bench campaign: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"setup        2000 devices via Store.PutDevice",
		"campaign     POST /v1/campaigns → last sandbox delivery",
		"(", "2000 devices, one delivery each)",
		`realtime     "orders" single sends, POST → sandbox, idle`,
		`realtime     "orders" single sends, during the campaign`,
		"writes       store rows per recipient: campaign ",
		"single transactional send ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
