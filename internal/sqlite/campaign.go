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

var (
	_ notify.CampaignStore  = (*Store)(nil)
	_ notify.AudienceSource = (*Store)(nil)
)

// campaignSchema is store migration 3.
//
// audience_devices is the device index campaigns page through. Its seq is an AUTOINCREMENT key,
// so it only grows and is never reused: a device registered after a campaign passed its position
// gets a later seq and is still reached, and a removed and re-added device comes after every
// cursor that saw it. Triggers on devices keep it in step with PutDevice, DeleteDevice and
// RemoveDeadDevice inside their own statements, so the index can never disagree with devices.
// A re-registration of the same token (an UPDATE) keeps its seq: a campaign that already reached
// the device does not reach it again.
const campaignSchema = `
CREATE TABLE IF NOT EXISTS campaigns (
	id           TEXT PRIMARY KEY,
	service      TEXT NOT NULL,
	state        TEXT NOT NULL,
	cursor       BLOB NOT NULL,   -- JSON notify.CampaignCursor, compared and replaced as one value
	paused_until INTEGER,         -- unix nanos; PAUSED_QUIET_HOURS only
	error        TEXT NOT NULL DEFAULT '',
	created_at   INTEGER NOT NULL,
	updated_at   INTEGER NOT NULL,
	started_at   INTEGER,
	finished_at  INTEGER,
	doc          BLOB NOT NULL    -- the rest of notify.Campaign as JSON; the columns above win
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS campaigns_state ON campaigns (state, created_at);

CREATE TABLE IF NOT EXISTS audience_lists (
	list_id TEXT NOT NULL,
	seq     INTEGER NOT NULL,
	user_id TEXT NOT NULL,
	PRIMARY KEY (list_id, seq)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS audience_devices (
	seq      INTEGER PRIMARY KEY AUTOINCREMENT,
	token    TEXT NOT NULL UNIQUE,
	app      TEXT NOT NULL,
	user_id  TEXT NOT NULL,
	platform TEXT NOT NULL,
	locale   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audience_devices_app ON audience_devices (app, seq);

INSERT OR IGNORE INTO audience_devices (token, app, user_id, platform, locale)
	SELECT token, app, user_id, platform, locale FROM devices ORDER BY updated_at, token;

CREATE TRIGGER IF NOT EXISTS devices_audience_insert AFTER INSERT ON devices BEGIN
	INSERT OR REPLACE INTO audience_devices (token, app, user_id, platform, locale)
		VALUES (NEW.token, NEW.app, NEW.user_id, NEW.platform, NEW.locale);
END;
CREATE TRIGGER IF NOT EXISTS devices_audience_update AFTER UPDATE ON devices BEGIN
	UPDATE audience_devices SET app = NEW.app, user_id = NEW.user_id, platform = NEW.platform, locale = NEW.locale
		WHERE token = NEW.token;
END;
CREATE TRIGGER IF NOT EXISTS devices_audience_delete AFTER DELETE ON devices BEGIN
	DELETE FROM audience_devices WHERE token = OLD.token;
END;
`

