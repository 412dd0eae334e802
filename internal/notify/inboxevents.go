package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Inbox event types: what a live inbox stream (a WebSocket connection of the user's app) hears
// the moment the inbox is written.
const (
	InboxEventItem      = "inbox.item"      // a new item of the user's own
	InboxEventBroadcast = "inbox.broadcast" // a new campaign broadcast that reaches the user
	InboxEventRead      = "inbox.read"      // one item (or all: ItemID "") was marked read
	InboxEventDeleted   = "inbox.deleted"   // one item was deleted
	InboxEventUnread    = "inbox.unread"    // the unread count changed
	InboxEventError     = "error"           // the client's last message was refused (Error says why)
)

// InboxEvent is one message of the live inbox stream, sent as JSON.
//
// ID orders events and lets a client resume: it is "<unix nanoseconds, 19 digits>-<item id>",
// the time being the item's CreatedAt for inbox.item and inbox.broadcast and the time of the
// change otherwise. A client that reconnects with the last ID it saw is replayed every item of
// its inbox created after that time (ReplaySince), then the current unread count.
type InboxEvent struct {
	ID     string     `json:"id"`
	Type   string     `json:"type"`
	Item   *InboxItem `json:"item,omitempty"`
	ItemID string     `json:"item_id,omitempty"`
	Unread *int       `json:"unread,omitempty"`
	Error  string     `json:"error,omitempty"`
}

// ResumeAction is the one message a client sends: {"action":"resume","last_event_id":"…"}
// once the socket is open asks for what it missed since that event ("" or no id: nothing, just
// the current unread count). Live events flow from the moment the socket opens either way; the
// AWS WebSocket API cannot send before the connection is up, so the replay is asked for, not
// sent at connect.
const ResumeAction = "resume"

// ParseResume reads a client message. ok is false (with the error event to answer) if it is
// not a resume message; since is zero when it names no event.
func ParseResume(b []byte) (since time.Time, errEvent *InboxEvent) {
	var m struct {
		Action      string `json:"action"`
		LastEventID string `json:"last_event_id"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Action != ResumeAction {
		return time.Time{}, &InboxEvent{Type: InboxEventError, Error: `want {"action":"resume","last_event_id":"…"}`}
	}
	if m.LastEventID == "" {
		return time.Time{}, nil
	}
	t, err := ParseInboxEventID(m.LastEventID)
	if err != nil {
		return time.Time{}, &InboxEvent{Type: InboxEventError, Error: "last_event_id: not an event id of this stream"}
	}
	return t, nil
}

// Resume is the answer to a resume message from userID: the replay since since (ReplaySince),
// or, when since is zero, just the current unread count.
func Resume(ctx context.Context, inbox InboxStore, userID string, since, now time.Time) ([]InboxEvent, error) {
	if since.IsZero() {
		n, err := inbox.UnreadCount(ctx, userID, now)
		if err != nil {
			return nil, fmt.Errorf("unread count of %s: %w", userID, err)
		}
		return []InboxEvent{UnreadEvent(now, n)}, nil
	}
	return ReplaySince(ctx, inbox, userID, since, now)
}

// InboxEvents publishes inbox events to the user's connected apps. Publishing is best effort:
// the inbox store is the truth and a client that missed an event catches up from it when it
// reconnects, so implementations log failures and never fail the write that caused the event.
type InboxEvents interface {
	// Publish sends events to every live connection of userID.
	Publish(ctx context.Context, userID string, events ...InboxEvent)
	// PublishBroadcast sends one inbox.broadcast event to every live connection whose user
	// the broadcast reaches (fan-out on read: one message per connection, no write per user).
	PublishBroadcast(ctx context.Context, b Broadcast)
}

// ConnectionCloser is an InboxEvents that can end a user's live connections (a user's erasure):
// nothing is sent to them after CloseUser returns.
type ConnectionCloser interface {
	CloseUser(ctx context.Context, userID string) error
}

// NopInboxEvents publishes nothing (no live stream configured).
type NopInboxEvents struct{}

func (NopInboxEvents) Publish(context.Context, string, ...InboxEvent) {}
func (NopInboxEvents) PublishBroadcast(context.Context, Broadcast)    {}

// InboxEventID is the event id of something about item id at t.
func InboxEventID(t time.Time, id string) string {
	return fmt.Sprintf("%019d-%s", t.UnixNano(), id)
}

// ParseInboxEventID returns the time of an event id; EINVALID if it is not one.
func ParseInboxEventID(s string) (time.Time, error) {
	ns, _, ok := strings.Cut(s, "-")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || len(ns) != 19 || n < 0 {
		return time.Time{}, FieldError("last_event_id", "not an event id of this stream")
	}
	return time.Unix(0, n).UTC(), nil
}

// ItemEvent is the inbox.item event of a new own item.
func ItemEvent(it InboxItem) InboxEvent {
	return InboxEvent{ID: InboxEventID(it.CreatedAt, it.ID), Type: InboxEventItem, Item: &it}
}

// UnreadEvent is the inbox.unread event carrying the count n at t.
func UnreadEvent(t time.Time, n int) InboxEvent {
	return InboxEvent{ID: InboxEventID(t, "unread"), Type: InboxEventUnread, Unread: &n}
}

// BroadcastReaches reports whether broadcast b, visible at now, reaches userID as the store's
// devices and preferences are now (the same test ListInbox applies when it merges broadcasts).
func BroadcastReaches(ctx context.Context, users UserStore, b Broadcast, userID string, now time.Time) (bool, error) {
	if !b.VisibleAt(now) {
		return false, nil
	}
	devs, err := users.ListDevices(ctx, []string{userID})
	if err != nil {
		return false, fmt.Errorf("devices of %s: %w", userID, err)
	}
	prefs, err := users.GetPreferences(ctx, []string{userID})
	if err != nil {
		return false, fmt.Errorf("preferences of %s: %w", userID, err)
	}
	return b.Reaches(devs[userID], prefs[userID]), nil
}

// maxReplay bounds how many missed items ReplaySince sends: a client away for longer re-reads
// its inbox through the list route instead.
const maxReplay = 100

// ReplaySince returns the events a client that last saw an event at since has missed: an
// inbox.item (or inbox.broadcast) for every item of userID's inbox created after since, oldest
// first and at most 100 (a broadcast among them comes as an inbox.item too), then an inbox.unread with the current count (which also covers the
// reads and deletes made meanwhile, not replayed one by one).
func ReplaySince(ctx context.Context, inbox InboxStore, userID string, since, now time.Time) ([]InboxEvent, error) {
	var missed []InboxEvent
	cursor := ""
walk:
	for {
		items, next, err := inbox.ListInbox(ctx, userID, cursor, maxReplay, now)
		if err != nil {
			return nil, fmt.Errorf("replay inbox of %s: %w", userID, err)
		}
		for _, it := range items {
			if !it.CreatedAt.After(since) || len(missed) == maxReplay {
				break walk
			}
			missed = append(missed, ItemEvent(it))
		}
		if next == "" {
			break
		}
		cursor = next
	}
	// ListInbox is newest first; a stream is oldest first.
	for i, j := 0, len(missed)-1; i < j; i, j = i+1, j-1 {
		missed[i], missed[j] = missed[j], missed[i]
	}
	n, err := inbox.UnreadCount(ctx, userID, now)
	if err != nil {
		return nil, fmt.Errorf("replay unread count of %s: %w", userID, err)
	}
	return append(missed, UnreadEvent(now, n)), nil
}
