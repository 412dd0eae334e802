package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"herald/internal/notify"
)

// Express notifications (notify.Express, docs/design.md §3) keep their deliveries in
// the notifications row's express column and their recipients in its recipients column, so a
// single send is one row written at ingest and the same row updated once sent.

// encodeExpress returns the express and recipients columns of n.
func encodeExpress(n *notify.Notification) (express, recipients []byte, err error) {
	if express, err = json.Marshal(n.Express); err != nil {
		return nil, nil, fmt.Errorf("encode express deliveries: %w", err)
	}
	rs := n.Recipients
	if rs == nil {
		rs = []notify.Recipient{}
	}
	if recipients, err = json.Marshal(rs); err != nil {
		return nil, nil, fmt.Errorf("encode recipients: %w", err)
	}
	return express, recipients, nil
}

func decodeExpress(b []byte) (*notify.Express, error) {
	var x notify.Express
	if err := json.Unmarshal(b, &x); err != nil {
		return nil, fmt.Errorf("decode express deliveries: %w", err)
	}
	return &x, nil
}

// readExpress reads id's status and express column inside tx.
func readExpress(ctx context.Context, tx *sql.Tx, id string) (notify.NotificationStatus, *notify.Express, error) {
	var (
		status string
		raw    []byte
	)
	err := tx.QueryRowContext(ctx, `SELECT status, express FROM notifications WHERE id = ?`, id).Scan(&status, &raw)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, notify.Errorf(notify.ENOTFOUND, "notification not found")
	}
	if err != nil {
		return "", nil, err
	}
	if raw == nil {
		return notify.NotificationStatus(status), nil, nil
	}
	x, err := decodeExpress(raw)
	return notify.NotificationStatus(status), x, err
}

// CompleteExpress implements notify.ExpressStore: one UPDATE of the notification's row.
func (s *Store) CompleteExpress(ctx context.Context, id string, updates []notify.DeliveryUpdate) (int, error) {
	applied := 0
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		status, x, err := readExpress(ctx, tx, id)
		if err != nil {
			return err
		}
		if x == nil {
			return notify.Errorf(notify.EINVALID, "notification is not express")
		}
		applied = x.Apply(updates)
		finish := !x.Pending() && status == notify.StatusProcessing
		if applied == 0 && !finish {
			return nil
		}
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("encode express deliveries: %w", err)
		}
		if finish {
			status = x.FinalStatus()
		}
		_, err = tx.ExecContext(ctx, `UPDATE notifications SET express = ?, status = ?, updated_at = ? WHERE id = ?`,
			b, string(status), nanosOf(s.now()), id)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: complete express %s: %w", id, err)
	}
	return applied, nil
}

// CompleteExpressBatch implements notify.ExpressStore: each notification's verdicts applied to
// its row as CompleteExpress applies them (the writes share transactions: DB.Tx's group
// commit). A notification no longer express keeps its records as they are.
func (s *Store) CompleteExpressBatch(ctx context.Context, batch string, done []notify.ExpressDone) error {
	errs := notify.Concurrently(len(done), 0, func(i int) error {
		if _, err := s.CompleteExpress(ctx, done[i].ID, done[i].Updates); err != nil && !notify.IsCode(err, notify.EINVALID) {
			return err
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite: complete express batch %s: %w", batch, err)
	}
	return nil
}

// HandOverExpress implements notify.ExpressStore: the deliveries become rows, their counts the
// notification's counters, in one transaction with clearing the express column.
func (s *Store) HandOverExpress(ctx context.Context, id string, updates []notify.DeliveryUpdate, reprepare bool) error {
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		_, x, err := readExpress(ctx, tx, id)
		if err != nil || x == nil {
			return err
		}
		x.Apply(updates)
		x.Release()
		now := s.now().UTC()
		// Stored in id order, the order the record listed them in, so a listing that began on
		// the record continues on the rows (ListDeliveries) without missing one.
		slices.SortFunc(x.Deliveries, func(a, b notify.Delivery) int { return strings.Compare(a.ID, b.ID) })
		for _, batch := range batchesOf(x.Deliveries, storeBatch) {
			if _, err := insertDeliveries(ctx, tx, id, batch, now, map[notify.Channel]notify.ChannelStats{}, map[string]bool{}); err != nil {
				return err
			}
		}
		if err := s.addStats(ctx, tx, id, x.Counts()); err != nil {
			return err
		}
		set := `express = NULL, updated_at = ?`
		if reprepare {
			set += `, chunks_prepared = 0`
		}
		_, err = tx.ExecContext(ctx, `UPDATE notifications SET `+set+` WHERE id = ?`, nanosOf(now), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: hand over express %s: %w", id, err)
	}
	return nil
}

// ReleaseExpressLeases ends the running lease of each of ids that is an express notification
// still PROCESSING, and returns how many it ended: the next look at one (its ingest message,
// redelivered) finds the send interrupted and hands it to the stage queues at once, as it would
// once the lease ran out. Other ids, and unknown ones, are left as they are. Like
// ReleaseBatchLeases, only for a process that knows no worker of the file is alive: a live
// worker's send would be sent twice. Express sends have no verdicts to come (AlimTalk never goes
// express), so a SENDING express delivery is one whose send was cut short.
func (s *Store) ReleaseExpressLeases(ctx context.Context, ids []string, now time.Time) (int, error) {
	n := 0
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		n = 0
		for _, id := range ids {
			status, x, err := readExpress(ctx, tx, id)
			if notify.IsCode(err, notify.ENOTFOUND) {
				continue
			}
			if err != nil {
				return err
			}
			if x == nil || status != notify.StatusProcessing || !x.Lease.After(now) {
				continue
			}
			x.Lease = now
			b, err := json.Marshal(x)
			if err != nil {
				return fmt.Errorf("encode express deliveries: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE notifications SET express = ? WHERE id = ?`, b, id); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: release express leases: %w", err)
	}
	return n, nil
}

// listExpress serves ListDeliveries for a notification whose deliveries are still in its row;
// ok is false for any other notification.
func (s *Store) listExpress(ctx context.Context, id, after string, limit int) (ds []notify.Delivery, more, ok bool, err error) {
	var raw []byte
	err = s.db.R.QueryRowContext(ctx, `SELECT express FROM notifications WHERE id = ?`, id).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && raw == nil) {
		return nil, false, false, nil
	}
	if err != nil {
		return nil, false, false, err
	}
	x, err := decodeExpress(raw)
	if err != nil {
		return nil, false, false, err
	}
	ds, more = x.Page(after, limit)
	for i := range ds {
		ds[i].NotificationID = id
	}
	return ds, more, true, nil
}
