package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"herald/internal/notify"
	"herald/internal/pipeline"
)

func batchMessage(t *testing.T, id string, reqs ...map[string]any) notify.Message {
	t.Helper()
	body, err := json.Marshal(map[string]any{"notifications": reqs})
	if err != nil {
		t.Fatal(err)
	}
	return notify.Message{ID: id, Body: body}
}

func pushTo(user, key string, channels ...string) map[string]any {
	r := map[string]any{"category": "transactional", "channels": channels,
		"recipients": []map[string]any{{"user_id": user}}, "content": map[string]any{"title": "Your code", "body": "123456"}}
	if key != "" {
		r["idempotency_key"] = key
	}
	return r
}

// A producer's message of several requests: each is a notification of its own, sent on the
// express path; the message again sends nothing.
func TestSendBatchEachRequestItsOwnNotification(t *testing.T) {
	t.Parallel()
	b := expressHarness(t, "tok-1")
	if err := b.st.PutDevice(t.Context(), notify.Device{UserID: "u2", Token: "tok-2", App: "default",
		Platform: notify.PlatformFCM, Environment: "production", UpdatedAt: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	h := b.p.Ingest("shop", nil)
	m := batchMessage(t, "mb", pushTo("u1", "k1", "push"), pushTo("u2", "", "push"), pushTo("u1", "k3", "push", "inbox"))
	if fails := b.ingest(t, h, m); len(fails) != 0 {
		t.Fatal(fails[0].Err)
	}
	if len(b.fcm.accepted["tok-1"]) != 2 || len(b.fcm.accepted["tok-2"]) != 1 {
		t.Fatalf("sent %v, want tok-1 twice and tok-2 once", b.fcm.accepted)
	}
	now := b.clock.Now()
	for _, id := range []string{notify.NotificationIDFor("shop", "k1", now), notify.NotificationIDFor("shop", "sqs-message:mb#1", now),
		notify.NotificationIDFor("shop", "k3", now)} {
		n, err := b.st.GetNotification(t.Context(), id)
		if err != nil || n.Status != notify.StatusSent {
			t.Fatalf("notification %s: %+v, %v; want SENT", id, n, err)
		}
	}
	items, _, err := b.st.ListInbox(t.Context(), "u1", "", 10, now)
	if err != nil || len(items) != 1 {
		t.Fatalf("u1's inbox %+v, %v; want the one item of k3", items, err)
	}
	// Redelivered (its visibility ran out after the sends): every request is deduped.
	if w := b.writes(t, func() {
		if fails := b.ingest(t, h, m); len(fails) != 0 {
			t.Fatal(fails[0].Err)
		}
	}); w != 0 {
		t.Errorf("the redelivered batch wrote %d rows", w)
	}
	if len(b.fcm.accepted["tok-1"]) != 2 || len(b.fcm.accepted["tok-2"]) != 1 {
		t.Fatalf("sent %v after the redelivery, want nothing more", b.fcm.accepted)
	}
}

// A batch with a bad request creates nothing, and its error names the request.
func TestSendBatchBadRequestCreatesNothing(t *testing.T) {
	t.Parallel()
	b := expressHarness(t, "tok-1")
	h := b.p.Ingest("shop", nil)
	bad := pushTo("u1", "k2", "push")
	bad["recipients"] = []map[string]any{{"emial": "a@example.com"}}
	tooMany := make([]map[string]any, notify.MaxSendBatch+1)
	for i := range tooMany {
		tooMany[i] = pushTo("u1", "", "push")
	}
	for _, c := range []struct {
		m     notify.Message
		field string
	}{
		{batchMessage(t, "m1", pushTo("u1", "k1", "push"), bad), `notifications[1]: ingest: body is not a SendRequest: json: unknown field "emial"`},
		{batchMessage(t, "m2"), "notifications"},
		{batchMessage(t, "m3", tooMany...), "notifications"},
		{notify.Message{ID: "m4", Body: []byte(`{"notifications":[{}],"attributes":[{},{}]}`)}, "attributes"},
	} {
		var fails []pipeline.ItemFailure
		written := b.writes(t, func() { fails = b.ingest(t, h, c.m) })
		if len(fails) != 1 || !notify.IsCode(fails[0].Err, notify.EINVALID) || !strings.Contains(fails[0].Err.Error(), c.field) {
			t.Fatalf("%s: failures %v, want one EINVALID naming %s", c.m.ID, fails, c.field)
		}
		if written != 0 || len(b.fcm.accepted["tok-1"]) != 0 {
			t.Fatalf("%s: %d rows written, sent %v; want nothing", c.m.ID, written, b.fcm.accepted)
		}
	}
	// A field the batch does not have is the batch's error, not a request's.
	fails := b.ingest(t, h, notify.Message{ID: "m5", Body: []byte(`{"notifications":[],"extra":1}`)})
	if len(fails) != 1 || !notify.IsCode(fails[0].Err, notify.EINVALID) || !strings.Contains(fails[0].Err.Error(), "SendBatch") {
		t.Fatalf("unknown batch field: %v", fails)
	}
}

// A request whose key names another request fails alone; the others are sent, and the
// dead-letter reason names it.
func TestSendBatchKeyReusedNamesTheRequest(t *testing.T) {
	t.Parallel()
	b := expressHarness(t, "tok-1")
	h := b.p.Ingest("shop", nil)
	if fails := b.ingest(t, h, singleSend(t, "k1", "push")); len(fails) != 0 {
		t.Fatal(fails[0].Err)
	}
	other := pushTo("u1", "k1", "push")
	other["content"] = map[string]any{"title": "Something else", "body": "entirely"}
	fails := b.ingest(t, h, batchMessage(t, "mb", pushTo("u1", "k2", "push"), other))
	if len(fails) != 1 || !notify.IsCode(fails[0].Err, notify.EKEYREUSED) || !strings.Contains(fails[0].Err.Error(), "notifications[1].idempotency_key") {
		t.Fatalf("failures %v, want EKEYREUSED naming notifications[1].idempotency_key", fails)
	}
	if len(b.fcm.accepted["tok-1"]) != 2 {
		t.Fatalf("sent %v, want k1 once and k2 once", b.fcm.accepted)
	}
}

// A message naming another service's notification id is refused and changes nothing there.
func TestIngestRefusesAnotherServicesID(t *testing.T) {
	t.Parallel()
	b := expressHarness(t, "tok-1")
	if fails := b.ingest(t, b.p.Ingest("shop", nil), singleSend(t, "k1", "push")); len(fails) != 0 {
		t.Fatal(fails[0].Err)
	}
	id := notify.NotificationIDFor("shop", "k1", b.clock.Now())
	m := singleSend(t, "k1", "push")
	m.ID, m.Attributes = "forged", map[string]string{notify.AttrNotificationID: id}
	fails := b.ingest(t, b.p.Ingest("billing", nil), m)
	if len(fails) != 1 || !notify.IsCode(fails[0].Err, notify.EFORBIDDEN) {
		t.Fatalf("failures %v, want one forbidden", fails)
	}
	if len(b.fcm.accepted["tok-1"]) != 1 {
		t.Fatalf("sent %v, want the one push of shop's notification", b.fcm.accepted)
	}
}

// countingBatches counts CompleteExpress and CompleteExpressBatch calls, and can fail the batch.
type countingBatches struct {
	notify.Store
	batches, singles int
	failBatch        bool
}

func (c *countingBatches) CompleteExpress(ctx context.Context, id string, u []notify.DeliveryUpdate) (int, error) {
	c.singles++
	return c.Store.CompleteExpress(ctx, id, u)
}

func (c *countingBatches) CompleteExpressBatch(ctx context.Context, batch string, done []notify.ExpressDone) error {
	c.batches++
	if c.failBatch {
		return errors.New("throttled")
	}
	return c.Store.CompleteExpressBatch(ctx, batch, done)
}

// The express notifications of one invocation record their verdicts together; when that fails
// they are recorded one by one, and nothing fails.
func TestExpressVerdictsRecordedPerInvocation(t *testing.T) {
	t.Parallel()
	for _, failBatch := range []bool{false, true} {
		b := expressHarness(t, "tok-1")
		st := &countingBatches{Store: b.st, failBatch: failBatch}
		p := pipeline.New(pipeline.Deps{Store: st, Queue: b.q, Senders: []notify.Sender{b.fcm}, Clock: b.clock,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, pipeline.Config{})
		msgs := []notify.Message{singleSend(t, "k1", "push"), singleSend(t, "k2", "push", "inbox"),
			batchMessage(t, "mb", pushTo("u1", "k3", "push"), pushTo("u1", "k4", "inbox"))}
		if fails := p.Ingest("shop", nil)(t.Context(), msgs); len(fails) != 0 {
			t.Fatal(fails[0].Err)
		}
		wantSingles := 0
		if failBatch {
			wantSingles = 4
		}
		if st.batches != 1 || st.singles != wantSingles {
			t.Fatalf("failBatch %v: %d batch writes, %d single; want 1 and %d", failBatch, st.batches, st.singles, wantSingles)
		}
		for _, k := range []string{"k1", "k2", "k3", "k4"} {
			n, err := b.st.GetNotification(t.Context(), notify.NotificationIDFor("shop", k, b.clock.Now()))
			if err != nil || n.Status != notify.StatusSent {
				t.Fatalf("failBatch %v: %s: %+v, %v; want SENT", failBatch, k, n, err)
			}
		}
	}
}
