package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"herald/internal/notify"
)

// notificationExists is ENOTFOUND unless the notification is stored.
func notificationExists(ctx context.Context, q storeConn, id string) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM notifications WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return notify.Errorf(notify.ENOTFOUND, "notification not found")
	}
	return err
}

// ChunkPrepared implements notify.BatchStore.
func (s *Store) ChunkPrepared(ctx context.Context, notificationID string, chunk int) (bool, error) {
	if err := notificationExists(ctx, s.db.R, notificationID); err != nil {
		return false, fmt.Errorf("sqlite: chunk %d of %s: %w", chunk, notificationID, err)
	}
	var one int
	err := s.db.R.QueryRowContext(ctx, `SELECT 1 FROM prepared_chunks WHERE notification_id = ? AND chunk = ?`,
		notificationID, chunk).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sqlite: chunk %d of %s: %w", chunk, notificationID, err)
	}
	return true, nil
}

// AddChunk implements notify.BatchStore: the marker, the counters and chunks_prepared are one
// transaction.
func (s *Store) AddChunk(ctx context.Context, notificationID string, chunk int, delta map[notify.Channel]notify.ChannelStats) (bool, error) {
	var added bool
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		if err := notificationExists(ctx, tx, notificationID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO prepared_chunks (notification_id, chunk) VALUES (?, ?)
			ON CONFLICT DO NOTHING`, notificationID, chunk)
		if err != nil {
			return fmt.Errorf("mark chunk: %w", err)
		}
		if k, err := res.RowsAffected(); err != nil || k == 0 {
			return err
		}
		added = true
		if err := s.addStats(ctx, tx, notificationID, delta); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE notifications SET chunks_prepared = chunks_prepared + 1
			WHERE id = ?`, notificationID); err != nil {
			return fmt.Errorf("count chunk: %w", err)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: add chunk %d of %s: %w", chunk, notificationID, err)
	}
	return added, nil
}

// ClaimBatch implements notify.BatchStore with one upsert whose WHERE clause only takes a batch
// that is not done and whose lease has ended; the single writer connection makes it atomic.
func (s *Store) ClaimBatch(ctx context.Context, notificationID, batchID string, now, leaseUntil time.Time) (notify.BatchClaim, error) {
	var c notify.BatchClaim
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		if err := notificationExists(ctx, tx, notificationID); err != nil {
			return err
		}
		var (
			done     bool
			attempts int
			leasedTo int64
		)
		err := tx.QueryRowContext(ctx, `SELECT done, attempts, lease_until FROM send_batches
			WHERE notification_id = ? AND id = ?`, notificationID, batchID).Scan(&done, &attempts, &leasedTo)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case done:
			c = notify.BatchClaim{State: notify.BatchDone, Attempts: attempts}
			return nil
		case leasedTo > now.UnixNano():
			c = notify.BatchClaim{State: notify.BatchBusy, Attempts: attempts, LeaseUntil: timeOfNanos(leasedTo)}
			return nil
		}
		c = notify.BatchClaim{State: notify.BatchClaimed, Attempts: attempts + 1}
		_, err = tx.ExecContext(ctx, `INSERT INTO send_batches (notification_id, id, attempts, lease_until, updated_at)
			VALUES (?, ?, 1, ?, ?)
			ON CONFLICT (notification_id, id) DO UPDATE SET attempts = attempts + 1,
				lease_until = excluded.lease_until, updated_at = excluded.updated_at`,
			notificationID, batchID, leaseUntil.UnixNano(), now.UnixNano())
		return err
	})
	if err != nil {
		return notify.BatchClaim{}, fmt.Errorf("sqlite: claim batch %s of %s: %w", batchID, notificationID, err)
	}
	return c, nil
}

