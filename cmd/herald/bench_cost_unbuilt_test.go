//go:build !costbench

package main

import (
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestShippedBinariesLinkNoProvingGround: herald and the Lambda functions carry no AWS fake,
// no stack in a box and no cost meter — those prove the product and stay out of it; the cost
// meter is linked only into a benchmarking herald (-tags costbench), and a plain one says so.
func TestShippedBinariesLinkNoProvingGround(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "herald/cmd/herald", "herald/functions/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasSuffix(p, "fake") || strings.Contains(p, "/stackbox") || strings.Contains(p, "/costbench") ||
			strings.HasSuffix(p, "test") && strings.HasPrefix(p, "herald/") {
			t.Errorf("a shipped binary links %s", p)
		}
	}
	if err := runBenchCost([]string{"--dynamodb-endpoint", "http://127.0.0.1:1"}, io.Discard); err == nil || !strings.Contains(err.Error(), "-tags costbench") {
		t.Fatalf("bench cost without the meter: %v, want it to say how to build one", err)
	}
}
