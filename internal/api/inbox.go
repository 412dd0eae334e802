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
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) markAllRead(w http.ResponseWriter, r *http.Request) error {
	n, err := s.store.MarkAllRead(r.Context(), r.PathValue("user"), s.clock.Now())
	if err != nil {
		return fmt.Errorf("mark all read: %w", err)
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
	w.WriteHeader(http.StatusNoContent)
	return nil
}
