package sqlite

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"herald/internal/notify"
)

// deliveryColumns is the column list every delivery read selects, in scanDeliveries' order.
const deliveryColumns = `id, notification_id, user_id, channel, provider, app, address_masked, status,
	reason, detail, attempts, provider_message_id, lease_until, updated_at, history`

// CreateDeliveries implements notify.DeliveryStore. The chunk marker, the inserts and the counter
// update are one transaction, so a crash between them cannot leave counters that disagree with
// the rows, and a redelivered prepare message finds the marker and changes nothing.
func (s *Store) CreateDeliveries(ctx context.Context, notificationID string, chunk int, ds []notify.Delivery) ([]string, error) {
	for i := range ds {
		if ds[i].ID == "" {
			return nil, fmt.Errorf("sqlite: create deliveries of %s: %w", notificationID,
				notify.FieldError(fmt.Sprintf("deliveries[%d].id", i), "delivery id is required"))
		}
		if ds[i].NotificationID != "" && ds[i].NotificationID != notificationID {
			return nil, fmt.Errorf("sqlite: create deliveries of %s: %w", notificationID,
				notify.FieldError(fmt.Sprintf("deliveries[%d].notification_id", i), "belongs to another notification"))
		}
	}
	now := s.now().UTC()
	var pending []string
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM notifications WHERE id = ?`, notificationID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return notify.Errorf(notify.ENOTFOUND, "notification not found")
		}
		if err != nil {
			return err
		}
		fresh := int64(1) // NoChunk: no marker, each id is inserted once
		if chunk != notify.NoChunk {
			res, err := tx.ExecContext(ctx, `INSERT INTO prepared_chunks (notification_id, chunk) VALUES (?, ?)
				ON CONFLICT DO NOTHING`, notificationID, chunk)
			if err != nil {
				return fmt.Errorf("mark chunk: %w", err)
			}
			if fresh, err = res.RowsAffected(); err != nil {
				return fmt.Errorf("mark chunk: %w", err)
			}
		}

		isPending := make(map[string]bool, len(ds))
		inserted := 0
		if fresh == 1 {
			delta := map[notify.Channel]notify.ChannelStats{}
			for _, batch := range batchesOf(ds, storeBatch) {
				n, err := insertDeliveries(ctx, tx, notificationID, batch, now, delta, isPending)
				if err != nil {
					return err
				}
				inserted += n
			}
			if err := s.addStats(ctx, tx, notificationID, delta); err != nil {
				return err
			}
			if chunk != notify.NoChunk {
				if _, err := tx.ExecContext(ctx, `UPDATE notifications SET chunks_prepared = chunks_prepared + 1
					WHERE id = ?`, notificationID); err != nil {
					return fmt.Errorf("count chunk: %w", err)
				}
			}
		}
		// Deliveries left from an earlier attempt may still be PENDING: look up those not inserted
		// just now. In the common first attempt everything was inserted and this is skipped.
		if inserted < len(ds) {
			var old []string
			for _, d := range ds {
				if _, ok := isPending[d.ID]; !ok {
					old = append(old, d.ID)
				}
			}
			for _, batch := range batchesOf(old, storeBatch) {
				if err := pendingAmong(ctx, tx, notificationID, batch, isPending); err != nil {
					return err
				}
			}
		}
		pending = make([]string, 0, len(ds))
		for _, d := range ds {
			if isPending[d.ID] {
				pending = append(pending, d.ID)
				isPending[d.ID] = false // a duplicate in ds is reported once
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: create deliveries of %s chunk %d: %w", notificationID, chunk, err)
	}
	return pending, nil
}

// insertDeliveries inserts ds in one statement, skipping existing ids, and records what was
// inserted: its outcome counts into delta, and whether it is PENDING into isPending.
func insertDeliveries(ctx context.Context, tx *sql.Tx, notificationID string, ds []notify.Delivery, now time.Time,
	delta map[notify.Channel]notify.ChannelStats, isPending map[string]bool) (int, error) {
	vals := make([][deliveryWidth]any, len(ds))
	for i := range ds {
		d := &ds[i]
		st := d.Status
		if st == "" {
			st = notify.DeliveryPending
		}
		vals[i] = deliveryRow(notificationID, d, st, d.LeaseUntil, now)
	}
	values, args := deliveryValues(vals)
	rows, err := tx.QueryContext(ctx, `INSERT INTO deliveries (`+deliveryColumns+`) VALUES `+values+
		` ON CONFLICT (notification_id, id) DO NOTHING RETURNING id, channel, status, reason`, args...)
	if err != nil {
		return 0, fmt.Errorf("insert deliveries: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id, ch, st, reason string
		if err := rows.Scan(&id, &ch, &st, &reason); err != nil {
			return 0, fmt.Errorf("insert deliveries: %w", err)
		}
		notify.CountDelivery(delta, notify.Channel(ch), notify.DeliveryStatus(st), reason, true)
		isPending[id] = st == string(notify.DeliveryPending)
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("insert deliveries: %w", err)
	}
	return n, nil
}

// pendingAmong sets isPending for each of ids of notification nid that exists, true when it is
// PENDING.
func pendingAmong(ctx context.Context, q storeConn, nid string, ids []string, isPending map[string]bool) error {
	rows, err := q.QueryContext(ctx, `SELECT id, status FROM deliveries WHERE notification_id = ? AND id IN (`+sqlIn(len(ids))+`)`,
		append([]any{nid}, stringArgs(ids)...)...)
	if err != nil {
		return fmt.Errorf("read delivery status: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			return fmt.Errorf("read delivery status: %w", err)
		}
		isPending[id] = st == string(notify.DeliveryPending)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read delivery status: %w", err)
	}
	return nil
}

// ClaimDeliveries implements notify.DeliveryStore. The condition and the update are one
// statement on the single writer, so two claimers can never both win the same delivery.
func (s *Store) ClaimDeliveries(ctx context.Context, notificationID string, ids []string, now, leaseUntil time.Time) ([]notify.Delivery, []string, error) {
	claimed := make([]notify.Delivery, 0, len(ids))
	var busy []string
	if len(ids) == 0 {
		return claimed, nil, nil
	}
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		for _, batch := range batchesOf(ids, storeBatch) {
			rows, err := tx.QueryContext(ctx, `UPDATE deliveries
				SET status = 'SENDING', lease_until = ?, attempts = attempts + 1, updated_at = ?
				WHERE notification_id = ? AND id IN (`+sqlIn(len(batch))+`)
				  AND (status = 'PENDING' OR (status = 'SENDING' AND lease_until < ?))
				RETURNING `+deliveryColumns,
				append([]any{nanosOf(leaseUntil), nanosOf(now), notificationID}, stringArgs(batch, nanosOf(now))...)...)
			if err != nil {
				return err
			}
			before := len(claimed)
			claimed, err = scanDeliveries(rows, claimed)
			if err != nil {
				return err
			}
			if len(claimed)-before == len(batch) {
				continue // every one claimed: none can be busy (the common case)
			}
			// Busy: what the UPDATE did not take because a lease on it is still running, in the
			// same transaction. The rows just claimed look the same, so they are left out.
			mine := make(map[string]bool, len(claimed)-before)
			for _, d := range claimed[before:] {
				mine[d.ID] = true
			}
			brows, err := tx.QueryContext(ctx, `SELECT id FROM deliveries
				WHERE notification_id = ? AND id IN (`+sqlIn(len(batch))+`) AND status = 'SENDING' AND lease_until >= ?`,
				append([]any{notificationID}, stringArgs(batch, nanosOf(now))...)...)
			if err != nil {
				return err
			}
			for brows.Next() {
				var id string
				if err := brows.Scan(&id); err != nil {
					brows.Close()
					return err
				}
				if !mine[id] {
					busy = append(busy, id)
				}
			}
			brows.Close()
			if err := brows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite: claim deliveries: %w", err)
	}
	return claimed, busy, nil
}

// CompleteDeliveries implements notify.DeliveryStore. Each batch of verdicts is one UPDATE …
// FROM a VALUES list guarded by status = 'SENDING'; RETURNING tells exactly which rows moved, and
// only those are counted, in the same transaction.
func (s *Store) CompleteDeliveries(ctx context.Context, notificationID string, updates []notify.DeliveryUpdate) (int, error) {
	for i, u := range updates {
		if !u.ValidVerdict() {
			return 0, fmt.Errorf("sqlite: complete deliveries of %s: %w", notificationID,
				notify.FieldError(fmt.Sprintf("updates[%d].status", i), "verdict must be SENT, FAILED, SKIPPED, EXPIRED, PENDING, or SENDING with a lease, not %q", u.Status))
		}
	}
	if len(updates) == 0 {
		return 0, nil
	}
	// The unary + on notification_id below keeps SQLite from driving the join from the
	// (notification_id, id) index: with a few hundred VALUES rows the planner otherwise walks every
	// delivery of the notification once per verdict, which grows with the campaign.

	now := s.now().UTC()
	applied := 0
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		delta := map[notify.Channel]notify.ChannelStats{}
		for _, batch := range batchesOf(updates, storeBatch) {
			const width = 8
			args := make([]any, 0, len(batch)*width+1)
			for _, u := range batch {
				at := u.At
				if at.IsZero() {
					at = now
				}
				lease := int64(0) // a verdict ends the claim; SENDING (verdict to come) renews it
				if u.Status == notify.DeliverySending {
					lease = nanosOf(u.LeaseUntil)
				}
				history, err := historyValue(u.History)
				if err != nil {
					return err
				}
				args = append(args, u.ID, string(u.Status), u.Reason, u.Detail, u.ProviderMessageID, nanosOf(at), lease, history)
			}
			args = append(args, notificationID)
			rows, err := tx.QueryContext(ctx, `WITH u (id, status, reason, detail, provider_message_id, at, lease, history) AS (
					VALUES `+sqlTuples(len(batch), width)+`)
				UPDATE deliveries SET status = u.status, reason = u.reason, detail = u.detail,
					provider_message_id = u.provider_message_id, lease_until = u.lease, updated_at = u.at,
					history = coalesce(u.history, deliveries.history)
				FROM u
				WHERE deliveries.notification_id = ? AND deliveries.id = u.id AND deliveries.status = 'SENDING'
				RETURNING deliveries.channel, deliveries.status, deliveries.reason`, args...)
			if err != nil {
				return err
			}
			n, err := countCompleted(rows, delta)
			if err != nil {
				return err
			}
			applied += n
		}
		return s.addStats(ctx, tx, notificationID, delta)
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: complete deliveries of %s: %w", notificationID, err)
	}
	return applied, nil
}

// countCompleted adds the terminal outcomes in rows (channel, new status) to delta.
func countCompleted(rows *sql.Rows, delta map[notify.Channel]notify.ChannelStats) (int, error) {
	defer rows.Close()
	n := 0
	for rows.Next() {
		var ch, st, reason string
		if err := rows.Scan(&ch, &st, &reason); err != nil {
			return 0, err
		}
		n++
		notify.CountDelivery(delta, notify.Channel(ch), notify.DeliveryStatus(st), reason, false)
	}
	return n, rows.Err()
}

// ListDeliveries implements notify.DeliveryStore, in the order the deliveries were stored
// (rowid, through deliveries_by_notification); an express notification's, while its record holds
// them, in id order. The cursor, base64url encoded so callers treat it as opaque, is "@<rowid>"
// of the last delivery returned, or an express page's last id; an id cursor met by the stored
// deliveries (the notification was handed over in between) continues after that delivery.
func (s *Store) ListDeliveries(ctx context.Context, notificationID, cursor string, limit int) ([]notify.Delivery, string, error) {
	after := ""
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(b) == 0 {
			return nil, "", fmt.Errorf("sqlite: list deliveries of %s: %w", notificationID,
				notify.FieldError("cursor", "malformed cursor"))
		}
		after = string(b)
	}
	limit = notify.PageLimit(limit)
	if xs, more, ok, err := s.listExpress(ctx, notificationID, after, limit); err != nil {
		return nil, "", fmt.Errorf("sqlite: list deliveries of %s: %w", notificationID, err)
	} else if ok {
		next := ""
		if more {
			next = base64.RawURLEncoding.EncodeToString([]byte(xs[len(xs)-1].ID))
		}
		return xs, next, nil
	}
	var from int64
	if after != "" {
		var err error
		if from, err = s.rowidAfter(ctx, notificationID, after); err != nil {
			return nil, "", fmt.Errorf("sqlite: list deliveries of %s: %w", notificationID, err)
		}
	}
	rows, err := s.db.R.QueryContext(ctx, `SELECT rowid, `+deliveryColumns+` FROM deliveries
		WHERE notification_id = ? AND rowid > ? ORDER BY rowid LIMIT ?`, notificationID, from, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list deliveries of %s: %w", notificationID, err)
	}
	var rowids []int64
	ds, err := scanDeliveriesWith(rows, make([]notify.Delivery, 0, limit+1), func() any {
		rowids = append(rowids, 0)
		return &rowids[len(rowids)-1]
	})
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list deliveries of %s: %w", notificationID, err)
	}
	next := ""
	if len(ds) > limit {
		ds = ds[:limit]
		next = base64.RawURLEncoding.EncodeToString([]byte("@" + strconv.FormatInt(rowids[limit-1], 10)))
	}
	return ds, next, nil
}

// rowidAfter is where a listing continues after cursor: "@<rowid>", or the id of one of the
// notification's deliveries.
func (s *Store) rowidAfter(ctx context.Context, notificationID, cursor string) (int64, error) {
	if n, ok := strings.CutPrefix(cursor, "@"); ok {
		if v, err := strconv.ParseInt(n, 10, 64); err == nil && v >= 0 {
			return v, nil
		}
		return 0, notify.FieldError("cursor", "malformed cursor")
	}
	var v int64
	err := s.db.R.QueryRowContext(ctx, `SELECT rowid FROM deliveries WHERE id = ? AND notification_id = ?`, cursor, notificationID).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, notify.FieldError("cursor", "the cursor names no delivery of this notification")
	}
	return v, err
}

// scanDeliveries appends the rows (deliveryColumns) to out and closes rows.
func scanDeliveries(rows *sql.Rows, out []notify.Delivery) ([]notify.Delivery, error) {
	return scanDeliveriesWith(rows, out, nil)
}

// scanDeliveriesWith is scanDeliveries for rows with one column before deliveryColumns, scanned
// into what lead returns for each row; nil lead: no such column.
func scanDeliveriesWith(rows *sql.Rows, out []notify.Delivery, lead func() any) ([]notify.Delivery, error) {
	defer rows.Close()
	for rows.Next() {
		var (
			d                notify.Delivery
			ch, prov, st     string
			lease, updatedAt int64
			history          sql.RawBytes
		)
		dest := []any{&d.ID, &d.NotificationID, &d.UserID, &ch, &prov, &d.App, &d.AddressMasked, &st,
			&d.Reason, &d.Detail, &d.Attempts, &d.ProviderMessageID, &lease, &updatedAt, &history}
		if lead != nil {
			dest = append([]any{lead()}, dest...)
		}
		if err := rows.Scan(dest...); err != nil {
			return out, err
		}
		d.Channel = notify.Channel(ch)
		d.Provider = notify.Provider(prov)
		d.Status = notify.DeliveryStatus(st)
		d.LeaseUntil = timeOfNanos(lease)
		d.UpdatedAt = timeOfNanos(updatedAt)
		if len(history) > 0 {
			if err := json.Unmarshal(history, &d.History); err != nil {
				return out, fmt.Errorf("delivery %s: history: %w", d.ID, err)
			}
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// historyValue is the history column's value of h: NULL when empty, else its JSON, as a string
// (deliveryValues compares rows' values, which a []byte cannot be).
func historyValue(h []notify.Attempt) (any, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode attempts: %w", err)
	}
	return string(b), nil
}
