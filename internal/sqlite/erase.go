package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"herald/internal/notify"
)

// erasureSchema is store migration 19: one row per erased user, keyed by notify.UserHash; the
// user id is kept only while the erasure runs (a crashed one is resumed from its step and
// cursor, kept in doc).
const erasureSchema = `
CREATE TABLE IF NOT EXISTS erasures (
	user_hash    TEXT PRIMARY KEY,
	user_id      TEXT,             -- NULL once finished
	status       TEXT NOT NULL,
	requested_at INTEGER NOT NULL, -- the tombstone: unix nanos
	doc          BLOB NOT NULL     -- erasureDoc as JSON
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS erasures_requested ON erasures (requested_at);`

// erasureDoc is an erasure as stored: with the step and cursor its JSON form leaves out.
type erasureDoc struct {
	notify.Erasure
	Step   int    `json:"step"`
	Cursor string `json:"cursor,omitempty"`
}

// eraseBatch bounds the rows one EraseStep call changes.
const eraseBatch = 500

var _ notify.ErasureStore = (*Store)(nil)

// BeginErasure implements notify.ErasureStore.
func (s *Store) BeginErasure(ctx context.Context, e notify.Erasure) (notify.Erasure, bool, error) {
	if e.UserHash == "" || e.UserID == "" || e.RequestedAt.IsZero() {
		return e, false, notify.Errorf(notify.EINVALID, "erasure: user hash, user id and requested_at are required")
	}
	e.Status, e.FinishedAt = notify.ErasureRunning, nil
	var (
		stored  notify.Erasure
		created bool
	)
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		had, err := readErasure(ctx, tx, e.UserHash)
		if err == nil && had.Status == notify.ErasureRunning {
			stored = had
			return nil
		}
		if err != nil && !notify.IsCode(err, notify.ENOTFOUND) {
			return err
		}
		stored, created = e, true
		return writeErasure(ctx, tx, e)
	})
	if err != nil {
		return e, false, fmt.Errorf("sqlite: begin erasure: %w", err)
	}
	return stored, created, nil
}

// SaveErasure implements notify.ErasureStore.
func (s *Store) SaveErasure(ctx context.Context, e notify.Erasure) error {
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		had, err := readErasure(ctx, tx, e.UserHash)
		if err != nil {
			return err
		}
		if had.Status != notify.ErasureRunning {
			return notify.Errorf(notify.ECONFLICT, "erasure %s has finished", e.UserHash)
		}
		return writeErasure(ctx, tx, e)
	})
	if err != nil {
		return fmt.Errorf("sqlite: save erasure: %w", err)
	}
	return nil
}

