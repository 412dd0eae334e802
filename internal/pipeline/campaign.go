package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"herald/internal/notify"
)

// What the campaign steps (internal/campaign) need of the pipeline: a campaign appends its
// audience to its notification in whole prepare chunks and hands the new chunks to prepare as
// ordinary prepare messages, so prepare, send and record treat a campaign page exactly like a
// chunk of any other notification.

// ChunkSize is how many recipients one prepare message covers.
func (p *Pipeline) ChunkSize() int { return p.cfg.ChunkSize }

// EnqueuePrepare enqueues one prepare message for each chunk in [from, to) of notification n on
// n's lane, the k-th of them delayed by delay(k) (nil: none). Prepare is idempotent per chunk,
// so enqueuing a chunk twice (a step retried after a crash) sends nothing twice.
func (p *Pipeline) EnqueuePrepare(ctx context.Context, n *notify.Notification, from, to int, delay func(k int) time.Duration) error {
	for c := from; c < to; {
		// One Send per run of equal delays keeps the per-message delay without a call per chunk.
		d := time.Duration(0)
		if delay != nil {
			d = delay(c - from)
		}
		var bodies []any
		for ; c < to && (delay == nil || delay(c-from) == d); c++ {
			bodies = append(bodies, prepareMsg{NotificationID: n.ID, Chunk: c})
		}
		if err := p.send(ctx, notify.LaneQueue(notify.StagePrepare, lane(n)), n.Service, d, bodies...); err != nil {
			return fmt.Errorf("enqueue prepare %s: %w", n.ID, err)
		}
	}
	return nil
}

// PrepareBodies returns the prepare message bodies of chunks [from, to) of n, for a sender that
// is not the pipeline (the campaign state machine's Map puts them on prepare-bulk itself): one
// message for up to maxChunksPerMessage consecutive chunks, so a page is one Map iteration —
// Step Functions bills every state transition.
func (p *Pipeline) PrepareBodies(n *notify.Notification, from, to int) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, max(0, (to-from+maxChunksPerMessage-1)/maxChunksPerMessage))
	for c := from; c < to; c += maxChunksPerMessage {
		m := prepareMsg{NotificationID: n.ID, Chunk: c}
		if k := min(maxChunksPerMessage, to-c); k > 1 {
			m.Count = k
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("encode prepare message: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
}

// EnqueueRecord asks record to look at n (after a campaign's Finish, when no delivery may be
// left to trigger it).
func (p *Pipeline) EnqueueRecord(ctx context.Context, n *notify.Notification) error {
	return p.send(ctx, notify.LaneQueue(notify.StageRecord, lane(n)), n.Service, 0, recordMsg{NotificationID: n.ID})
}
