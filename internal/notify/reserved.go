package notify

import (
	"context"
	"time"
)

// Reserved sends (a SCHEDULED notification or campaign) are armed as one-time schedules whose
// fire names the send_at they were armed for (FireMessage.At). EventBridge Scheduler keeps
// whole seconds (at(yyyy-mm-ddThh:mm:ss)), so a send_at is kept in whole seconds too
// (ReservedTime) from the moment it is accepted: the fire's At then equals the stored send_at
// exactly, and a comparison of the two can tell a superseded fire from a current one.

// ReservedTime is send_at as Herald keeps it: in UTC, rounded up to the whole second — up, so a
// reserved send never goes out before the time it was asked for.
func ReservedTime(t time.Time) time.Time {
	t = t.UTC()
	s := t.Truncate(time.Second)
	if s.Before(t) {
		s = s.Add(time.Second)
	}
	return s
}

// ReservedTimePtr is ReservedTime of *t, nil for nil.
func ReservedTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	r := ReservedTime(*t)
	return &r
}

// FireLateness is how long after send_at a fire still counts as on time: EventBridge Scheduler
// delivers within seconds, and a schedule armed for a send_at less than a minute away fires a
// minute from then (internal/scheduler's MinLead). A fire later than that, or any fire before
// send_at, comes from a schedule whose time an operator edited in the console.
const FireLateness = time.Minute

// FireVerdict is what a fire does to the reserved send it names.
type FireVerdict struct {
	// Stale: the fire was armed for a send_at the send no longer has (a PATCH re-armed it for
	// another time, and that fire will come); it must be ignored.
	Stale bool
	// SendAt, when not nil, is the send_at to store as the send goes out: the fire came before
	// send_at or more than FireLateness after it, so the stored time follows the fire.
	SendAt *time.Time
}

// JudgeFire decides what a fire armed for armedFor, arriving at now, does to a SCHEDULED send
// whose stored send_at is sendAt. The comparison is at ReservedTime's precision, so a send_at
// stored with a fraction of a second (before times were kept whole) still matches the fire
// armed for it.
func JudgeFire(armedFor time.Time, sendAt *time.Time, now time.Time) FireVerdict {
	if sendAt == nil {
		return FireVerdict{}
	}
	stored := ReservedTime(*sendAt)
	if !ReservedTime(armedFor).Equal(stored) {
		return FireVerdict{Stale: true}
	}
	if now.Before(stored) || now.Sub(stored) > FireLateness {
		at := now.UTC().Truncate(time.Second)
		return FireVerdict{SendAt: &at}
	}
	return FireVerdict{}
}

// Reserved is a send waiting for its fire: a SCHEDULED notification, or a SCHEDULED campaign.
// It is what re-arming schedules from the tables needs.
type Reserved struct {
	ID      string    `json:"id"`
	Service string    `json:"service"`
	SendAt  time.Time `json:"send_at"`
}

// MaxReservedPage is the largest limit ListScheduledNotifications and ListReservedCampaigns
// accept.
const MaxReservedPage = 1000

// ScheduledLister pages the reserved sends a store holds, for re-arming every schedule from the
// tables (after a schedule group was lost). Both listings have the same contract:
//
//   - limit is 1–MaxReservedPage (EINVALID otherwise); cursor is "" for the first page, then the
//     next returned by the page before.
//   - A page holds at most limit entries, and may hold fewer — even none — while next is not ""
//     (an adapter may bound the work of one call, as a DynamoDB scan does); next is "" once the
//     listing is complete.
//   - Entries come in an order that is stable across calls, each at most once per listing;
//     a send that enters or leaves SCHEDULED while the listing runs may or may not be listed.
//   - A cursor is opaque; one that the adapter did not produce is EINVALID.
type ScheduledLister interface {
	// ListScheduledNotifications lists notifications whose status is SCHEDULED, with their
	// service and send_at. Campaigns' notifications are never SCHEDULED, so never listed.
	ListScheduledNotifications(ctx context.Context, cursor string, limit int) (page []Reserved, next string, err error)
}

// ReservedCampaignLister is ScheduledLister's counterpart for campaigns.
type ReservedCampaignLister interface {
	// ListReservedCampaigns lists campaigns whose state is SCHEDULED and that have a send_at,
	// with their service and send_at.
	ListReservedCampaigns(ctx context.Context, cursor string, limit int) (page []Reserved, next string, err error)
}
