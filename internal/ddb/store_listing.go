package ddb

import (
	"context"
	"encoding/json"
	"fmt"

	"herald/internal/notify"
)

var _ notify.NotificationLister = (*Store)(nil)

// ListNotifications implements notify.NotificationLister with a Scan of the notifications table
// filtered to main items matching the filter (status, service, idempotency key and created_at
// in the filter expression; the category, kept in the item's document, checked here), at most
// scanPagesPerCall requests per call, like ListScheduledNotifications and with its cursor. It is
// an operator's listing (GET /v1/admin/notifications), rare and paged: no index is kept for it
// on every write. Entries come in scan order, not by time.
func (s *Store) ListNotifications(ctx context.Context, f notify.NotificationFilter, cursor string, limit int) ([]notify.NotificationSummary, string, error) {
	const op = "list notifications"
	if limit < 1 || limit > notify.MaxReservedPage {
		return nil, "", wrapErr(op, notify.FieldError("limit", "must be 1–%d", notify.MaxReservedPage))
	}
	start, err := decodeScanCursor(cursor)
	if err != nil {
		return nil, "", wrapErr(op, err)
	}
	e := newExpr()
	// A campaign's notification (its counters, pages and state live beside it) is the campaign's,
	// listed by ListCampaigns: campaign ids start c_.
	filter := e.n(attrSK) + " = " + e.s(skNotification) + " AND " + e.n("status") + " <> " + e.s(string(notify.StatusDispatching)) +
		" AND NOT begins_with(" + e.n("id") + ", " + e.s(notify.CampaignIDPrefix) + ")"

	for _, c := range []struct{ attr, v string }{{"service", f.Service}, {"idempotency_key", f.IdempotencyKey}} {
		if c.v != "" {
			filter += " AND " + e.n(c.attr) + " = " + e.s(c.v)
		}
	}
	if f.Status != "" {
		// An express notification whose batch recorded its verdicts is final only once they are
		// applied (resolveVerdicts): a PROCESSING one with an express attribute is a candidate
		// for every status, checked below.
		filter += " AND (" + e.n("status") + " = " + e.s(string(f.Status)) + " OR (" + e.n("status") + " = " +
			e.s(string(notify.StatusProcessing)) + " AND attribute_exists(" + e.n("x") + ")))"
	}
	if !f.From.IsZero() {
		filter += " AND " + e.n("created_at") + " >= " + e.i(nanos(f.From))
	}
	if !f.To.IsZero() {
		filter += " AND " + e.n("created_at") + " < " + e.i(nanos(f.To))
	}
	proj := e.n(attrPK) + ", " + e.n(attrSK) + ", " + e.n("id") + ", " + e.n("service") + ", " + e.n("idempotency_key") + ", " +
		e.n("status") + ", " + e.n("created_at") + ", " + e.n("doc") + ", " + e.n("x")
	var out []notify.NotificationSummary
	docs := verdictDocs{} // an ingest invocation's notifications share one batch item: read it once
	next, err := s.scanNotifications(ctx, start, limit, e, filter, proj, func(it notificationItem) (bool, error) {
		var doc struct {
			Category notify.Category `json:"category"`
		}
		if err := json.Unmarshal([]byte(it.Doc), &doc); err != nil {
			return false, fmt.Errorf("decode notification %s: %w", it.ID, err)
		}
		if f.Category != "" && doc.Category != f.Category {
			return false, nil
		}
		status := notify.NotificationStatus(it.Status)
		if it.Express != "" && status == notify.StatusProcessing {
			var x notify.Express
			if err := json.Unmarshal([]byte(it.Express), &x); err != nil {
				return false, fmt.Errorf("decode express deliveries of %s: %w", it.ID, err)
			}
			if status, err = s.resolveVerdicts(ctx, it.ID, &x, status, docs); err != nil {
				return false, err
			}
		}
		if f.Status != "" && status != f.Status {
			return false, nil
		}
		out = append(out, notify.NotificationSummary{ID: it.ID, Service: it.Service, IdempotencyKey: it.IdempotencyKey,
			Status: status, Category: doc.Category, CreatedAt: timeOf(it.CreatedAt)})
		return true, nil
	})
	return out, next, wrapErr(op, err)
}
