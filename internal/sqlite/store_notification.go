package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"herald/internal/notify"
)

// CreateNotification implements notify.NotificationStore.
func (s *Store) CreateNotification(ctx context.Context, n *notify.Notification) (*notify.Notification, bool, error) {
	if n == nil || n.ID == "" {
		return nil, false, notify.Errorf(notify.EINVALID, "notification id is required")
	}
	c := *n
	c.CreatedAt = s.nowOr(c.CreatedAt)
	c.UpdatedAt = s.nowOr(c.UpdatedAt)
	c.SendAt = utcPtr(c.SendAt)
	c.RecipientCount = len(c.Recipients)
	// The document carries no Stats (the counter columns and rows are the only truth for them)
	// and no Recipients (they are in pages of their own).
	doc := c
	doc.Stats = notify.Stats{}
	doc.Recipients = nil
	body, err := json.Marshal(&doc)
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: create notification %s: encode: %w", n.ID, err)
	}

	// An express notification is one row: its deliveries, their counts and its few recipients
	// are columns of its own (see store_express.go).
	var express, inline []byte
	if c.Express != nil {
		if express, inline, err = encodeExpress(&c); err != nil {
			return nil, false, fmt.Errorf("sqlite: create notification %s: %w", n.ID, err)
		}
	}

	var stored *notify.Notification
	created := false
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		// No conflict target: the primary key and the partial (service, key) index both count.
		res, err := tx.ExecContext(ctx, `INSERT INTO notifications
			(id, service, idempotency_key, status, chunks_total, chunks_prepared, created_at, updated_at, doc, express, recipients, recipient_user)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			c.ID, c.Service, c.IdempotencyKey, string(c.Status), c.Stats.ChunksTotal, c.Stats.ChunksPrepared,
			nanosOf(c.CreatedAt), nanosOf(c.UpdatedAt), body, express, inline, nullIfEmpty(notify.IndexedUser(&c)))
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil {
			return err
		} else if k == 1 {
			created = true
			stored = &c
			if c.Express != nil {
				stored = notify.ExpressView(&c)
				return nil
			}
			if err := s.putRecipients(ctx, tx, c.ID, c.Recipients); err != nil {
				return err
			}
			return s.addStats(ctx, tx, c.ID, c.Stats.Channels)
		}
		if c.IdempotencyKey != "" {
			// The != '' term lets SQLite use the partial index.
			stored, err = s.readNotification(ctx, tx,
				`n.service = ? AND n.idempotency_key = ? AND n.idempotency_key != ''`, c.Service, c.IdempotencyKey)
			if err == nil || !notify.IsCode(err, notify.ENOTFOUND) {
				return err
			}
		}
		stored, err = s.readNotification(ctx, tx, `n.id = ?`, c.ID)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: create notification %s: %w", n.ID, err)
	}
	return stored, created, nil
}

// recipientPage is how many recipients one notification_recipients row holds.
const recipientPage = 500

func (s *Store) putRecipients(ctx context.Context, tx *sql.Tx, id string, rs []notify.Recipient) error {
	for page := 0; page*recipientPage < len(rs); page++ {
		part := rs[page*recipientPage : min((page+1)*recipientPage, len(rs))]
		b := notify.AppendRecipients(make([]byte, 0, 64*len(part)), part)
		if _, err := tx.ExecContext(ctx, `INSERT INTO notification_recipients (notification_id, page, doc) VALUES (?, ?, ?)`,
			id, page, b); err != nil {
			return err
		}
	}
	return nil
}

// GetRecipients implements notify.NotificationStore.
func (s *Store) GetRecipients(ctx context.Context, id string, offset, limit int) ([]notify.Recipient, error) {
	if offset < 0 || limit < 0 {
		return nil, notify.Errorf(notify.EINVALID, "offset and limit must not be negative")
	}
	var inline []byte
	err := s.db.R.QueryRowContext(ctx, `SELECT recipients FROM notifications WHERE id = ?`, id).Scan(&inline)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: get recipients of %s: %w", id, notify.Errorf(notify.ENOTFOUND, "notification not found"))
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get recipients of %s: %w", id, err)
	}
	out := make([]notify.Recipient, 0, min(limit, 4*recipientPage))
	if limit == 0 {
		return out, nil
	}
	if inline != nil { // an express notification's few recipients are in its row
		rs, err := notify.DecodeRecipients(inline, nil)
		if err != nil {
			return nil, fmt.Errorf("sqlite: get recipients of %s: decode: %w", id, err)
		}
		lo, hi := min(offset, len(rs)), min(offset+limit, len(rs))
		return append(out, rs[lo:hi]...), nil
	}
	first, last := offset/recipientPage, (offset+limit-1)/recipientPage
	rows, err := s.db.R.QueryContext(ctx, `SELECT page, doc FROM notification_recipients
		WHERE notification_id = ? AND page BETWEEN ? AND ? ORDER BY page`, id, first, last)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get recipients of %s: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			page int
			doc  []byte
			rs   = make([]notify.Recipient, 0, recipientPage) // a page's room, not grown to it
		)
		if err := rows.Scan(&page, &doc); err != nil {
			return nil, fmt.Errorf("sqlite: get recipients of %s: %w", id, err)
		}
		if rs, err = notify.DecodeRecipients(doc, rs); err != nil {
			return nil, fmt.Errorf("sqlite: get recipients of %s: decode: %w", id, err)
		}
		base := page * recipientPage
		lo, hi := max(offset-base, 0), min(offset+limit-base, len(rs))
		if lo < hi {
			out = append(out, rs[lo:hi]...)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: get recipients of %s: %w", id, err)
	}
	return out, nil
}

// GetNotification implements notify.NotificationStore.
func (s *Store) GetNotification(ctx context.Context, id string) (*notify.Notification, error) {
	n, err := s.readNotification(ctx, s.db.R, `n.id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get notification %s: %w", id, err)
	}
	return n, nil
}