// ReleaseBatchLeases ends every running lease on a send batch that is not done, and returns how
// many it ended: the batch can be claimed again at once, as it could when the lease ran out.
// Only a process that knows no worker of the file is alive may call it — the local runtime at
// start, holding its data directory's lock — since a live worker's batch would be sent twice.
// Leases on deliveries stay: a SENDING delivery may be waiting for its provider's verdict.
func (s *Store) ReleaseBatchLeases(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE send_batches SET lease_until = 0, updated_at = ?
			WHERE done = 0 AND lease_until > ?`, now.UnixNano(), now.UnixNano())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: release batch leases: %w", err)
	}
	return int(n), nil
}

// CompleteBatch implements notify.BatchStore.
func (s *Store) CompleteBatch(ctx context.Context, notificationID, batchID string, delta map[notify.Channel]notify.ChannelStats, at time.Time) (bool, error) {
	var applied bool
	err := s.db.Tx(ctx, func(tx *sql.Tx) (err error) {
		if applied, err = markBatchDone(ctx, tx, notificationID, batchID, at); err != nil || !applied {
			return err
		}
		return s.addStats(ctx, tx, notificationID, delta)
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: complete batch %s of %s: %w", batchID, notificationID, err)
	}
	return applied, nil
}

// markBatchDone marks a claimed batch that is not done yet done, and reports whether it did.
func markBatchDone(ctx context.Context, tx *sql.Tx, notificationID, batchID string, at time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE send_batches SET done = 1, lease_until = 0, updated_at = ?
		WHERE notification_id = ? AND id = ? AND done = 0`, at.UnixNano(), notificationID, batchID)
	if err != nil {
		return false, err
	}
	k, err := res.RowsAffected()
	return k == 1, err
}

// RecordBatch implements notify.BatchStore as one transaction: the batch is marked done, and
// each delivery is inserted, or written over a PENDING one of the same notification (a retry's
// outcome); only the outcomes of the rows written are counted (recordDeliveries).
func (s *Store) RecordBatch(ctx context.Context, notificationID, batchID string, ds []notify.Delivery, at time.Time) (bool, error) {
	if err := notify.CheckRecorded(notificationID, ds); err != nil {
		return false, fmt.Errorf("sqlite: record batch %s of %s: %w", batchID, notificationID, err)
	}
	var applied bool
	err := s.db.Tx(ctx, func(tx *sql.Tx) (err error) {
		if applied, err = markBatchDone(ctx, tx, notificationID, batchID, at); err != nil {
			return err
		}
		if !applied {
			return notificationExists(ctx, tx, notificationID)
		}
		delta := map[notify.Channel]notify.ChannelStats{}
		for _, batch := range batchesOf(ds, storeBatch) {
			if err := recordDeliveries(ctx, tx, notificationID, batch, at, delta); err != nil {
				return err
			}
		}
		return s.addStats(ctx, tx, notificationID, delta)
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: record batch %s of %s: %w", batchID, notificationID, err)
	}
	return applied, nil
}

// recordDeliveries stores ds and counts the outcome of every row it writes into delta. The
// common case — none of them stored yet — is one INSERT with no result rows, each counted from
// ds. When some exist, the rows just inserted are told from them by rowid (a new row's rowid is
// above every row's before it), and the others are written only over a PENDING delivery of the
// notification (a retry's outcome), RETURNING which.
func recordDeliveries(ctx context.Context, tx *sql.Tx, notificationID string, ds []notify.Delivery, at time.Time,
	delta map[notify.Channel]notify.ChannelStats) error {
	var top int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(rowid), 0) FROM deliveries`).Scan(&top); err != nil {
		return fmt.Errorf("record deliveries: %w", err)
	}
	values, args := recordedValues(notificationID, ds, at)
	res, err := tx.ExecContext(ctx, `INSERT INTO deliveries (`+deliveryColumns+`) VALUES `+values+`
		ON CONFLICT (notification_id, id) DO NOTHING`, args...)
	if err != nil {
		return fmt.Errorf("record deliveries: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("record deliveries: %w", err)
	} else if int(k) == len(ds) {
		for _, d := range ds {
			notify.CountDelivery(delta, d.Channel, d.Status, d.Reason, false)
		}
		return nil
	}
	inserted := map[string]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT id FROM deliveries WHERE rowid > ?`, top)
	if err != nil {
		return fmt.Errorf("record deliveries: %w", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("record deliveries: %w", err)
		}
		inserted[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("record deliveries: %w", err)
	}
	var rest []notify.Delivery
	for _, d := range ds {
		if inserted[d.ID] {
			notify.CountDelivery(delta, d.Channel, d.Status, d.Reason, false)
		} else {
			rest = append(rest, d)
		}
	}
	if len(rest) == 0 {
		return nil
	}
	values, args = recordedValues(notificationID, rest, at)
	rows, err = tx.QueryContext(ctx, `WITH u (`+deliveryColumns+`) AS (VALUES `+values+`)
		UPDATE deliveries SET status = u.status, reason = u.reason, detail = u.detail, attempts = u.attempts,
			provider_message_id = u.provider_message_id, lease_until = 0, updated_at = u.updated_at,
			history = coalesce(u.history, deliveries.history)
		FROM u
		WHERE deliveries.notification_id = u.notification_id AND deliveries.id = u.id AND deliveries.status = 'PENDING'
		RETURNING deliveries.channel, deliveries.status, deliveries.reason`, args...)
	if err != nil {
		return fmt.Errorf("record deliveries: %w", err)
	}
	if _, err := countCompleted(rows, delta); err != nil {
		return fmt.Errorf("record deliveries: %w", err)
	}
	return nil
}

