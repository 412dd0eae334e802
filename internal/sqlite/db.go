// Package sqlite holds Herald's embedded adapters: the Store and a durable Queue with SQS
// semantics, on SQLite in WAL mode through a pure-Go driver (no cgo). The local runtime uses
// them; they pass the same conformance suites as the AWS adapters.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"runtime"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DB is one SQLite file with a single writer connection (SQLite allows one writer at a time;
// queuing writers in Go is faster than busy-waiting in SQLite) and a pool of readers.
type DB struct {
	W    *sql.DB // exactly one connection: every write and read-modify-write goes here
	R    *sql.DB // readers
	Path string
}

// Open opens (creating if needed) the database file at path in WAL mode. path ":memory:" is not
// supported (readers would see another database); use a file in t.TempDir() in tests.
func Open(path string) (*DB, error) {
	q := url.Values{}
	for _, p := range []string{
		"journal_mode(WAL)",
		"synchronous(NORMAL)", // durable across process crashes (SIGKILL); an OS crash may lose the last transactions
		"busy_timeout(10000)",
		"foreign_keys(ON)",
		"temp_store(MEMORY)",
		"cache_size(-32000)",
	} {
		q.Add("_pragma", p)
	}
	dsn := "file:" + path + "?" + q.Encode()
	w, err := sql.Open(cachingDriverName, dsn+"&_txlock=immediate")
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
	return &DB{W: w, R: r, Path: path}, nil
}

// Close closes both pools.
func (db *DB) Close() error {
	err1 := db.R.Close()
	err2 := db.W.Close()
	if err2 != nil {
		return err2
	}
	return err1
}

// Tx runs fn in a write transaction, committing if fn returns nil.
func (db *DB) Tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.W.BeginTx(ctx, nil)
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
