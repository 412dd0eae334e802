package sqlite

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"herald/internal/notify"
)

var _ notify.NotificationLister = (*Store)(nil)

// ListNotifications implements notify.NotificationLister: newest first (created_at, then id,
// descending) with a keyset cursor on both, over the created_at index; the other filters are
// checked row by row.
func (s *Store) ListNotifications(ctx context.Context, f notify.NotificationFilter, cursor string, limit int) ([]notify.NotificationSummary, string, error) {
	const op = "list notifications"
	if limit < 1 || limit > notify.MaxReservedPage {
		return nil, "", fmt.Errorf("sqlite: %s: %w", op, notify.FieldError("limit", "must be 1–%d", notify.MaxReservedPage))
	}
	beforeAt, beforeID, err := decodeKeyset(cursor)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: %s: %w", op, err)
	}
	from, to := timeRange(f.From, f.To)
	// By user, the recipient index (notifications_by_user) is walked instead of the whole table:
	// the condition names the column as the partial index does.
	byUser := "?11 = ''"
	if f.User != "" {
		byUser = "recipient_user = ?11"
	}
	rows, err := s.db.R.QueryContext(ctx, `SELECT id, service, idempotency_key, status,
			coalesce(json_extract(CAST(doc AS TEXT), '$.category'), ''), created_at
		FROM notifications
		WHERE `+byUser+` AND status != ?1 AND NOT EXISTS (SELECT 1 FROM campaigns c WHERE c.id = notifications.id)
			AND (?2 = '' OR status = ?2) AND (?3 = '' OR service = ?3)
			AND (?4 = '' OR idempotency_key = ?4)
			AND (?5 = '' OR coalesce(json_extract(CAST(doc AS TEXT), '$.category'), '') = ?5)
			AND created_at >= ?6 AND created_at < ?7
			AND (created_at < ?8 OR (created_at = ?8 AND id < ?9))
		ORDER BY created_at DESC, id DESC LIMIT ?10`,
		string(notify.StatusDispatching), string(f.Status), f.Service, f.IdempotencyKey, string(f.Category),
		from, to, beforeAt, beforeID, limit, f.User)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: %s: %w", op, err)
	}
	defer rows.Close()
	var out []notify.NotificationSummary
	var lastAt int64
	for rows.Next() {
		var n notify.NotificationSummary
		var status, category string
		if err := rows.Scan(&n.ID, &n.Service, &n.IdempotencyKey, &status, &category, &lastAt); err != nil {
			return nil, "", fmt.Errorf("sqlite: %s: %w", op, err)
		}
		n.Status, n.Category, n.CreatedAt = notify.NotificationStatus(status), notify.Category(category), timeOfNanos(lastAt)
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if len(out) < limit {
		return out, "", nil
	}
	return out, encodeKeyset(lastAt, out[len(out)-1].ID), nil
}

// A newest-first listing pages with a keyset cursor: the last row's time (unix nanos) and key,
// the rows before it coming next.

// decodeKeyset reads a cursor encodeKeyset made; "" starts (before every row).
func decodeKeyset(cursor string) (beforeAt int64, beforeKey string, err error) {
	if cursor == "" {
		return math.MaxInt64, "", nil
	}
	b, derr := base64.RawURLEncoding.DecodeString(cursor)
	at, key, ok := strings.Cut(string(b), "|")
	n, perr := strconv.ParseInt(at, 10, 64)
	if derr != nil || !ok || perr != nil || key == "" {
		return 0, "", notify.FieldError("cursor", "not a cursor this listing returned")
	}
	return n, key, nil
}

// encodeKeyset is the cursor after the row at time at with key.
func encodeKeyset(at int64, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at, 10) + "|" + key))
}

// timeRange is [from, to) in unix nanos, unbounded where a bound is zero.
func timeRange(from, to time.Time) (int64, int64) {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if !from.IsZero() {
		lo = nanosOf(from)
	}
	if !to.IsZero() {
		hi = nanosOf(to)
	}
	return lo, hi
}
