package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"herald/internal/notify"
)

// Store is notify.Store on SQLite. Every write goes through the DB's single writer connection,
// so a read-modify-write inside one transaction needs no retry loop; plain reads use the reader
// pool and see the last committed state (WAL snapshot per statement).
type Store struct {
	db     *DB
	cipher notify.Cipher
	now    func() time.Time // used only where the port passes no time (defaults such as UpdatedAt)
}

var _ notify.Store = (*Store)(nil)

// storeSchemaVersion is the schema this code reads and writes. It lives in store_meta rather
// than PRAGMA user_version because the Queue shares the database file and has its own schema.
const storeSchemaVersion = 19

// storeMigrations[i] takes the schema from version i to i+1.
var storeMigrations = []string{
	// 1: the initial schema.
	`
CREATE TABLE IF NOT EXISTS notifications (
	id              TEXT PRIMARY KEY,
	service         TEXT NOT NULL,
	idempotency_key TEXT NOT NULL DEFAULT '',
	status          TEXT NOT NULL,
	chunks_total    INTEGER NOT NULL DEFAULT 0,
	chunks_prepared INTEGER NOT NULL DEFAULT 0,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	doc             BLOB NOT NULL -- the whole notify.Notification as JSON; the columns above win
);
-- Partial, so an empty key never dedupes.
CREATE UNIQUE INDEX IF NOT EXISTS notifications_idempotency
	ON notifications (service, idempotency_key) WHERE idempotency_key != '';
CREATE INDEX IF NOT EXISTS notifications_created ON notifications (created_at);

-- Per-channel counters, changed only in the transaction of the delivery transition causing them.
CREATE TABLE IF NOT EXISTS notification_stats (
	notification_id TEXT NOT NULL,
	channel         TEXT NOT NULL,
	total           INTEGER NOT NULL DEFAULT 0,
	sent            INTEGER NOT NULL DEFAULT 0,
	failed          INTEGER NOT NULL DEFAULT 0,
	skipped         INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (notification_id, channel)
) WITHOUT ROWID;

-- One row per prepared chunk: its presence is what makes a re-submitted chunk a no-op.
CREATE TABLE IF NOT EXISTS prepared_chunks (
	notification_id TEXT NOT NULL,
	chunk           INTEGER NOT NULL,
	PRIMARY KEY (notification_id, chunk)
) WITHOUT ROWID;

-- No raw address column on purpose: stores keep only the masked form.
-- A rowid table, not WITHOUT ROWID keyed by the (random, hashed) id: rows of one batch are
-- appended next to each other, so claiming and completing that batch later dirties a few pages
-- instead of one page per delivery.
CREATE TABLE IF NOT EXISTS deliveries (
	id                  TEXT NOT NULL UNIQUE,
	notification_id     TEXT NOT NULL,
	user_id             TEXT NOT NULL,
	channel             TEXT NOT NULL,
	provider            TEXT NOT NULL,
	app                 TEXT NOT NULL,
	address_masked      TEXT NOT NULL,
	status              TEXT NOT NULL,
	reason              TEXT NOT NULL,
	detail              TEXT NOT NULL,
	attempts            INTEGER NOT NULL,
	provider_message_id TEXT NOT NULL,
	lease_until         INTEGER NOT NULL, -- unix nanos, 0 when not leased
	updated_at          INTEGER NOT NULL
);
-- Replaced by deliveries_by_notification (migration 12); claims and verdicts find rows through
-- the UNIQUE id index.
CREATE INDEX IF NOT EXISTS deliveries_notification ON deliveries (notification_id, id);

-- Keyed by token: a token belongs to at most one user, so registering it again moves it.
CREATE TABLE IF NOT EXISTS devices (
	token       TEXT PRIMARY KEY,
	user_id     TEXT NOT NULL,
	platform    TEXT NOT NULL,
	app         TEXT NOT NULL,
	environment TEXT NOT NULL,
	locale      TEXT NOT NULL,
	time_zone   TEXT NOT NULL,
	updated_at  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS devices_user ON devices (user_id, token);

-- Everything but the user id is sealed with the configured notify.Cipher.
CREATE TABLE IF NOT EXISTS contacts (
	user_id TEXT PRIMARY KEY,
	sealed  BLOB NOT NULL
) WITHOUT ROWID;

-- Consent times are columns, so "who consented when" is answerable in SQL for an audit.
CREATE TABLE IF NOT EXISTS preferences (
	user_id             TEXT PRIMARY KEY,
	opt_out             BLOB NOT NULL, -- JSON map channel -> categories
	marketing_consent_at INTEGER,      -- NULL: no consent
	night_consent_at    INTEGER,       -- NULL: no consent
	updated_at          INTEGER NOT NULL
) WITHOUT ROWID;

-- Keyed by notify.AddressKey (a hash); the address itself is never stored.
CREATE TABLE IF NOT EXISTS suppressions (
	address_key TEXT PRIMARY KEY,
	channel     TEXT NOT NULL,
	masked      TEXT NOT NULL,
	reason      TEXT NOT NULL,
	created_at  INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS inbox (
	user_id    TEXT NOT NULL,
	id         TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	read_at    INTEGER,           -- NULL: unread
	expires_at INTEGER,           -- NULL: never
	doc        BLOB NOT NULL,     -- content fields as JSON
	PRIMARY KEY (user_id, id)
);
CREATE INDEX IF NOT EXISTS inbox_newest ON inbox (user_id, created_at DESC, id DESC);
`,
	// 2: recipients live in pages beside the notification, so reading a notification's status
	// never decodes its recipient list.
	`
CREATE TABLE IF NOT EXISTS notification_recipients (
	notification_id TEXT NOT NULL,
	page            INTEGER NOT NULL, -- recipients [page*recipientPage, (page+1)*recipientPage)
	doc             BLOB NOT NULL,    -- JSON array of notify.Recipient
	PRIMARY KEY (notification_id, page)
) WITHOUT ROWID;`,
	// 3: campaigns, their uploaded audience lists, and the per-app, sequence-ordered device index
	// campaigns page with `seq > ?` (see campaign.go).
	campaignSchema,
	// 4: the bulk lane's per-batch idempotency records (see store_batch.go).
	`
CREATE TABLE IF NOT EXISTS send_batches (
	notification_id TEXT NOT NULL,
	id              TEXT NOT NULL,
	done            INTEGER NOT NULL DEFAULT 0,
	attempts        INTEGER NOT NULL,
	lease_until     INTEGER NOT NULL, -- unix nanos
	updated_at      INTEGER NOT NULL,
	PRIMARY KEY (notification_id, id)
) WITHOUT ROWID;`,
	// 5: inbox broadcasts, stored once and merged into the reads of the users they target, and
	// the per-user markers written when one is read or deleted (see store_inbox.go).
	broadcastSchema,
	// 6: import markers of uploaded audience list objects (see imports.go).
	importSchema,
	// 7: the audit log of operator actions (see audit.go).
	auditSchema,
	// 8: stored templates, every version (see store_template.go).
	templateSchema,
	// 9: export jobs (see export.go).
	exportSchema,
	// 10: suppressions in creation order, for ListSuppressions' keyset pages (see
	// store_suppressions.go).
	`CREATE INDEX IF NOT EXISTS suppressions_created ON suppressions (created_at, address_key);`,
	// 11: express notifications keep their deliveries and their few recipients in their own row
	// (see store_express.go); NULL for every other notification.
	addColumns + "notifications express BLOB, recipients BLOB",
	// 12: ListDeliveries pages a notification's deliveries in the order they were stored: an
	// index on notification_id alone is ordered by rowid within it, so a batch's deliveries are
	// appended to it instead of each landing on a page of its own, as (notification_id, id) with
	// hashed ids had them — that index was more than half of what storing them cost.
	`DROP INDEX IF EXISTS deliveries_notification;
CREATE INDEX IF NOT EXISTS deliveries_by_notification ON deliveries (notification_id);`,
	// 13: a delivery is unique within its notification — (notification_id, id) — instead of by
	// its id across the table. Ids are hashes: under a UNIQUE(id) index every delivery stored
	// lands on an index page of its own anywhere in the whole history, so storing a batch dirtied
	// a page per delivery and cost more the longer the database had lived (14–16 ms a batch of 500
	// over 1,000,000 earlier deliveries, against 8–10 ms keyed by notification). Every lookup
	// names the notification. SQLite cannot drop a column's UNIQUE: the table is rebuilt, rowids
	// (the listing order) kept.
	deliveriesByNotification,
	// 14: the HTTP API's claims of idempotency keys (see keyclaim.go).
	keyClaimSchema,
	// 15: the recipient index (notify.IndexedUser): the one user a notification was sent to,
	// NULL for every other notification.
	addColumns + "notifications recipient_user TEXT",
	// 16: the recipient view's search, newest first; partial, so notifications to several users,
	// campaigns and those from before the index cost it nothing.
	`CREATE INDEX IF NOT EXISTS notifications_by_user ON notifications (recipient_user, created_at DESC, id DESC)
	WHERE recipient_user IS NOT NULL;`,
	// 17: a delivery's earlier attempts (notify.Delivery.History) as JSON; NULL for the
	// deliveries decided on their first attempt.
	addColumns + "deliveries history BLOB",
	// 18: the owner of each contact address, by its AddressKey (notify.AddressFinder): contacts
	// are sealed, so the search by address needs its own index.
	`CREATE TABLE IF NOT EXISTS contact_owners (
	address_key TEXT PRIMARY KEY,
	user_id     TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS contact_owners_user ON contact_owners (user_id);`,
	// 19: users' erasures and their tombstones (see erase.go).
	erasureSchema,
}

