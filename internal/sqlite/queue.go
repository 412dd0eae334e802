package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"

	"herald/internal/notify"
)

// Queue is a durable queue with SQS semantics kept in SQLite: the local runtime's stand-in for
// SQS. Every message is a row of queue_messages; a receive is one write transaction that claims
// the oldest visible rows and hands out a fresh random receipt, so a receipt goes stale the
// moment the message is received again. Waiting receivers are woken in-process (see
// queueWaker), never by polling the database in a loop.
type Queue struct {
	db      *DB
	clock   notify.Clock
	queues  map[string]*queueState // fixed after NewQueue, so read without a lock
	stmts   sync.Map               // SQL text → *sql.Stmt prepared on the writer connection
	deletes queueDeletes
	// OnDeadLetter, when set (before the first Receive), hears of every message the queue
	// itself moves to its DLQ for having used up its receives — what SQS's redrive policy does
	// without telling anyone — after the move is committed. It runs on the receiving goroutine
	// and must not block.
	OnDeadLetter func(queue string, m notify.Message)
}

var _ notify.Queue = (*Queue)(nil)

// Limits follow SQS so that code written against the local runtime behaves the same in AWS.
const (
	queueMaxBody           = 1 << 20 // 1 MiB
	queueMaxReceive        = 10
	queueMaxDelay          = notify.MaxQueueDelay
	queueMaxVisibility     = 12 * time.Hour
	queueDefaultVisibility = 30 * time.Second
	// queueFallbackPoll bounds how long a waiting Receive trusts in-process signals alone: it
	// catches messages written by another process on the same file.
	queueFallbackPoll = 250 * time.Millisecond
	// queueInsertRows keeps a multi-row INSERT well under SQLite's 32766 bound parameters.
	queueInsertRows = 500
)

// queueState is one registered queue.
type queueState struct {
	cfg notify.QueueConfig
	dlq *queueState // nil when messages never dead-letter
	// redriveTo is where Redrive sends DLQ messages that carry no source (sent to the DLQ
	// directly): the one queue that names this one as its DLQ, or "" when that is ambiguous.
	redriveTo string
	waker     queueWaker
}

// queueSchema: seq is AUTOINCREMENT so a deleted message's number is never reused and an old
// receipt can never match a newer message. The index serves both the receive scan (oldest visible
// first) and min(visible_at) for the wake-up timer.
const queueSchema = `
CREATE TABLE IF NOT EXISTS queue_messages (
	seq           INTEGER PRIMARY KEY AUTOINCREMENT,
	id            TEXT    NOT NULL,
	queue         TEXT    NOT NULL,
	body          BLOB    NOT NULL,
	group_id      TEXT    NOT NULL DEFAULT '',
	attributes    TEXT,                       -- JSON object; NULL when there are none
	sent_at       INTEGER NOT NULL,           -- unix ms
	visible_at    INTEGER NOT NULL,           -- unix ms; in the future while delayed or in flight
	receive_count INTEGER NOT NULL DEFAULT 0,
	receipt       INTEGER NOT NULL DEFAULT 0, -- random, odd, new on every receive; even (queueNoReceipt, or 0) = no valid receipt
	source        TEXT    NOT NULL DEFAULT '', -- in a DLQ: the queue the message came from
	held          INTEGER NOT NULL DEFAULT 0   -- 1 once ChangeVisibility set visible_at (a backoff, a hold); 0 from each receive
);
CREATE INDEX IF NOT EXISTS queue_messages_ready ON queue_messages(queue, visible_at);
`

