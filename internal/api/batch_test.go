package api

import (
	"encoding/json"
	"testing"
	"time"

	"herald/internal/notify"
)

func keyed(key string, r map[string]any) map[string]any {
	r["idempotency_key"] = key
	return r
}

// A batch is one message on the ingest queue carrying every request, with the ids answered.
func TestBatchIsOneIngestMessage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	later := pushRequest()
	later["send_at"] = e.clock.Now().Add(time.Hour).Format(time.RFC3339)
	rec := e.do(t, "POST", "/v1/notifications/batch", ordersKey, map[string]any{"notifications": []any{
		keyed("order-1", pushRequest()), pushRequest(), later,
	}})
	wantStatus(t, rec, 202)
	got := decodeBody[batchResponse](t, rec)
	if len(got.Notifications) != 3 || got.Notifications[0].ID != notify.NotificationIDFor("orders", "order-1", e.clock.Now()) ||
		got.Notifications[0].Status != notify.StatusAccepted || got.Notifications[2].Status != notify.StatusScheduled {
		t.Fatalf("answer %+v", got)
	}
	ms := e.receiveAll(t, notify.IngestQueue("orders"))
	if len(ms) != 1 {
		t.Fatalf("%d ingest messages, want 1", len(ms))
	}
	var b notify.SendBatch
	if err := json.Unmarshal(ms[0].Body, &b); err != nil || b.Validate() != nil || len(b.Notifications) != 3 {
		t.Fatalf("message %s: %v", ms[0].Body, err)
	}
	for i, a := range b.Attributes {
		if a[notify.AttrNotificationID] != got.Notifications[i].ID || a[notify.AttrFingerprint] == "" {
			t.Errorf("request %d's attributes %v, answered id %s", i, a, got.Notifications[i].ID)
		}
		var req notify.SendRequest
		if err := json.Unmarshal(b.Notifications[i], &req); err != nil || len(req.Recipients) != 1 {
			t.Errorf("request %d: %s, %v", i, b.Notifications[i], err)
		}
	}
}

// A bad request fails the batch naming it, and nothing is queued.
func TestBatchBadRequestQueuesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	bad := pushRequest()
	bad["recipients"] = []map[string]any{{"emial": "a@example.com"}}
	tooMany := make([]any, notify.MaxSendBatch+1)
	for i := range tooMany {
		tooMany[i] = pushRequest()
	}
	other := keyed("k", pushRequest())
	other["content"] = map[string]any{"title": "Other", "body": "another request"}
	for _, c := range []struct {
		body   any
		status int
		code   string
		field  string
	}{
		{map[string]any{"notifications": []any{pushRequest(), bad}}, 400, notify.EINVALID, "notifications[1].recipients[0].emial"},
		{map[string]any{"notifications": []any{}}, 400, notify.EINVALID, "notifications"},
		{map[string]any{"notifications": tooMany}, 400, notify.EINVALID, "notifications"},
		{map[string]any{"notifications": []any{pushRequest()}, "extra": 1}, 400, notify.EINVALID, "extra"},
		{map[string]any{"notifications": []any{keyed("k", pushRequest()), other}}, 409, notify.EKEYREUSED, "notifications[1].idempotency_key"},
	} {
		wantError(t, e.do(t, "POST", "/v1/notifications/batch", ordersKey, c.body), c.status, c.code, c.field)
		if ms := e.receiveAll(t, notify.IngestQueue("orders")); len(ms) != 0 {
			t.Fatalf("%s: %d messages queued, want none", c.field, len(ms))
		}
	}
}

// A request repeated in a batch, or already stored, is not queued again.
func TestBatchRepeatsAreNotQueued(t *testing.T) {
	t.Parallel()
	e := setup(t)
	stored := keyed("stored-1", pushRequest())
	raw, _ := json.Marshal(stored)
	var req notify.SendRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	n := req.Notification(notify.NotificationIDFor("orders", "stored-1", now), "orders", now)
	n.Fingerprint = notify.RequestFingerprint(&req)
	n.Status = notify.StatusSent
	if _, _, err := e.store.CreateNotification(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	rec := e.do(t, "POST", "/v1/notifications/batch", ordersKey, map[string]any{"notifications": []any{
		stored, keyed("new-1", pushRequest()), keyed("new-1", pushRequest()),
	}})
	wantStatus(t, rec, 202)
	got := decodeBody[batchResponse](t, rec)
	if got.Notifications[0].Status != notify.StatusSent || got.Notifications[1].ID != got.Notifications[2].ID {
		t.Fatalf("answer %+v", got)
	}
	ms := e.receiveAll(t, notify.IngestQueue("orders"))
	var b notify.SendBatch
	if len(ms) != 1 || json.Unmarshal(ms[0].Body, &b) != nil || len(b.Notifications) != 1 {
		t.Fatalf("queued %d messages (%v), want one carrying new-1 once", len(ms), b.Attributes)
	}
}

// Every ingest message says which lane its notification takes (a batch: bulk only when all
// its requests do), so a runtime can schedule it before reading it.
func TestIngestMessageSaysItsLane(t *testing.T) {
	t.Parallel()
	e := setup(t)
	marketing := func() map[string]any {
		r := pushRequest()
		r["category"] = "marketing"
		return r
	}
	lane := func() string {
		t.Helper()
		ms := e.receiveAll(t, notify.IngestQueue("orders"))
		if len(ms) != 1 {
			t.Fatalf("%d ingest messages, want 1", len(ms))
		}
		// The lane is the message's: a batch's requests do not carry it each.
		var b notify.SendBatch
		if json.Unmarshal(ms[0].Body, &b) == nil {
			for i, a := range b.Attributes {
				if _, ok := a[notify.AttrLane]; ok {
					t.Errorf("request %d of the batch carries %s", i, notify.AttrLane)
				}
			}
		}
		return ms[0].Attributes[notify.AttrLane]
	}
	wantStatus(t, e.do(t, "POST", "/v1/notifications", ordersKey, pushRequest()), 202)
	if got := lane(); got != "realtime" {
		t.Errorf("transactional send: lane %q, want realtime", got)
	}
	wantStatus(t, e.do(t, "POST", "/v1/notifications", ordersKey, marketing()), 202)
	if got := lane(); got != "bulk" {
		t.Errorf("marketing send: lane %q, want bulk", got)
	}
	wantStatus(t, e.do(t, "POST", "/v1/notifications/batch", ordersKey, map[string]any{"notifications": []any{marketing(), marketing()}}), 202)
	if got := lane(); got != "bulk" {
		t.Errorf("batch of marketing sends: lane %q, want bulk", got)
	}
	wantStatus(t, e.do(t, "POST", "/v1/notifications/batch", ordersKey, map[string]any{"notifications": []any{marketing(), pushRequest()}}), 202)
	if got := lane(); got != "realtime" {
		t.Errorf("mixed batch: lane %q, want realtime", got)
	}
}