// deliveriesByNotification is migration 13 (see storeMigrations). It may run again over its own
// result: the copy is then of the same rows.
const deliveriesByNotification = `
DROP TABLE IF EXISTS deliveries_v13;
CREATE TABLE deliveries_v13 (
	id                  TEXT NOT NULL,
	notification_id     TEXT NOT NULL,
	user_id             TEXT NOT NULL,
	channel             TEXT NOT NULL,
	provider            TEXT NOT NULL,
	app                 TEXT NOT NULL,
	address_masked      TEXT NOT NULL,
	status              TEXT NOT NULL,
	reason              TEXT NOT NULL,
	detail              TEXT NOT NULL,
	attempts            INTEGER NOT NULL,
	provider_message_id TEXT NOT NULL,
	lease_until         INTEGER NOT NULL,
	updated_at          INTEGER NOT NULL
);
INSERT INTO deliveries_v13 (rowid, ` + deliveryColumnsV13 + `) SELECT rowid, ` + deliveryColumnsV13 + ` FROM deliveries ORDER BY rowid;
DROP TABLE deliveries;
ALTER TABLE deliveries_v13 RENAME TO deliveries;
CREATE UNIQUE INDEX deliveries_id ON deliveries (notification_id, id);
CREATE INDEX deliveries_by_notification ON deliveries (notification_id);`

