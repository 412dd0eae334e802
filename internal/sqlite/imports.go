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

var _ notify.ImportStore = (*Store)(nil)

// importSchema is store migration 6: one row per object version imported (or being imported)
// into an audience list; the lease is owner + lease_until, the checkpoint JSON.
const importSchema = `
CREATE TABLE IF NOT EXISTS import_markers (
	object      TEXT NOT NULL,
	version     TEXT NOT NULL,
	list_id     TEXT NOT NULL,
	owner       TEXT NOT NULL,
	lease_until INTEGER NOT NULL, -- unix nanos
	done        INTEGER NOT NULL DEFAULT 0,
	checkpoint  BLOB NOT NULL,    -- JSON notify.ImportCheckpoint
	updated_at  INTEGER NOT NULL,
	PRIMARY KEY (object, version)
) WITHOUT ROWID;`

// ClaimImport implements notify.ImportStore. The read and the write are one write transaction,
// which SQLite runs one at a time, so two claims never both win.
func (s *Store) ClaimImport(ctx context.Context, object, version, listID, owner string, now, leaseUntil time.Time) (notify.ImportMarker, error) {
	var m notify.ImportMarker
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		stored, err := readImport(ctx, tx, object, version)
		switch {
		case notify.IsCode(err, notify.ENOTFOUND):
			m = notify.ImportMarker{Object: object, Version: version, ListID: listID}
		case err != nil:
			return err
		case stored.Done:
			m = stored
			return nil
		case !stored.LeaseUntil.Before(now):
			return notify.Errorf(notify.ECONFLICT, "another attempt holds the lease of %s %s", object, version)
		default:
			m = stored
		}
		m.Owner, m.LeaseUntil, m.UpdatedAt = owner, leaseUntil.UTC(), now.UTC()
		cp, err := json.Marshal(m.Checkpoint)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO import_markers (object, version, list_id, owner, lease_until, done, checkpoint, updated_at)
			VALUES (?, ?, ?, ?, ?, 0, ?, ?)
			ON CONFLICT (object, version) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until,
				updated_at = excluded.updated_at`,
			object, version, m.ListID, owner, m.LeaseUntil.UnixNano(), cp, m.UpdatedAt.UnixNano())
		return err
	})
	if err != nil {
		return notify.ImportMarker{}, fmt.Errorf("sqlite: claim import: %w", err)
	}
	return m, nil
}

// readImport reads a marker; ENOTFOUND if there is none.
func readImport(ctx context.Context, q storeConn, object, version string) (notify.ImportMarker, error) {
	m := notify.ImportMarker{Object: object, Version: version}
	var lease, updated int64
	var cp []byte
	err := q.QueryRowContext(ctx, `SELECT list_id, owner, lease_until, done, checkpoint, updated_at FROM import_markers
		WHERE object = ? AND version = ?`, object, version).Scan(&m.ListID, &m.Owner, &lease, &m.Done, &cp, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return m, notify.Errorf(notify.ENOTFOUND, "no import marker for %s %s", object, version)
	}
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(cp, &m.Checkpoint); err != nil {
		return m, fmt.Errorf("import marker %s %s: checkpoint: %w", object, version, err)
	}
	m.LeaseUntil, m.UpdatedAt = time.Unix(0, lease).UTC(), time.Unix(0, updated).UTC()
	return m, nil
}

// SaveImportCheckpoint implements notify.ImportStore.
func (s *Store) SaveImportCheckpoint(ctx context.Context, object, version, owner string, cp notify.ImportCheckpoint, leaseUntil time.Time) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	return s.ownedImportUpdate(ctx, "save import checkpoint", object, version, owner,
		`checkpoint = ?, lease_until = ?`, b, leaseUntil.UnixNano())
}

// ReleaseImport implements notify.ImportStore.
func (s *Store) ReleaseImport(ctx context.Context, object, version, owner string) error {
	return s.ownedImportUpdate(ctx, "release import", object, version, owner, `lease_until = 0`)
}

// FinishImport implements notify.ImportStore.
func (s *Store) FinishImport(ctx context.Context, object, version, owner string, cp notify.ImportCheckpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	return s.ownedImportUpdate(ctx, "finish import", object, version, owner, `checkpoint = ?, done = 1`, b)
}

// ownedImportUpdate sets set (with args) on the marker if owner holds it.
func (s *Store) ownedImportUpdate(ctx context.Context, op, object, version, owner, set string, args ...any) error {
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		args = append(args, s.now().UTC().UnixNano(), object, version, owner)
		res, err := tx.ExecContext(ctx, `UPDATE import_markers SET `+set+`, updated_at = ?
			WHERE object = ? AND version = ? AND owner = ?`, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		if _, err := readImport(ctx, tx, object, version); err != nil {
			return err
		}
		return notify.Errorf(notify.ECONFLICT, "%s %s is held by another attempt", object, version)
	})
	if err != nil {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	return nil
}