func writeErasure(ctx context.Context, tx *sql.Tx, e notify.Erasure) error {
	e.RequestedAt = e.RequestedAt.UTC()
	e.FinishedAt = utcPtr(e.FinishedAt)
	var user any = e.UserID
	if e.Status == notify.ErasureFinished {
		user, e.UserID, e.Cursor = nil, "", ""
	}
	doc, err := json.Marshal(erasureDoc{Erasure: e, Step: e.Step, Cursor: e.Cursor})
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO erasures (user_hash, user_id, status, requested_at, doc) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (user_hash) DO UPDATE SET user_id = excluded.user_id, status = excluded.status,
			requested_at = excluded.requested_at, doc = excluded.doc`,
		e.UserHash, user, e.Status, nanosOf(e.RequestedAt), doc)
	return err
}

func readErasure(ctx context.Context, q storeConn, hash string) (notify.Erasure, error) {
	var (
		user sql.NullString
		doc  []byte
	)
	err := q.QueryRowContext(ctx, `SELECT user_id, doc FROM erasures WHERE user_hash = ?`, hash).Scan(&user, &doc)
	if errors.Is(err, sql.ErrNoRows) {
		return notify.Erasure{}, notify.Errorf(notify.ENOTFOUND, "no erasure of %s", hash)
	}
	if err != nil {
		return notify.Erasure{}, err
	}
	return decodeErasure(user, doc)
}

func decodeErasure(user sql.NullString, doc []byte) (notify.Erasure, error) {
	var d erasureDoc
	if err := json.Unmarshal(doc, &d); err != nil {
		return notify.Erasure{}, fmt.Errorf("decode erasure: %w", err)
	}
	e := d.Erasure
	e.Step, e.Cursor, e.UserID = d.Step, d.Cursor, user.String
	return e, nil
}

// GetErasure implements notify.ErasureStore.
func (s *Store) GetErasure(ctx context.Context, hash string) (notify.Erasure, error) {
	e, err := readErasure(ctx, s.db.R, hash)
	if err != nil {
		return e, fmt.Errorf("sqlite: get erasure: %w", err)
	}
	return e, nil
}

// ErasedSince implements notify.ErasureStore.
func (s *Store) ErasedSince(ctx context.Context, since time.Time) (map[string]time.Time, error) {
	rows, err := s.db.R.QueryContext(ctx, `SELECT user_hash, requested_at FROM erasures WHERE requested_at >= ?`, nanosOf(since))
	if err != nil {
		return nil, fmt.Errorf("sqlite: erased since: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var (
			hash string
			at   int64
		)
		if err := rows.Scan(&hash, &at); err != nil {
			return nil, fmt.Errorf("sqlite: erased since: %w", err)
		}
		out[hash] = timeOfNanos(at)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: erased since: %w", err)
	}
	return out, nil
}

// EraseStep implements notify.ErasureStore. The tables with a user_id column are deleted from
// (or rewritten) eraseBatch rows at a time; a step with more to do returns the cursor "more",
// and since each call changes only rows still naming the user, any cursor goes on the same.
// Delivery records and the recipient lists of notifications to several users are found by
// scanning: this runtime's tables are one machine's.
func (s *Store) EraseStep(ctx context.Context, userID, step, cursor string) (int, string, error) {
	if userID == "" {
		return 0, "", notify.Errorf(notify.EINVALID, "erase: user id is required")
	}
	var (
		n    int
		next string
		err  error
	)
	switch step {
	case notify.EraseSuppressions:
		n, err = s.eraseSuppressions(ctx, userID)
	case notify.EraseContact:
		n, err = s.eraseRows(ctx, `DELETE FROM contacts WHERE user_id = ?`, userID)
		if err == nil {
			_, err = s.eraseRows(ctx, `DELETE FROM contact_owners WHERE user_id = ?`, userID)
		}
	case notify.EraseDevices:
		n, err = s.eraseRows(ctx, `DELETE FROM devices WHERE token IN (SELECT token FROM devices WHERE user_id = ? LIMIT ?)`, userID, eraseBatch)
		next = more(n)
	case notify.ErasePreferences:
		n, err = s.eraseRows(ctx, `DELETE FROM preferences WHERE user_id = ?`, userID)
	case notify.EraseInbox:
		var marks int
		n, err = s.eraseRows(ctx, `DELETE FROM inbox WHERE rowid IN (SELECT rowid FROM inbox WHERE user_id = ? LIMIT ?)`, userID, eraseBatch)
		if err == nil {
			marks, err = s.eraseRows(ctx, `DELETE FROM inbox_marks WHERE user_id = ?1 AND id IN
				(SELECT id FROM inbox_marks WHERE user_id = ?1 LIMIT ?2)`, userID, eraseBatch)
		}
		next, n = more(max(n, marks)), n+marks
	case notify.EraseLists:
		n, err = s.eraseRows(ctx, `DELETE FROM audience_lists WHERE (list_id, seq) IN
			(SELECT list_id, seq FROM audience_lists WHERE user_id = ? LIMIT ?)`, userID, eraseBatch)
		next = more(n)
	case notify.EraseSent:
		n, next, err = s.eraseSent(ctx, userID)
	case notify.EraseDeliveries:
		n, next, err = s.eraseDeliveries(ctx, userID, cursor)
	default:
		return 0, "", notify.Errorf(notify.EINVALID, "erase: unknown step %q", step)
	}
	if err != nil {
		return 0, "", fmt.Errorf("sqlite: erase %s: %w", step, err)
	}
	return n, next, nil
}

// more is the cursor after a batch that changed n rows: "more" when it was full.
func more(n int) string {
	if n >= eraseBatch {
		return "more"
	}
	return ""
}

func (s *Store) eraseRows(ctx context.Context, query string, args ...any) (int, error) {
	res, err := s.db.W.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	k, err := res.RowsAffected()
	return int(k), err
}

// eraseSuppressions keeps the suppressions of the user's contact addresses by hash only.
func (s *Store) eraseSuppressions(ctx context.Context, userID string) (int, error) {
	contacts, err := s.GetContacts(ctx, []string{userID})
	if err != nil {
		return 0, err
	}
	keys := notify.ContactKeys(contacts[userID])
	if len(keys) == 0 {
		return 0, nil
	}
	return s.eraseRows(ctx, `UPDATE suppressions SET masked = '' WHERE masked != '' AND address_key IN (`+sqlIn(len(keys))+`)`,
		stringArgs(keys)...)
}

// eraseSent rewrites up to a batch of the notifications to the user alone (the recipient index):
// each no longer names them, so the next call finds the next ones.
func (s *Store) eraseSent(ctx context.Context, userID string) (int, string, error) {
	const batch = 100
	rows, err := s.db.R.QueryContext(ctx, `SELECT id FROM notifications WHERE recipient_user = ? LIMIT ?`, userID, batch)
	if err != nil {
		return 0, "", err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, "", err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, "", err
	}
	hash := notify.UserHash(userID)
	for _, id := range ids {
		err := s.db.Tx(ctx, func(tx *sql.Tx) error {
			var doc, express, inline []byte
			if err := tx.QueryRowContext(ctx, `SELECT doc, express, recipients FROM notifications WHERE id = ?`, id).
				Scan(&doc, &express, &inline); err != nil {
				return err
			}
			var n notify.Notification
			if err := json.Unmarshal(doc, &n); err != nil {
				return fmt.Errorf("decode notification %s: %w", id, err)
			}
			if express != nil {
				x, err := decodeExpress(express)
				if err != nil {
					return err
				}
				n.Express = x
			}
			if inline != nil {
				rs, err := notify.DecodeRecipients(inline, nil)
				if err != nil {
					return err
				}
				n.Recipients = rs
			}
			notify.EraseNotification(&n, userID)
			rs := n.Recipients
			n.Recipients = nil
			body, err := json.Marshal(&n)
			if err != nil {
				return err
			}
			if n.Express != nil {
				n.Recipients = rs
				if express, inline, err = encodeExpress(&n); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE notifications SET doc = ?, express = ?, recipients = ?, recipient_user = ? WHERE id = ?`,
				body, express, inline, hash, id); err != nil {
				return err
			}
			return rewriteRecipientPages(ctx, tx, id, userID)
		})
		if err != nil {
			return 0, "", fmt.Errorf("notification %s: %w", id, err)
		}
	}
	next := ""
	if len(ids) == batch {
		next = "more"
	}
	return len(ids), next, nil
}

