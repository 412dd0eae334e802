package pipeline

import (
	"context"
	"fmt"
	"time"

	"herald/internal/notify"
)

// checkFire refuses a fire message that no Herald schedule wrote: every schedule names the
// send_at it was armed for, and without it the fire could not be told from a stale one.
func checkFire(f notify.FireMessage) error {
	if f.At == nil {
		return notify.FieldError("at", "fire message for %s names no send_at it was armed for; Herald's schedules always do, so it is refused", f.Fire)
	}
	return nil
}

// fire handles a schedule's fire on service's ingest queue. It must carry the send_at it was
// armed for and name a notification of service — anything else is refused (dead-lettered with
// its reason), so no producer can fire another service's reserved send, or fire one early. A
// fire armed for a send_at the notification no longer has (a PATCH re-armed it) is stale and
// ignored; one armed for the stored send_at sends, even before or long after it (an operator
// moved the schedule in the console), and the stored send_at follows. Only a notification still
// SCHEDULED is sent, so a fire after a cancel, or a second fire, does nothing.
//
// A stale fire re-arms the schedule for the stored send_at (scheduler may be nil: nothing to
// re-arm). Usually the PATCH that made it stale armed that already, and re-arming is the same
// schedule again; but a PATCH that lands between ingest storing a reserved send and arming it
// is overwritten by ingest's arm for the old time — whose fire is this one, and without the
// re-arm the send would wait for `herald schedules rearm`.
func (p *Pipeline) fire(ctx context.Context, service string, scheduler notify.Scheduler, f notify.FireMessage) error {
	if err := checkFire(f); err != nil {
		return err
	}
	id := f.Fire
	n, err := p.store.GetNotification(ctx, id)
	if notify.IsCode(err, notify.ENOTFOUND) {
		return notify.Wrap(notify.ENOTFOUND, err, "fire on the ingest queue of %s names %s, which is no notification or campaign", service, id)
	}
	if err != nil {
		return fmt.Errorf("fire %s: %w", id, err)
	}
	if n.Service != service {
		return notify.Errorf(notify.EFORBIDDEN, "fire for %s arrived on the ingest queue of %s, but it is another service's", id, service)
	}
	switch n.Status {
	case notify.StatusScheduled:
		v := notify.JudgeFire(*f.At, n.SendAt, p.clock.Now())
		if v.Stale {
			// The notification was rescheduled: the fire armed for its new time will come.
			p.log.InfoContext(ctx, "stale fire ignored", "notification_id", id, "armed_for", *f.At, "send_at", n.SendAt)
			if scheduler == nil || n.SendAt == nil {
				return nil
			}
			if err := scheduler.Schedule(ctx, id, notify.IngestQueue(service), *n.SendAt); err != nil {
				return fmt.Errorf("fire %s: re-arm for its send_at: %w", id, err)
			}
			return nil
		}
		if err := p.startScheduled(ctx, n, v.SendAt); notify.IsCode(err, notify.ECONFLICT) {
			// Canceled, or started by another delivery of this fire, meanwhile: look again.
			if n, err = p.store.GetNotification(ctx, id); err != nil {
				return fmt.Errorf("fire %s: %w", id, err)
			}
			if n.Status != notify.StatusAccepted {
				p.log.InfoContext(ctx, "fire ignored", "notification_id", id, "status", n.Status)
				return nil
			}
		} else if err != nil {
			return fmt.Errorf("fire %s: %w", id, err)
		}
		return p.fanOut(ctx, n)
	case notify.StatusAccepted:
		return p.fanOut(ctx, n) // a fire redelivered after a crash mid-fan-out
	default:
		p.log.InfoContext(ctx, "fire ignored", "notification_id", id, "status", n.Status)
		return nil
	}
}

// startScheduled moves n from SCHEDULED to ACCEPTED, with sendAt as its new send_at when the
// fire came off time (in the same write, so a redelivered fire still finds the send_at it was
// armed for until the notification has left SCHEDULED). ECONFLICT if it is no longer SCHEDULED.
func (p *Pipeline) startScheduled(ctx context.Context, n *notify.Notification, sendAt *time.Time) error {
	if sendAt != nil {
		rs, ok := p.store.(notify.Rescheduler)
		if ok {
			if err := rs.FireScheduled(ctx, n.ID, *sendAt); err != nil {
				return err
			}
			p.log.InfoContext(ctx, "fire came off its send_at; send_at follows", "notification_id", n.ID,
				"send_at_was", n.SendAt, "send_at", *sendAt)
			n.Status, n.SendAt = notify.StatusAccepted, sendAt
			return nil
		}
		// A store that cannot move send_at still sends; the stored time stays the old one.
	}
	if err := p.store.SetNotificationStatus(ctx, n.ID, notify.StatusAccepted, notify.StatusScheduled); err != nil {
		return err
	}
	n.Status = notify.StatusAccepted
	return nil
}