// NewQueue creates the queue tables in db if needed and registers cfgs. A DLQ named by a config
// but not declared itself is registered with default settings, so callers need not list DLQs.
// A queue with MaxReceiveCount 0 or no DLQ never dead-letters. Messages of queues no longer
// configured stay in the file untouched. clock gives every stored time (nil: the system clock);
// waits and wake-up timers run on real time.
func NewQueue(db *DB, cfgs []notify.QueueConfig, clock notify.Clock) (*Queue, error) {
	if clock == nil {
		clock = notify.SystemClock{}
	}
	q := &Queue{db: db, clock: clock, queues: make(map[string]*queueState, len(cfgs))}
	var problems []error
	for i, c := range cfgs {
		switch {
		case c.Name == "":
			problems = append(problems, fmt.Errorf("queues[%d]: empty name", i))
			continue
		case q.queues[c.Name] != nil:
			problems = append(problems, fmt.Errorf("queue %s: declared twice", c.Name))
			continue
		case c.DLQ == c.Name:
			problems = append(problems, fmt.Errorf("queue %s: is its own DLQ", c.Name))
		case c.MaxReceiveCount < 0:
			problems = append(problems, fmt.Errorf("queue %s: negative MaxReceiveCount", c.Name))
		case c.VisibilityTimeout < 0 || c.VisibilityTimeout > queueMaxVisibility:
			problems = append(problems, fmt.Errorf("queue %s: VisibilityTimeout %s outside 0..%s", c.Name, c.VisibilityTimeout, queueMaxVisibility))
		}
		q.queues[c.Name] = &queueState{cfg: c}
	}
	for _, c := range cfgs {
		if c.DLQ != "" && q.queues[c.DLQ] == nil {
			q.queues[c.DLQ] = &queueState{cfg: notify.QueueConfig{Name: c.DLQ}}
		}
	}
	if len(problems) > 0 {
		return nil, &notify.Error{Code: notify.EINVALID, Message: "queue config", Err: errors.Join(problems...)}
	}
	sources := map[string][]string{} // dlq → queues that dead-letter into it
	for _, st := range q.queues {
		if c := st.cfg; c.DLQ != "" && c.DLQ != c.Name {
			sources[c.DLQ] = append(sources[c.DLQ], c.Name)
			if c.MaxReceiveCount > 0 {
				st.dlq = q.queues[c.DLQ]
			}
		}
	}
	for dlq, srcs := range sources {
		if len(srcs) == 1 {
			q.queues[dlq].redriveTo = srcs[0]
		}
	}
	for _, st := range q.queues {
		st.waker.fire = func() { q.fire(st) }
	}
	if _, err := db.W.ExecContext(context.Background(), queueSchema); err != nil {
		return nil, queueDBError(err, "create queue schema")
	}
	// A queue file from before the held column: added once. Both values are stored in no bytes
	// beyond the row header, so setting it never changes a row's size (see queueNoReceipt).
	var hasHeld bool
	if err := db.W.QueryRowContext(context.Background(),
		`SELECT count(*) > 0 FROM pragma_table_info('queue_messages') WHERE name = 'held'`).Scan(&hasHeld); err != nil {
		return nil, queueDBError(err, "read queue schema")
	}
	if !hasHeld {
		if _, err := db.W.ExecContext(context.Background(), `ALTER TABLE queue_messages ADD COLUMN held INTEGER NOT NULL DEFAULT 0`); err != nil {
			return nil, queueDBError(err, "add the held column")
		}
	}
	return q, nil
}

// Released is a message ReleaseInFlight made visible again, and its queue.
type Released struct {
	Queue string
	notify.Message
}

// ReleaseInFlight makes every message that a receive took and nobody has deleted or changed the
// visibility of since visible again now, with no valid receipt, and returns them (without
// receipts): what their visibility timeouts would do once they ran out. Only a process that knows no
// receiver of the file is alive may call it — the local runtime at start, holding its data
// directory's lock — since a live receiver's messages would be delivered twice. Messages whose
// visibility ChangeVisibility set (backoffs, holds until a send window) and delayed sends keep
// their time; receive counts are kept, so a message that kills its process each time still ends
// in its DLQ.
func (q *Queue) ReleaseInFlight(ctx context.Context) ([]Released, error) {
	now := q.clock.Now().UnixMilli()
	rows, err := q.db.W.QueryContext(ctx, `UPDATE queue_messages SET visible_at = ?, receipt = `+noReceiptSQL+`
		WHERE held = 0 AND (receipt & 1) = 1 AND visible_at > ?
		RETURNING queue, id, body, group_id, attributes, sent_at, receive_count`, now, now)
	if err != nil {
		return nil, queueDBError(err, "release in-flight messages")
	}
	defer rows.Close()
	var out []Released
	for rows.Next() {
		var r Released
		if r.Message, err = queueScanMessage(rows, "release in-flight messages", &r.Queue); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, queueDBError(err, "release in-flight messages")
	}
	for _, st := range q.queues {
		st.waker.signal(len(out))
	}
	return out, nil
}

