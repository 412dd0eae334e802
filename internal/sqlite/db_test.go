package sqlite

import (
	"context"
	"path/filepath"
	"testing"
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
