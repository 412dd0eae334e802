package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"herald/internal/notify"
)

// keyClaimSchema is migration 14: the HTTP API's claims of idempotency keys
// (notify.NotificationStore.ClaimKey), one row per (service, key), never removed.
const keyClaimSchema = `
CREATE TABLE IF NOT EXISTS key_claims (
	service         TEXT NOT NULL,
	idempotency_key TEXT NOT NULL,
	notification_id TEXT NOT NULL,
	fingerprint     TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	PRIMARY KEY (service, idempotency_key)
) WITHOUT ROWID;`

// ClaimKey implements notify.NotificationStore: an insert that does nothing on a conflict, and
// a read of the row that holds the key when it did, in one transaction.
func (s *Store) ClaimKey(ctx context.Context, k notify.KeyClaim) (notify.KeyClaim, bool, error) {
	if err := k.Check(); err != nil {
		return notify.KeyClaim{}, false, fmt.Errorf("sqlite: claim key: %w", err)
	}
	k.At = s.nowOr(k.At)
	held, won := k, false
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO key_claims (service, idempotency_key, notification_id, fingerprint, created_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, k.Service, k.Key, k.NotificationID, k.Fingerprint, nanosOf(k.At))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			won = err == nil
			return err
		}
		var at int64
		err = tx.QueryRowContext(ctx, `SELECT notification_id, fingerprint, created_at FROM key_claims
			WHERE service = ? AND idempotency_key = ?`, k.Service, k.Key).Scan(&held.NotificationID, &held.Fingerprint, &at)
		held.At = timeOfNanos(at)
		return err
	})
	if err != nil {
		return notify.KeyClaim{}, false, fmt.Errorf("sqlite: claim key of service %s: %w", k.Service, err)
	}
	return held, won, nil
}
