package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"herald/internal/notify"
)

// listableStatuses are the statuses GET /v1/admin/notifications?status= accepts: every status a
// notification shows (DISPATCHING is a campaign's bookkeeping, served as the campaign).
var listableStatuses = []notify.NotificationStatus{notify.StatusAccepted, notify.StatusScheduled, notify.StatusProcessing,
	notify.StatusSent, notify.StatusPartiallySent, notify.StatusFailed, notify.StatusSkipped, notify.StatusCanceled}

type notificationList struct {
	Notifications []notify.NotificationSummary `json:"notifications"`
	NextCursor    string                       `json:"next_cursor"`
}

// listNotifications is GET /v1/admin/notifications: every service's notifications matching
// ?status=, ?service=, ?category=, ?idempotency_key=, ?from= and ?to= (created in [from, to)),
// one store page per call (on DynamoDB a bounded scan: a page may hold fewer than limit, even
// none, with a next_cursor). A cursor serves only the filter it was made for.
func (s *server) listNotifications(w http.ResponseWriter, r *http.Request) error {
	if err := s.operatorOnly(r); err != nil {
		return err
	}
	lister, ok := s.store.(notify.NotificationLister)
	if !ok {
		writeNotImplemented(w, "listing notifications is not available in this runtime")
		return nil
	}
	q := r.URL.Query()
	f := notify.NotificationFilter{Status: notify.NotificationStatus(q.Get("status")), Service: q.Get("service"),
		Category: notify.Category(q.Get("category")), IdempotencyKey: q.Get("idempotency_key"), User: q.Get("user")}
	if f.Status != "" && !slices.Contains(listableStatuses, f.Status) {
		return notify.FieldError("status", "unknown status %q; one of %s", f.Status, oneOf(listableStatuses))
	}
	if f.Category != "" && f.Category != notify.CategoryTransactional && f.Category != notify.CategoryMarketing {
		return notify.FieldError("category", "unknown category %q (want transactional or marketing)", f.Category)
	}
	if err := checkFilterParams(filterParam{"service", f.Service}, filterParam{"idempotency_key", f.IdempotencyKey},
		filterParam{"user", f.User}); err != nil {
		return err
	}
	var err error
	if f.From, err = queryTime(r, "from"); err != nil {
		return err
	}
	if f.To, err = queryTime(r, "to"); err != nil {
		return err
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return notify.FieldError("to", "must be after from")
	}
	limit, err := queryLimit(r, 50, 200)
	if err != nil {
		return err
	}
	scope := fmt.Sprintf("%s|%s|%s|%s|%d|%d|%s", f.Status, f.Service, f.Category, f.IdempotencyKey, f.From.UnixNano(), f.To.UnixNano(), f.User)
	cursor, err := s.queryCursor(r, "admin-notifications", scope)
	if err != nil {
		return err
	}
	page, next, err := lister.ListNotifications(r.Context(), f, cursor, limit)
	if errors.Is(err, notify.ErrNoRecipientIndex) {
		writeNotImplemented(w, notify.ErrNoRecipientIndex.Error()+": a user's notifications cannot be listed")
		return nil
	}
	if err != nil {
		return fmt.Errorf("list notifications: %w", err)
	}
	out := notificationList{Notifications: make([]notify.NotificationSummary, 0, len(page)), NextCursor: s.sealCursor("admin-notifications", scope, next)}
	for _, n := range page {
		n.CreatedAt = n.CreatedAt.UTC()
		out.Notifications = append(out.Notifications, n)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// recipientFound is GET /v1/admin/recipients' answer.
type recipientFound struct {
	UserID  string         `json:"user_id"`
	Channel notify.Channel `json:"channel"`
}

// findRecipient is GET /v1/admin/recipients?address=: the user an email, phone number or push
// token belongs to (notify.AddressFinder), for the recipient view's search by address. The
// address is read from the query and never logged or echoed.
func (s *server) findRecipient(w http.ResponseWriter, r *http.Request) error {
	if err := s.operatorOnly(r); err != nil {
		return err
	}
	f, ok := s.store.(notify.AddressFinder)
	if !ok {
		writeNotImplemented(w, "finding a user by address is not available in this runtime")
		return nil
	}
	raw := r.URL.Query().Get("address")
	if strings.TrimSpace(raw) == "" || len(raw) > 4096 || !utf8.ValidString(raw) {
		return notify.FieldError("address", "an email, a phone number (+ and digits) or a push token is required")
	}
	ch, address := notify.AddressChannel(raw)
	user, err := f.UserByAddress(r.Context(), ch, address)
	if notify.IsCode(err, notify.ENOTFOUND) {
		return notify.Errorf(notify.ENOTFOUND, "no user has this %s address (a contact stored before the address index is found after its next change)", ch)
	}
	if err != nil {
		return fmt.Errorf("find recipient: %w", err)
	}
	writeJSON(w, http.StatusOK, recipientFound{UserID: user, Channel: ch})
	return nil
}
