package api

import (
	"fmt"
	"net/http"

	"herald/internal/notify"
)

const (
	defaultInboxPage = 20
	maxInboxPage     = 100
)

// inboxPage is GET /v1/users/{user}/inbox.
type inboxPage struct {
	Items      []notify.InboxItem `json:"items"`
	NextCursor string             `json:"next_cursor"`
}

func (s *server) listInbox(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryLimit(r, defaultInboxPage, maxInboxPage)
	if err != nil {
		return err
	}
	user := r.PathValue("user")
	cursor, err := s.queryCursor(r, "inbox", user)
	if err != nil {
		return err
	}
	items, next, err := s.store.ListInbox(r.Context(), user, cursor, limit, s.clock.Now())
	if err != nil {
		return fmt.Errorf("list inbox: %w", err)
	}
	if items == nil {
		items = []notify.InboxItem{}
	}
	for i := range items {
		items[i].CreatedAt = utc(items[i].CreatedAt)
		items[i].ReadAt = utcPtr(items[i].ReadAt)
		items[i].ExpiresAt = utcPtr(items[i].ExpiresAt)
	}
	writeJSON(w, http.StatusOK, inboxPage{Items: items, NextCursor: s.sealCursor("inbox", user, next)})
	return nil
}

func (s *server) unreadCount(w http.ResponseWriter, r *http.Request) error {
	n, err := s.store.UnreadCount(r.Context(), r.PathValue("user"), s.clock.Now())
	if err != nil {
		return fmt.Errorf("count unread: %w", err)
	}
	writeJSON(w, http.StatusOK, map[string]int{"unread": n})
	return nil
}

func (s *server) markRead(w http.ResponseWriter, r *http.Request) error {
	err := s.store.MarkRead(r.Context(), r.PathValue("user"), r.PathValue("id"), s.clock.Now())
	if notify.IsCode(err, notify.ENOTFOUND) {
		return notify.Errorf(notify.ENOTFOUND, "no such inbox item for this user")
	}
	if err != nil {
		return fmt.Errorf("mark read: %w", err)
	}
	s.publishChange(r, notify.InboxEventRead, r.PathValue("id"))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) markAllRead(w http.ResponseWriter, r *http.Request) error {
	n, err := s.store.MarkAllRead(r.Context(), r.PathValue("user"), s.clock.Now())
	if err != nil {
		return fmt.Errorf("mark all read: %w", err)
	}
	if n > 0 {
		s.publishChange(r, notify.InboxEventRead, "")
	}
	writeJSON(w, http.StatusOK, map[string]int{"updated": n})
	return nil
}

func (s *server) deleteInboxItem(w http.ResponseWriter, r *http.Request) error {
	err := s.store.DeleteInboxItem(r.Context(), r.PathValue("user"), r.PathValue("id"))
	if notify.IsCode(err, notify.ENOTFOUND) {
		return notify.Errorf(notify.ENOTFOUND, "no such inbox item for this user")
	}
	if err != nil {
		return fmt.Errorf("delete inbox item: %w", err)
	}
	s.publishChange(r, notify.InboxEventDeleted, r.PathValue("id"))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// publishChange tells the user's live inbox streams of a read or delete (itemID "": every item
// read) and of the unread count it leaves. Best effort: the write has happened and the response
// does not depend on it; a stream that misses it is brought current when it reconnects.
func (s *server) publishChange(r *http.Request, typ, itemID string) {
	if s.inboxEvents == nil {
		return
	}
	user, now := r.PathValue("user"), s.clock.Now()
	ev := []notify.InboxEvent{{ID: notify.InboxEventID(now, itemID), Type: typ, ItemID: itemID}}
	if n, err := s.store.UnreadCount(r.Context(), user, now); err != nil {
		s.log.WarnContext(r.Context(), "inbox stream: unread count", "error", err)
	} else {
		ev = append(ev, notify.UnreadEvent(now, n))
	}
	s.inboxEvents.Publish(r.Context(), user, ev...)
}

// inboxStream is GET /v1/users/{user}/inbox/stream: the live inbox over WebSocket, served by
// Options.InboxStream once the caller is authenticated for {user}.
func (s *server) inboxStream(w http.ResponseWriter, r *http.Request) error {
	if s.stream == nil {
		writeNotImplemented(w, "the live inbox stream is not served here (in AWS it is the WebSocket API)")
		return nil
	}
	if v := r.URL.Query().Get("last_event_id"); v != "" {
		if _, err := notify.ParseInboxEventID(v); err != nil {
			return err
		}
	}
	s.stream.ServeHTTP(w, r)
	return nil
}
