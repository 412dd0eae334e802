// Package sqlite holds Herald's embedded adapters: the Store and a durable Queue with SQS
// semantics, on SQLite in WAL mode through a pure-Go driver (no cgo). The local runtime uses
// them; they pass the same conformance suites as the AWS adapters.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DB is one SQLite file with a single writer connection (SQLite allows one writer at a time;
// queuing writers in Go is faster than busy-waiting in SQLite) and a pool of readers.
type DB struct {
	W    *sql.DB // exactly one connection: every write and read-modify-write goes here
	R    *sql.DB // readers
	Path string

	group txGroup // Tx's group commit

	// ckpt is the checkpointer's own connection: the writer never checkpoints (its
	// wal_autocheckpoint is 0), so no commit waits while the WAL is copied into the database —
	// but for the last frames before the WAL is rewound (restartWAL).
	ckpt          *sql.DB
	restartFrames int // past this many frames in the WAL, the checkpointer rewinds it
	stopCkpt      chan struct{}
	ckptDone      chan struct{}
}

// checkpointEvery is how often the checkpointer copies the WAL into the database: a PASSIVE
// checkpoint, which never waits for the writer or readers and copies what it can.
const checkpointEvery = 100 * time.Millisecond

// walRestartFrames bounds the WAL under sustained writes: past it, the checkpointer rewinds
// the WAL (restartWAL). A PASSIVE checkpoint copies frames but never rewinds the WAL, and the
// writer rewinds it only when a transaction begins with every frame copied — which, with a
// write starting every fraction of a millisecond, never happened: registering 100,000 devices
// grew a 40 MB database's WAL to 3 GB, and 15 s of single sends to 4.4 GB. 16,384 frames of
// 4 KiB is 64 MB.
const walRestartFrames = 16384

// walWait is how long rewinding the WAL waits for readers to leave it, holding the writer.
const walWait = 100 * time.Millisecond

// walFrameBytes is a WAL frame's page: SQLite's default page size, which these databases keep.
const walFrameBytes = 4096

// busyTimeout is how long a connection waits for a lock another holds.
const busyTimeout = 10 * time.Second

// Open opens (creating if needed) the database file at path in WAL mode. path ":memory:" is not
// supported (readers would see another database); use a file in t.TempDir() in tests.
func Open(path string) (*DB, error) {
	return open(path, walRestartFrames)
}

// open is Open with the WAL's bound in frames.
func open(path string, restartFrames int) (*DB, error) {
	q := url.Values{}
	for _, p := range []string{
		"journal_mode(WAL)",
		"synchronous(NORMAL)", // durable across process crashes (SIGKILL); an OS crash may lose the last transactions
		fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()),
		"foreign_keys(ON)",
		"temp_store(MEMORY)",
		"cache_size(-32000)",
	} {
		q.Add("_pragma", p)
	}
	dsn := "file:" + path + "?" + q.Encode()
	// SQLite checkpoints on the commit that takes the WAL past 1,000 pages, inside that commit:
	// under a campaign's stream of writes that stalled every transaction queued behind it —
	// the single writer — for as long as the copy took. The checkpointer does it instead.
	//
	// The writer's page cache is a quarter of the readers': a commit that split a B-tree page
	// walks the writer's whole cache hash table, however few pages it wrote — SQLite renumbers
	// the split pages through the lock page's number, past the database's end, and truncating
	// the cache back to the database's size cannot tell which slots that touched. With 32 MB of
	// cache that walk was 3–4 % of the CPU of a stream of single sends. Storing batches over a
	// million earlier deliveries (BenchmarkRecordBatchWithHistory) was no slower with 8 MB.
	//
	// Its journal_size_limit cuts a WAL that a burst grew past the bound back to it when the WAL
	// is rewound (restartWAL); a WAL within the bound keeps its file, which the next writes
	// overwrite instead of growing a file cut to nothing again.
	w, err := sql.Open(cachingDriverName, dsn+"&_txlock=immediate&_pragma=wal_autocheckpoint(0)&_pragma=cache_size(-8000)"+
		fmt.Sprintf("&_pragma=journal_size_limit(%d)", restartFrames*walFrameBytes))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := w.PingContext(context.Background()); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	r, err := sql.Open(cachingDriverName, dsn+"&mode=ro")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0)*2)
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	c, err := sql.Open("sqlite", dsn)
	if err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	c.SetMaxOpenConns(1)
	db := &DB{W: w, R: r, Path: path, ckpt: c, restartFrames: restartFrames, stopCkpt: make(chan struct{}), ckptDone: make(chan struct{})}
	go db.checkpointer()
	return db, nil
}

// checkpointer copies the WAL into the database every checkpointEvery until Close, and once
// more, truncating the WAL, when it closes.
func (db *DB) checkpointer() {
	defer close(db.ckptDone)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-db.stopCkpt:
			_, _ = db.ckpt.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
			return
		case <-t.C:
			// A failure (the file busy past busy_timeout) is tried again at the next tick.
			var busy, frames, copied int
			err := db.ckpt.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
			if err == nil && frames > db.restartFrames {
				db.restartWAL()
			}
		}
	}
}

