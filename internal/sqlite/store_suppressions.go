package sqlite

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"

	"herald/internal/notify"
)

// ListSuppressions implements notify.SuppressionStore: newest first (created_at, then
// address_key, descending) with a keyset cursor on both, over the suppressions_created index;
// channel and reason are checked row by row. A page is short only at the end.
func (s *Store) ListSuppressions(ctx context.Context, f notify.SuppressionFilter, cursor string, limit int) ([]notify.Suppression, string, error) {
	const op = "list suppressions"
	if limit < 1 || limit > notify.MaxSuppressionPage {
		return nil, "", fmt.Errorf("sqlite: %s: %w", op, notify.FieldError("limit", "must be 1–%d", notify.MaxSuppressionPage))
	}
	beforeAt, beforeKey := int64(math.MaxInt64), ""
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		at, key, ok := strings.Cut(string(b), "|")
		n, perr := strconv.ParseInt(at, 10, 64)
		if err != nil || !ok || perr != nil || key == "" {
			return nil, "", fmt.Errorf("sqlite: %s: %w", op, notify.FieldError("cursor", "not a cursor this listing returned"))
		}
		beforeAt, beforeKey = n, key
	}
	from, to := int64(math.MinInt64), int64(math.MaxInt64)
	if !f.From.IsZero() {
		from = nanosOf(f.From)
	}
	if !f.To.IsZero() {
		to = nanosOf(f.To)
	}
	rows, err := s.db.R.QueryContext(ctx, `SELECT address_key, channel, masked, reason, created_at
		FROM suppressions
		WHERE (?1 = '' OR channel = ?1) AND (?2 = '' OR reason = ?2)
			AND created_at >= ?3 AND created_at < ?4
			AND (created_at < ?5 OR (created_at = ?5 AND address_key < ?6))
		ORDER BY created_at DESC, address_key DESC LIMIT ?7`,
		string(f.Channel), f.Reason, from, to, beforeAt, beforeKey, limit)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: %s: %w", op, err)
	}
	defer rows.Close()
	var out []notify.Suppression
	var lastAt int64
	for rows.Next() {
		var sp notify.Suppression
		var ch string
		if err := rows.Scan(&sp.AddressKey, &ch, &sp.Masked, &sp.Reason, &lastAt); err != nil {
			return nil, "", fmt.Errorf("sqlite: %s: %w", op, err)
		}
		sp.Channel, sp.CreatedAt = notify.Channel(ch), timeOfNanos(lastAt)
		out = append(out, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if len(out) < limit {
		return out, "", nil
	}
	next := base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(lastAt, 10) + "|" + out[len(out)-1].AddressKey))
	return out, next, nil
}
