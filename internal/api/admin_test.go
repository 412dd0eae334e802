package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
)

func TestDeadLettersListMaskedAndRedrive(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *Options) {
		o.Admin = o.Queue.(notify.Queue)
		o.Queues = []string{notify.IngestQueue("orders")}
		o.AdminServices = []string{"orders"}
	})
	ctx := context.Background()
	body := `{"channels":["sms","push"],"recipients":[{"phone":"+821012345678"},{"fcm_token":"fcm-secret-token-0001"},{"email":"kim@example.com"}],"content":{"body":"call +821099998888"}}`
	if err := e.queue.Send(ctx, notify.DLQName(notify.IngestQueue("orders")), notify.OutMessage{Body: []byte(body), Attributes: map[string]string{
		pipeline.AttrErrorCode: notify.EINVALID, pipeline.AttrErrorReason: "invalid channels[0]", pipeline.AttrSourceQueue: notify.IngestQueue("orders"),
		pipeline.AttrReceiveCount: "3",
	}}); err != nil {
		t.Fatal(err)
	}

	rec := e.do(t, "GET", "/v1/admin/queues", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	if !strings.Contains(rec.Body.String(), `"dead_letters":1`) {
		t.Fatalf("queues = %s, want one dead letter", rec.Body)
	}
	rec = e.do(t, "GET", "/v1/admin/queues/ingest-orders/dead-letters", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	got := rec.Body.String()
	for _, raw := range []string{"+821012345678", "fcm-secret-token-0001", "kim@example.com", "+821099998888"} {
		if strings.Contains(got, raw) {
			t.Errorf("dead letter listing shows raw %q: %s", raw, got)
		}
	}
	if !strings.Contains(got, `"code":"invalid"`) || !strings.Contains(got, "invalid channels[0]") {
		t.Fatalf("dead letter listing lacks its reason: %s", got)
	}
	if !strings.Contains(got, `"receive_count":3`) {
		t.Fatalf("dead letter listing does not show the receives it died with (3): %s", got)
	}

	wantError(t, e.do(t, "POST", "/v1/admin/queues/ingest-orders/redrive", billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	wantError(t, e.do(t, "POST", "/v1/admin/queues/nope/redrive", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "queue")
	rec = e.do(t, "POST", "/v1/admin/queues/ingest-orders/redrive", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	if !strings.Contains(rec.Body.String(), `"moved":1`) {
		t.Fatalf("redrive = %s", rec.Body)
	}
	msgs, err := e.queue.Peek(ctx, notify.IngestQueue("orders"), 10)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != body {
		t.Fatalf("after redrive the source queue holds %d messages (%v), want the original", len(msgs), err)
	}
}

// TestPurgeDeadLetters: a purge needs the queue's name typed again (400 naming confirm
// otherwise), an admin (403), removes every dead letter and says how many, and is audited.
func TestPurgeDeadLetters(t *testing.T) {
	t.Parallel()
	e := setup(t, withAudit)
	ctx := context.Background()
	dlq := notify.DLQName(notify.IngestQueue("orders"))
	for _, b := range []string{"a", "b", "c"} {
		if err := e.queue.Send(ctx, dlq, notify.OutMessage{Body: []byte(b)}); err != nil {
			t.Fatal(err)
		}
	}
	wantError(t, e.do(t, "DELETE", "/v1/admin/queues/ingest-orders/dead-letters", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "confirm")
	wantError(t, e.do(t, "DELETE", "/v1/admin/queues/ingest-orders/dead-letters?confirm=ingest-order", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "confirm")
	wantError(t, e.do(t, "DELETE", "/v1/admin/queues/ingest-orders/dead-letters?confirm=ingest-orders", billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	rec := e.do(t, "DELETE", "/v1/admin/queues/ingest-orders/dead-letters?confirm=ingest-orders", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "DELETE", "/v1/admin/queues/{queue}/dead-letters", rec)
	if !strings.Contains(rec.Body.String(), `"purged":3`) {
		t.Fatalf("purge = %s", rec.Body)
	}
	if left, _ := e.queue.Peek(ctx, dlq, 10); len(left) != 0 {
		t.Fatalf("the DLQ still holds %d", len(left))
	}
	got := auditEntries(t, e, "?action=dead_letter.purge")
	ok := 0
	for _, en := range got.Entries {
		if en.Result == notify.AuditResultOK && en.Params["purged"] == "3" && en.Actor == "orders" {
			ok++
		}
	}
	if len(got.Entries) != 4 || ok != 1 {
		t.Fatalf("audit %+v, want the purge (and the three refused tries)", got.Entries)
	}
}

func TestMaskPayload(t *testing.T) {
	t.Parallel()
	got := string(MaskPayload([]byte(`{"items":[{"id":"d1","address":"abcdefghijklmnopqrstuvwxyz"}],"Message":"{\"mail\":{\"destination\":[\"lee@example.com\"]}}"}`)))
	for _, raw := range []string{"abcdefghijklmnopqrstuvwxyz", "lee@example.com"} {
		if strings.Contains(got, raw) {
			t.Fatalf("masked payload still holds %q: %s", raw, got)
		}
	}
	if !strings.Contains(string(MaskPayload([]byte("not json, mail bob@example.com"))), "b***@example.com") {
		t.Fatal("non-JSON bodies are masked as text")
	}
}

// A send message for a web push subscription holds its token (endpoint and keys) as an address:
// the dead letter shows the endpoint's origin and nothing of its keys, even with an "@" in it.
func TestMaskPayloadWebPush(t *testing.T) {
	t.Parallel()
	sub := notify.WebPushSubscription{Endpoint: "https://push.example.net/s/user@host-secretpart",
		Keys: notify.WebPushKeys{P256dh: testVAPIDKey, Auth: "AAECAwQFBgcICQoLDA0ODw"}}
	body, _ := json.Marshal(map[string]any{"items": []map[string]any{{"address": sub.Token()}}})
	got := string(MaskPayload(body))
	for _, raw := range []string{"secretpart", sub.Keys.Auth, sub.Keys.P256dh} {
		if strings.Contains(got, raw) {
			t.Fatalf("masked payload still holds %q: %s", raw, got)
		}
	}
	if !strings.Contains(got, "https://push.example.net/") {
		t.Fatalf("the push service is not shown: %s", got)
	}
}

// fakeConsumers records pauses.
type fakeConsumers struct{ paused map[string]bool }

func (f *fakeConsumers) SetPaused(_ context.Context, q string, p bool) error {
	f.paused[q] = p
	return nil
}
func (f *fakeConsumers) Paused(_ context.Context, q string) (bool, error) { return f.paused[q], nil }

// TestPauseAndResumeQueue: an admin pauses and resumes a queue's consumers, the queue listing
// says which are paused, both are audited; without Consumers the routes answer 501.
func TestPauseAndResumeQueue(t *testing.T) {
	t.Parallel()
	fc := &fakeConsumers{paused: map[string]bool{}}
	e := setup(t, withAudit, func(o *Options) { o.Consumers = fc })
	wantError(t, e.do(t, "POST", "/v1/admin/queues/ingest-orders/pause", billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	wantError(t, e.do(t, "POST", "/v1/admin/queues/nope/pause", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "queue")
	rec := e.do(t, "POST", "/v1/admin/queues/ingest-orders/pause", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "POST", "/v1/admin/queues/{queue}/pause", rec)
	if !fc.paused["ingest-orders"] {
		t.Fatal("not paused")
	}
	rec = e.do(t, "GET", "/v1/admin/queues", ordersKey, nil)
	if !strings.Contains(rec.Body.String(), `"paused":true`) {
		t.Fatalf("queues = %s, want ingest-orders paused", rec.Body)
	}
	wantStatus(t, e.do(t, "POST", "/v1/admin/queues/ingest-orders/resume", ordersKey, nil), http.StatusOK)
	if fc.paused["ingest-orders"] {
		t.Fatal("not resumed")
	}
	for _, a := range []string{"queue.pause", "queue.resume"} {
		if got := auditEntries(t, e, "?action="+a); len(got.Entries) == 0 {
			t.Fatalf("%s not audited", a)
		}
	}
	bare := setup(t, withAudit)
	rec = bare.do(t, "POST", "/v1/admin/queues/ingest-orders/pause", ordersKey, nil)
	wantStatus(t, rec, http.StatusNotImplemented)
}

// TestListQueueMessages: a queue's visible and delayed messages page oldest first with their
// payloads masked; an unknown state is a 400 naming it.
func TestListQueueMessages(t *testing.T) {
	t.Parallel()
	e := setup(t, withAudit)
	ctx := context.Background()
	q := notify.IngestQueue("orders")
	for i := range 3 {
		if err := e.queue.Send(ctx, q, notify.OutMessage{Body: fmt.Appendf(nil, `{"recipients":[{"email":"m%d@example.com"}]}`, i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.queue.Send(ctx, q, notify.OutMessage{Body: []byte(`{"later": true}`), Delay: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	rec := e.do(t, "GET", "/v1/admin/queues/ingest-orders/messages?limit=2", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "GET", "/v1/admin/queues/{queue}/messages", rec)
	var page struct {
		Messages []struct {
			ID      string          `json:"id"`
			Payload json.RawMessage `json:"payload"`
		} `json:"messages"`
		Next string `json:"next_cursor"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &page)
	if len(page.Messages) != 2 || page.Next == "" || strings.Contains(rec.Body.String(), "m0@example.com") {
		t.Fatalf("first page %s: want 2 masked, and a cursor", rec.Body)
	}
	rec = e.do(t, "GET", "/v1/admin/queues/ingest-orders/messages?limit=2&cursor="+page.Next, ordersKey, nil)
	_ = json.Unmarshal(rec.Body.Bytes(), &page)
	if len(page.Messages) != 1 || page.Next != "" {
		t.Fatalf("second page %s: want the last visible one", rec.Body)
	}
	rec = e.do(t, "GET", "/v1/admin/queues/ingest-orders/messages?state=delayed", ordersKey, nil)
	if !strings.Contains(rec.Body.String(), `later`) {
		t.Fatalf("delayed = %s", rec.Body)
	}
	wantError(t, e.do(t, "GET", "/v1/admin/queues/ingest-orders/messages?state=asleep", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "state")
}
