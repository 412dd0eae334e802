package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"

	"herald/internal/notify"
)

// queueDeletes is group commit for Delete. The first caller becomes the leader and commits
// every Delete pending at that moment in one transaction; callers arriving meanwhile wait, and
// the oldest of them leads the next round. A lone caller pays one transaction as before; eight
// concurrent workers pay about one between them. No goroutine is kept: leadership passes from
// caller to caller.
type queueDeletes struct {
	mu      sync.Mutex
	pending []*queueDeleteReq
	busy    bool // a leader is committing
}

type queueDeleteReq struct {
	queue      string
	seq, token int64
	done       chan error // buffered 1: errQueueLead, or the result
}

// errQueueLead tells a waiting caller that it leads the next round.
var errQueueLead = errors.New("lead the next delete round")

const queueDeleteSQL = `DELETE FROM queue_messages WHERE seq = ? AND queue = ? AND receipt = ?`

// do runs req and returns its result. A caller that has queued waits for its answer even if ctx
// ends meanwhile: the round is a few milliseconds, and a leader must not walk away from the
// requests it took.
func (d *queueDeletes) do(ctx context.Context, q *Queue, req *queueDeleteReq) error {
	d.mu.Lock()
	d.pending = append(d.pending, req)
	lead := !d.busy
	d.busy = true
	d.mu.Unlock()
	if !lead {
		if err := <-req.done; err != errQueueLead {
			return err
		}
	}
	d.mu.Lock()
	batch := d.pending
	d.pending = nil
	d.mu.Unlock()

	// Detached from ctx: the batch holds other callers' deletes too.
	q.commitDeletes(context.WithoutCancel(ctx), batch)

	d.mu.Lock()
	if len(d.pending) > 0 {
		d.pending[0].done <- errQueueLead
	} else {
		d.busy = false
	}
	d.mu.Unlock()
	return <-req.done // answered by commitDeletes, req being in batch
}

// commitDeletes deletes batch in one transaction and answers every request.
func (q *Queue) commitDeletes(ctx context.Context, batch []*queueDeleteReq) {
	results := make([]error, len(batch))
	prepared, err := q.stmt(ctx, queueDeleteSQL)
	if err == nil {
		err = q.db.Tx(ctx, func(tx *sql.Tx) error {
			del := tx.StmtContext(ctx, prepared)
			for i, r := range batch {
				res, err := del.ExecContext(ctx, r.seq, r.queue, r.token)
				if err != nil {
					return err
				}
				n, err := res.RowsAffected()
				if err != nil {
					return err
				}
				results[i] = nil
				if n == 1 {
					continue
				}
				// Nothing deleted: gone already (fine) or received again since (stale).
				var one int
				switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM queue_messages WHERE seq = ?`, r.seq).Scan(&one); {
				case errors.Is(err, sql.ErrNoRows):
				case err != nil:
					return err
				default:
					results[i] = notify.Errorf(notify.ECONFLICT, "delete from %s: stale receipt: the message was received again", r.queue)
				}
			}
			return nil
		})
	}
	for i, r := range batch {
		if err != nil {
			results[i] = queueDBError(err, "delete from %s", r.queue)
		}
		r.done <- results[i]
	}
}