// Close stops the wake-up timers and releases prepared statements. Call it once consumers have
// stopped; the DB stays open for its other users.
func (q *Queue) Close() {
	for _, st := range q.queues {
		st.waker.close()
	}
	q.stmts.Range(func(k, v any) bool {
		v.(*sql.Stmt).Close()
		q.stmts.Delete(k)
		return true
	})
}

func (q *Queue) state(op, queue string) (*queueState, error) {
	st := q.queues[queue]
	if st == nil {
		return nil, notify.Errorf(notify.ENOTFOUND, "%s: unknown queue %q", op, queue)
	}
	return st, nil
}

// Send enqueues msgs in one transaction (one multi-row INSERT per 500 messages).
func (q *Queue) Send(ctx context.Context, queue string, msgs ...notify.OutMessage) error {
	st, err := q.state("send", queue)
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	now := q.clock.Now()
	nowMs := now.UnixMilli()
	args := make([]any, 0, 7*len(msgs))
	visibleNow := false
	var soonest time.Duration = -1
	for i, m := range msgs {
		if len(m.Body) > queueMaxBody {
			return notify.Errorf(notify.ETOOLARGE, "send %s: message %d: body of %d bytes is over the %d-byte limit", queue, i, len(m.Body), queueMaxBody)
		}
		if m.Delay < 0 || m.Delay > queueMaxDelay {
			return notify.FieldError(fmt.Sprintf("msgs[%d].delay", i), "send %s: delay %s outside 0..%s", queue, m.Delay, queueMaxDelay)
		}
		attrs, err := queueEncodeAttributes(m.Attributes)
		if err != nil {
			return notify.FieldError(fmt.Sprintf("msgs[%d].attributes", i), "send %s: %v", queue, err)
		}
		body := m.Body
		if body == nil {
			body = []byte{} // NOT NULL column; nil would bind as NULL
		}
		args = append(args, notify.NewID("m_", now), queue, body, m.GroupID, attrs, nowMs, now.Add(m.Delay).UnixMilli())
		if m.Delay == 0 {
			visibleNow = true
		} else if soonest < 0 || m.Delay < soonest {
			soonest = m.Delay
		}
	}
	// Prepare before the transaction: the writer pool's only connection is the transaction's.
	stmts := make(map[int]*sql.Stmt, 2)
	for lo := 0; lo < len(msgs); lo += queueInsertRows {
		if rows := min(queueInsertRows, len(msgs)-lo); rows <= queueMaxReceive || rows == queueInsertRows {
			if stmts[rows], err = q.stmt(ctx, queueInsertSQL(rows)); err != nil {
				return queueDBError(err, "send to %s", queue)
			}
		}
	}
	err = q.db.Tx(ctx, func(tx *sql.Tx) error {
		for lo := 0; lo < len(msgs); lo += queueInsertRows {
			hi := min(lo+queueInsertRows, len(msgs))
			var err error
			if stmt := stmts[hi-lo]; stmt != nil {
				_, err = tx.StmtContext(ctx, stmt).ExecContext(ctx, args[7*lo:7*hi]...)
			} else {
				_, err = tx.ExecContext(ctx, queueInsertSQL(hi-lo), args[7*lo:7*hi]...)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return queueDBError(err, "send %d messages to %s", len(msgs), queue)
	}
	if visibleNow {
		st.waker.signal(1)
	}
	if soonest >= 0 {
		st.waker.wakeIn(soonest)
	}
	return nil
}

var queueInsertSQLs sync.Map // rows → SQL text, for the shapes that are prepared

func queueInsertSQL(rows int) string {
	cached := rows <= queueMaxReceive || rows == queueInsertRows
	if s, ok := queueInsertSQLs.Load(rows); ok {
		return s.(string)
	}
	var b strings.Builder
	b.WriteString("INSERT INTO queue_messages (id, queue, body, group_id, attributes, sent_at, visible_at, receipt) VALUES ")
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?," + noReceiptSQL + ")")
	}
	s := b.String()
	if cached {
		queueInsertSQLs.Store(rows, s)
	}
	return s
}

// stmt returns query prepared on the writer pool; bind it to a transaction with tx.StmtContext.
// The pool has exactly one long-lived connection, so preparing once saves SQLite recompiling
// the same statement on every call. Only the few statement shapes of the hot path are kept
// (receive, delete, change visibility, inserts of up to 10 rows and of full chunks). Never
// call it inside a transaction: it needs the connection the transaction holds.
func (q *Queue) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	s, ok := q.stmts.Load(query)
	if !ok {
		p, err := q.db.W.PrepareContext(ctx, query)
		if err != nil {
			return nil, err
		}
		if s, ok = q.stmts.LoadOrStore(query, p); ok {
			p.Close()
		} else {
			s = p
		}
	}
	return s.(*sql.Stmt), nil
}

