package sqlite

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
// inbox_newest index, so a page costs the same however deep it is; the user's visible broadcasts
// below the same cursor are merged in (one cursor serves both).
func (s *Store) ListInbox(ctx context.Context, userID, cursor string, limit int, now time.Time) ([]notify.InboxItem, string, error) {
	limit = notify.PageLimit(limit)
	q := `SELECT id, created_at, read_at, expires_at, doc FROM inbox
		WHERE user_id = ? AND (expires_at IS NULL OR expires_at > ?)`
	args := []any{userID, nanosOf(now)}
	var (
		cursorAt int64
		cursorID string
	)
	if cursor != "" {
		var err error
		if cursorAt, cursorID, err = decodeInboxCursor(cursor); err != nil {
			return nil, "", fmt.Errorf("sqlite: list inbox of %s: %w", userID, err)
		}
		q += ` AND (created_at, id) < (?, ?)`
		args = append(args, cursorAt, cursorID)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit+1)

	rows, err := s.db.R.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list inbox of %s: %w", userID, err)
	}
	own, err := scanInbox(rows, userID, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list inbox of %s: %w", userID, err)
	}
	bs, err := s.visibleBroadcasts(ctx, userID, now)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list inbox of %s: %w", userID, err)
	}
	var after []notify.InboxItem
	for _, b := range bs {
		if cursor == "" || inboxBefore(nanosOf(b.CreatedAt), b.ID, cursorAt, cursorID) {
			after = append(after, b)
		}
	}
	items, more := notify.MergeInbox(own, after, limit)
	next := ""
	if more {
		last := items[limit-1]
		next = encodeInboxCursor(nanosOf(last.CreatedAt), last.ID)
	}
	return items, next, nil
}

