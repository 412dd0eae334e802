package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	"herald/internal/notify"
	"herald/internal/pipeline"
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