// queueNoReceipt is a row's receipt while no receive holds it: even, so no receipt handle
// matches it (they are odd), and with bit 62 set, as every receipt has, so that SQLite stores
// every receipt in the same 8 bytes. SQLite rewrites a row in place only when its size is
// unchanged, and then writes only the pages whose bytes changed; a receipt that grew the row
// from 0 to 8 bytes made the first receive of each message rewrite its whole body (a large
// message's every overflow page, freed and written again) on the queue's one writer.
const queueNoReceipt int64 = 1 << 62

// noReceiptSQL is queueNoReceipt as an SQL literal.
var noReceiptSQL = strconv.FormatInt(queueNoReceipt, 10)

// queueReceiveSQL claims the oldest visible messages, each with a new receipt: 61 random bits,
// bit 62 set and odd (see queueNoReceipt). Its LIMIT is `? + 0`, not `?`: SQLite's planner reads
// a bare bound LIMIT and marks the statement to be prepared again whenever that value changes,
// and receives ask for every count from 1 to a batch's size (a receive of messages that
// alternated between two limits spent a quarter of its time preparing the statement again).
var queueReceiveSQL = `
UPDATE queue_messages
SET receive_count = receive_count + 1, visible_at = ?, held = 0, receipt = (random() & ` +
	strconv.FormatInt(queueNoReceipt-1, 10) + `) | ` + strconv.FormatInt(queueNoReceipt+1, 10) + `
WHERE seq IN (
	SELECT seq FROM queue_messages
	WHERE queue = ? AND visible_at <= ?
	ORDER BY visible_at, seq
	LIMIT ? + 0)
RETURNING seq, id, body, group_id, attributes, sent_at, receive_count, receipt`

// Receive implements notify.Queue. visibility 0 means the queue's VisibilityTimeout (30 s when
// that is 0 too). A cancelled ctx ends a waiting Receive with an EUNAVAILABLE error that wraps
// ctx.Err().
func (q *Queue) Receive(ctx context.Context, queue string, max int, visibility, wait time.Duration) ([]notify.Message, error) {
	st, err := q.state("receive", queue)
	if err != nil {
		return nil, err
	}
	if max < 1 || max > queueMaxReceive {
		return nil, notify.FieldError("max", "receive %s: max %d outside 1..%d", queue, max, queueMaxReceive)
	}
	if visibility < 0 || visibility > queueMaxVisibility {
		return nil, notify.FieldError("visibility", "receive %s: visibility %s outside 0..%s", queue, visibility, queueMaxVisibility)
	}
	if wait < 0 {
		return nil, notify.FieldError("wait", "receive %s: negative wait %s", queue, wait)
	}
	if visibility == 0 {
		visibility = st.cfg.VisibilityTimeout
		if visibility == 0 {
			visibility = queueDefaultVisibility
		}
	}
	if wait == 0 {
		msgs, _, err := q.receiveOnce(ctx, st, max, visibility, false)
		return msgs, err
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		// Register before looking, so a Send that commits after our look still finds us.
		w := st.waker.add()
		msgs, next, err := q.receiveOnce(ctx, st, max, visibility, true)
		if err != nil || len(msgs) > 0 {
			st.waker.leave(w)
			return msgs, err
		}
		st.waker.wakeIn(min(next, queueFallbackPoll))
		select {
		case <-w.ch:
		case <-deadline.C:
			st.waker.leave(w)
			return nil, nil
		case <-ctx.Done():
			st.waker.leave(w)
			return nil, notify.Wrap(notify.EUNAVAILABLE, ctx.Err(), "receive %s", queue)
		}
	}
}

