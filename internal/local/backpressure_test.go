package local

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"herald/internal/notify"
)

type countingProducer struct{ sent atomic.Int64 }

func (p *countingProducer) Send(_ context.Context, _ string, msgs ...notify.OutMessage) error {
	p.sent.Add(int64(len(msgs)))
	return nil
}

func TestBackpressureHoldsIngestWhileItsQueueIsBehind(t *testing.T) {
	t.Parallel()
	var depth atomic.Int64
	depth.Store(10)
	p := &countingProducer{}
	b := newBackpressure(p, func(context.Context, string) (int, error) { return int(depth.Load()), nil }, 5)
	b.ttl = 0
	ctx := context.Background()

	// Another stage's queue is never held.
	if err := b.Send(ctx, "prepare-realtime", notify.OutMessage{}); err != nil || p.sent.Load() != 1 {
		t.Fatalf("prepare: %v, sent %d", err, p.sent.Load())
	}
	// An ingest queue over the limit holds the request until it drains.
	done := make(chan error, 1)
	go func() { done <- b.Send(ctx, notify.IngestQueue("shop"), notify.OutMessage{}) }()
	select {
	case err := <-done:
		t.Fatalf("sent while the queue was behind: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	depth.Store(3)
	if err := <-done; err != nil || p.sent.Load() != 2 {
		t.Fatalf("after the queue drained: %v, sent %d", err, p.sent.Load())
	}
	// Never refused: after maxWait it is queued anyway.
	depth.Store(100)
	b.maxWait = 20 * time.Millisecond
	if err := b.Send(ctx, notify.IngestQueue("shop"), notify.OutMessage{}); err != nil || p.sent.Load() != 3 {
		t.Fatalf("past maxWait: %v, sent %d", err, p.sent.Load())
	}
	// A depth that cannot be read holds nothing.
	b.depth = func(context.Context, string) (int, error) { return 0, errors.New("locked") }
	b.maxWait = time.Hour
	if err := b.Send(ctx, notify.IngestQueue("shop"), notify.OutMessage{}); err != nil || p.sent.Load() != 4 {
		t.Fatalf("unreadable depth: %v, sent %d", err, p.sent.Load())
	}
}