// rewriteRecipientPages rewrites the recipient pages of notification id that name userID.
func rewriteRecipientPages(ctx context.Context, tx *sql.Tx, id, userID string) error {
	rows, err := tx.QueryContext(ctx, `SELECT page, doc FROM notification_recipients WHERE notification_id = ?`, id)
	if err != nil {
		return err
	}
	type page struct {
		n   int
		doc []byte
	}
	var pages []page
	for rows.Next() {
		var p page
		if err := rows.Scan(&p.n, &p.doc); err != nil {
			rows.Close()
			return err
		}
		pages = append(pages, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, p := range pages {
		if err := rewritePage(ctx, tx, id, p.n, p.doc, userID); err != nil {
			return err
		}
	}
	return nil
}

// rewritePage rewrites one recipient page if it names userID.
func rewritePage(ctx context.Context, tx *sql.Tx, id string, page int, doc []byte, userID string) error {
	rs, err := notify.DecodeRecipients(doc, nil)
	if err != nil {
		return fmt.Errorf("decode recipients of %s: %w", id, err)
	}
	if notify.EraseRecipients(rs, userID) == 0 {
		return nil
	}
	_, err = tx.ExecContext(ctx, `UPDATE notification_recipients SET doc = ? WHERE notification_id = ? AND page = ?`,
		notify.AppendRecipients(nil, rs), id, page)
	return err
}

// eraseDeliveries rewrites, a batch at a time, the delivery records naming the user ("" and
// "d"), then the recipient pages of notifications to several users ("p"), then the express
// notifications' inline recipients and deliveries ("x").
func (s *Store) eraseDeliveries(ctx context.Context, userID, cursor string) (int, string, error) {
	// The raw id as a pre-filter of JSON documents: exact when it has nothing JSON escapes.
	needle := userID
	if strings.ContainsFunc(userID, func(r rune) bool { return r < 0x20 || r > 0x7e || strings.ContainsRune(`"\<>&`, r) }) {
		needle = ""
	}
	switch cursor {
	case "", "d":
		n, err := s.eraseDeliveryRows(ctx, userID)
		if err != nil || n >= eraseBatch {
			return n, "d", err
		}
		return n, "p", nil
	case "p":
		n, full, err := s.eraseRecipientPages(ctx, userID, needle)
		if err != nil || full {
			return n, "p", err
		}
		return n, "x", nil
	case "x":
		n, err := s.eraseExpressRows(ctx, userID, needle)
		return n, "", err
	}
	return 0, "", notify.Errorf(notify.EINVALID, "erase deliveries: unknown cursor %q", cursor)
}

func (s *Store) eraseDeliveryRows(ctx context.Context, userID string) (int, error) {
	n := 0
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT rowid, history FROM deliveries WHERE user_id = ? LIMIT ?`, userID, eraseBatch)
		if err != nil {
			return err
		}
		type row struct {
			id      int64
			history []byte
		}
		var rs []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.history); err != nil {
				rows.Close()
				return err
			}
			rs = append(rs, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		hash := notify.UserHash(userID)
		for _, r := range rs {
			var history []byte
			if r.history != nil {
				d := notify.Delivery{}
				if err := json.Unmarshal(r.history, &d.History); err != nil {
					return fmt.Errorf("decode history: %w", err)
				}
				notify.EraseDelivery(&d)
				if history, err = json.Marshal(d.History); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET user_id = ?, address_masked = '', detail = '', history = ?
				WHERE rowid = ?`, hash, history, r.id); err != nil {
				return err
			}
		}
		n = len(rs)
		return nil
	})
	return n, err
}