// readNotification reads one notification with its counters in a single statement, so the
// document and the stats come from the same snapshot.
func (s *Store) readNotification(ctx context.Context, q storeConn, where string, args ...any) (*notify.Notification, error) {
	var (
		doc                   []byte
		status                string
		chunksTotal, chunksOK int
		createdAt, updatedAt  int64
		stats, express        []byte
	)
	err := q.QueryRowContext(ctx, `SELECT n.doc, n.status, n.chunks_total, n.chunks_prepared, n.created_at, n.updated_at,
			(SELECT json_group_array(json_array(s.channel, s.total, s.sent, s.failed, s.skipped))
			 FROM notification_stats s WHERE s.notification_id = n.id), n.express
		FROM notifications n WHERE `+where, args...).
		Scan(&doc, &status, &chunksTotal, &chunksOK, &createdAt, &updatedAt, &stats, &express)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notify.Errorf(notify.ENOTFOUND, "notification not found")
	}
	if err != nil {
		return nil, err
	}
	var n notify.Notification
	if err := json.Unmarshal(doc, &n); err != nil {
		return nil, fmt.Errorf("decode notification: %w", err)
	}
	n.Status = notify.NotificationStatus(status)
	n.CreatedAt = timeOfNanos(createdAt)
	n.UpdatedAt = timeOfNanos(updatedAt)
	n.Stats = notify.Stats{ChunksTotal: chunksTotal, ChunksPrepared: chunksOK}
	var rows [][]json.RawMessage
	if err := json.Unmarshal(stats, &rows); err != nil {
		return nil, fmt.Errorf("decode notification stats: %w", err)
	}
	for _, r := range rows {
		var (
			ch notify.Channel
			cs notify.ChannelStats
		)
		if len(r) != 5 {
			return nil, fmt.Errorf("decode notification stats: %d fields", len(r))
		}
		for i, dst := range []any{&ch, &cs.Total, &cs.Sent, &cs.Failed, &cs.Skipped} {
			if err := json.Unmarshal(r[i], dst); err != nil {
				return nil, fmt.Errorf("decode notification stats: %w", err)
			}
		}
		if n.Stats.Channels == nil {
			n.Stats.Channels = make(map[notify.Channel]notify.ChannelStats, len(rows))
		}
		n.Stats.Channels[ch] = cs
	}
	if express != nil {
		if n.Express, err = decodeExpress(express); err != nil {
			return nil, err
		}
		n.Stats.Channels = notify.MergeCounts(n.Stats.Channels, n.Express.Counts())
	}
	n.Stats.SplitReasons()
	return &n, nil
}

// SetNotificationStatus implements notify.NotificationStore.
func (s *Store) SetNotificationStatus(ctx context.Context, id string, to notify.NotificationStatus, from ...notify.NotificationStatus) error {
	now := nanosOf(s.now())
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		var current string
		err := tx.QueryRowContext(ctx, `SELECT status FROM notifications WHERE id = ?`, id).Scan(&current)
		if errors.Is(err, sql.ErrNoRows) {
			return notify.Errorf(notify.ENOTFOUND, "notification not found")
		}
		if err != nil {
			return err
		}
		if len(from) > 0 && !statusIn(notify.NotificationStatus(current), from) {
			return notify.Errorf(notify.ECONFLICT, "notification is %s, not %v", current, from)
		}
		_, err = tx.ExecContext(ctx, `UPDATE notifications SET status = ?, updated_at = ? WHERE id = ?`,
			string(to), now, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: set notification %s status %s: %w", id, to, err)
	}
	return nil
}

func statusIn(s notify.NotificationStatus, set []notify.NotificationStatus) bool {
	for _, k := range set {
		if s == k {
			return true
		}
	}
	return false
}

// SetChunksTotal implements notify.NotificationStore. A different value overwrites: the prepare
// stage is the only writer and always computes the same split for a notification.
func (s *Store) SetChunksTotal(ctx context.Context, id string, chunks int) error {
	res, err := s.db.W.ExecContext(ctx, `UPDATE notifications SET chunks_total = ? WHERE id = ?`, chunks, id)
	if err != nil {
		return fmt.Errorf("sqlite: set chunks total of %s: %w", id, err)
	}
	if k, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqlite: set chunks total of %s: %w", id, err)
	} else if k == 0 {
		return fmt.Errorf("sqlite: set chunks total of %s: %w", id, notify.Errorf(notify.ENOTFOUND, "notification not found"))
	}
	return nil
}

// addStats adds delta to a notification's per-channel counters in one statement.
func (s *Store) addStats(ctx context.Context, tx *sql.Tx, notificationID string, delta map[notify.Channel]notify.ChannelStats) error {
	if len(delta) == 0 {
		return nil
	}
	args := make([]any, 0, len(delta)*6)
	for ch, d := range delta {
		args = append(args, notificationID, string(ch), d.Total, d.Sent, d.Failed, d.Skipped)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO notification_stats
		(notification_id, channel, total, sent, failed, skipped) VALUES `+sqlTuples(len(delta), 6)+`
		ON CONFLICT (notification_id, channel) DO UPDATE SET
			total = total + excluded.total, sent = sent + excluded.sent,
			failed = failed + excluded.failed, skipped = skipped + excluded.skipped`, args...)
	if err != nil {
		return fmt.Errorf("update stats: %w", err)
	}
	return nil
}

// nullIfEmpty is s as a column value, NULL when it is empty (a partial index's WHERE ... IS NOT
// NULL leaves those rows out).
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
