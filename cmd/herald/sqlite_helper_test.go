package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"herald/internal/notify"
	"herald/internal/seal"
	"herald/internal/sqlite"
)

// openSQLite opens a SQLite database in a temporary directory with a store and a queue holding
// the given queues, all closed when the test ends: the backend the command tests serve the API on.
func openSQLite(t *testing.T, queues ...notify.QueueConfig) (*sqlite.DB, *sqlite.Store, *sqlite.Queue) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	box, err := seal.New(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.NewStore(db, box)
	if err != nil {
		t.Fatal(err)
	}
	queue, err := sqlite.NewQueue(db, queues, notify.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(queue.Close)
	return db, store, queue
}
