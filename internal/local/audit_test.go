package local

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
)

// TestAuditLogRecordsOperatorActions: through the running API, a redrive, a notification's
// reschedule and cancel and a campaign's cancel each appear in GET /v1/admin/audit with who did
// them and on what, and nothing in the log holds the addresses those actions concerned.
func TestAuditLogRecordsOperatorActions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	const (
		email = "audit-alice@example.com"
		phone = "+15005550123"
		token = "fcm-audit-secret-token-0001"
	)
	e.mustDo("PUT", "/v1/users/alice/contacts", map[string]any{"email": email, "phone": phone}, 200)
	e.mustDo("PUT", "/v1/users/alice/devices/"+token, map[string]any{"platform": "fcm"}, 200)

	// A dead letter carrying addresses, then its redrive.
	poison := `{"channels": "push", "recipients": [{"email": "` + email + `", "phone": "` + phone + `", "fcm_token": "` + token + `"}]`
	if err := e.rt.Queue.Send(ctx, notify.IngestQueue("demo"), notify.OutMessage{Body: []byte(poison)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		msgs, err := e.rt.Queue.Peek(ctx, notify.DLQName(notify.IngestQueue("demo")), 10)
		return err == nil && len(msgs) == 1
	})
	var moved struct {
		Moved int `json:"moved"`
	}
	if code := e.do("POST", "/v1/admin/queues/ingest-demo/redrive", nil, &moved); code != 200 || moved.Moved != 1 {
		t.Fatalf("redrive = %d %+v", code, moved)
	}

	// A reserved notification to those addresses, moved and then cancelled.
	at := time.Now().Add(time.Hour).UTC()
	id := e.scheduleAt("audit-1", token, at)
	e.mustDo("PATCH", "/v1/notifications/"+id, map[string]any{"send_at": at.Add(time.Hour)}, 200)
	e.mustDo("DELETE", "/v1/notifications/"+id, nil, 200)

	// A reserved campaign, cancelled.
	var created struct {
		ID string `json:"id"`
	}
	if code := e.do("POST", "/v1/campaigns", map[string]any{
		"channels": []string{"push"}, "content": map[string]any{"body": "Sale"}, "send_at": at,
		"audience": map[string]any{"sources": []map[string]any{{"kind": "app_devices", "app": "default"}}},
	}, &created); code != 202 {
		t.Fatalf("POST /v1/campaigns = %d", code)
	}
	e.mustDo("DELETE", "/v1/campaigns/"+created.ID, nil, 200)

	raw := e.auditJSON("")
	var page struct {
		Entries []notify.AuditEntry `json:"entries"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		t.Fatal(err)
	}
	find := func(action notify.AuditAction, target string) notify.AuditEntry {
		t.Helper()
		for _, en := range page.Entries {
			if en.Action == action && en.TargetID == target {
				return en
			}
		}
		t.Fatalf("no %s entry on %s in %s", action, target, raw)
		return notify.AuditEntry{}
	}
	for _, en := range []notify.AuditEntry{
		find(notify.AuditQueueRedrive, "ingest-demo"),
		find(notify.AuditNotificationReschedule, id),
		find(notify.AuditNotificationCancel, id),
		find(notify.AuditCampaignCancel, created.ID),
	} {
		if en.Actor != "demo" || en.ActorKind != notify.ActorService || en.Result != notify.AuditResultOK || en.At.IsZero() {
			t.Errorf("entry %+v, want by service demo, ok", en)
		}
	}
	if en := find(notify.AuditQueueRedrive, "ingest-demo"); en.TargetType != notify.AuditTargetQueue || en.Params["moved"] != "1" {
		t.Errorf("redrive entry %+v", en)
	}
	// The contacts were replaced by a service: a change to a user's shared data, audited too (the
	// device registration is not).
	if en := find(notify.AuditUserContactsPut, "alice"); en.Actor != "demo" || en.TargetType != notify.AuditTargetUser {
		t.Errorf("contacts entry %+v", en)
	}
	if len(page.Entries) != 5 || page.Entries[0].Action != notify.AuditCampaignCancel || page.Entries[3].Action != notify.AuditQueueRedrive ||
		page.Entries[4].Action != notify.AuditUserContactsPut {
		t.Errorf("entries not newest first: %s", raw)
	}
	for _, s := range []string{email, phone, token, "audit-alice", "5550123"} {
		if bytes.Contains(raw, []byte(s)) {
			t.Fatalf("the audit log holds %q: %s", s, raw)
		}
	}
	if got := e.auditJSON("?target_id=" + created.ID); !strings.Contains(string(got), `"action":"campaign.cancel"`) || strings.Contains(string(got), id) {
		t.Fatalf("filtered by the campaign: %s", got)
	}
}

// auditJSON is GET /v1/admin/audit with query, as the demo (admin) service.
func (e *env) auditJSON(query string) []byte {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.rt.URL+"/v1/admin/audit"+query, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer dev-demo-key")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		e.t.Fatalf("GET /v1/admin/audit%s = %d %s %v", query, res.StatusCode, b, err)
	}
	return b
}