// CreateCampaign implements notify.CampaignStore.
func (s *Store) CreateCampaign(ctx context.Context, c *notify.Campaign) (*notify.Campaign, bool, error) {
	if c == nil || c.ID == "" {
		return nil, false, notify.Errorf(notify.EINVALID, "campaign id is required")
	}
	cp := *c
	cp.CreatedAt = s.nowOr(cp.CreatedAt)
	cp.UpdatedAt = s.nowOr(cp.UpdatedAt)
	cp.StartedAt = cp.StartedOnCreate()
	cp.SendAt = utcPtr(cp.SendAt)
	cp.Cursor = notify.CampaignCursor{Sources: make([]notify.SourceCursor, len(cp.Audience.Sources))}
	cp.Progress = notify.CampaignProgress{}

	n := cp.Notification
	n.ID, n.Service, n.IdempotencyKey = cp.ID, cp.Service, ""
	n.Recipients, n.RecipientCount = nil, 0
	n.Lane = notify.LaneBulk
	n.Status = notify.StatusDispatching
	qh := cp.QuietHours
	n.QuietHours = &qh // prepare holds each recipient by this policy, in their own time zone
	n.SendAt = cp.SendAt
	n.Stats = notify.Stats{}
	n.CreatedAt, n.UpdatedAt = cp.CreatedAt, cp.UpdatedAt
	cp.Notification = n
	nbody, err := json.Marshal(&n)
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: create campaign %s: encode notification: %w", c.ID, err)
	}
	doc, cursor, err := campaignDoc(&cp)
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: create campaign %s: %w", c.ID, err)
	}

	var stored *notify.Campaign
	created := false
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO campaigns
			(id, service, state, cursor, paused_until, error, created_at, updated_at, started_at, finished_at, doc)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			cp.ID, cp.Service, string(cp.State), cursor, nullNanosOf(cp.PausedUntil), cp.Error,
			nanosOf(cp.CreatedAt), nanosOf(cp.UpdatedAt), nullNanosOf(cp.StartedAt), nullNanosOf(cp.FinishedAt), doc)
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil {
			return err
		} else if k == 0 {
			stored, err = s.readCampaign(ctx, tx, cp.ID)
			return err
		}
		res, err = tx.ExecContext(ctx, `INSERT INTO notifications
			(id, service, idempotency_key, status, chunks_total, chunks_prepared, created_at, updated_at, doc)
			VALUES (?, ?, '', ?, 0, 0, ?, ?, ?) ON CONFLICT DO NOTHING`,
			n.ID, n.Service, string(n.Status), nanosOf(n.CreatedAt), nanosOf(n.UpdatedAt), nbody)
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil {
			return err
		} else if k == 0 {
			return notify.Errorf(notify.ECONFLICT, "a notification with id %s exists and is not a campaign", n.ID)
		}
		created, stored = true, &cp
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: create campaign %s: %w", c.ID, err)
	}
	return stored, created, nil
}

// campaignDoc encodes what the columns do not hold.
func campaignDoc(c *notify.Campaign) (doc, cursor []byte, err error) {
	d := *c
	d.Cursor = notify.CampaignCursor{}
	d.Progress = notify.CampaignProgress{}
	if doc, err = json.Marshal(&d); err != nil {
		return nil, nil, fmt.Errorf("encode campaign: %w", err)
	}
	if cursor, err = json.Marshal(c.Cursor); err != nil {
		return nil, nil, fmt.Errorf("encode cursor: %w", err)
	}
	return doc, cursor, nil
}

