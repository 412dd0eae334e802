package notify

import (
	"context"
	"time"
)

// NotificationFilter selects notifications for an operator's listing (the console); a zero
// field matches every notification.
type NotificationFilter struct {
	Status         NotificationStatus
	Service        string
	Category       Category
	IdempotencyKey string    // with Service: the one notification sent with this key
	From, To       time.Time // created in [From, To)
}

// NotificationSummary is one listed notification.
type NotificationSummary struct {
	ID             string             `json:"id"`
	Service        string             `json:"service"`
	IdempotencyKey string             `json:"idempotency_key,omitempty"`
	Status         NotificationStatus `json:"status"`
	Category       Category           `json:"category"`
	CreatedAt      time.Time          `json:"created_at"`
}

// NotificationLister pages the notifications matching a filter, campaigns' own bookkeeping
// (DISPATCHING) never among them. It has ScheduledLister's contract: limit 1–MaxReservedPage,
// a page may hold fewer than limit — even none — while next is not "" (a DynamoDB scan bounds
// its work per call), entries come in an order stable across calls, each once per listing, and
// the cursor is opaque (EINVALID when the adapter did not produce it). It reads the whole table
// across a listing's pages: an operator's tool, not a service route. A campaign's notification
// is never listed: campaigns have their own listing (and their own page in the console).
type NotificationLister interface {
	ListNotifications(ctx context.Context, f NotificationFilter, cursor string, limit int) (page []NotificationSummary, next string, err error)
}
