package pipeline

import (
	"context"
	"fmt"

	"herald/internal/notify"
)

// Record returns the handler of the record queues: when a notification's every chunk is prepared
// and every delivery is in an end state, set its final status and emit one summary event.
// Counters themselves move atomically with delivery transitions in the store, so record is
// idempotent and may run any number of times.
func (p *Pipeline) Record() Handler {
	return func(ctx context.Context, msgs []notify.Message) []ItemFailure {
		// Several batches of one notification often finish together: look once per notification.
		seen := map[string]bool{}
		var out []ItemFailure
		for _, m := range msgs {
			var rm recordMsg
			if err := decode(m.Body, &rm); err != nil {
				out = append(out, ItemFailure{MessageID: m.ID, Err: err})
				continue
			}
			if seen[rm.NotificationID] {
				continue
			}
			seen[rm.NotificationID] = true
			if err := p.recordOne(ctx, rm.NotificationID); err != nil {
				out = append(out, ItemFailure{MessageID: m.ID, Err: err})
			}
		}
		return out
	}
}

func (p *Pipeline) recordOne(ctx context.Context, id string) error {
	n, err := p.store.GetNotification(ctx, id)
	if notify.IsCode(err, notify.ENOTFOUND) {
		return notify.Wrap(notify.EINVALID, err, "record: unknown notification %s", id)
	}
	if err != nil {
		return fmt.Errorf("record %s: %w", id, err)
	}
	if n.Status.Final() || !n.Stats.Complete() {
		return nil
	}
	final := n.Stats.FinalStatus()
	err = p.store.SetNotificationStatus(ctx, id, final, notify.StatusProcessing, notify.StatusAccepted)
	if notify.IsCode(err, notify.ECONFLICT) {
		return nil // another record run got there first
	}
	if err != nil {
		return fmt.Errorf("record %s: %w", id, err)
	}
	t := n.Stats.Sum()
	attrs := []any{"notification_id", id, "service", n.Service, "status", final,
		"total", t.Total, "sent", t.Sent, "failed", t.Failed, "skipped", t.Skipped,
		"duration_ms", p.clock.Now().Sub(n.CreatedAt).Milliseconds()}
	for ch, c := range n.Stats.Channels {
		attrs = append(attrs, string(ch), c)
	}
	p.log.InfoContext(ctx, "notification finished", attrs...)
	return nil
}