// GetCampaign implements notify.CampaignStore.
func (s *Store) GetCampaign(ctx context.Context, id string) (*notify.Campaign, error) {
	c, err := s.readCampaign(ctx, s.db.R, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get campaign %s: %w", id, err)
	}
	n, err := s.readNotification(ctx, s.db.R, `n.id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get campaign %s: notification: %w", id, err)
	}
	unpaged, err := notify.Unpaged(ctx, s, c.Audience, c.Cursor)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get campaign %s: %w", id, err)
	}
	c.Progress = notify.ProgressOf(c.Cursor, n.Stats, unpaged)
	return c, nil
}

// LoadCampaign implements notify.CampaignStore: the campaign's row alone.
func (s *Store) LoadCampaign(ctx context.Context, id string) (*notify.Campaign, error) {
	c, err := s.readCampaign(ctx, s.db.R, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: load campaign %s: %w", id, err)
	}
	return c, nil
}

const campaignColumns = `state, cursor, paused_until, error, created_at, updated_at, started_at, finished_at, doc`

func (s *Store) readCampaign(ctx context.Context, q storeConn, id string) (*notify.Campaign, error) {
	row := q.QueryRowContext(ctx, `SELECT `+campaignColumns+` FROM campaigns WHERE id = ?`, id)
	c, err := scanCampaign(row.Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notify.Errorf(notify.ENOTFOUND, "campaign not found")
	}
	return c, err
}

func scanCampaign(scan func(...any) error) (*notify.Campaign, error) {
	var (
		state, errText                     string
		cursor, doc                        []byte
		pausedUntil, startedAt, finishedAt sql.NullInt64
		createdAt, updatedAt               int64
	)
	if err := scan(&state, &cursor, &pausedUntil, &errText, &createdAt, &updatedAt, &startedAt, &finishedAt, &doc); err != nil {
		return nil, err
	}
	var c notify.Campaign
	if err := json.Unmarshal(doc, &c); err != nil {
		return nil, fmt.Errorf("decode campaign: %w", err)
	}
	if err := json.Unmarshal(cursor, &c.Cursor); err != nil {
		return nil, fmt.Errorf("decode campaign cursor: %w", err)
	}
	c.State = notify.CampaignState(state)
	c.PausedUntil = timePtrOfNull(pausedUntil)
	c.Error = errText
	c.CreatedAt, c.UpdatedAt = timeOfNanos(createdAt), timeOfNanos(updatedAt)
	c.StartedAt, c.FinishedAt = timePtrOfNull(startedAt), timePtrOfNull(finishedAt)
	return &c, nil
}

// ListCampaigns implements notify.CampaignStore.
func (s *Store) ListCampaigns(ctx context.Context, states ...notify.CampaignState) ([]*notify.Campaign, error) {
	q := `SELECT ` + campaignColumns + ` FROM campaigns`
	var args []any
	if len(states) > 0 {
		q += ` WHERE state IN (` + sqlIn(len(states)) + `)`
		for _, st := range states {
			args = append(args, string(st))
		}
	}
	rows, err := s.db.R.QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list campaigns: %w", err)
	}
	defer rows.Close()
	out := []*notify.Campaign{}
	for rows.Next() {
		c, err := scanCampaign(rows.Scan)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list campaigns: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list campaigns: %w", err)
	}
	return out, nil
}

// SaveCursor implements notify.CampaignStore. The cursor check, the recipient pages and the
// notification's recipient count are one transaction.
func (s *Store) SaveCursor(ctx context.Context, id string, expected, next notify.CampaignCursor, recipients []notify.Recipient) error {
	if next.Members != expected.Members+len(recipients) {
		return fmt.Errorf("sqlite: save cursor of %s: %w", id, notify.Errorf(notify.EINVALID,
			"next.members %d != expected.members %d + %d recipients", next.Members, expected.Members, len(recipients)))
	}
	if len(next.Sources) != len(expected.Sources) {
		return fmt.Errorf("sqlite: save cursor of %s: %w", id, notify.Errorf(notify.EINVALID, "next has %d sources, expected %d",
			len(next.Sources), len(expected.Sources)))
	}
	body, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("sqlite: save cursor of %s: encode: %w", id, err)
	}
	// The whole pages are encoded before the transaction: the store has one writer, which a
	// real-time send waits for while a page of the audience is stored.
	add, err := recipientPages(expected.Members, recipients)
	if err != nil {
		return fmt.Errorf("sqlite: save cursor of %s: encode recipients: %w", id, err)
	}
	now := nanosOf(s.now())
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		var (
			state  string
			stored []byte
			cur    notify.CampaignCursor
		)
		err := tx.QueryRowContext(ctx, `SELECT state, cursor FROM campaigns WHERE id = ?`, id).Scan(&state, &stored)
		if errors.Is(err, sql.ErrNoRows) {
			return notify.Errorf(notify.ENOTFOUND, "campaign not found")
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal(stored, &cur); err != nil {
			return fmt.Errorf("decode cursor: %w", err)
		}
		if notify.CampaignState(state).Final() {
			return notify.Errorf(notify.ECONFLICT, "campaign is %s", state)
		}
		if !cur.Equal(expected) {
			return notify.Errorf(notify.ECONFLICT, "cursor moved (members %d, expected %d)", cur.Members, expected.Members)
		}
		if len(recipients) > 0 {
			if err := s.appendRecipients(ctx, tx, id, expected.Members, add); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE campaigns SET cursor = ?, updated_at = ? WHERE id = ?`, body, now, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: save cursor of %s: %w", id, err)
	}
	return nil
}

