package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// kvDB is a fresh database with one table kv (k, v), closed when the test ends.
func kvDB(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "kv.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Tx(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(context.Background(), `CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT NOT NULL)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return db
}

// Concurrent transactions share commits, and each still commits or rolls back whole: a failing
// one undoes only its own writes, a canceled one runs nothing, and the rest are all there.
func TestTxGroupCommitKeepsEachCallAtomic(t *testing.T) {
	t.Parallel()
	db := kvDB(t)
	ctx := context.Background()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	const n = 300
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := ctx
			if i%50 == 7 {
				c = canceled
			}
			errs[i] = db.Tx(c, func(tx *sql.Tx) error {
				for j := range 2 { // two rows, so a partial write would show
					if _, err := tx.ExecContext(c, `INSERT INTO kv (k, v) VALUES (?, ?)`, i*10+j, "x"); err != nil {
						return err
					}
				}
				if i == 0 {
					time.Sleep(5 * time.Millisecond) // let the others pile up behind the first
				}
				if i%7 == 3 {
					return fmt.Errorf("call %d fails", i)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	want := 0
	for i, err := range errs {
		switch {
		case i%50 == 7:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("call %d (canceled): %v", i, err)
			}
		case i%7 == 3:
			if err == nil || err.Error() != fmt.Sprintf("call %d fails", i) {
				t.Errorf("call %d: %v, want its own error", i, err)
			}
		default:
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
			want += 2
		}
	}
	rows, err := db.R.QueryContext(ctx, `SELECT k FROM kv`)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for rows.Next() {
		var k int
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		if i := k / 10; i%7 == 3 || i%50 == 7 {
			t.Errorf("row %d of a call that failed is there", k)
		}
		got++
	}
	rows.Close()
	if got != want {
		t.Fatalf("%d rows, want %d", got, want)
	}
	db.group.mu.Lock()
	shared := db.group.shared
	db.group.mu.Unlock()
	if shared == 0 {
		t.Fatalf("no transaction was shared by %d concurrent calls", n)
	}
	t.Logf("%d calls, %d shared transactions", n, shared)
}
