package sqlite

import (
	"context"
	"fmt"
)

// TotalChanges returns SQLite's total_changes() on the writer connection: the rows inserted,
// updated or deleted through it since it was opened. The writer pool holds exactly one
// connection, so the difference of two readings is the rows every write between them changed —
// how benchmarks count store writes.
func (db *DB) TotalChanges(ctx context.Context) (int64, error) {
	var n int64
	if err := db.W.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: total_changes: %w", err)
	}
	return n, nil
}

// TotalChanges is TotalChanges of the store's database (which the Scheduler shares).
func (s *Store) TotalChanges(ctx context.Context) (int64, error) { return s.db.TotalChanges(ctx) }