// deliveryWidth is how many columns deliveryColumns names.
const deliveryWidth = 15

// recordedValues returns the VALUES rows that store ds as recorded outcomes (no lease) and their
// arguments (deliveryValues).
func recordedValues(notificationID string, ds []notify.Delivery, at time.Time) (string, []any) {
	rows := make([][deliveryWidth]any, len(ds))
	for i := range ds {
		rows[i] = deliveryRow(notificationID, &ds[i], ds[i].Status, time.Time{}, at)
	}
	return deliveryValues(rows)
}

// deliveryRow is d's values for deliveryColumns with the given status and lease, updated at
// d.UpdatedAt or else at. d.Address is deliberately not bound: only the masked form is persisted.
func deliveryRow(notificationID string, d *notify.Delivery, status notify.DeliveryStatus, lease, at time.Time) [deliveryWidth]any {
	updated := d.UpdatedAt
	if updated.IsZero() {
		updated = at
	}
	var history any // NULL: nearly every delivery is decided on its first attempt
	if len(d.History) > 0 {
		history, _ = historyValue(d.History) // []Attempt of times, strings and ints always encodes
	}
	return [deliveryWidth]any{d.ID, notificationID, d.UserID, string(d.Channel), string(d.Provider), d.App,
		d.AddressMasked, string(status), d.Reason, d.Detail, d.Attempts, d.ProviderMessageID, nanosOf(lease), nanosOf(updated), history}
}

// deliveryValues returns VALUES rows for deliveryColumns and their arguments. A column whose
// value is the same in every row — the notification, channel, provider, app, attempt and time,
// and for a batch that went out whole its status and empty reason and detail — is bound once, as
// a named parameter every row names; the others once a row, as plain ?s: SQLite finds a
// parameter's name in a list of every named one, so naming them all made binding quadratic.
// Binding is most of what storing a batch costs outside SQLite's own work (two fifths of
// recordDeliveries' CPU with every value bound once a row), and a batch of 500 has 7,000 values.
func deliveryValues(rows [][deliveryWidth]any) (string, []any) {
	var shared [deliveryWidth]bool
	for c := range deliveryWidth {
		shared[c] = true
		for i := 1; i < len(rows) && shared[c]; i++ {
			shared[c] = rows[i][c] == rows[0][c]
		}
	}
	// Parameters are numbered in the order they first appear: a plain ? takes the next number,
	// and so does a named one at its first use, which is named for that number ($k: the driver
	// binds it the k-th argument); its later uses share it.
	var args []any
	var name [deliveryWidth]string // a shared column's parameter
	var b strings.Builder
	b.Grow(len(rows) * deliveryWidth * 3)
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for c := range deliveryWidth {
			if c > 0 {
				b.WriteByte(',')
			}
			switch {
			case !shared[c]:
				args = append(args, rows[i][c])
				b.WriteByte('?')
			case name[c] == "":
				args = append(args, rows[i][c])
				name[c] = "$" + strconv.Itoa(len(args))
				fallthrough
			default:
				b.WriteString(name[c])
			}
		}
		b.WriteByte(')')
	}
	return b.String(), args
}
