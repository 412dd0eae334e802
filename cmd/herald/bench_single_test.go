package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBenchSingle runs `herald bench single` briefly: every accepted notification reaches its
// device exactly once (the command fails otherwise), every figure line is printed, and a keyed
// push writes three store rows (the API's claim of its idempotency key, the notification and its
// delivery), a push with the inbox four.
func TestBenchSingle(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the local runtime")
	}
	for _, c := range []struct {
		args []string
		rows string
	}{
		{nil, "store rows per single send (push)                     3.00"},
		{[]string{"--inbox"}, "store rows per single send (push+inbox)               4.00"},
	} {
		var out bytes.Buffer
		args := append([]string{"--duration", "1s", "--clients", "4", "--users", "3000"}, c.args...)
		if err := runBenchSingle(args, &out); err != nil {
			t.Fatalf("bench single %v: %v\n%s", c.args, err, out.String())
		}
		got := out.String()
		for _, want := range []string{"accepted     POST /v1/notifications → 202", "completed    reached the sandbox",
			"drained      last delivery after the first post", "every device reached exactly once"} {
			if !strings.Contains(got, want) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, want, got)
			}
		}
		if f := strings.Fields(c.rows); !strings.Contains(strings.Join(strings.Fields(got), " "), strings.Join(f, " ")) {
			t.Errorf("%v: output lacks %q:\n%s", c.args, c.rows, got)
		}
	}
}
