package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"herald/internal/notify"
)

// Scheduler is the local stand-in for EventBridge Scheduler: one-time fires kept in a table and
// delivered by Fire, which the local runtime calls in a loop. A fire is enqueued before its row is
// deleted, so a crash in between fires twice — harmless, since ingest ignores a fire for a
// notification that is no longer SCHEDULED.
type Scheduler struct {
	db *DB
}

var _ notify.Scheduler = (*Scheduler)(nil)

// NewScheduler creates the schedule table if needed.
func NewScheduler(db *DB) (*Scheduler, error) {
	_, err := db.W.Exec(`CREATE TABLE IF NOT EXISTS schedules (
		id    TEXT PRIMARY KEY,
		queue TEXT NOT NULL,
		at    INTEGER NOT NULL
	);
	CREATE INDEX IF NOT EXISTS schedules_at ON schedules(at);`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: create schedules: %w", err)
	}
	return &Scheduler{db: db}, nil
}

// Schedule arms (or re-arms) id's fire at `at` onto queue.
func (s *Scheduler) Schedule(ctx context.Context, id, queue string, at time.Time) error {
	_, err := s.db.W.ExecContext(ctx, `INSERT INTO schedules(id, queue, at) VALUES(?,?,?)
		ON CONFLICT(id) DO UPDATE SET queue=excluded.queue, at=excluded.at`, id, queue, at.UTC().UnixNano())
	if err != nil {
		return fmt.Errorf("sqlite: schedule %s: %w", id, err)
	}
	return nil
}

// Unschedule disarms id's fire.
func (s *Scheduler) Unschedule(ctx context.Context, id string) error {
	if _, err := s.db.W.ExecContext(ctx, `DELETE FROM schedules WHERE id=?`, id); err != nil {
		return fmt.Errorf("sqlite: unschedule %s: %w", id, err)
	}
	return nil
}

// Fire enqueues every fire due at now and returns how many it sent.
func (s *Scheduler) Fire(ctx context.Context, now time.Time, q notify.Producer) (int, error) {
	rows, err := s.db.R.QueryContext(ctx, `SELECT id, queue, at FROM schedules WHERE at <= ? ORDER BY at LIMIT 500`, now.UTC().UnixNano())
	if err != nil {
		return 0, fmt.Errorf("sqlite: due schedules: %w", err)
	}
	type due struct {
		id, queue string
		at        int64
	}
	var list []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.id, &d.queue, &d.at); err != nil {
			rows.Close()
			return 0, fmt.Errorf("sqlite: due schedules: %w", err)
		}
		list = append(list, d)
	}
	rows.Close()
	n := 0
	for _, d := range list {
		armedFor := time.Unix(0, d.at).UTC()
		body, _ := json.Marshal(notify.FireMessage{Fire: d.id, At: &armedFor})
		if err := q.Send(ctx, d.queue, notify.OutMessage{Body: body}); err != nil {
			return n, fmt.Errorf("fire %s: %w", d.id, err)
		}
		// Delete only the fire we sent: a re-arm in the meantime changed `at` and must survive.
		if _, err := s.db.W.ExecContext(ctx, `DELETE FROM schedules WHERE id=? AND at=?`, d.id, d.at); err != nil {
			return n, fmt.Errorf("sqlite: delete fired %s: %w", d.id, err)
		}
		n++
	}
	return n, nil
}
