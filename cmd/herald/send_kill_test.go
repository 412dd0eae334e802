package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// sendKillConfig gives every real-time stage a visibility timeout (and so the send lease) of ten
// minutes: what a herald dev killed mid-send left in flight could come back by itself only after
// them, so a send that ends within the test's two minutes was handed back at the restart.
const sendKillConfig = `
env: e2e
sandbox: true
services:
  - name: demo
    api_keys: [dev-demo-key]
lanes:
  realtime:
    prepare: {visibility_timeout: 10m}
    send: {visibility_timeout: 10m}
    record: {visibility_timeout: 10m}
providers:
  fcm:
    apps: {default: {project_id: herald-e2e}}
contacts:
  encryption_key: aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=
`

// sendKillHerald is a `herald dev` on sendKillConfig, in a data directory of its own.
type sendKillHerald struct {
	data, cfgPath, addr, base string
	logs                      *killLog
	p                         *proc
}

func startSendKillHerald(t *testing.T) sendKillHerald {
	t.Helper()
	h := newSendKillHerald(t, sendKillConfig)
	h.start(t)
	return h
}

// newSendKillHerald is a sendKillHerald on config cfg, its data directory made, not started.
func newSendKillHerald(t *testing.T, cfg string) sendKillHerald {
	t.Helper()
	dir := t.TempDir()
	h := sendKillHerald{data: filepath.Join(dir, "data"), cfgPath: filepath.Join(dir, "herald.yaml"), addr: freeAddr(t), logs: newKillLog()}
	if err := os.WriteFile(h.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(h.data, 0o700); err != nil {
		t.Fatal(err)
	}
	h.base = "http://" + h.addr
	return h
}

// start starts h's herald dev (again, after a kill).
func (h *sendKillHerald) start(t *testing.T) {
	t.Helper()
	h.p = startKillHerald(t, h.addr, h.data, h.cfgPath, h.logs)
}

// awaitSent waits until notification id is SENT, failing the test if it ends otherwise or is
// not done two minutes after since (the restart).
func (h sendKillHerald) awaitSent(t *testing.T, client *http.Client, id string, since time.Time) {
	t.Helper()
	for {
		var st struct{ Status string }
		killAPI(client, http.MethodGet, h.base+"/v1/notifications/"+id+"?limit=1", nil, &st)
		switch st.Status {
		case "SENT":
			return
		case "", "ACCEPTED", "PROCESSING":
		default:
			t.Fatalf("notification %s ended %s, want SENT", id, st.Status)
		}
		if time.Since(since) > 2*time.Minute {
			t.Fatalf("notification %s still %q two minutes after the restart: what was in flight waits for its ten-minute lease\n%s",
				id, st.Status, h.logs.tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killAfter sends SIGKILL once the sandbox has recorded n pushes (or after a minute), waits
// for the process to end, and returns how many it had recorded by then.
func (h sendKillHerald) killAfter(t *testing.T, n int) int {
	t.Helper()
	rt := &recordTail{path: filepath.Join(h.data, "sandbox-deliveries.jsonl")}
	deadline := time.Now().Add(60 * time.Second)
	for rt.lines(t) < n && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	_ = h.p.cmd.Process.Signal(syscall.SIGKILL)
	<-h.p.done
	return rt.lines(t)
}

// TestSendKilledMidSendResumesAtRestart: `herald dev` killed with SIGKILL while a 5,000-token
// transactional push is being sent, then started again on the same data directory. The restart
// releases what the dead process held (its received queue messages, its claimed send batches), so
// the send ends SENT within seconds, not after the ten-minute visibility timeouts and leases;
// every token is reached, and only the batches in flight at the kill are sent again, with the
// notification id as collapse id. A second herald on the same directory is refused meanwhile.
func TestSendKilledMidSendResumesAtRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills the herald binary; skipped with -short")
	}
	const tokens = 5000
	h := startSendKillHerald(t)
	data, cfgPath, base, logs, p := h.data, h.cfgPath, h.base, h.logs, h.p
	client := &http.Client{Timeout: 30 * time.Second}

	// A second process on the same directory would take the first one's work: refused.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	second, err := exec.CommandContext(ctx, heraldBin, "dev", "--addr", freeAddr(t), "--data", data, "--config", cfgPath).CombinedOutput()
	cancel()
	if out := string(second); err == nil || !strings.Contains(out, "in use by another process (pid "+fmt.Sprint(p.cmd.Process.Pid)+")") {
		t.Fatalf("a second herald dev on the same data directory: %v\n%s", err, tail(out))
	}

	var recipients []map[string]string
	for i := range tokens {
		recipients = append(recipients, map[string]string{"fcm_token": fmt.Sprintf("send-kill-%05d", i)})
	}
	var acc struct{ ID string }
	if code := killAPI(client, http.MethodPost, base+"/v1/notifications", map[string]any{
		"category": "transactional", "channels": []string{"push"},
		"content": map[string]string{"title": "Kill", "body": "mid-send"}, "recipients": recipients,
	}, &acc); code != http.StatusAccepted || acc.ID == "" {
		t.Fatalf("POST /v1/notifications: %d %+v", code, acc)
	}
	recordFile := filepath.Join(data, "sandbox-deliveries.jsonl")
	atKill := h.killAfter(t, 1000)
	if atKill >= tokens {
		t.Skipf("all %d pushes were out before the kill landed: nothing was in flight", atKill)
	}

	t.Logf("killed at %d of %d pushes; restarting", atKill, tokens)
	restarted := time.Now()
	h.start(t)
	h.awaitSent(t, client, acc.ID, restarted)
	took := time.Since(restarted)
	if !strings.Contains(logs.String(), "released the work in flight when the last run stopped") {
		t.Errorf("the restart did not log what it released\n%s", logs.tail())
	}
	lines := readKillRecord(t, recordFile)
	seen := map[string]int{}
	for _, r := range lines {
		seen[r.Address]++
		if r.CollapseID != acc.ID {
			t.Errorf("push to %s carried collapse id %q, want the notification's %s", maskForLog(r.Address), r.CollapseID, acc.ID)
			break
		}
	}
	resent := len(lines) - len(seen)
	t.Logf("killed at %d of %d pushes; SENT %v after the restart; %d pushes in all, %d sent again", atKill, tokens, took.Round(time.Millisecond), len(lines), resent)
	if len(seen) != tokens {
		t.Fatalf("%d distinct tokens reached, want %d", len(seen), tokens)
	}
	// Only batches in flight at the kill go again: the realtime lane's send workers (8) × 500.
	if resent > 8*500 {
		t.Errorf("%d pushes sent twice: more than the batches in flight at the kill", resent)
	}
}

// TestSingleSendsKilledResumeAtRestart: `herald dev` killed with SIGKILL while 32 clients post
// single-recipient pushes (the express path: prepared, sent and recorded by the ingest worker),
// then started again. Every send it accepted ends SENT within seconds of the restart: the express
// sends in flight at the kill are handed to the stage queues at once, not after their ten-minute
// leases; each token is reached, and one sent twice carries its notification id as collapse id.
func TestSingleSendsKilledResumeAtRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills the herald binary; skipped with -short")
	}
	h := startSendKillHerald(t)
	data, base, logs := h.data, h.base, h.logs

	const clients = 32
	var (
		mu       sync.Mutex
		accepted = map[string]string{} // notification id → token
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	stop := make(chan struct{})
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				tok := fmt.Sprintf("single-kill-%06d", next.Add(1))
				var acc struct{ ID string }
				code := killAPI(client, http.MethodPost, base+"/v1/notifications", map[string]any{
					"category": "transactional", "channels": []string{"push"},
					"content":    map[string]string{"title": "Code", "body": "123456"},
					"recipients": []map[string]string{{"fcm_token": tok}},
				}, &acc)
				if code == 0 { // the process is gone
					return
				}
				if code == http.StatusAccepted {
					mu.Lock()
					accepted[acc.ID] = tok
					mu.Unlock()
				}
			}
		}()
	}
	recordFile := filepath.Join(data, "sandbox-deliveries.jsonl")
	atKill := h.killAfter(t, 2000)
	close(stop)
	wg.Wait()

	restarted := time.Now()
	h.start(t)
	mu.Lock()
	defer mu.Unlock()
	for id := range accepted {
		h.awaitSent(t, client, id, restarted)
	}
	took := time.Since(restarted)
	idOf := map[string]string{}
	for id, tok := range accepted {
		idOf[tok] = id
	}
	seen := map[string]int{}
	for _, r := range readKillRecord(t, recordFile) {
		seen[r.Address]++
		if id, ok := idOf[r.Address]; ok && r.CollapseID != id {
			t.Errorf("push to %s carried collapse id %q, want its notification's %s", maskForLog(r.Address), r.CollapseID, id)
		}
	}
	twice := 0
	for _, tok := range accepted {
		switch n := seen[tok]; {
		case n == 0:
			t.Errorf("token %s of an accepted send never reached", maskForLog(tok))
		case n > 1:
			twice++
		}
	}
	handedOver := strings.Count(logs.String(), "express send interrupted; handed to the stage queues")
	t.Logf("%d sends accepted, killed at %d pushes; all SENT %v after the restart; %d express sends handed over at the restart, %d tokens reached twice",
		len(accepted), atKill, took.Round(time.Millisecond), handedOver, twice)
}
