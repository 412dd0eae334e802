package notify

import (
	"context"
	"errors"
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
	// User selects the notifications IndexedUser files under this user, newest first, through
	// the store's recipient index (docs/design.md §7): the recipient view's search. A store
	// without the index answers ErrNoRecipientIndex.
	User string
}

// ErrNoRecipientIndex is what a store keeping no recipient index answers a listing by user (in
// AWS the index is a deployment's choice: stack.recipient_index).
var ErrNoRecipientIndex = errors.New("the recipient index is off in this deployment (stack.recipient_index in herald.yaml)")

// IndexedUser is the user the recipient index files n under: the one user id among its
// recipients, when exactly one user is named (also beside direct addresses). A notification to
// several users, or to addresses only, and a campaign are not filed: a campaign's audience is
// its own record, and filing each of several users would cost a write per user on every send.
func IndexedUser(n *Notification) string {
	if n == nil || IsCampaignID(n.ID) {
		return ""
	}
	user := ""
	for _, r := range n.Recipients {
		switch {
		case r.UserID == "" || r.UserID == user:
		case user == "":
			user = r.UserID
		default:
			return ""
		}
	}
	return user
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
