package local

import (
	"context"
	"sync"
	"time"

	"herald/internal/notify"
)

// backpressure is the API's producer in the local runtime: a request for a service whose ingest
// queue is already far behind waits a little before it is queued. In AWS every stage scales out
// on its own; here the API, the stages, the sandbox and the callers share the machine's cores,
// and an API free to accept faster than the stages finish would build a backlog of minutes
// while reporting every request accepted. Waiting — never refusing, never dropping — keeps the
// accept rate at what the runtime completes, and shows overload as the API's latency.
type backpressure struct {
	notify.Producer
	depth   func(ctx context.Context, queue string) (int, error)
	limit   int           // messages an ingest queue may hold before a request waits
	maxWait time.Duration // after this a request is queued anyway
	ttl     time.Duration // how long a read depth is trusted

	mu   sync.Mutex
	seen map[string]depthAt
}

type depthAt struct {
	n  int
	at time.Time
}

func newBackpressure(p notify.Producer, depth func(context.Context, string) (int, error), limit int) *backpressure {
	return &backpressure{Producer: p, depth: depth, limit: limit, maxWait: 2 * time.Second, ttl: 20 * time.Millisecond,
		seen: map[string]depthAt{}}
}

func (b *backpressure) Send(ctx context.Context, queue string, msgs ...notify.OutMessage) error {
	if b.limit > 0 && notify.IsIngestQueue(queue) {
		deadline := time.Now().Add(b.maxWait)
		for b.behind(ctx, queue) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
		}
	}
	return b.Producer.Send(ctx, queue, msgs...)
}

// behind reports whether queue holds more than the limit, from a depth at most ttl old.
func (b *backpressure) behind(ctx context.Context, queue string) bool {
	now := time.Now()
	b.mu.Lock()
	d, ok := b.seen[queue]
	b.mu.Unlock()
	if !ok || now.Sub(d.at) > b.ttl {
		n, err := b.depth(ctx, queue)
		if err != nil {
			return false // a failed look never holds a request
		}
		d = depthAt{n: n, at: now}
		b.mu.Lock()
		b.seen[queue] = d
		b.mu.Unlock()
	}
	return d.n > b.limit
}

// defaultIngestBacklog is well under a second of what the local runtime completes: enough that
// the ingest workers never run dry, little enough that a send waits for no backlog.
const defaultIngestBacklog = 1000