// pagedRecipients are recipients to append, split by recipientPages.
type pagedRecipients struct {
	head  []notify.Recipient // those that fill the page already begun (none when they start one)
	pages [][]byte           // the whole pages after it, encoded
	count int                // recipients in all
}

// recipientPages splits rs, to be stored from position from on, into the recipients that fill
// the page begun there and the whole pages after it, encoded.
func recipientPages(from int, rs []notify.Recipient) (pagedRecipients, error) {
	k := min((recipientPage-from%recipientPage)%recipientPage, len(rs))
	p := pagedRecipients{head: rs[:k], count: len(rs)}
	for rs = rs[k:]; len(rs) > 0; {
		n := min(recipientPage, len(rs))
		b, err := json.Marshal(rs[:n])
		if err != nil {
			return pagedRecipients{}, err
		}
		p.pages, rs = append(p.pages, b), rs[n:]
	}
	return p, nil
}

// appendRecipients writes add at positions from… of notification id — its head into the page
// begun there, then its encoded pages — and moves the document's RecipientCount to match.
func (s *Store) appendRecipients(ctx context.Context, tx *sql.Tx, id string, from int, add pagedRecipients) error {
	var doc []byte
	if err := tx.QueryRowContext(ctx, `SELECT doc FROM notifications WHERE id = ?`, id).Scan(&doc); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return notify.Errorf(notify.ENOTFOUND, "campaign notification not found")
		}
		return err
	}
	var n notify.Notification
	if err := json.Unmarshal(doc, &n); err != nil {
		return fmt.Errorf("decode notification: %w", err)
	}
	if n.RecipientCount != from {
		return notify.Errorf(notify.ECONFLICT, "notification has %d recipients, cursor says %d", n.RecipientCount, from)
	}
	page := from / recipientPage
	put := func(b []byte) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO notification_recipients (notification_id, page, doc) VALUES (?, ?, ?)
			ON CONFLICT (notification_id, page) DO UPDATE SET doc = excluded.doc`, id, page, b)
		page++
		return err
	}
	if len(add.head) > 0 {
		var b []byte
		if err := tx.QueryRowContext(ctx, `SELECT doc FROM notification_recipients WHERE notification_id = ? AND page = ?`,
			id, page).Scan(&b); err != nil {
			return fmt.Errorf("read recipient page %d: %w", page, err)
		}
		var cur []notify.Recipient
		if err := json.Unmarshal(b, &cur); err != nil {
			return fmt.Errorf("decode recipient page %d: %w", page, err)
		}
		b, err := json.Marshal(append(cur, add.head...))
		if err != nil {
			return fmt.Errorf("encode recipients: %w", err)
		}
		if err := put(b); err != nil {
			return err
		}
	}
	for _, b := range add.pages {
		if err := put(b); err != nil {
			return err
		}
	}
	n.RecipientCount += add.count
	body, err := json.Marshal(&n)
	if err != nil {
		return fmt.Errorf("encode notification: %w", err)
	}
	_, err = tx.ExecContext(ctx, `UPDATE notifications SET doc = ? WHERE id = ?`, body, id)
	return err
}

// SetCampaignState implements notify.CampaignStore.
func (s *Store) SetCampaignState(ctx context.Context, id string, t notify.CampaignTransition, from ...notify.CampaignState) error {
	at := s.nowOr(t.At)
	var paused any
	if t.To == notify.CampaignPausedQuietHours {
		paused = nullNanosOf(t.PausedUntil)
	}
	errText := ""
	if t.To == notify.CampaignFailed {
		errText = t.Error
	}
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		var current string
		err := tx.QueryRowContext(ctx, `SELECT state FROM campaigns WHERE id = ?`, id).Scan(&current)
		if errors.Is(err, sql.ErrNoRows) {
			return notify.Errorf(notify.ENOTFOUND, "campaign not found")
		}
		if err != nil {
			return err
		}
		if len(from) > 0 && !campaignStateIn(notify.CampaignState(current), from) {
			return notify.Errorf(notify.ECONFLICT, "campaign is %s, not %v", current, from)
		}
		if t.SendAt != nil {
			if err := setCampaignSendAt(ctx, tx, id, *t.SendAt); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE campaigns SET state = ?, paused_until = ?, error = ?, updated_at = ?,
				started_at = CASE WHEN ? AND started_at IS NULL THEN ? ELSE started_at END,
				finished_at = CASE WHEN ? THEN ? ELSE finished_at END
			WHERE id = ?`,
			string(t.To), paused, errText, nanosOf(at),
			t.To == notify.CampaignRunning, nanosOf(at),
			t.To.Final(), nanosOf(at), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: set campaign %s state %s: %w", id, t.To, err)
	}
	return nil
}

