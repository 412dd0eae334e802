package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/sqlite"
)

type sink struct {
	mu   sync.Mutex
	evs  []notify.Event
	fail bool
}

func (s *sink) Emit(_ context.Context, e notify.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, e)
	if s.fail {
		return errors.New("bus unavailable")
	}
	return nil
}

type discardQueue struct{}

func (discardQueue) Send(context.Context, string, ...notify.OutMessage) error { return nil }

func sendRequest(t *testing.T, key string, n int) []byte {
	t.Helper()
	req := notify.SendRequest{IdempotencyKey: key, Channels: []notify.Channel{notify.ChannelPush},
		Content: notify.Content{Title: "Hi", Body: "everyone"}}
	for i := range n {
		req.Recipients = append(req.Recipients, notify.Recipient{UserID: fmt.Sprintf("u%05d", i)})
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIngestEmitsLargeSendStarted: a notification accepted with 1,000 recipients or more emits
// large_send_started once — not again when its message is redelivered — and a smaller one
// none; a sink that refuses does not fail the message.
func TestIngestEmitsLargeSendStarted(t *testing.T) {
	t.Parallel()
	_, st := openStore(t)
	ev := &sink{}
	p := pipeline.New(pipeline.Deps{Store: st, Queue: discardQueue{}, Events: ev,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, pipeline.Config{})
	ingest := p.Ingest("orders", nil)
	ctx := t.Context()

	big := notify.Message{ID: "m-big", Body: sendRequest(t, "big", notify.LargeSend)}
	for range 2 { // the second is a redelivery
		if f := ingest(ctx, []notify.Message{big}); len(f) != 0 {
			t.Fatalf("ingest failed: %v", f[0].Err)
		}
	}
	if f := ingest(ctx, []notify.Message{{ID: "m-small", Body: sendRequest(t, "small", notify.LargeSend-1)}}); len(f) != 0 {
		t.Fatalf("ingest failed: %v", f[0].Err)
	}
	if len(ev.evs) != 1 {
		t.Fatalf("events %+v, want one large_send_started", ev.evs)
	}
	e := ev.evs[0]
	if e.Type != notify.EventLargeSendStarted || e.Service != "orders" || e.NotificationID == "" || e.CampaignID != "" ||
		e.Recipients != notify.LargeSend || e.Detail["chunks"] != 2 || e.Time.IsZero() {
		t.Fatalf("event %+v, want large_send_started for orders with 1000 recipients in 2 chunks", e)
	}
	n, err := st.GetNotification(ctx, e.NotificationID)
	if err != nil || n.Status != notify.StatusProcessing {
		t.Fatalf("notification %s: %v %v, want PROCESSING", e.NotificationID, n, err)
	}

	ev.fail = true
	if f := ingest(ctx, []notify.Message{{ID: "m-big2", Body: sendRequest(t, "big2", 1500)}}); len(f) != 0 {
		t.Fatalf("ingest with a refusing sink failed: %v", f[0].Err)
	}
	if len(ev.evs) != 2 || ev.evs[1].Recipients != 1500 {
		t.Fatalf("events %+v, want a second large_send_started for 1500", ev.evs)
	}
}

// TestDeadLetterEmitsAnEvent: a message settled as dead-lettered is announced as
// message_dead_lettered, with its queue, id, code, reason and masked payload; a failed Emit
// changes nothing about the settle — the message is still in the DLQ and gone from its queue.
func TestDeadLetterEmitsAnEvent(t *testing.T) {
	t.Parallel()
	for _, fail := range []bool{false, true} {
		db, _ := openStore(t)
		const queue = "send-realtime"
		q, err := sqlite.NewQueue(db, []notify.QueueConfig{{Name: queue, MaxReceiveCount: 5, DLQ: notify.DLQName(queue)}}, notify.SystemClock{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(q.Close)
		ctx := context.Background()
		body := `{"notification_id":"n-1","address":"alice.secret@example.com"`
		if err := q.Send(ctx, queue, notify.OutMessage{Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
		msgs, err := q.Receive(ctx, queue, 1, time.Minute, 0)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("receive: %v %v", msgs, err)
		}
		s := &sink{fail: fail}
		cause := notify.Errorf(notify.EINVALID, "send: bad body for alice.secret@example.com")
		if a := pipeline.SettleFailed(ctx, q, queue, notify.DLQName(queue), msgs[0], cause, time.Second, time.Minute,
			slog.New(slog.DiscardHandler), s); a != pipeline.DeadLetter {
			t.Fatalf("fail=%v: action %v, want DeadLetter", fail, a)
		}
		if len(s.evs) != 1 {
			t.Fatalf("fail=%v: %d events, want 1", fail, len(s.evs))
		}
		e := s.evs[0]
		if e.Type != notify.EventMessageDeadLettered || e.NotificationID != "" || e.Detail["queue"] != queue ||
			e.Detail["message_id"] != msgs[0].ID || e.Detail["code"] != notify.EINVALID {
			t.Fatalf("event = %+v", e)
		}
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), "alice.secret") || !strings.Contains(string(b), "a***@example.com") {
			t.Fatalf("event not masked: %s", b)
		}
		if st, _ := q.Stats(ctx, notify.DLQName(queue)); st.Visible != 1 {
			t.Fatalf("fail=%v: DLQ %+v, want the message", fail, st)
		}
		if st, _ := q.Stats(ctx, queue); st.Visible+st.InFlight != 0 {
			t.Fatalf("fail=%v: queue %+v, want it gone", fail, st)
		}
	}
}
