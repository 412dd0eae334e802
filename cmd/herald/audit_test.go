package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	heraldapi "herald/internal/api"
	"herald/internal/notify"
)

// TestAudit runs `herald audit` against the API on SQLite holding a few entries.
func TestAudit(t *testing.T) {
	t.Parallel()
	_, store, queue := openSQLite(t, notify.QueueConfig{Name: "ingest-demo"})
	now := time.Now()
	add := func(i int, ago time.Duration, actor string, action notify.AuditAction, tt, id, result string) {
		t.Helper()
		if err := store.AppendAudit(t.Context(), notify.AuditEntry{ID: fmt.Sprintf("a_%d", i), At: now.Add(-ago), Actor: actor,
			ActorKind: notify.ActorService, Action: action, TargetType: tt, TargetID: id, Result: result,
			Params: map[string]string{"moved": "2"}}); err != nil {
			t.Fatal(err)
		}
	}
	add(1, 48*time.Hour, "demo", notify.AuditCampaignCancel, "campaign", "c_old", "ok")
	add(2, 3*time.Hour, "demo", notify.AuditCampaignCancel, "campaign", "c_1", "ok")
	add(3, 2*time.Hour, "ops", notify.AuditQueueRedrive, "queue", "send-bulk", "ok")
	add(4, time.Hour, "demo", notify.AuditCampaignPause, "campaign", "c_1", "already_finished")
	srv := httptest.NewServer(heraldapi.New(heraldapi.Options{Store: store, Queue: queue, Audit: store,
		Keys: map[string]string{"k": "demo", "other": "shop"}, AdminServices: []string{"demo"}}))
	t.Cleanup(srv.Close)

	herald := func(args ...string) (string, string, int) {
		var stdout, stderr strings.Builder
		code := run(append([]string{"audit", "--api", srv.URL, "--key", "k"}, args...), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	out, errOut, code := herald()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || errOut != "" || len(lines) != 4 || !strings.HasPrefix(lines[0], "AT") {
		t.Fatalf("herald audit = %d %q:\n%s", code, errOut, out)
	}
	for i, want := range []string{"campaign.pause  campaign:c_1", "queue.redrive   queue:send-bulk", "campaign.cancel  campaign:c_1"} {
		if !strings.Contains(strings.Join(strings.Fields(lines[i+1]), "  "), strings.Join(strings.Fields(want), "  ")) {
			t.Errorf("line %d = %q, want %q", i+1, lines[i+1], want)
		}
	}
	if !strings.Contains(lines[1], "already_finished") || !strings.Contains(lines[1], "moved=2") {
		t.Errorf("line 1 = %q, want its result and params", lines[1])
	}
	// The default --since 24h leaves the 2-day-old entry out; --since 0 reads the year.
	if out, _, _ := herald("--since", "0"); !strings.Contains(out, "c_old") {
		t.Errorf("--since 0:\n%s", out)
	}
	if out, _, _ := herald("--target", "campaign:c_1", "--action", "campaign.cancel"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "campaign.cancel") {
		t.Errorf("--target campaign:c_1 --action campaign.cancel:\n%s", out)
	}
	if out, _, _ := herald("--actor", "ops"); !strings.Contains(out, "send-bulk") || strings.Contains(out, "c_1") {
		t.Errorf("--actor ops:\n%s", out)
	}
	if out, _, _ := herald("--limit", "2"); strings.Count(out, "\n") != 4 || !strings.Contains(out, "more match") {
		t.Errorf("--limit 2:\n%s", out)
	}
	out, _, _ = herald("--json", "--target", "send-bulk")
	var e auditEntry
	if err := json.Unmarshal([]byte(out), &e); err != nil || e.Action != "queue.redrive" || e.Actor != "ops" {
		t.Errorf("--json: %q %v", out, err)
	}
	if out, _, _ := herald("--actor", "nobody"); !strings.Contains(out, "no audit entries") {
		t.Errorf("--actor nobody:\n%s", out)
	}
	// Mistakes: a bad flag exits 2; the API's refusals exit 1 with its message.
	if _, errOut, code := herald("--since", "yesterday"); code != exitUsage || !strings.Contains(errOut, "herald audit -h") {
		t.Errorf("--since yesterday = %d %q", code, errOut)
	}
	if _, errOut, code := herald("--action", "campaign.delete"); code != exitError || !strings.Contains(errOut, "unknown action") {
		t.Errorf("--action campaign.delete = %d %q", code, errOut)
	}
	var stdout, stderr strings.Builder
	if code := run([]string{"audit", "--api", srv.URL, "--key", "other"}, &stdout, &stderr); code != exitError || !strings.Contains(stderr.String(), "403") {
		t.Errorf("a non-admin key = %d %q", code, stderr.String())
	}
}
