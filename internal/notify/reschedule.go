package notify

import (
	"context"
	"time"
)

// Rescheduler is an optional NotificationStore capability: moving a reserved send
// (docs/design.md §5). The API asks the store for it with a type assertion, so a store without
// it answers a reschedule with a clear "not available" instead of failing to compile.
type Rescheduler interface {
	// RescheduleNotification sets the SendAt of notification id to at, in one conditional write,
	// if it is still SCHEDULED. ECONFLICT if it is not (it fired, or was canceled); ENOTFOUND.
	RescheduleNotification(ctx context.Context, id string, at time.Time) error
	// FireScheduled moves notification id from SCHEDULED to ACCEPTED and sets its SendAt to at,
	// in one conditional write: a reserved send whose fire came at another time than its
	// send_at (its schedule was edited in the console) records when it went out, and a crash
	// can never leave the one without the other. ECONFLICT if it is not SCHEDULED; ENOTFOUND.
	FireScheduled(ctx context.Context, id string, at time.Time) error
}
