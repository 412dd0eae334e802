package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"herald/internal/notify"
)

// templateSchema keeps every version of every service's templates, immutable once written.
const templateSchema = `
CREATE TABLE IF NOT EXISTS template_versions (
	service    TEXT NOT NULL,
	name       TEXT NOT NULL,
	version    INTEGER NOT NULL,
	created_at INTEGER NOT NULL, -- unix nanos
	doc        BLOB NOT NULL,    -- the notify.Template as JSON
	PRIMARY KEY (service, name, version)
) WITHOUT ROWID;`

// PutTemplateVersion implements notify.TemplateStore. The next version is read and written in
// one write transaction, and the database has one writer, so concurrent puts are serialized.
func (s *Store) PutTemplateVersion(ctx context.Context, t *notify.Template) (*notify.Template, error) {
	if t == nil || t.Service == "" || t.Name == "" {
		return nil, notify.Errorf(notify.EINVALID, "a template needs a service and a name")
	}
	c := *t
	c.CreatedAt = s.nowOr(c.CreatedAt)
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		var latest int
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM template_versions WHERE service = ? AND name = ?`,
			c.Service, c.Name).Scan(&latest); err != nil {
			return err
		}
		c.Version = latest + 1
		doc, err := json.Marshal(&c)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO template_versions (service, name, version, created_at, doc) VALUES (?, ?, ?, ?, ?)`,
			c.Service, c.Name, c.Version, nanosOf(c.CreatedAt), doc)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: put template %s: %w", t.Name, err)
	}
	return &c, nil
}

// GetTemplate implements notify.TemplateStore.
func (s *Store) GetTemplate(ctx context.Context, service, name string, version int) (*notify.Template, error) {
	q, args := `SELECT doc FROM template_versions WHERE service = ? AND name = ? AND version = ?`, []any{service, name, version}
	if version == 0 {
		q, args = `SELECT doc FROM template_versions WHERE service = ? AND name = ? ORDER BY version DESC LIMIT 1`, []any{service, name}
	}
	var doc []byte
	err := s.db.R.QueryRowContext(ctx, q, args...).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: get template %s: %w", name, notify.Errorf(notify.ENOTFOUND, "template not found"))
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get template %s: %w", name, err)
	}
	var t notify.Template
	if err := json.Unmarshal(doc, &t); err != nil {
		return nil, fmt.Errorf("sqlite: get template %s: decode: %w", name, err)
	}
	return &t, nil
}

// ListTemplates implements notify.TemplateStore. The cursor is the last row's
// "<created_at nanos>/<name>", the keyset the order walks.
func (s *Store) ListTemplates(ctx context.Context, service, cursor string, limit int) ([]notify.Template, string, error) {
	if limit <= 0 {
		limit = 50
	}
	at, after := int64(1<<62), "\xff"
	if cursor != "" {
		n, name, ok := strings.Cut(cursor, "/")
		v, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil || name == "" {
			return nil, "", notify.FieldError("cursor", "malformed cursor")
		}
		at, after = v, name
	}
	rows, err := s.db.R.QueryContext(ctx, `SELECT t.created_at, t.name, t.doc FROM template_versions t
		WHERE t.service = ?
		  AND t.version = (SELECT max(version) FROM template_versions v WHERE v.service = t.service AND v.name = t.name)
		  AND (t.created_at < ? OR (t.created_at = ? AND t.name < ?))
		ORDER BY t.created_at DESC, t.name DESC LIMIT ?`, service, at, at, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list templates: %w", err)
	}
	defer rows.Close()
	out := []notify.Template{}
	next := ""
	for rows.Next() {
		var (
			created int64
			name    string
			doc     []byte
		)
		if err := rows.Scan(&created, &name, &doc); err != nil {
			return nil, "", fmt.Errorf("sqlite: list templates: %w", err)
		}
		if len(out) == limit {
			last := out[len(out)-1]
			next = strconv.FormatInt(nanosOf(last.CreatedAt), 10) + "/" + last.Name
			break
		}
		var t notify.Template
		if err := json.Unmarshal(doc, &t); err != nil {
			return nil, "", fmt.Errorf("sqlite: list templates: decode %s: %w", name, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: list templates: %w", err)
	}
	return out, next, nil
}
