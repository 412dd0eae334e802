package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestOpenWAL(t *testing.T) {
	t.Parallel()
	db, err := Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.W.QueryRowContext(context.Background(), "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Fatalf("journal_mode = %q, want wal", mode)
	}
	if _, err := db.W.Exec("CREATE TABLE t(x)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.W.Exec("INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.R.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("reader sees %d rows, err %v", n, err)
	}
	if _, err := db.R.Exec("INSERT INTO t VALUES (2)"); err == nil {
		t.Fatal("reader pool accepted a write")
	}
}

// The writer never checkpoints; the checkpointer does, so the WAL stays bounded under a stream
// of writes (with neither, it would hold every page ever written), and Close truncates it.
func TestCheckpointerKeepsTheWALBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wal.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := db.W.ExecContext(ctx, `CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB)`); err != nil {
		t.Fatal(err)
	}
	var auto int
	if err := db.W.QueryRowContext(ctx, `PRAGMA wal_autocheckpoint`).Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("the writer's wal_autocheckpoint = %d (%v), want 0", auto, err)
	}
	payload := make([]byte, 64<<10)
	const writes = 400 // 25 MB in all
	largest := int64(0)
	for i := range writes {
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO blobs (b) VALUES (?)`, payload)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if i%20 == 0 {
			time.Sleep(2 * checkpointEvery / 3)
		}
		if fi, err := os.Stat(path + "-wal"); err == nil {
			largest = max(largest, fi.Size())
		}
	}
	t.Logf("largest WAL %d bytes after writing %d", largest, writes*len(payload))
	if largest > int64(writes*len(payload))/2 {
		t.Fatalf("the WAL grew to %d bytes for %d written: nothing checkpointed it", largest, writes*len(payload))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		t.Fatalf("WAL of %d bytes after Close, want it truncated", fi.Size())
	}
}

// The writer's page cache is the smaller one (see Open); the readers keep theirs.
func TestWriterCacheIsSmaller(t *testing.T) {
	t.Parallel()
	db, err := Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, c := range []struct {
		name string
		conn *sql.DB
		want int
	}{{"writer", db.W, -8000}, {"reader", db.R, -32000}} {
		var got int
		if err := c.conn.QueryRowContext(context.Background(), "PRAGMA cache_size").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: cache_size = %d, want %d", c.name, got, c.want)
		}
	}
}

// Writes with no pause between them still leave the WAL bounded: the checkpointer rewinds it,
// on the writer's connection, once it holds more than its bound (here 1,024 frames, 4 MB),
// where copying alone never let it rewind, and the writer cuts the file back to the bound
// (journal_size_limit). The bound is passed by what is written in a tick or two.
func TestCheckpointerBoundsTheWALUnderSustainedWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wal.db")
	db, err := open(path, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.W.ExecContext(ctx, `CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB)`); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 16<<10)
	const written = 256 << 20
	largest, shrinks, last := int64(0), 0, int64(0)
	for range written / len(payload) {
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO blobs (b) VALUES (?)`, payload)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path + "-wal"); err == nil {
			largest = max(largest, fi.Size())
			if fi.Size() < last {
				shrinks++
			}
			last = fi.Size()
		}
	}
	t.Logf("largest WAL %d bytes after writing %d with no pause; cut back %d times", largest, written, shrinks)
	// Without the rewinds the WAL only grows, past what was written; how far
	// past the bound it gets depends on how late a busy machine runs the checkpointer's ticks.
	if shrinks < 2 || largest > written {
		t.Fatalf("the WAL grew to %d bytes for %d written, cut back %d times", largest, written, shrinks)
	}
	// The rewind waits walWait for readers; the writer's own wait is restored after it.
	var wait int
	if err := db.W.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&wait); err != nil {
		t.Fatal(err)
	}
	if wait != int(busyTimeout.Milliseconds()) {
		t.Fatalf("the writer's busy_timeout is %d ms after a rewind, want %d", wait, busyTimeout.Milliseconds())
	}
}