// eraseRecipientPages rewrites up to a batch of recipient pages naming the user; full reports
// that the batch was full (there may be more).
func (s *Store) eraseRecipientPages(ctx context.Context, userID, needle string) (n int, full bool, err error) {
	const batch = 50
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT notification_id, page, doc FROM notification_recipients
			WHERE ?1 = '' OR instr(doc, ?1) > 0`, needle)
		if err != nil {
			return err
		}
		type page struct {
			id  string
			n   int
			doc []byte
		}
		var pages []page
		for rows.Next() && len(pages) < batch {
			var p page
			if err := rows.Scan(&p.id, &p.n, &p.doc); err != nil {
				rows.Close()
				return err
			}
			rs, err := notify.DecodeRecipients(p.doc, nil)
			if err != nil {
				rows.Close()
				return fmt.Errorf("decode recipients of %s: %w", p.id, err)
			}
			if notify.EraseRecipients(rs, userID) > 0 {
				p.doc = notify.AppendRecipients(nil, rs)
				pages = append(pages, p)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, p := range pages {
			if _, err := tx.ExecContext(ctx, `UPDATE notification_recipients SET doc = ? WHERE notification_id = ? AND page = ?`,
				p.doc, p.id, p.n); err != nil {
				return err
			}
		}
		n, full = len(pages), len(pages) == batch
		return nil
	})
	return n, full, err
}

// eraseExpressRows rewrites the express notifications (a few recipients each, in their row)
// that name the user.
func (s *Store) eraseExpressRows(ctx context.Context, userID, needle string) (int, error) {
	n := 0
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, express, recipients FROM notifications
			WHERE recipients IS NOT NULL AND (?1 = '' OR instr(recipients, ?1) > 0 OR instr(express, ?1) > 0)`, needle)
		if err != nil {
			return err
		}
		type row struct {
			id                  string
			express, recipients []byte
		}
		var changed []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.express, &r.recipients); err != nil {
				rows.Close()
				return err
			}
			rs, err := notify.DecodeRecipients(r.recipients, nil)
			if err != nil {
				rows.Close()
				return err
			}
			k := notify.EraseRecipients(rs, userID)
			if r.express != nil {
				x, err := decodeExpress(r.express)
				if err != nil {
					rows.Close()
					return err
				}
				for i := range x.Deliveries {
					if x.Deliveries[i].UserID == userID {
						notify.EraseDelivery(&x.Deliveries[i])
						k++
					}
				}
				if k > 0 {
					if r.express, err = json.Marshal(x); err != nil {
						rows.Close()
						return err
					}
				}
			}
			if k > 0 {
				r.recipients = notify.AppendRecipients(nil, rs)
				changed = append(changed, r)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range changed {
			if _, err := tx.ExecContext(ctx, `UPDATE notifications SET express = ?, recipients = ? WHERE id = ?`,
				r.express, r.recipients, r.id); err != nil {
				return err
			}
		}
		n = len(changed)
		return nil
	})
	return n, err
}
