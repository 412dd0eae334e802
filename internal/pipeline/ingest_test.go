package pipeline_test

import (
	"io"
	"log/slog"
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
	db, st := openStore(t)
	queue := notify.IngestQueue("orders")
	q, err := sqlite.NewQueue(db, []notify.QueueConfig{{Name: queue, MaxReceiveCount: 5, DLQ: notify.DLQName(queue)},
		{Name: notify.DLQName(queue)}}, notify.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := pipeline.New(pipeline.Deps{Store: st, Queue: discardQueue{}, Logger: log}, pipeline.Config{})
	ingest := p.Ingest("orders", nil)
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
	}
	if n, _ := st.GetNotification(ctx, id); n.RecipientCount != 1 {
		t.Fatalf("stored notification has %d recipients, want the first request's 1", n.RecipientCount)
	}
}
