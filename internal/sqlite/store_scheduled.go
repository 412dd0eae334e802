package sqlite

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"time"

	"herald/internal/notify"
)

var _ notify.ScheduledLister = (*Store)(nil)

// Listing reserved sends for re-arming their schedules (notify.ScheduledLister). Both listings
// page in id order with keyset cursors (`id > last ORDER BY id`): the cursor is the last id,
// base64url-encoded so callers treat it as opaque. Notifications have no index on status, so a
// listing reads the table's rows once across all its pages — fine for an operator's rare
// re-arm on one process's store, and no index to keep up on every status change.

// ListScheduledNotifications implements notify.ScheduledLister.
func (s *Store) ListScheduledNotifications(ctx context.Context, cursor string, limit int) ([]notify.Reserved, string, error) {
	return s.listReserved(ctx, "list scheduled notifications", `SELECT id, service,
		json_extract(CAST(doc AS TEXT), '$.send_at') FROM notifications
		WHERE status = ? AND id > ? ORDER BY id LIMIT ?`, string(notify.StatusScheduled), cursor, limit)
}

// ListReservedCampaigns implements notify.ReservedCampaignLister.
func (s *Store) ListReservedCampaigns(ctx context.Context, cursor string, limit int) ([]notify.Reserved, string, error) {
	return s.listReserved(ctx, "list reserved campaigns", `SELECT id, service,
		json_extract(CAST(doc AS TEXT), '$.send_at') FROM campaigns
		WHERE state = ? AND id > ? ORDER BY id LIMIT ?`, string(notify.CampaignScheduled), cursor, limit)
}

func (s *Store) listReserved(ctx context.Context, op, query, state, cursor string, limit int) ([]notify.Reserved, string, error) {
	if limit < 1 || limit > notify.MaxReservedPage {
		return nil, "", fmt.Errorf("sqlite: %s: %w", op, notify.FieldError("limit", "must be 1–%d", notify.MaxReservedPage))
	}
	after, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: %s: %w", op, notify.FieldError("cursor", "not a cursor this listing returned"))
	}
	rows, err := s.db.R.QueryContext(ctx, query, state, string(after), limit)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: %s: %w", op, err)
	}
	defer rows.Close()
	var out []notify.Reserved
	last, n := "", 0
	for rows.Next() {
		var r notify.Reserved
		var sendAt sql.NullString
		if err := rows.Scan(&r.ID, &r.Service, &sendAt); err != nil {
			return nil, "", fmt.Errorf("sqlite: %s: %w", op, err)
		}
		last, n = r.ID, n+1
		if !sendAt.Valid {
			continue // a campaign created SCHEDULED without a send_at waits for nothing
		}
		if r.SendAt, err = time.Parse(time.RFC3339Nano, sendAt.String); err != nil {
			return nil, "", fmt.Errorf("sqlite: %s: send_at of %s: %w", op, r.ID, err)
		}
		r.SendAt = r.SendAt.UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: %s: %w", op, err)
	}
	next := ""
	if n == limit {
		next = base64.RawURLEncoding.EncodeToString([]byte(last))
	}
	return out, next, nil
}