// receiveOnce claims up to max visible messages in one write transaction, moving those that
// have used up their receives to the DLQ on the way. When nothing was visible and wantNext is
// set, next is how long until the queue's next message becomes visible (queueFallbackPoll if
// the queue is empty).
func (q *Queue) receiveOnce(ctx context.Context, st *queueState, max int, visibility time.Duration, wantNext bool) (out []notify.Message, next time.Duration, err error) {
	now := q.clock.Now()
	nowMs := now.UnixMilli()
	until := now.Add(visibility).UnixMilli()
	name := st.cfg.Name
	next = queueFallbackPoll
	dead := 0
	var moved []notify.Message
	prepared, err := q.stmt(ctx, queueReceiveSQL)
	if err != nil {
		return nil, 0, queueDBError(err, "receive %s", name)
	}
	err = q.db.Tx(ctx, func(tx *sql.Tx) error {
		out, dead, moved = out[:0], 0, moved[:0]
		receive := tx.StmtContext(ctx, prepared)
		for len(out) < max {
			limit := max - len(out)
			got, exhausted, err := queueScanReceived(ctx, receive, until, name, nowMs, limit)
			if err != nil {
				return err
			}
			var deadSeqs []any
			for _, r := range got {
				if st.dlq != nil && r.msg.ReceiveCount > st.cfg.MaxReceiveCount {
					deadSeqs = append(deadSeqs, r.seq)
					moved = append(moved, r.msg)
					continue
				}
				out = append(out, r.msg)
			}
			if len(deadSeqs) > 0 {
				// The claim above counted a receive that never happened; undo it so the DLQ
				// shows how often the message was really delivered.
				args := append([]any{st.dlq.cfg.Name, name, nowMs}, deadSeqs...)
				if _, err := tx.ExecContext(ctx, `UPDATE queue_messages
					SET queue = ?, source = ?, visible_at = ?, receive_count = receive_count - 1, receipt = `+noReceiptSQL+`
					WHERE seq IN (?`+strings.Repeat(",?", len(deadSeqs)-1)+`)`, args...); err != nil {
					return err
				}
				dead += len(deadSeqs)
			}
			if len(deadSeqs) == 0 || exhausted {
				break
			}
		}
		if wantNext && len(out) == 0 {
			var at sql.NullInt64
			if err := tx.QueryRowContext(ctx, `SELECT min(visible_at) FROM queue_messages WHERE queue = ? AND visible_at > ?`,
				name, nowMs).Scan(&at); err != nil {
				return err
			}
			if at.Valid {
				next = time.UnixMilli(at.Int64).Sub(now)
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, queueDBError(err, "receive %s", name)
	}
	if dead > 0 {
		st.dlq.waker.signal(1)
		if q.OnDeadLetter != nil {
			for _, m := range moved {
				m.ReceiveCount-- // as the UPDATE recorded it
				q.OnDeadLetter(name, m)
			}
		}
	}
	if len(out) > 0 {
		// The claimed messages come back if not deleted in time: have a waiter look then.
		st.waker.wakeIn(visibility)
	}
	if len(out) == max {
		// There may be more: hand over to the next waiter rather than waking all at once.
		st.waker.signal(1)
	}
	return out, next, nil
}

type queueReceived struct {
	seq int64
	msg notify.Message
}

// queueScanReceived runs the claim and reports whether fewer than limit rows were visible.
func queueScanReceived(ctx context.Context, stmt *sql.Stmt, until int64, name string, nowMs int64, limit int) ([]queueReceived, bool, error) {
	rows, err := stmt.QueryContext(ctx, until, name, nowMs, limit)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	got := make([]queueReceived, 0, limit)
	for rows.Next() {
		var (
			r       queueReceived
			attrs   sql.NullString
			sentAt  int64
			receipt int64
		)
		if err := rows.Scan(&r.seq, &r.msg.ID, &r.msg.Body, &r.msg.GroupID, &attrs, &sentAt, &r.msg.ReceiveCount, &receipt); err != nil {
			return nil, false, err
		}
		if r.msg.Attributes, err = queueDecodeAttributes(attrs); err != nil {
			return nil, false, fmt.Errorf("message %s: %w", r.msg.ID, err)
		}
		r.msg.SentAt = time.UnixMilli(sentAt).UTC()
		r.msg.ReceiptHandle = queueReceipt(r.seq, receipt)
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	// RETURNING order is unspecified; hand messages out oldest first.
	slices.SortFunc(got, func(a, b queueReceived) int { return cmp.Compare(a.seq, b.seq) })
	return got, len(got) < limit, nil
}

// Delete implements notify.Queue. Deleting a message that is already gone succeeds, as in SQS,
// so a consumer may repeat a Delete whose answer it lost. Concurrent Deletes share one commit
// (see queueDeletes): workers delete one message at a time, and a commit per message would
// make the commit, not the work, the limit.
func (q *Queue) Delete(ctx context.Context, queue, receiptHandle string) error {
	if _, err := q.state("delete", queue); err != nil {
		return err
	}
	seq, token, err := queueParseReceipt(receiptHandle)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return notify.Wrap(notify.EUNAVAILABLE, err, "delete from %s", queue)
	}
	return q.deletes.do(ctx, q, &queueDeleteReq{queue: queue, seq: seq, token: token, done: make(chan error, 1)})
}

// ChangeVisibility implements notify.Queue. ENOTFOUND when the message is gone.
func (q *Queue) ChangeVisibility(ctx context.Context, queue, receiptHandle string, d time.Duration) error {
	st, err := q.state("change visibility", queue)
	if err != nil {
		return err
	}
	if d < 0 || d > queueMaxVisibility {
		return notify.FieldError("visibility", "change visibility in %s: %s outside 0..%s", queue, d, queueMaxVisibility)
	}
	seq, token, err := queueParseReceipt(receiptHandle)
	if err != nil {
		return err
	}
	stmt, err := q.stmt(ctx, `UPDATE queue_messages SET visible_at = ?, held = 1 WHERE seq = ? AND queue = ? AND receipt = ?`)
	if err != nil {
		return queueDBError(err, "change visibility in %s", queue)
	}
	res, err := stmt.ExecContext(ctx, q.clock.Now().Add(d).UnixMilli(), seq, queue, token)
	if err != nil {
		return queueDBError(err, "change visibility in %s", queue)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return queueDBError(err, "change visibility in %s", queue)
	}
	if n == 1 {
		if d == 0 {
			st.waker.signal(1)
		} else {
			st.waker.wakeIn(d)
		}
		return nil
	}
	exists, err := q.exists(ctx, seq)
	if err != nil {
		return queueDBError(err, "change visibility in %s", queue)
	}
	if exists {
		return notify.Errorf(notify.ECONFLICT, "change visibility in %s: stale receipt: the message was received again", queue)
	}
	return notify.Errorf(notify.ENOTFOUND, "change visibility in %s: the message was deleted", queue)
}

// exists asks the writer, not a reader, so the answer follows the write that just missed.
func (q *Queue) exists(ctx context.Context, seq int64) (bool, error) {
	var one int
	err := q.db.W.QueryRowContext(ctx, `SELECT 1 FROM queue_messages WHERE seq = ?`, seq).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Peek implements notify.Queue: up to max messages of any visibility, oldest first, without
// receipts and without changing them.
func (q *Queue) Peek(ctx context.Context, queue string, max int) ([]notify.Message, error) {
	if _, err := q.state("peek", queue); err != nil {
		return nil, err
	}
	if max < 1 {
		return nil, notify.FieldError("max", "peek %s: max %d below 1", queue, max)
	}
	rows, err := q.db.R.QueryContext(ctx, `SELECT id, body, group_id, attributes, sent_at, receive_count
		FROM queue_messages WHERE queue = ? ORDER BY seq LIMIT ?`, queue, max)
	if err != nil {
		return nil, queueDBError(err, "peek %s", queue)
	}
	defer rows.Close()
	var out []notify.Message
	for rows.Next() {
		m, err := queueScanMessage(rows, "peek "+queue)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, queueDBError(err, "peek %s", queue)
	}
	return out, nil
}

// Redrive implements notify.Queue. Each message goes back to the queue it dead-lettered from;
// one without a recorded source goes to the only queue using dlq as its DLQ, and stays if there
// is no such single queue (or its source is no longer configured).
func (q *Queue) Redrive(ctx context.Context, dlq string) (int, error) {
	st, err := q.state("redrive", dlq)
	if err != nil {
		return 0, err
	}
	nowMs := q.clock.Now().UnixMilli()
	moved := map[string]int{}
	err = q.db.Tx(ctx, func(tx *sql.Tx) error {
		clear(moved)
		rows, err := tx.QueryContext(ctx, `SELECT DISTINCT source FROM queue_messages WHERE queue = ?`, dlq)
		if err != nil {
			return err
		}
		var sources []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				rows.Close()
				return err
			}
			sources = append(sources, s)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, src := range sources {
			target := src
			if target == "" {
				target = st.redriveTo
			}
			if q.queues[target] == nil || target == dlq {
				continue
			}
			res, err := tx.ExecContext(ctx, `UPDATE queue_messages
				SET queue = ?, source = '', receive_count = 0, visible_at = ?, receipt = `+noReceiptSQL+`
				WHERE queue = ? AND source = ?`, target, nowMs, dlq, src)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			moved[target] += int(n)
		}
		return nil
	})
	if err != nil {
		return 0, queueDBError(err, "redrive %s", dlq)
	}
	total := 0
	for target, n := range moved {
		total += n
		if n > 0 {
			q.queues[target].waker.signal(1)
		}
	}
	return total, nil
}

// Stats implements notify.Queue. In flight means received at least once and not visible;
// delayed means never received and not visible yet. The oldest message's age counts from its
// first send: a redriven message keeps its sent_at.
func (q *Queue) Stats(ctx context.Context, queue string) (notify.QueueStats, error) {
	var s notify.QueueStats
	if _, err := q.state("stats", queue); err != nil {
		return s, err
	}
	nowMs := q.clock.Now().UnixMilli()
	var oldest sql.NullInt64
	err := q.db.R.QueryRowContext(ctx, `SELECT
			coalesce(sum(visible_at <= ?1), 0),
			coalesce(sum(visible_at > ?1 AND receive_count > 0), 0),
			coalesce(sum(visible_at > ?1 AND receive_count = 0), 0),
			min(sent_at)
		FROM queue_messages WHERE queue = ?2`, nowMs, queue).Scan(&s.Visible, &s.InFlight, &s.Delayed, &oldest)
	if err != nil {
		return s, queueDBError(err, "stats %s", queue)
	}
	if oldest.Valid {
		age := max(0, (nowMs-oldest.Int64)/1000)
		s.OldestAgeSeconds = &age
	}
	return s, nil
}

// fire runs on the queue's timer: if a message is visible now, one waiter is woken; otherwise
// the timer is set for the next one (or the fallback poll). It only reads, so an idle queue
// with waiters costs one cheap query per poll interval, not a write transaction per waiter.
func (q *Queue) fire(st *queueState) {
	if !st.waker.fired() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var at sql.NullInt64
	err := q.db.R.QueryRowContext(ctx, `SELECT min(visible_at) FROM queue_messages WHERE queue = ?`, st.cfg.Name).Scan(&at)
	now := q.clock.Now()
	if err != nil || (at.Valid && at.Int64 <= now.UnixMilli()) {
		// On error, let a waiter try: it will report the problem to its caller.
		st.waker.signal(1)
		return
	}
	d := queueFallbackPoll
	if at.Valid {
		d = min(d, time.UnixMilli(at.Int64).Sub(now))
	}
	st.waker.wakeIn(d)
}

// Receipt handles are "<seq>.<token>": the row and the random token of the receive that issued it.
func queueReceipt(seq, token int64) string {
	return strconv.FormatInt(seq, 10) + "." + strconv.FormatUint(uint64(token), 16)
}

func queueParseReceipt(h string) (seq, token int64, err error) {
	s, t, ok := strings.Cut(h, ".")
	if ok {
		var u uint64
		seq, err = strconv.ParseInt(s, 10, 64)
		if err == nil {
			u, err = strconv.ParseUint(t, 16, 64)
		}
		if err == nil && u&1 == 1 { // receipts are odd (queueNoReceipt)
			return seq, int64(u), nil
		}
	}
	return 0, 0, notify.FieldError("receiptHandle", "malformed receipt handle %q", h)
}

func queueEncodeAttributes(attrs map[string]string) (any, error) {
	if len(attrs) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(attrs)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// queueScanMessage reads a row whose last columns are id, body, group_id, attributes, sent_at and
// receive_count, its first ones into lead; op names the operation in errors.
func queueScanMessage(rows *sql.Rows, op string, lead ...any) (notify.Message, error) {
	var (
		m      notify.Message
		attrs  sql.NullString
		sentAt int64
	)
	if err := rows.Scan(append(lead, &m.ID, &m.Body, &m.GroupID, &attrs, &sentAt, &m.ReceiveCount)...); err != nil {
		return m, queueDBError(err, "%s", op)
	}
	var err error
	if m.Attributes, err = queueDecodeAttributes(attrs); err != nil {
		return m, notify.Wrap(notify.EINTERNAL, err, "%s: message %s", op, m.ID)
	}
	m.SentAt = time.UnixMilli(sentAt).UTC()
	return m, nil
}

func queueDecodeAttributes(s sql.NullString) (map[string]string, error) {
	if !s.Valid {
		return nil, nil
	}
	var attrs map[string]string
	if err := json.Unmarshal([]byte(s.String), &attrs); err != nil {
		return nil, fmt.Errorf("decode attributes: %w", err)
	}
	return attrs, nil
}

// queueDBError gives a database failure its code: a cancelled context, a busy or locked database
// and similar transient states are EUNAVAILABLE; everything else EINTERNAL. Both are retryable,
// so nothing is lost either way; the distinction is for operators reading logs.
func queueDBError(err error, format string, args ...any) error {
	code := notify.EINTERNAL
	var se *sqlite.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code = notify.EUNAVAILABLE
	case errors.As(err, &se):
		switch se.Code() & 0xff {
		case 5, 6, 10: // SQLITE_BUSY, SQLITE_LOCKED, SQLITE_IOERR
			code = notify.EUNAVAILABLE
		}
	}
	return notify.Wrap(code, err, format, args...)
}

// Depth is how many messages queue holds (ready, delayed and in flight): one count over its
// index, cheaper than Stats, for the local runtime's backpressure.
func (q *Queue) Depth(ctx context.Context, queue string) (int, error) {
	var n int
	if err := q.db.R.QueryRowContext(ctx, `SELECT count(*) FROM queue_messages WHERE queue = ?`, queue).Scan(&n); err != nil {
		return 0, queueDBError(err, "depth of %s", queue)
	}
	return n, nil
}

var _ notify.QueueBrowser = (*Queue)(nil)

// Browse implements notify.QueueBrowser on the queue table: visible (visible_at ≤ now), in
// flight (received, not visible) or delayed (never received, not visible yet), by sequence;
// the cursor is the last sequence shown.
func (q *Queue) Browse(ctx context.Context, queue, state, after string, limit int) ([]notify.Message, string, error) {
	if _, err := q.state("browse", queue); err != nil {
		return nil, "", err
	}
	var cond string
	switch state {
	case notify.MessageVisible:
		cond = "visible_at <= ?1"
	case notify.MessageInFlight:
		cond = "visible_at > ?1 AND receive_count > 0"
	case notify.MessageDelayed:
		cond = "visible_at > ?1 AND receive_count = 0"
	default:
		return nil, "", notify.FieldError("state", "want visible, in_flight or delayed, got %q", state)
	}
	var seq int64
	if after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil || n < 0 {
			return nil, "", notify.FieldError("cursor", "not a cursor of this listing")
		}
		seq = n
	}
	if limit < 1 || limit > 1000 {
		return nil, "", notify.FieldError("limit", "must be 1–1000")
	}
	rows, err := q.db.R.QueryContext(ctx, `SELECT seq, id, body, group_id, attributes, sent_at, receive_count
		FROM queue_messages WHERE queue = ?2 AND seq > ?3 AND `+cond+` ORDER BY seq LIMIT ?4`,
		q.clock.Now().UnixMilli(), queue, seq, limit+1)
	if err != nil {
		return nil, "", queueDBError(err, "browse %s", queue)
	}
	defer rows.Close()
	var out []notify.Message
	var seqs []int64
	for rows.Next() {
		var s int64
		m, err := queueScanMessage(rows, "browse "+queue, &s)
		if err != nil {
			return nil, "", err
		}
		out, seqs = append(out, m), append(seqs, s)
	}
	if err := rows.Err(); err != nil {
		return nil, "", queueDBError(err, "browse %s", queue)
	}
	next := ""
	if len(out) > limit {
		out, next = out[:limit], strconv.FormatInt(seqs[limit-1], 10)
	}
	return out, next, nil
}