// deliveryColumnsV13 are the deliveries table's columns as migration 13 copies them (later
// migrations add more).
const deliveryColumnsV13 = `id, notification_id, user_id, channel, provider, app, address_masked, status,
	reason, detail, attempts, provider_message_id, lease_until, updated_at`

// addColumns starts a migration that adds columns to a table unless they exist — SQLite has no
// ADD COLUMN IF NOT EXISTS, and a migration may run again over a schema that has them (a
// downgraded schema_version): "<addColumns><table> <column> <type>, <column> <type>…".
const addColumns = "-- add columns: "

// runMigration applies one entry of storeMigrations.
func runMigration(ctx context.Context, tx *sql.Tx, m string) error {
	spec, ok := strings.CutPrefix(m, addColumns)
	if !ok {
		_, err := tx.ExecContext(ctx, m)
		return err
	}
	table, cols, _ := strings.Cut(spec, " ")
	have := map[string]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, table)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		have[name] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, col := range strings.Split(cols, ",") {
		col = strings.TrimSpace(col)
		name, _, _ := strings.Cut(col, " ")
		if have[name] {
			continue
		}
		if _, err := tx.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN `+col); err != nil {
			return err
		}
	}
	return nil
}

// NewStore returns a Store on db, creating or upgrading its schema. cipher seals contacts at rest
// and is required.
func NewStore(db *DB, cipher notify.Cipher) (*Store, error) {
	if db == nil {
		return nil, errors.New("sqlite: new store: nil DB")
	}
	if cipher == nil {
		return nil, errors.New("sqlite: new store: a cipher is required to keep contacts encrypted at rest")
	}
	s := &Store{db: db, cipher: cipher, now: time.Now}
	if err := s.migrate(context.Background()); err != nil {
		return nil, fmt.Errorf("sqlite: new store: %w", err)
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS store_meta (
			key   TEXT PRIMARY KEY,
			value INTEGER NOT NULL
		) WITHOUT ROWID`); err != nil {
			return fmt.Errorf("create store_meta: %w", err)
		}
		var v int
		err := tx.QueryRowContext(ctx, `SELECT value FROM store_meta WHERE key = 'schema_version'`).Scan(&v)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read schema version: %w", err)
		}
		if v > storeSchemaVersion {
			return fmt.Errorf("database schema version %d is newer than this build's %d", v, storeSchemaVersion)
		}
		for ; v < storeSchemaVersion; v++ {
			if err := runMigration(ctx, tx, storeMigrations[v]); err != nil {
				return fmt.Errorf("migrate schema to version %d: %w", v+1, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO store_meta (key, value) VALUES ('schema_version', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, v); err != nil {
			return fmt.Errorf("write schema version: %w", err)
		}
		return nil
	})
}

