package sqlite

import (
	"context"
	"fmt"

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
	beforeAt, beforeKey, err := decodeKeyset(cursor)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: %s: %w", op, err)
	}
	from, to := timeRange(f.From, f.To)
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
	return out, encodeKeyset(lastAt, out[len(out)-1].AddressKey), nil
}