// inboxBefore reports whether (at, id) comes after (cursorAt, cursorID) newest first.
func inboxBefore(at int64, id string, cursorAt int64, cursorID string) bool {
	return at < cursorAt || (at == cursorAt && id < cursorID)
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
	bs, err := s.visibleBroadcasts(ctx, userID, now)
	if err != nil {
		return 0, fmt.Errorf("sqlite: unread count of %s: %w", userID, err)
	}
	for _, b := range bs {
		if b.ReadAt == nil {
			n++
		}
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
	if notify.IsCode(err, notify.ENOTFOUND) {
		err = s.markBroadcast(ctx, userID, id, s.nowOr(at), false)
	}
	if err != nil {
		return fmt.Errorf("sqlite: mark inbox item %s read: %w", id, err)
	}
	return nil
}

// markBroadcast writes userID's marker of broadcast id — read at `at`, or deleted — if the
// broadcast is visible to them at `at`; ENOTFOUND if it is not. A read marker keeps the first
// read_at; a second delete changes nothing and is ENOTFOUND like a missing item.
func (s *Store) markBroadcast(ctx context.Context, userID, id string, at time.Time, deleted bool) error {
	bs, err := s.visibleBroadcasts(ctx, userID, at)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(bs, func(it notify.InboxItem) bool { return it.ID == id })
	if i < 0 {
		return notify.Errorf(notify.ENOTFOUND, "inbox item not found")
	}
	if !deleted {
		if bs[i].ReadAt != nil {
			return nil
		}
		_, err = s.db.W.ExecContext(ctx, `INSERT INTO inbox_marks (user_id, id, read_at, deleted) VALUES (?, ?, ?, 0)
			ON CONFLICT (user_id, id) DO UPDATE SET read_at = coalesce(inbox_marks.read_at, excluded.read_at)`,
			userID, id, nanosOf(at))
		return err
	}
	res, err := s.db.W.ExecContext(ctx, `INSERT INTO inbox_marks (user_id, id, read_at, deleted) VALUES (?, ?, NULL, 1)
		ON CONFLICT (user_id, id) DO UPDATE SET deleted = 1 WHERE inbox_marks.deleted = 0`, userID, id)
	if err == nil {
		var k int64
		if k, err = res.RowsAffected(); err == nil && k == 0 {
			err = notify.Errorf(notify.ENOTFOUND, "inbox item not found")
		}
	}
	return err
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
	bs, err := s.visibleBroadcasts(ctx, userID, at)
	if err != nil {
		return int(k), fmt.Errorf("sqlite: mark all read of %s: %w", userID, err)
	}
	for _, b := range bs {
		if b.ReadAt != nil {
			continue
		}
		// Counted only if this call wrote the read mark: a concurrent MarkRead got there first
		// otherwise.
		res, err := s.db.W.ExecContext(ctx, `INSERT INTO inbox_marks (user_id, id, read_at, deleted) VALUES (?, ?, ?, 0)
			ON CONFLICT (user_id, id) DO UPDATE SET read_at = excluded.read_at
			WHERE inbox_marks.read_at IS NULL AND inbox_marks.deleted = 0`, userID, b.ID, nanosOf(at))
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err != nil {
			return int(k), fmt.Errorf("sqlite: mark all read of %s: %w", userID, err)
		}
		k += n
	}
	return int(k), nil
}

// DeleteInboxItem implements notify.InboxStore: an own item is deleted; a broadcast gets the
// user's deleted marker.
func (s *Store) DeleteInboxItem(ctx context.Context, userID, id string) error {
	res, err := s.db.W.ExecContext(ctx, `DELETE FROM inbox WHERE user_id = ? AND id = ?`, userID, id)
	if err == nil {
		var k int64
		if k, err = res.RowsAffected(); err == nil && k == 0 {
			err = s.markBroadcast(ctx, userID, id, s.now().UTC(), true)
		}
	}
	if err != nil {
		return fmt.Errorf("sqlite: delete inbox item %s: %w", id, err)
	}
	return nil
}

// broadcastSchema is store migration 5. A broadcast is one row however many users it targets,
// plus one broadcast_apps row per app it targets: the index an inbox read walks from the apps of
// the user's devices. inbox_marks holds a user's read_at or deleted flag for a broadcast, written
// only when they read or delete it.
const broadcastSchema = `
CREATE TABLE IF NOT EXISTS broadcasts (
	id         TEXT PRIMARY KEY,
	created_at INTEGER NOT NULL,
	expires_at INTEGER,          -- NULL: never
	doc        BLOB NOT NULL     -- notify.Broadcast as JSON (content and targets); the columns win
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS broadcast_apps (
	app        TEXT NOT NULL,
	id         TEXT NOT NULL,
	expires_at INTEGER,
	PRIMARY KEY (app, id)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS inbox_marks (
	user_id TEXT NOT NULL,
	id      TEXT NOT NULL,       -- the broadcast's id
	read_at INTEGER,             -- NULL: unread
	deleted INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (user_id, id)
) WITHOUT ROWID;
`

// PutBroadcast implements notify.InboxStore: the broadcast row and one index row per app, in one
// transaction, whatever the audience. ON CONFLICT DO NOTHING keeps a stored broadcast (and every
// marker of it) as it is when a campaign step is retried.
func (s *Store) PutBroadcast(ctx context.Context, b notify.Broadcast) error {
	if err := b.Validate(); err != nil {
		return fmt.Errorf("sqlite: put broadcast: %w", err)
	}
	b.CreatedAt = s.nowOr(b.CreatedAt)
	b.ExpiresAt = utcPtr(b.ExpiresAt)
	doc, err := json.Marshal(&b)
	if err != nil {
		return fmt.Errorf("sqlite: put broadcast %s: encode: %w", b.ID, err)
	}
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO broadcasts (id, created_at, expires_at, doc) VALUES (?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`, b.ID, nanosOf(b.CreatedAt), nullNanosOf(b.ExpiresAt), doc)
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil || k == 0 {
			return err
		}
		for _, app := range b.Apps() {
			if _, err := tx.ExecContext(ctx, `INSERT INTO broadcast_apps (app, id, expires_at) VALUES (?, ?, ?)
				ON CONFLICT DO NOTHING`, app, b.ID, nullNanosOf(b.ExpiresAt)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: put broadcast %s: %w", b.ID, err)
	}
	return nil
}

// visibleBroadcasts returns the broadcasts userID sees at now as inbox items (ReadAt from their
// marker), in no particular order: the unexpired broadcasts of the apps of the user's devices
// that Broadcast.Reaches them, less those they deleted and those an own item of the same id
// shadows. Broadcasts are few, so this is a handful of indexed point reads; a user without
// devices costs one.
func (s *Store) visibleBroadcasts(ctx context.Context, userID string, now time.Time) ([]notify.InboxItem, error) {
	devices, err := s.ListDevices(ctx, []string{userID})
	if err != nil {
		return nil, err
	}
	ds := devices[userID]
	apps := notify.AppsOf(ds)
	if len(apps) == 0 {
		return nil, nil
	}
	rows, err := s.db.R.QueryContext(ctx, `SELECT b.created_at, b.expires_at, b.doc FROM broadcasts b
		WHERE b.id IN (SELECT id FROM broadcast_apps WHERE app IN (`+sqlIn(len(apps))+`)
			AND (expires_at IS NULL OR expires_at > ?))`, stringArgs(apps, nanosOf(now))...)
	if err != nil {
		return nil, fmt.Errorf("read broadcasts: %w", err)
	}
	var bs []notify.Broadcast
	err = func() error {
		defer rows.Close()
		for rows.Next() {
			var (
				b       notify.Broadcast
				created int64
				expires sql.NullInt64
				doc     []byte
			)
			if err := rows.Scan(&created, &expires, &doc); err != nil {
				return err
			}
			if err := json.Unmarshal(doc, &b); err != nil {
				return fmt.Errorf("decode broadcast: %w", err)
			}
			b.CreatedAt, b.ExpiresAt = timeOfNanos(created), timePtrOfNull(expires)
			bs = append(bs, b)
		}
		return rows.Err()
	}()
	if err != nil || len(bs) == 0 {
		return nil, err
	}
	prefs, err := s.GetPreferences(ctx, []string{userID})
	if err != nil {
		return nil, err
	}
	bs = slices.DeleteFunc(bs, func(b notify.Broadcast) bool { return !b.Reaches(ds, prefs[userID]) })
	if len(bs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(bs))
	for i, b := range bs {
		ids[i] = b.ID
	}
	type mark struct {
		readAt  *time.Time
		deleted bool
	}
	marks := map[string]mark{}
	// An own item of the same id (the campaign also reached the user through a user list)
	// shadows the broadcast: it shows as a deleted mark would.
	rows, err = s.db.R.QueryContext(ctx, `SELECT id, read_at, deleted FROM inbox_marks WHERE user_id = ? AND id IN (`+sqlIn(len(ids))+`)
		UNION ALL SELECT id, NULL, 1 FROM inbox WHERE user_id = ? AND id IN (`+sqlIn(len(ids))+`)`,
		append(append([]any{userID}, stringArgs(ids, userID)...), stringArgs(ids)...)...)
	if err != nil {
		return nil, fmt.Errorf("read inbox marks: %w", err)
	}
	err = func() error {
		defer rows.Close()
		for rows.Next() {
			var (
				id      string
				readAt  sql.NullInt64
				deleted bool
			)
			if err := rows.Scan(&id, &readAt, &deleted); err != nil {
				return err
			}
			m := marks[id]
			m.deleted = m.deleted || deleted
			if readAt.Valid {
				m.readAt = timePtrOfNull(readAt)
			}
			marks[id] = m
		}
		return rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("read inbox marks: %w", err)
	}
	out := make([]notify.InboxItem, 0, len(bs))
	for _, b := range bs {
		if m := marks[b.ID]; !m.deleted {
			out = append(out, b.Item(userID, m.readAt))
		}
	}
	return out, nil
}

// WithdrawBroadcast implements notify.InboxStore: the broadcast expires at at (or earlier, if it
// already did), in the table and in its per-app index, which every read filters on.
func (s *Store) WithdrawBroadcast(ctx context.Context, id string, at time.Time) error {
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		for _, table := range []string{"broadcasts", "broadcast_apps"} {
			if _, err := tx.ExecContext(ctx, `UPDATE `+table+` SET expires_at = ?
				WHERE id = ? AND (expires_at IS NULL OR expires_at > ?)`, nanosOf(at), id, nanosOf(at)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: withdraw broadcast %s: %w", id, err)
	}
	return nil
}
