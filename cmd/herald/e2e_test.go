package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run the real `herald dev` binary, kill it, and start it again.

// heraldBin is the binary under test: $HERALD_BIN (`make test` builds it once, see the
// test-binaries target), or one TestMain builds into a temporary directory.
var heraldBin string

func TestMain(m *testing.M) {
	if heraldBin = os.Getenv("HERALD_BIN"); heraldBin != "" {
		if _, err := os.Stat(heraldBin); err != nil {
			fmt.Fprintln(os.Stderr, "HERALD_BIN:", err)
			os.Exit(1)
		}
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "herald-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	heraldBin = filepath.Join(dir, "herald")
	build := exec.Command("go", "build", "-ldflags=-s -w", "-o", heraldBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build herald:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// killConfig slows FCM and APNs down with the shared rate limiter so there is time to kill the
// process mid-send, and shortens the send lease so messages in flight at a kill come back quickly.
const killConfig = `
env: e2e
sandbox: true
services:
  - name: demo
    api_keys: [dev-demo-key]
    max_concurrency: 4
lanes:
  realtime:
    send: {batch_size: 1, max_concurrency: 4, visibility_timeout: 3s}
retry: {base: 200ms, max: 2s}
providers:
  fcm:
    rate_per_second: 2500
    apps: {default: {project_id: herald-e2e}}
  apns:
    rate_per_second: 2500
    apps: {default: {topic: com.example.e2e}}
  ses: {from: noreply@example.com}
  twilio: {account_sid: AC00000000000000000000000000000000, auth_token: sandboxtoken0000, from: "+15005550006"}
contacts:
  encryption_key: aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=
`

type proc struct {
	cmd  *exec.Cmd
	logs *bytes.Buffer
	done chan error
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startHerald(t *testing.T, addr, data, cfg string, logs *bytes.Buffer) *proc {
	t.Helper()
	cmd := exec.Command(heraldBin, "dev", "--addr", addr, "--data", data, "--config", cfg)
	cmd.Stdout = io.Discard
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, logs: logs, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		once := false
		for sc.Scan() {
			logs.Write(sc.Bytes())
			logs.WriteByte('\n')
			if !once && strings.Contains(sc.Text(), "herald dev started") {
				once = true
				close(ready)
			}
		}
	}()
	go func() { err := cmd.Wait(); pw.Close(); p.done <- err }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	select {
	case <-ready:
	case err := <-p.done:
		t.Fatalf("herald dev exited at start: %v\n%s", err, logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("herald dev not ready after 30s\n%s", logs)
	}
	return p
}

func api(t *testing.T, method, url string, body any, out any) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, r)
	req.Header.Set("Authorization", "Bearer dev-demo-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

type record struct {
	Provider   string `json:"provider"`
	Address    string `json:"address"`
	CollapseID string `json:"collapse_id"`
}

func readRecords(t *testing.T, path string) []record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r record
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

func TestKillAndRestartDeliversEverythingOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills the herald binary; skipped with -short")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "herald.yaml")
	if err := os.WriteFile(cfg, []byte(killConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if d := os.Getenv("HERALD_E2E_DATA"); d != "" { // keep the databases for a post-mortem
		data = d
	}
	addr := freeAddr(t)
	base := "http://" + addr
	var logs bytes.Buffer
	t.Cleanup(func() {
		if f := os.Getenv("HERALD_E2E_LOG"); f != "" {
			_ = os.WriteFile(f, logs.Bytes(), 0o600)
		}
	})

	const fcmN, apnsN = 7000, 3000
	var rs []map[string]string
	want := map[string]bool{}
	for i := range fcmN {
		tok := fmt.Sprintf("fcm-kill-token-%05d", i)
		rs = append(rs, map[string]string{"fcm_token": tok})
		want[tok] = true
	}
	for i := range apnsN {
		tok := fmt.Sprintf("apns-kill-token-%05d", i)
		rs = append(rs, map[string]string{"apns_token": tok})
		want[tok] = true
	}

	p := startHerald(t, addr, data, cfg, &logs)
	var acc struct{ ID string }
	if code := api(t, "POST", base+"/v1/notifications", map[string]any{
		"idempotency_key": "kill-test", "channels": []string{"push"},
		"content": map[string]string{"title": "Kill test", "body": "ten thousand"}, "recipients": rs,
	}, &acc); code != http.StatusAccepted {
		t.Fatalf("POST = %d\n%s", code, logs.String())
	}
	recordFile := filepath.Join(data, "sandbox-deliveries.jsonl")
	waitDelivered := func(n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if b, err := os.ReadFile(recordFile); err == nil && bytes.Count(b, []byte("\n")) >= n {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("fewer than %d deliveries after 60s", n)
	}

	// 1: SIGTERM mid-way drains in-flight work and exits cleanly.
	waitDelivered(1500)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("herald dev after SIGTERM: %v\n%s", err, tail(logs.String()))
		}
	case <-time.After(40 * time.Second):
		t.Fatal("herald dev did not stop within 40s of SIGTERM")
	}
	afterTerm := len(readRecords(t, recordFile))

	// 2: SIGKILL mid-way, twice.
	for _, at := range []int{afterTerm + 1500, afterTerm + 4000} {
		p = startHerald(t, addr, data, cfg, &logs)
		waitDelivered(at)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}

	// 3: the last start finishes the job.
	p = startHerald(t, addr, data, cfg, &logs)
	deadline := time.Now().Add(90 * time.Second)
	var st struct {
		Status string `json:"status"`
	}
	for time.Now().Before(deadline) {
		if api(t, "GET", base+"/v1/notifications/"+acc.ID, nil, &st) == 200 && (st.Status == "SENT" || st.Status == "PARTIALLY_SENT" || st.Status == "FAILED" || st.Status == "SKIPPED") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Status != "SENT" {
		t.Fatalf("status = %q after restarts, want SENT\n%s", st.Status, tail(logs.String()))
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done

	got := map[string][]record{}
	for _, r := range readRecords(t, recordFile) {
		got[r.Address] = append(got[r.Address], r)
	}
	missing, dups := 0, 0
	for tok := range want {
		switch n := len(got[tok]); {
		case n == 0:
			missing++
		case n > 1:
			dups += n - 1
			for _, r := range got[tok] {
				if r.CollapseID != acc.ID {
					t.Errorf("resent %s carries collapse id %q, want %q", tok, r.CollapseID, acc.ID)
				}
			}
		}
	}
	t.Logf("10,000 tokens, 1 SIGTERM + 2 SIGKILL: %d missing, %d resent (in flight at a kill, same collapse id)", missing, dups)
	if missing > 0 {
		t.Fatalf("%d tokens never delivered", missing)
	}
	if len(got) != len(want) {
		t.Fatalf("sandbox saw %d distinct addresses, want %d", len(got), len(want))
	}
	// In flight at a kill is at most what the send workers hold: 4 workers × one 500-token batch,
	// per kill.
	if dups > 2*4*500 {
		t.Fatalf("%d resends: more than the send workers could have had in flight at two kills", dups)
	}
	for _, secret := range []string{"fcm-kill-token-", "apns-kill-token-", "dev-demo-key"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("log contains raw %q", secret)
		}
	}
}

// tail returns the end of the log without the access-log lines.
func tail(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, `"msg":"http request"`) {
			keep = append(keep, l)
		}
	}
	s = strings.Join(keep, "\n")
	if len(s) > 6000 {
		return s[len(s)-6000:]
	}
	return s
}