// setCampaignSendAt rewrites the send_at kept in the campaign's doc.
func setCampaignSendAt(ctx context.Context, tx *sql.Tx, id string, at time.Time) error {
	var doc []byte
	if err := tx.QueryRowContext(ctx, `SELECT doc FROM campaigns WHERE id = ?`, id).Scan(&doc); err != nil {
		return err
	}
	var d map[string]json.RawMessage
	if err := json.Unmarshal(doc, &d); err != nil {
		return fmt.Errorf("decode campaign: %w", err)
	}
	raw, err := json.Marshal(at.UTC())
	if err != nil {
		return err
	}
	d["send_at"] = raw
	if doc, err = json.Marshal(d); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE campaigns SET doc = ? WHERE id = ?`, doc, id)
	return err
}

func campaignStateIn(s notify.CampaignState, set []notify.CampaignState) bool {
	for _, k := range set {
		if s == k {
			return true
		}
	}
	return false
}

// AppendAudienceList implements notify.CampaignStore.
func (s *Store) AppendAudienceList(ctx context.Context, listID string, userIDs []string) (int64, error) {
	if listID == "" {
		return 0, fmt.Errorf("sqlite: append audience list: %w", notify.Errorf(notify.EINVALID, "list id is required"))
	}
	var last int64
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM audience_lists WHERE list_id = ?`,
			listID).Scan(&last); err != nil {
			return err
		}
		for _, batch := range batchesOf(userIDs, storeBatch) {
			args := make([]any, 0, 3*len(batch))
			for _, u := range batch {
				last++
				args = append(args, listID, last, u)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO audience_lists (list_id, seq, user_id) VALUES `+
				sqlTuples(len(batch), 3), args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: append audience list %s: %w", listID, err)
	}
	return last, nil
}

// audienceQuery selects cols of seg's members after afterSeq: from the app's device index with
// its filters, or from an uploaded list (aliased a, with empty token and platform).
func audienceQuery(seg notify.Segment, cols string, afterSeq int64) (string, []any, error) {
	var (
		b    strings.Builder
		args []any
	)
	switch seg.Kind {
	case notify.AudienceAppDevices:
		b.WriteString(`SELECT ` + cols + ` FROM audience_devices a`)
		if seg.MarketingConsent {
			b.WriteString(` JOIN preferences p ON p.user_id = a.user_id AND p.marketing_consent_at IS NOT NULL`)
		}
		b.WriteString(` WHERE a.app = ? AND a.seq > ?`)
		args = append(args, seg.App, afterSeq)
		if seg.Platform != "" {
			b.WriteString(` AND a.platform = ?`)
			args = append(args, string(seg.Platform))
		}
		if seg.Locale != "" {
			b.WriteString(` AND (a.locale = ? OR substr(a.locale, 1, ?) = ?)`)
			args = append(args, seg.Locale, len(seg.Locale)+1, seg.Locale+"-")
		}
	case notify.AudienceUserList:
		b.WriteString(`SELECT ` + cols + ` FROM (SELECT seq, user_id, '' AS token, '' AS platform FROM audience_lists
			WHERE list_id = ?) a WHERE a.seq > ?`)
		args = append(args, seg.ListID, afterSeq)
	default:
		return "", nil, notify.Errorf(notify.EINVALID, "unknown audience source kind %q", seg.Kind)
	}
	return b.String(), args, nil
}

// remainingExactUpTo is how many members Remaining counts one by one. SQLite keeps no counts: an
// exact count walks the index over every member left, which for a campaign of millions read
// every time its status is polled would cost about as much as reading the audience.
const remainingExactUpTo = 50000

// Remaining implements notify.AudienceSource: an exact count with the page's filters while at
// most remainingExactUpTo members are left, otherwise an upper bound — the source's highest seq
// less afterSeq (seqs are unique and increasing within a source), which counts members the
// filters leave out, and other apps' devices between an app's seqs.
func (s *Store) Remaining(ctx context.Context, a notify.Audience, source int, afterSeq int64) (int, error) {
	return s.remaining(ctx, a, source, afterSeq, remainingExactUpTo)
}

func (s *Store) remaining(ctx context.Context, a notify.Audience, source int, afterSeq int64, exactUpTo int) (int, error) {
	if source < 0 || source >= len(a.Sources) {
		return 0, notify.Errorf(notify.EINVALID, "audience source %d out of range (%d sources)", source, len(a.Sources))
	}
	seg := a.Sources[source]
	q, args, err := audienceQuery(seg, `1`, afterSeq)
	if err != nil {
		return 0, err
	}
	var n int
	if err := s.db.R.QueryRowContext(ctx, `SELECT count(*) FROM (`+q+` LIMIT ?)`, append(args, exactUpTo+1)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: audience remaining: %w", err)
	}
	if n <= exactUpTo {
		return n, nil
	}
	var last sql.NullInt64
	if seg.Kind == notify.AudienceUserList {
		err = s.db.R.QueryRowContext(ctx, `SELECT max(seq) FROM audience_lists WHERE list_id = ?`, seg.ListID).Scan(&last)
	} else {
		err = s.db.R.QueryRowContext(ctx, `SELECT max(seq) FROM audience_devices WHERE app = ?`, seg.App).Scan(&last)
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: audience remaining: %w", err)
	}
	return max(n, int(last.Int64-afterSeq)), nil
}

// Page implements notify.AudienceSource.
func (s *Store) Page(ctx context.Context, a notify.Audience, source int, afterSeq int64, limit int) ([]notify.Member, error) {
	if source < 0 || source >= len(a.Sources) {
		return nil, notify.Errorf(notify.EINVALID, "audience source %d out of range (%d sources)", source, len(a.Sources))
	}
	if limit <= 0 {
		return nil, notify.Errorf(notify.EINVALID, "page limit must be positive")
	}
	q, args, err := audienceQuery(a.Sources[source], `a.seq, a.user_id, a.token, a.platform`, afterSeq)
	if err != nil {
		return nil, err
	}
	q += ` ORDER BY a.seq LIMIT ?`
	args = append(args, limit)
	rows, err := s.db.R.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: audience page: %w", err)
	}
	defer rows.Close()
	out := make([]notify.Member, 0, limit)
	for rows.Next() {
		var m notify.Member
		if err := rows.Scan(&m.Seq, &m.UserID, &m.Token, &m.Platform); err != nil {
			return nil, fmt.Errorf("sqlite: audience page: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: audience page: %w", err)
	}
	return out, nil
}
