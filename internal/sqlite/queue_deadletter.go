package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"herald/internal/notify"
)

var _ notify.DeadLetters = (*Queue)(nil)

// RedriveDeadLetter implements notify.DeadLetters: the message goes back to the queue it
// dead-lettered from, or, without a recorded source, to the only queue using dlq as its DLQ.
// A message received at the moment (a consumer of the DLQ holds it) is not moved.
func (q *Queue) RedriveDeadLetter(ctx context.Context, dlq, id string) error {
	st, err := q.state("redrive", dlq)
	if err != nil {
		return err
	}
	nowMs := q.clock.Now().UnixMilli()
	var target string
	err = q.db.Tx(ctx, func(tx *sql.Tx) error {
		var src string
		err := tx.QueryRowContext(ctx, `SELECT source FROM queue_messages WHERE queue = ? AND id = ? AND visible_at <= ?`,
			dlq, id, nowMs).Scan(&src)
		if err == sql.ErrNoRows {
			return notify.Errorf(notify.ENOTFOUND, "redrive %s: no dead letter %s", dlq, id)
		}
		if err != nil {
			return err
		}
		if target = src; target == "" {
			target = st.redriveTo
		}
		if q.queues[target] == nil || target == dlq {
			return notify.Errorf(notify.ECONFLICT, "redrive %s: dead letter %s has no source queue to go back to", dlq, id)
		}
		_, err = tx.ExecContext(ctx, `UPDATE queue_messages
			SET queue = ?, source = '', receive_count = 0, visible_at = ?, receipt = `+noReceiptSQL+`
			WHERE queue = ? AND id = ?`, target, nowMs, dlq, id)
		return err
	})
	if err != nil {
		if e := (*notify.Error)(nil); errors.As(err, &e) {
			return err
		}
		return queueDBError(err, "redrive %s: dead letter %s", dlq, id)
	}
	q.queues[target].waker.signal(1)
	return nil
}

// DeleteDeadLetter implements notify.DeadLetters.
func (q *Queue) DeleteDeadLetter(ctx context.Context, dlq, id string) error {
	if _, err := q.state("delete", dlq); err != nil {
		return err
	}
	res, err := q.db.W.ExecContext(ctx, `DELETE FROM queue_messages WHERE queue = ? AND id = ? AND visible_at <= ?`,
		dlq, id, q.clock.Now().UnixMilli())
	if err != nil {
		return queueDBError(err, "delete %s: dead letter %s", dlq, id)
	}
	if n, err := res.RowsAffected(); err != nil {
		return queueDBError(err, "delete %s: dead letter %s", dlq, id)
	} else if n == 0 {
		return notify.Errorf(notify.ENOTFOUND, "delete %s: no dead letter %s", dlq, id)
	}
	return nil
}

// PurgeDeadLetters implements notify.DeadLetters: every message of dlq, received or not, goes.
func (q *Queue) PurgeDeadLetters(ctx context.Context, dlq string) (int, error) {
	if _, err := q.state("purge", dlq); err != nil {
		return 0, err
	}
	res, err := q.db.W.ExecContext(ctx, `DELETE FROM queue_messages WHERE queue = ?`, dlq)
	if err != nil {
		return 0, queueDBError(err, "purge %s", dlq)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, queueDBError(err, "purge %s", dlq)
	}
	return int(n), nil
}
