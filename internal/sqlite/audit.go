package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"herald/internal/notify"
)

var _ notify.AuditLog = (*Store)(nil)

// auditSchema is store migration 7: the append-only audit log of operator actions. Rows are
// inserted (ON CONFLICT on id: nothing) and deleted only once they are past
// notify.AuditRetention; the store has no statement that updates one.
const auditSchema = `
CREATE TABLE IF NOT EXISTS audit_log (
	id          TEXT PRIMARY KEY,
	at          INTEGER NOT NULL, -- unix nanos
	actor       TEXT NOT NULL,
	actor_kind  TEXT NOT NULL,
	action      TEXT NOT NULL,
	target_type TEXT NOT NULL,
	target_id   TEXT NOT NULL,
	params      BLOB NOT NULL,    -- JSON object of sanitized parameters
	result      TEXT NOT NULL,
	request_id  TEXT NOT NULL
) WITHOUT ROWID;
-- ListAudit pages newest first by (at, id); the filters are few rows a day, checked on the way.
CREATE INDEX IF NOT EXISTS audit_log_newest ON audit_log (at DESC, id DESC);`

// AppendAudit implements notify.AuditLog. Entries past their retention are pruned in the same
// transaction — a range delete on the time index, empty almost every time — so the table stays
// a year long without a background job.
func (s *Store) AppendAudit(ctx context.Context, e notify.AuditEntry) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("sqlite: append audit: %w", err)
	}
	params, err := json.Marshal(notify.SanitizeAuditParams(e.Params))
	if err != nil {
		return fmt.Errorf("sqlite: append audit: %w", err)
	}
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO audit_log (id, at, actor, actor_kind, action, target_type, target_id, params, result, request_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			e.ID, e.At.UnixNano(), e.Actor, string(e.ActorKind), string(e.Action), e.TargetType, e.TargetID, params, e.Result, e.RequestID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM audit_log WHERE at < ?`, s.auditHorizon().UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: append audit %s: %w", e.ID, err)
	}
	return nil
}

// auditHorizon is the time before which entries have expired.
func (s *Store) auditHorizon() time.Time { return s.now().Add(-notify.AuditRetention) }

// ListAudit implements notify.AuditLog.
func (s *Store) ListAudit(ctx context.Context, f notify.AuditFilter, cursor string, limit int) ([]notify.AuditEntry, string, error) {
	limit = notify.ClampAuditLimit(limit)
	where := []string{"at >= ?"}
	from := s.auditHorizon()
	if f.From.After(from) {
		from = f.From
	}
	args := []any{from.UnixNano()}
	if !f.To.IsZero() {
		where, args = append(where, "at < ?"), append(args, f.To.UnixNano())
	}
	if cursor != "" {
		at, id, err := notify.ParseAuditCursor(cursor)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: list audit: %w", err)
		}
		where, args = append(where, "(at < ? OR (at = ? AND id < ?))"), append(args, at.UnixNano(), at.UnixNano(), id)
	}
	for _, c := range []struct{ col, v string }{
		{"actor", f.Actor}, {"action", string(f.Action)}, {"target_type", f.TargetType}, {"target_id", f.TargetID},
	} {
		if c.v != "" {
			where, args = append(where, c.col+" = ?"), append(args, c.v)
		}
	}
	rows, err := s.db.R.QueryContext(ctx, `SELECT id, at, actor, actor_kind, action, target_type, target_id, params, result, request_id
		FROM audit_log WHERE `+strings.Join(where, " AND ")+` ORDER BY at DESC, id DESC LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list audit: %w", err)
	}
	defer rows.Close()
	var out []notify.AuditEntry
	for rows.Next() {
		var e notify.AuditEntry
		var at int64
		var params []byte
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.ActorKind, &e.Action, &e.TargetType, &e.TargetID, &params, &e.Result, &e.RequestID); err != nil {
			return nil, "", fmt.Errorf("sqlite: list audit: %w", err)
		}
		if err := json.Unmarshal(params, &e.Params); err != nil {
			return nil, "", fmt.Errorf("sqlite: list audit: entry %s params: %w", e.ID, err)
		}
		e.At = time.Unix(0, at).UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: list audit: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		next = notify.AuditCursor(last.At, last.ID)
	}
	return out, next, nil
}
