package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"herald/internal/notify"
)

var _ notify.ExportStore = (*Store)(nil)

// exportSchema is store migration 8: export jobs, one row each, the job as a JSON document.
// Every change is a read-modify-write in one transaction (SQLite has one writer), so the state
// checks of the port are plain Go. Rows past expires_at are pruned by the next CreateExport.
const exportSchema = `
CREATE TABLE IF NOT EXISTS export_jobs (
	id         TEXT PRIMARY KEY,
	expires_at INTEGER NOT NULL, -- unix nanos
	doc        BLOB NOT NULL     -- JSON of notify.ExportJob, LeaseUntil and Object included
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS export_jobs_expiry ON export_jobs (expires_at);`

// exportDoc is what a row holds: the job with the fields its JSON form leaves out.
type exportDoc struct {
	notify.ExportJob
	Object     string    `json:"object"`
	LeaseUntil time.Time `json:"lease_until"`
}

func (s *Store) readExport(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id string) (*notify.ExportJob, error) {
	var doc []byte
	err := q.QueryRowContext(ctx, `SELECT doc FROM export_jobs WHERE id = ?`, id).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notify.Errorf(notify.ENOTFOUND, "export not found")
	}
	if err != nil {
		return nil, err
	}
	var d exportDoc
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("decode export %s: %w", id, err)
	}
	j := d.ExportJob
	j.Object, j.LeaseUntil = d.Object, d.LeaseUntil
	if !j.ExpiresAt.After(s.now()) {
		j.Status = notify.ExportExpired
	}
	return &j, nil
}

func writeExport(ctx context.Context, tx *sql.Tx, j *notify.ExportJob) error {
	doc, err := json.Marshal(exportDoc{ExportJob: *j, Object: j.Object, LeaseUntil: j.LeaseUntil})
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO export_jobs (id, expires_at, doc) VALUES (?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET doc = excluded.doc`, j.ID, j.ExpiresAt.UnixNano(), doc)
	return err
}

// CreateExport implements notify.ExportStore.
func (s *Store) CreateExport(ctx context.Context, j notify.ExportJob) (*notify.ExportJob, bool, error) {
	if j.ID == "" {
		return nil, false, fmt.Errorf("sqlite: create export: %w", notify.FieldError("id", "is required"))
	}
	j.CreatedAt = s.nowOr(j.CreatedAt)
	j.UpdatedAt, j.ExpiresAt = j.CreatedAt, j.CreatedAt.Add(notify.ExportRetention)
	j.Status, j.Attempts, j.Rows, j.Bytes = notify.ExportPending, 0, 0, 0
	var out *notify.ExportJob
	created := false
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		got, err := s.readExport(ctx, tx, j.ID)
		if err == nil {
			out = got
			return nil
		}
		if notify.ErrorCode(err) != notify.ENOTFOUND {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM export_jobs WHERE expires_at <= ?`, s.now().UnixNano()); err != nil {
			return err
		}
		out, created = &j, true
		return writeExport(ctx, tx, &j)
	})
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: create export %s: %w", j.ID, err)
	}
	return out, created, nil
}

// GetExport implements notify.ExportStore.
func (s *Store) GetExport(ctx context.Context, id string) (*notify.ExportJob, error) {
	j, err := s.readExport(ctx, s.db.R, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get export %s: %w", id, err)
	}
	return j, nil
}

// updateExport runs fn on the stored job inside one transaction and writes it back when fn
// returns write=true.
func (s *Store) updateExport(ctx context.Context, op, id string, fn func(j *notify.ExportJob) (write bool, err error)) (*notify.ExportJob, error) {
	var out *notify.ExportJob
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		j, err := s.readExport(ctx, tx, id)
		if err != nil {
			return err
		}
		write, err := fn(j)
		if err != nil {
			return err
		}
		out = j
		if !write {
			return nil
		}
		return writeExport(ctx, tx, j)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s export %s: %w", op, id, err)
	}
	return out, nil
}

// ClaimExport implements notify.ExportStore.
func (s *Store) ClaimExport(ctx context.Context, id string, now, leaseUntil time.Time) (*notify.ExportJob, bool, error) {
	claimed := false
	j, err := s.updateExport(ctx, "claim", id, func(j *notify.ExportJob) (bool, error) {
		claimed = notify.ClaimExportJob(j, now, leaseUntil)
		return claimed, nil
	})
	return j, claimed, err
}

// CheckpointExport implements notify.ExportStore.
func (s *Store) CheckpointExport(ctx context.Context, id string, attempt int, rows int64, leaseUntil time.Time) error {
	_, err := s.updateExport(ctx, "checkpoint", id, func(j *notify.ExportJob) (bool, error) {
		return true, notify.CheckpointExportJob(j, attempt, rows, leaseUntil, s.now())
	})
	return err
}

// FinishExport implements notify.ExportStore.
func (s *Store) FinishExport(ctx context.Context, id string, attempt int, r notify.ExportResult, at time.Time) error {
	_, err := s.updateExport(ctx, "finish", id, func(j *notify.ExportJob) (bool, error) {
		return true, notify.FinishExportJob(j, attempt, r, at)
	})
	return err
}

// CancelExport implements notify.ExportStore.
func (s *Store) CancelExport(ctx context.Context, id string, at time.Time) (*notify.ExportJob, error) {
	return s.updateExport(ctx, "cancel", id, func(j *notify.ExportJob) (bool, error) {
		return notify.CancelExportJob(j, at)
	})
}

// ListExports implements notify.ExportStore: newest first with a keyset cursor on (expires_at,
// id) — every job expires ExportRetention after it was created, so the expiry index orders
// them by creation too.
func (s *Store) ListExports(ctx context.Context, cursor string, limit int) ([]notify.ExportJob, string, error) {
	const op = "sqlite: list exports"
	if limit < 1 || limit > notify.MaxExportPage {
		return nil, "", fmt.Errorf("%s: %w", op, notify.FieldError("limit", "must be 1–%d", notify.MaxExportPage))
	}
	beforeAt, beforeID, err := decodeKeyset(cursor)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", op, err)
	}
	rows, err := s.db.R.QueryContext(ctx, `SELECT id, expires_at FROM export_jobs
		WHERE expires_at < ?1 OR (expires_at = ?1 AND id < ?2)
		ORDER BY expires_at DESC, id DESC LIMIT ?3`, beforeAt, beforeID, limit)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", op, err)
	}
	var (
		ids    []string
		lastAt int64
	)
	for rows.Next() {
		var id string
		if err := rows.Scan(&id, &lastAt); err != nil {
			rows.Close()
			return nil, "", fmt.Errorf("%s: %w", op, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("%s: %w", op, err)
	}
	out := make([]notify.ExportJob, 0, len(ids))
	for _, id := range ids {
		j, err := s.readExport(ctx, s.db.R, id)
		if notify.ErrorCode(err) == notify.ENOTFOUND {
			continue // pruned since the page was read
		}
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", op, err)
		}
		out = append(out, *j)
	}
	if len(ids) < limit {
		return out, "", nil
	}
	return out, encodeKeyset(lastAt, ids[len(ids)-1]), nil
}