// restartWAL copies the WAL's last frames into the database and has the next write start the
// WAL over from its beginning (a RESTART checkpoint), on the writer's own connection, taken
// between two of its transactions: the checkpoint before it copied all but those frames, but a
// WAL rewinds only once none is left to copy, which a writer that keeps appending never allows.
// Holding the writer's one connection stops every write meanwhile, the grouped and the single
// ones. Readers still in the WAL are waited for walWait at most; past it, a later tick tries
// again. The writer's own lock wait (busyTimeout) is restored after; if it cannot be, the
// connection is discarded and the pool opens a new one from the DSN, rather than leave the
// writer giving up on a lock after walWait.
//
// Truncating the WAL to nothing instead (a TRUNCATE checkpoint) held the writer 50–60 ms each
// time while 300,000 devices were registered, and the next writes grew the file again; a
// RESTART held it 15–35 ms, and single sends, which rewind the WAL every few seconds, went
// 7–8 % faster (docs/benchmarks.md).
func (db *DB) restartWAL() {
	ctx := context.Background()
	conn, err := db.W.Conn(ctx)
	if err != nil {
		return
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, walWait.Milliseconds())); err != nil {
		discard(conn)
		return
	}
	_, _ = conn.ExecContext(ctx, `PRAGMA wal_checkpoint(RESTART)`) // busy or failed: a later tick tries again
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, busyTimeout.Milliseconds())); err != nil {
		discard(conn)
	}
}

// discard closes conn instead of returning it to its pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}

// Close stops the checkpointer and closes the pools.
func (db *DB) Close() error {
	select {
	case <-db.stopCkpt:
	default:
		close(db.stopCkpt)
	}
	<-db.ckptDone
	err0 := db.ckpt.Close()
	err1 := db.R.Close()
	err2 := db.W.Close()
	return errors.Join(err2, err1, err0)
}

// Tx runs fn in a write transaction, committing if fn returns nil. Concurrent calls share
// transactions (group commit): while one transaction commits, the calls that arrive wait, and
// the next transaction runs each of them in a savepoint of its own — so each fn still commits or
// rolls back whole, in a serial order, and a failing fn undoes only its own writes — then commits
// them together. Every BEGIN and COMMIT costs a WAL write and system calls; under a stream of
// single sends, sharing them is most of what a write costs.
func (db *DB) Tx(ctx context.Context, fn func(*sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	r := &txReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	g := &db.group
	g.mu.Lock()
	g.pending = append(g.pending, r)
	lead := !g.busy
	g.busy = true
	g.mu.Unlock()
	if lead {
		db.runGroup()
	}
	for {
		err := <-r.done
		if err != errLead {
			return err
		}
		db.runGroup()
	}
}

// maxGroup bounds how many calls share one transaction.
const maxGroup = 64

// errLead tells a waiting call that it runs the next group.
var errLead = errors.New("sqlite: lead the next group")

type txReq struct {
	ctx  context.Context
	fn   func(*sql.Tx) error
	done chan error
}

type txGroup struct {
	mu      sync.Mutex
	busy    bool // a group is running, or a caller is about to run the next
	pending []*txReq
	shared  int // transactions that ran more than one call (for tests)
}

// runGroup runs the pending calls (up to maxGroup) as one transaction, then hands the next
// group to the first call still waiting, or ends the busy state.
func (db *DB) runGroup() {
	g := &db.group
	g.mu.Lock()
	n := min(len(g.pending), maxGroup)
	batch := g.pending[:n:n]
	g.pending = append([]*txReq(nil), g.pending[n:]...)
	g.mu.Unlock()

	db.commitGroup(batch)

	g.mu.Lock()
	if len(g.pending) == 0 {
		g.busy = false
		g.mu.Unlock()
		return
	}
	next := g.pending[0]
	g.mu.Unlock()
	next.done <- errLead
}

// commitGroup runs batch in one transaction and tells each call its outcome.
func (db *DB) commitGroup(batch []*txReq) {
	results := make([]error, len(batch))
	finish := func(all error) {
		for i, r := range batch {
			if all != nil && results[i] == nil {
				results[i] = all
			}
			r.done <- results[i]
		}
	}
	if len(batch) == 1 { // alone: no savepoint, and its own context for the transaction
		r := batch[0]
		finish(runAlone(r.ctx, db.W, r.fn))
		return
	}
	db.group.mu.Lock()
	db.group.shared++
	db.group.mu.Unlock()
	// The transaction outlives any one caller's context; each fn's statements use its own.
	ctx := context.Background()
	tx, err := db.W.BeginTx(ctx, nil)
	if err != nil {
		finish(fmt.Errorf("begin: %w", err))
		return
	}
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			results[i] = fmt.Errorf("begin: %w", err)
			continue
		}
		if _, err := tx.ExecContext(ctx, `SAVEPOINT herald_group`); err != nil {
			_ = tx.Rollback()
			finish(fmt.Errorf("savepoint: %w", err))
			return
		}
		if results[i] = r.fn(tx); results[i] != nil {
			_, err = tx.ExecContext(ctx, `ROLLBACK TO herald_group`)
		}
		if err == nil {
			_, err = tx.ExecContext(ctx, `RELEASE herald_group`)
		}
		if err != nil {
			// The transaction itself is gone (an interrupted statement rolls back all of it):
			// nothing of this group is written, and every call is told so.
			_ = tx.Rollback()
			finish(fmt.Errorf("savepoint: %w", err))
			return
		}
	}
	if err := tx.Commit(); err != nil {
		finish(fmt.Errorf("commit: %w", err))
		return
	}
	finish(nil)
}

// runAlone is one call's own transaction.
func runAlone(ctx context.Context, w *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
