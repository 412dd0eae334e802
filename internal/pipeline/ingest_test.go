package pipeline_test

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/sqlite"
)

// A second request under an idempotency key already used by another request — sent straight to
// the ingest queue, or racing the first through it from the API — is dead-lettered with
// idempotency_key_reused, not dropped in silence; a redelivery of the same request is a no-op.
func TestIngestDeadLettersReusedKey(t *testing.T) {
	t.Parallel()
	st, q, queue, log, ingest := newIngestHarness(t)
	ctx := t.Context()

	first := sendRequest(t, "order-7", 1)
	if f := ingest(ctx, []notify.Message{{ID: "m1", Body: first}}); len(f) != 0 {
		t.Fatalf("first: %v", f[0].Err)
	}
	if f := ingest(ctx, []notify.Message{{ID: "m1", Body: first}}); len(f) != 0 {
		t.Fatalf("a redelivery of the same request failed: %v", f[0].Err)
	}
	id := notify.NotificationIDFor("orders", "order-7", time.Now())
	n, err := st.GetNotification(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if n.Fingerprint == "" {
		t.Fatal("ingest stored no request fingerprint")
	}

	for _, m := range []notify.Message{
		{ID: "m2", Body: sendRequest(t, "order-7", 2)}, // straight to the queue: ingest computes the fingerprint
		{ID: "m3", Body: sendRequest(t, "order-7", 2), Attributes: map[string]string{ // from the API, which computed it
			notify.AttrNotificationID: id, notify.AttrFingerprint: "fingerprint-of-another-request"}},
	} {
		if err := q.Send(ctx, queue, notify.OutMessage{Body: m.Body, Attributes: m.Attributes}); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := q.Receive(ctx, queue, 10, time.Minute, 0)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("receive: %d, %v", len(msgs), err)
	}
	fails := ingest(ctx, msgs)
	if len(fails) != 2 {
		t.Fatalf("failures = %+v, want both messages", fails)
	}
	for i, f := range fails {
		if !notify.IsCode(f.Err, notify.EKEYREUSED) {
			t.Fatalf("failure %v, want %s", f.Err, notify.EKEYREUSED)
		}
		if a := pipeline.SettleFailed(ctx, q, queue, notify.DLQName(queue), msgs[i], f.Err, time.Second, time.Minute, log, nil); a != pipeline.DeadLetter {
			t.Fatalf("action %v, want DeadLetter", a)
		}
	}
	dead, err := q.Receive(ctx, notify.DLQName(queue), 10, time.Minute, 0)
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead letters: %d, %v; want 2", len(dead), err)
	}
	for _, d := range dead {
		if d.Attributes[pipeline.AttrErrorCode] != notify.EKEYREUSED {
			t.Fatalf("dead letter code %q, want %s", d.Attributes[pipeline.AttrErrorCode], notify.EKEYREUSED)
		}
		if d.Attributes[pipeline.AttrReceiveCount] != "1" {
			t.Fatalf("dead letter receive count %q, want the 1 it died with", d.Attributes[pipeline.AttrReceiveCount])
		}
	}
	if n, _ := st.GetNotification(ctx, id); n.RecipientCount != 1 {
		t.Fatalf("stored notification has %d recipients, want the first request's 1", n.RecipientCount)
	}
}

// A producer writing straight to the ingest queue may name a template: ingest renders it, stores
// the rendered content with the template's name and version, and dead-letters a request whose
// data lacks a variable, with the reason naming it.
func TestIngestRendersTemplates(t *testing.T) {
	t.Parallel()
	st, q, queue, log, ingest := newIngestHarness(t)
	ctx := t.Context()
	if _, err := st.PutTemplateVersion(ctx, &notify.Template{Service: "orders", Name: "shipped", TemplateSpec: notify.TemplateSpec{
		Channels:  map[notify.Channel]notify.Content{notify.ChannelInbox: {Title: "Order {{order_id}}", Body: "Order {{order_id}} shipped"}},
		Variables: []notify.TemplateVariable{{Name: "order_id"}},
	}}); err != nil {
		t.Fatal(err)
	}

	ok := `{"idempotency_key": "tpl-1", "channels": ["inbox"], "recipients": [{"user_id": "u1"}],
		"template": {"name": "shipped", "data": {"order_id": "A-17"}}}`
	if f := ingest(ctx, []notify.Message{{ID: "m1", Body: []byte(ok)}}); len(f) != 0 {
		t.Fatalf("ingest: %v", f[0].Err)
	}
	n, err := st.GetNotification(ctx, notify.NotificationIDFor("orders", "tpl-1", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if n.TemplateName != "shipped" || n.TemplateVersion != 1 || n.ContentFor(notify.ChannelInbox, "").Body != "Order A-17 shipped" {
		t.Fatalf("stored: template %q v%d content %+v", n.TemplateName, n.TemplateVersion, n.ContentFor(notify.ChannelInbox, ""))
	}

	for _, body := range []string{
		`{"channels": ["inbox"], "recipients": [{"user_id": "u1"}], "template": {"name": "shipped", "data": {}}}`,
		`{"channels": ["inbox"], "recipients": [{"user_id": "u1"}], "template": {"name": "shipped", "version": 2, "data": {"order_id": "1"}}}`,
	} {
		if err := q.Send(ctx, queue, notify.OutMessage{Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := q.Receive(ctx, queue, 10, time.Minute, 0)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("receive: %d, %v", len(msgs), err)
	}
	fails := ingest(ctx, msgs)
	if len(fails) != 2 {
		t.Fatalf("failures = %+v, want both messages", fails)
	}
	for i, f := range fails {
		if a := pipeline.SettleFailed(ctx, q, queue, notify.DLQName(queue), msgs[i], f.Err, time.Second, time.Minute, log, nil); a != pipeline.DeadLetter {
			t.Fatalf("action %v, want DeadLetter", a)
		}
	}
	dead, err := q.Receive(ctx, notify.DLQName(queue), 10, time.Minute, 0)
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead letters: %d, %v; want 2", len(dead), err)
	}
	var reasons []string
	for _, d := range dead {
		reasons = append(reasons, d.Attributes[pipeline.AttrErrorReason])
	}
	slices.Sort(reasons)
	if !strings.Contains(reasons[0], "template.data.order_id") || !strings.Contains(reasons[1], "template.version") {
		t.Fatalf("dead letter reasons %q, want template.data.order_id and template.version", reasons)
	}
}

// newIngestHarness is a store, the ingest queue of service "orders" (queue) with its DLQ, and
// the ingest handler of a pipeline on that store, logging to log.
func newIngestHarness(t *testing.T) (st *sqlite.Store, q *sqlite.Queue, queue string, log *slog.Logger, ingest pipeline.Handler) {
	t.Helper()
	db, st := openStore(t)
	queue = notify.IngestQueue("orders")
	q, err := sqlite.NewQueue(db, []notify.QueueConfig{{Name: queue, MaxReceiveCount: 5, DLQ: notify.DLQName(queue)},
		{Name: notify.DLQName(queue)}}, notify.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	log = slog.New(slog.NewTextHandler(io.Discard, nil))
	p := pipeline.New(pipeline.Deps{Store: st, Queue: discardQueue{}, Logger: log}, pipeline.Config{})
	return st, q, queue, log, p.Ingest("orders", nil)
}
