package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"herald/internal/notify"
)

var _ notify.Rescheduler = (*Store)(nil)

// RescheduleNotification implements notify.Rescheduler. The document's send_at and the
// updated_at column move in one UPDATE conditional on the status, so a fire that has already
// moved the notification to ACCEPTED wins and the reschedule reports ECONFLICT.
func (s *Store) RescheduleNotification(ctx context.Context, id string, at time.Time) error {
	return s.moveScheduled(ctx, "reschedule", id, at, notify.StatusScheduled)
}

// FireScheduled implements notify.Rescheduler: RescheduleNotification's UPDATE, moving the
// status to ACCEPTED too.
func (s *Store) FireScheduled(ctx context.Context, id string, at time.Time) error {
	return s.moveScheduled(ctx, "fire", id, at, notify.StatusAccepted)
}

// moveScheduled sets a SCHEDULED notification's send_at to at and its status to `to` in one
// UPDATE conditional on the status.
func (s *Store) moveScheduled(ctx context.Context, op, id string, at time.Time, to notify.NotificationStatus) error {
	now := s.now()
	// The document is stored as a BLOB of JSON text: read and written back as text so SQLite
	// does not take it for JSONB.
	res, err := s.db.W.ExecContext(ctx, `UPDATE notifications
		SET doc = CAST(json_set(CAST(doc AS TEXT), '$.send_at', ?, '$.updated_at', ?) AS BLOB), updated_at = ?, status = ?
		WHERE id = ? AND status = ?`,
		at.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano), nanosOf(now), string(to), id, string(notify.StatusScheduled))
	if err != nil {
		return fmt.Errorf("sqlite: %s notification %s: %w", op, id, err)
	}
	if k, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqlite: %s notification %s: %w", op, id, err)
	} else if k == 1 {
		return nil
	}
	var status string
	err = s.db.W.QueryRowContext(ctx, `SELECT status FROM notifications WHERE id = ?`, id).Scan(&status)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("sqlite: %s notification %s: %w", op, id, notify.Errorf(notify.ENOTFOUND, "notification not found"))
	case err != nil:
		return fmt.Errorf("sqlite: %s notification %s: %w", op, id, err)
	}
	return fmt.Errorf("sqlite: %s notification %s: %w", op, id,
		notify.Errorf(notify.ECONFLICT, "notification is %s, no longer SCHEDULED", status))
}