// storeConn is what both *sql.DB and *sql.Tx offer, so a read can run inside a write
// transaction or on the reader pool.
type storeConn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// storeBatch is how many ids or rows go into one statement: well under SQLite's limit on bound
// variables even for the widest row, and large enough that a 500-delivery step is one statement.
const storeBatch = 500

// batchesOf splits xs into slices of at most n.
func batchesOf[T any](xs []T, n int) [][]T {
	var out [][]T
	for len(xs) > n {
		out = append(out, xs[:n:n])
		xs = xs[n:]
	}
	if len(xs) > 0 {
		out = append(out, xs)
	}
	return out
}

// sqlTuples returns "(?,?),(?,?)" with rows tuples of width placeholders.
func sqlTuples(rows, width int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?,", width), ",") + ")"
	var b strings.Builder
	b.Grow(rows * (len(one) + 1))
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(one)
	}
	return b.String()
}

// sqlIn returns "?,?,?" for an IN list of n items.
func sqlIn(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// stringArgs converts ids to driver arguments.
func stringArgs(ids []string, extra ...any) []any {
	args := make([]any, 0, len(ids)+len(extra))
	for _, id := range ids {
		args = append(args, id)
	}
	return append(args, extra...)
}

// nanosOf is how times are stored: UTC unix nanoseconds, 0 for the zero time.
func nanosOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// timeOfNanos reverses nanosOf.
func timeOfNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// nullNanosOf stores an optional time; nil becomes NULL.
func nullNanosOf(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

// timePtrOfNull reverses nullNanosOf.
func timePtrOfNull(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := time.Unix(0, n.Int64).UTC()
	return &t
}

// utcPtr returns a UTC copy of an optional time, so JSON documents hold "Z" times.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// nowOr returns t, or the store's current time when t is zero.
func (s *Store) nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return s.now().UTC()
	}
	return t.UTC()
}
