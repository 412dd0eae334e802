package sqlite

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"herald/internal/notify"
)

// inboxDoc is the part of an inbox item no query filters or sorts on.
type inboxDoc struct {
	Service  string            `json:"service"`
	Category notify.Category   `json:"category"`
	Title    string            `json:"title,omitempty"`
	Body     string            `json:"body,omitempty"`
	Data     map[string]string `json:"data,omitempty"`
	Link     string            `json:"link,omitempty"`
	ImageURL string            `json:"image_url,omitempty"`
}

// PutInboxItems implements notify.InboxStore. ON CONFLICT DO NOTHING keeps an existing item
// exactly as it is (read state included) when a prepare step is redelivered.
func (s *Store) PutInboxItems(ctx context.Context, items []notify.InboxItem) error {
	if len(items) == 0 {
		return nil
	}
	const width = 6
	args := make([]any, 0, len(items)*width)
	for i, it := range items {
		if it.UserID == "" || it.ID == "" {
			return fmt.Errorf("sqlite: put inbox items: %w",
				notify.FieldError(fmt.Sprintf("items[%d]", i), "user id and id are required"))
		}
		doc, err := json.Marshal(inboxDoc{Service: it.Service, Category: it.Category, Title: it.Title,
			Body: it.Body, Data: it.Data, Link: it.Link, ImageURL: it.ImageURL})
		if err != nil {
			return fmt.Errorf("sqlite: put inbox items: encode: %w", err)
		}
		args = append(args, it.UserID, it.ID, nanosOf(s.nowOr(it.CreatedAt)), nullNanosOf(it.ReadAt),
			nullNanosOf(it.ExpiresAt), doc)
	}
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		for lo := 0; lo < len(items); lo += storeBatch {
			hi := min(lo+storeBatch, len(items))
			if _, err := tx.ExecContext(ctx, `INSERT INTO inbox (user_id, id, created_at, read_at, expires_at, doc)
				VALUES `+sqlTuples(hi-lo, width)+` ON CONFLICT (user_id, id) DO NOTHING`,
				args[lo*width:hi*width]...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: put inbox items: %w", err)
	}
	return nil
}

// ListInbox implements notify.InboxStore. The keyset (created_at, id) below the cursor walks the
// inbox_newest index, so a page costs the same however deep it is.
func (s *Store) ListInbox(ctx context.Context, userID, cursor string, limit int, now time.Time) ([]notify.InboxItem, string, error) {
	limit = clampLimit(limit)
	q := `SELECT id, created_at, read_at, expires_at, doc FROM inbox
		WHERE user_id = ? AND (expires_at IS NULL OR expires_at > ?)`
	args := []any{userID, nanosOf(now)}
	if cursor != "" {
		at, id, err := decodeInboxCursor(cursor)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: list inbox of %s: %w", userID, err)
		}
		q += ` AND (created_at, id) < (?, ?)`
		args = append(args, at, id)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit+1)

	rows, err := s.db.R.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list inbox of %s: %w", userID, err)
	}
	items, err := scanInbox(rows, userID, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list inbox of %s: %w", userID, err)
	}
	next := ""
	if len(items) > limit {
		items = items[:limit]
		last := items[limit-1]
		next = encodeInboxCursor(nanosOf(last.CreatedAt), last.ID)
	}
	return items, next, nil
}

func scanInbox(rows *sql.Rows, userID string, capacity int) ([]notify.InboxItem, error) {
	defer rows.Close()
	items := make([]notify.InboxItem, 0, capacity)
	for rows.Next() {
		var (
			it              notify.InboxItem
			created         int64
			readAt, expires sql.NullInt64
			doc             []byte
			d               inboxDoc
		)
		if err := rows.Scan(&it.ID, &created, &readAt, &expires, &doc); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(doc, &d); err != nil {
			return nil, fmt.Errorf("decode inbox item %s: %w", it.ID, err)
		}
		it.UserID = userID
		it.Service, it.Category, it.Title, it.Body = d.Service, d.Category, d.Title, d.Body
		it.Data, it.Link, it.ImageURL = d.Data, d.Link, d.ImageURL
		it.CreatedAt = timeOfNanos(created)
		it.ReadAt = timePtrOfNull(readAt)
		it.ExpiresAt = timePtrOfNull(expires)
		items = append(items, it)
	}
	return items, rows.Err()
}

// encodeInboxCursor is base64url of 8 bytes of created_at nanos (big endian) then the id.
func encodeInboxCursor(createdAt int64, id string) string {
	b := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(b, uint64(createdAt))
	return base64.RawURLEncoding.EncodeToString(append(b, id...))
}

func decodeInboxCursor(cursor string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) < 9 {
		return 0, "", notify.FieldError("cursor", "malformed cursor")
	}
	return int64(binary.BigEndian.Uint64(b[:8])), string(b[8:]), nil
}

// UnreadCount implements notify.InboxStore.
func (s *Store) UnreadCount(ctx context.Context, userID string, now time.Time) (int, error) {
	var n int
	err := s.db.R.QueryRowContext(ctx, `SELECT count(*) FROM inbox
		WHERE user_id = ? AND read_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`,
		userID, nanosOf(now)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("sqlite: unread count of %s: %w", userID, err)
	}
	return n, nil
}

// MarkRead implements notify.InboxStore. An item already read keeps its first ReadAt.
func (s *Store) MarkRead(ctx context.Context, userID, id string, at time.Time) error {
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE inbox SET read_at = ?
			WHERE user_id = ? AND id = ? AND read_at IS NULL`, nanosOf(s.nowOr(at)), userID, id)
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil || k > 0 {
			return err
		}
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM inbox WHERE user_id = ? AND id = ?`, userID, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return notify.Errorf(notify.ENOTFOUND, "inbox item not found")
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: mark inbox item %s read: %w", id, err)
	}
	return nil
}

// MarkAllRead implements notify.InboxStore. Items already expired at `at` are invisible, so
// they are neither marked nor counted.
func (s *Store) MarkAllRead(ctx context.Context, userID string, at time.Time) (int, error) {
	at = s.nowOr(at)
	res, err := s.db.W.ExecContext(ctx, `UPDATE inbox SET read_at = ?
		WHERE user_id = ? AND read_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`,
		nanosOf(at), userID, nanosOf(at))
	if err != nil {
		return 0, fmt.Errorf("sqlite: mark all read of %s: %w", userID, err)
	}
	k, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlite: mark all read of %s: %w", userID, err)
	}
	return int(k), nil
}

// DeleteInboxItem implements notify.InboxStore.
func (s *Store) DeleteInboxItem(ctx context.Context, userID, id string) error {
	res, err := s.db.W.ExecContext(ctx, `DELETE FROM inbox WHERE user_id = ? AND id = ?`, userID, id)
	if err == nil {
		var k int64
		if k, err = res.RowsAffected(); err == nil && k == 0 {
			err = notify.Errorf(notify.ENOTFOUND, "inbox item not found")
		}
	}
	if err != nil {
		return fmt.Errorf("sqlite: delete inbox item %s: %w", id, err)
	}
	return nil
}
