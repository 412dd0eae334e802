package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// A bench stopped by SIGTERM or an interrupt mid-run removes its temporary directory (which
// holds its store and queue) and exits as the signal would have.
func TestBenchStoppedRemovesItsDirectory(t *testing.T) {
	for _, s := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(s.String(), func(t *testing.T) {
			tmp := t.TempDir()
			cmd := exec.Command(heraldBin, "bench", "campaign", "--devices", "200000")
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			deadline := time.Now().Add(30 * time.Second)
			for { // the store's database inside the bench's directory means it is running
				held, _ := filepath.Glob(filepath.Join(tmp, "herald-bench-*", "*.db"))
				if len(held) > 0 {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					<-done
					t.Fatalf("no bench directory after 30 s; output:\n%s", out.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := cmd.Process.Signal(s); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatal("bench still running 30 s after the signal")
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 128+int(s) {
				t.Fatalf("exit: %v, want code %d; output:\n%s", err, 128+int(s), out.String())
			}
			left, _ := os.ReadDir(tmp)
			for _, e := range left {
				t.Errorf("left behind: %s", e.Name())
			}
		})
	}
}
