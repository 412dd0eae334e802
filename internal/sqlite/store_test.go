package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/notify/storetest"
	"herald/internal/seal"
	"herald/internal/sqlite"
)

// openTestStore returns a Store on a fresh database file, closed when the test ends.
func openTestStore(tb testing.TB) (*sqlite.Store, *sqlite.DB) {
	tb.Helper()
	s, db := storeAt(tb, filepath.Join(tb.TempDir(), "herald.db"))()
	tb.Cleanup(func() { db.Close() })
	return s, db
}

// storeAt returns a function that opens the Store on the database file at path, as a restart
// does, with one fixed contacts key.
func storeAt(tb testing.TB, path string) func() (*sqlite.Store, *sqlite.DB) {
	tb.Helper()
	box, err := seal.New([]byte(strings.Repeat("k", 32)))
	if err != nil {
		tb.Fatal(err)
	}
	return func() (*sqlite.Store, *sqlite.DB) {
		tb.Helper()
		db, err := sqlite.Open(path)
		if err != nil {
			tb.Fatal(err)
		}
		s, err := sqlite.NewStore(db, box)
		if err != nil {
			tb.Fatal(err)
		}
		return s, db
	}
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) notify.Store {
		s, _ := openTestStore(t)
		return s
	})
}

func TestStoreNilCipher(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := sqlite.NewStore(db, nil); err == nil {
		t.Fatal("NewStore(db, nil) succeeded; contacts would be stored in plaintext")
	}
}

// TestStoreReopen: the schema is created once and a second NewStore on the same file keeps the
// data (CREATE IF NOT EXISTS plus a recorded schema version).
func TestStoreReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "herald.db")
	box, err := seal.New([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	n := &notify.Notification{ID: "n_reopen", Service: "billing", IdempotencyKey: "k", Status: notify.StatusAccepted,
		CreatedAt: time.Unix(1_900_000_000, 0)}
	for round := range 2 {
		db, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		s, err := sqlite.NewStore(db, box)
		if err != nil {
			t.Fatalf("round %d: NewStore: %v", round, err)
		}
		_, created, err := s.CreateNotification(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if created != (round == 0) {
			t.Fatalf("round %d: created = %v", round, created)
		}
		db.Close()
	}
}

// TestStoreNoPersonalDataAtRest writes a contact and a delivery with raw addresses, then looks for
// those addresses in every table through SQL and in the database file's bytes.
func TestStoreNoPersonalDataAtRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := openTestStore(t)
	const (
		email = "very.private.person@example.com"
		phone = "+821098765432"
		token = "fcm-token-THAT-MUST-NOT-LEAK-0123456789"
	)
	if err := s.PutContact(ctx, notify.Contact{UserID: "u1", Email: email, Phone: phone, Locale: "ko"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetContacts(ctx, []string{"u1"})
	if err != nil {
		t.Fatal(err)
	}
	if got["u1"].Email != email || got["u1"].Phone != phone {
		t.Fatalf("contact round trip = %+v", got["u1"])
	}

	n := &notify.Notification{ID: "n_1", Service: "billing", Status: notify.StatusProcessing}
	if _, _, err := s.CreateNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	var ds []notify.Delivery
	for _, x := range []struct {
		ch   notify.Channel
		addr string
	}{{notify.ChannelEmail, email}, {notify.ChannelSMS, phone}, {notify.ChannelPush, token}} {
		ds = append(ds, notify.Delivery{ID: notify.DeliveryID(n.ID, x.ch, x.addr), NotificationID: n.ID, UserID: "u1",
			Channel: x.ch, Address: x.addr, AddressMasked: notify.MaskAddress(x.ch, x.addr), Status: notify.DeliveryPending})
	}
	if _, err := s.CreateDeliveries(ctx, n.ID, 0, ds); err != nil {
		t.Fatal(err)
	}
	secrets := []string{email, phone, token, "very.private", "98765432"}

	// Every column of every table, read as text.
	tables := queryStrings(t, db.R, `SELECT name FROM sqlite_master WHERE type = 'table'`)
	if !contains(tables, "contacts") || !contains(tables, "deliveries") {
		t.Fatalf("tables = %v", tables)
	}
	for _, table := range tables {
		rows, err := db.R.Query(`SELECT * FROM "` + table + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				for _, secret := range secrets {
					if strings.Contains(string(v), secret) {
						t.Errorf("%s.%s holds %q in plaintext", table, cols[i], secret)
					}
				}
			}
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// The contacts table as text through SQL itself, as an operator with the sqlite3 shell would.
	for _, secret := range secrets {
		var k int
		if err := db.R.QueryRow(`SELECT count(*) FROM contacts
			WHERE instr(CAST(sealed AS TEXT), ?) > 0 OR instr(user_id, ?) > 0`, secret, secret).Scan(&k); err != nil {
			t.Fatal(err)
		}
		if k != 0 {
			t.Errorf("contacts: %d rows contain %q", k, secret)
		}
	}

	// And the raw bytes once the WAL is folded into the main file.
	if _, err := db.W.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{db.Path, db.Path + "-wal"} {
		raw, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range secrets {
			if bytes.Contains(raw, []byte(secret)) {
				t.Errorf("%s contains %q", filepath.Base(path), secret)
			}
		}
	}
}

func queryStrings(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// BenchmarkDeliveries500 is one prepare → send → record round for a batch of 500 deliveries: the
// unit the pipeline moves. deliveries/s is the sustained rate through all three steps.
func BenchmarkDeliveries500(b *testing.B) {
	const batch = 500
	ctx := context.Background()
	s, _ := openTestStore(b)
	n := &notify.Notification{ID: "n_bench", Service: "bench", Status: notify.StatusProcessing}
	if _, _, err := s.CreateNotification(ctx, n); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	chunk := 0
	ds := make([]notify.Delivery, batch)
	ids := make([]string, batch)
	updates := make([]notify.DeliveryUpdate, batch)
	b.ReportAllocs()
	for b.Loop() {
		for i := range ds {
			addr := fmt.Sprintf("token-%d-%d-abcdefghijklmnopqrstuvwxyz", chunk, i)
			ds[i] = notify.Delivery{ID: notify.DeliveryID(n.ID, notify.ChannelPush, addr), NotificationID: n.ID,
				UserID: fmt.Sprintf("user-%d", i), Channel: notify.ChannelPush, Provider: notify.ProviderFCM, App: "default",
				Address: addr, AddressMasked: notify.MaskToken(addr), Status: notify.DeliveryPending}
			ids[i] = ds[i].ID
		}
		pending, err := s.CreateDeliveries(ctx, n.ID, chunk, ds)
		if err != nil || len(pending) != batch {
			b.Fatalf("create: %d pending, %v", len(pending), err)
		}
		claimed, _, err := s.ClaimDeliveries(ctx, n.ID, ids, now, now.Add(time.Minute))
		if err != nil || len(claimed) != batch {
			b.Fatalf("claim: %d claimed, %v", len(claimed), err)
		}
		for i, id := range ids {
			updates[i] = notify.DeliveryUpdate{ID: id, Status: notify.DeliverySent, ProviderMessageID: "pm-" + id, At: now}
		}
		applied, err := s.CompleteDeliveries(ctx, n.ID, updates)
		if err != nil || applied != batch {
			b.Fatalf("complete: %d applied, %v", applied, err)
		}
		chunk++
	}
	b.ReportMetric(float64(batch*chunk)/b.Elapsed().Seconds(), "deliveries/s")
}

// BenchmarkRecordBatch500 is the realtime lane's round for a batch of 500 deliveries claimed
// whole (Notification.BatchClaims): the chunk counted, the batch claimed, and its deliveries
// stored once with their outcomes. Compare BenchmarkDeliveries500, the per-delivery round.
func BenchmarkRecordBatch500(b *testing.B) {
	s, _ := openTestStore(b)
	recordBatches(b, s)
}

// recordBatches stores realtime batches of 500 sent deliveries of one notification on s, one
// per iteration of b: each claimed, then recorded (RecordBatch), as the send stage does.
func recordBatches(b *testing.B, s *sqlite.Store) {
	const batch = 500
	ctx := context.Background()
	n := &notify.Notification{ID: "n_bench", Service: "bench", Status: notify.StatusProcessing, BatchClaims: true}
	if _, _, err := s.CreateNotification(ctx, n); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	chunk := 0
	ds := make([]notify.Delivery, batch)
	b.ReportAllocs()
	for b.Loop() {
		total := map[notify.Channel]notify.ChannelStats{notify.ChannelPush: {Total: batch}}
		if _, err := s.AddChunk(ctx, n.ID, chunk, total); err != nil {
			b.Fatal(err)
		}
		for i := range ds {
			addr := fmt.Sprintf("token-%d-%d-abcdefghijklmnopqrstuvwxyz", chunk, i)
			id := notify.DeliveryID(n.ID, notify.ChannelPush, addr)
			ds[i] = notify.Delivery{ID: id, NotificationID: n.ID, UserID: fmt.Sprintf("user-%d", i), Channel: notify.ChannelPush,
				Provider: notify.ProviderFCM, App: "default", AddressMasked: notify.MaskToken(addr), Status: notify.DeliverySent,
				Attempts: 1, ProviderMessageID: "projects/bench/messages/0:" + id, UpdatedAt: now}
		}
		bid := fmt.Sprintf("b_%d", chunk)
		if c, err := s.ClaimBatch(ctx, n.ID, bid, now, now.Add(time.Minute)); err != nil || c.State != notify.BatchClaimed {
			b.Fatalf("claim: %+v, %v", c, err)
		}
		if ok, err := s.RecordBatch(ctx, n.ID, bid, ds, now); err != nil || !ok {
			b.Fatalf("record: %v, %v", ok, err)
		}
		chunk++
	}
	b.ReportMetric(float64(batch*chunk)/b.Elapsed().Seconds(), "deliveries/s")
}

// TestDeliveriesMigrationKeepsRowsAndOrder: a database whose deliveries are unique by id alone
// (schema 12) is rebuilt keyed by notification: every delivery kept, listed in the same order, a
// cursor of the old listing still valid, and claims go on.
func TestDeliveriesMigrationKeepsRowsAndOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "herald.db")
	open := storeAt(t, path)
	s, db := open()
	var ns []*notify.Notification
	for k := range 2 {
		n := &notify.Notification{ID: fmt.Sprintf("n_migrate%d", k), Service: "orders", Status: notify.StatusProcessing,
			Channels: []notify.Channel{notify.ChannelPush}, RecipientCount: 7}
		if _, _, err := s.CreateNotification(ctx, n); err != nil {
			t.Fatal(err)
		}
		ds := make([]notify.Delivery, 7)
		for i := range ds {
			addr := fmt.Sprintf("tok-%d-%d", k, i)
			ds[i] = notify.Delivery{ID: notify.DeliveryID(n.ID, notify.ChannelPush, addr), NotificationID: n.ID, UserID: "u",
				Channel: notify.ChannelPush, Provider: notify.ProviderFCM, App: "default", AddressMasked: notify.MaskToken(addr),
				Status: notify.DeliveryPending}
		}
		if _, err := s.CreateDeliveries(ctx, n.ID, 0, ds); err != nil {
			t.Fatal(err)
		}
		ns = append(ns, n)
	}
	list := func(s *sqlite.Store, nid, cursor string) ([]string, string) {
		t.Helper()
		ds, next, err := s.ListDeliveries(ctx, nid, cursor, 3)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
		return ids, next
	}
	before0, cursor := list(s, ns[0].ID, "")
	before1, _ := list(s, ns[0].ID, cursor)
	// Turn the file back into a schema-12 database: deliveries unique by id.
	for _, q := range []string{
		`CREATE TABLE deliveries_v12 (id TEXT NOT NULL UNIQUE, notification_id TEXT NOT NULL, user_id TEXT NOT NULL,
			channel TEXT NOT NULL, provider TEXT NOT NULL, app TEXT NOT NULL, address_masked TEXT NOT NULL, status TEXT NOT NULL,
			reason TEXT NOT NULL, detail TEXT NOT NULL, attempts INTEGER NOT NULL, provider_message_id TEXT NOT NULL,
			lease_until INTEGER NOT NULL, updated_at INTEGER NOT NULL)`,
		`INSERT INTO deliveries_v12 (rowid, id, notification_id, user_id, channel, provider, app, address_masked, status, reason,
			detail, attempts, provider_message_id, lease_until, updated_at) SELECT rowid * 10, id, notification_id, user_id, channel,
			provider, app, address_masked, status, reason, detail, attempts, provider_message_id, lease_until, updated_at FROM deliveries`,
		`DROP TABLE deliveries`,
		`ALTER TABLE deliveries_v12 RENAME TO deliveries`,
		`CREATE INDEX deliveries_by_notification ON deliveries (notification_id)`,
		`UPDATE store_meta SET value = 12 WHERE key = 'schema_version'`,
	} {
		if _, err := db.W.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rowids := func() string {
		t.Helper()
		var r string
		if err := db.W.QueryRowContext(ctx, `SELECT group_concat(rowid || ':' || id, ' ') FROM (SELECT rowid, id FROM deliveries ORDER BY rowid)`).Scan(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	was := rowids()
	db.Close()

	s, db = open()
	defer db.Close()
	if got := rowids(); got != was {
		t.Fatalf("rowids after the upgrade:\n%s\nwere\n%s", got, was)
	}
	_, cursor = list(s, ns[0].ID, "")
	var rows, unique int
	if err := db.W.QueryRowContext(ctx, `SELECT count(*) FROM deliveries`).Scan(&rows); err != nil || rows != 14 {
		t.Fatalf("after the upgrade %d deliveries (%v), want 14", rows, err)
	}
	if err := db.W.QueryRowContext(ctx, `SELECT count(*) FROM pragma_index_list('deliveries') WHERE "unique" AND name = 'deliveries_id'`).Scan(&unique); err != nil || unique != 1 {
		t.Fatalf("unique index deliveries_id: %d (%v), want 1", unique, err)
	}
	after0, _ := list(s, ns[0].ID, "")
	after1, _ := list(s, ns[0].ID, cursor) // a cursor names a rowid: kept
	if strings.Join(after0, " ") != strings.Join(before0, " ") || strings.Join(after1, " ") != strings.Join(before1, " ") {
		t.Fatalf("listing changed: pages %v %v, were %v %v", after0, after1, before0, before1)
	}
	now := time.Now()
	claimed, _, err := s.ClaimDeliveries(ctx, ns[1].ID, before0, now, now.Add(time.Minute))
	if err != nil || len(claimed) != 0 {
		t.Fatalf("claiming another notification's deliveries: %d claimed, %v; want none", len(claimed), err)
	}
	if claimed, _, err = s.ClaimDeliveries(ctx, ns[0].ID, before0, now, now.Add(time.Minute)); err != nil || len(claimed) != len(before0) {
		t.Fatalf("claim after the upgrade: %d of %d, %v", len(claimed), len(before0), err)
	}
}

// BenchmarkRecordBatchWithHistory stores realtime batches of 500 into a database that already
// holds 1,000,000 deliveries of 100 earlier notifications: what storing a batch costs once the
// database has lived a while (a delivery is unique within its notification, so a batch touches
// its own notification's index pages, not pages spread over the whole history).
func BenchmarkRecordBatchWithHistory(b *testing.B) {
	ctx := context.Background()
	s, db := openTestStore(b)
	if _, err := db.W.ExecContext(ctx, `WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM k WHERE i < 999999)
		INSERT INTO deliveries (id, notification_id, user_id, channel, provider, app, address_masked, status, reason, detail,
			attempts, provider_message_id, lease_until, updated_at)
		SELECT 'd_' || lower(hex(randomblob(12))), 'n_history' || (i % 100), 'u', 'push', 'fcm', 'default', 'x', 'SENT', '', '',
			1, '', 0, 0 FROM k`); err != nil {
		b.Fatal(err)
	}
	recordBatches(b, s)
}

// A batch a dead worker had claimed can be claimed at once after ReleaseBatchLeases; a done
// batch stays done.
func TestStoreReleaseBatchLeases(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t)
	ctx := t.Context()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	n := &notify.Notification{ID: "n_release", Service: "shop", Status: notify.StatusProcessing, CreatedAt: now, UpdatedAt: now}
	if _, _, err := s.CreateNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"b1", "b2"} {
		if c, err := s.ClaimBatch(ctx, n.ID, b, now, now.Add(time.Minute)); err != nil || c.State != notify.BatchClaimed {
			t.Fatalf("claim %s = %+v, %v", b, c, err)
		}
	}
	if ok, err := s.CompleteBatch(ctx, n.ID, "b2", nil, now); err != nil || !ok {
		t.Fatalf("complete b2 = %v, %v", ok, err)
	}
	later := now.Add(5 * time.Second)
	if c, err := s.ClaimBatch(ctx, n.ID, "b1", later, later.Add(time.Minute)); err != nil || c.State != notify.BatchBusy {
		t.Fatalf("claim under the dead worker's lease = %+v, %v; want BUSY", c, err)
	}
	if k, err := s.ReleaseBatchLeases(ctx, later); err != nil || k != 1 {
		t.Fatalf("ReleaseBatchLeases = %d, %v; want 1", k, err)
	}
	if c, err := s.ClaimBatch(ctx, n.ID, "b1", later, later.Add(time.Minute)); err != nil || c.State != notify.BatchClaimed || c.Attempts != 2 {
		t.Fatalf("claim after the release = %+v, %v; want CLAIMED, attempt 2", c, err)
	}
	if c, err := s.ClaimBatch(ctx, n.ID, "b2", later, later.Add(time.Minute)); err != nil || c.State != notify.BatchDone {
		t.Fatalf("claim of the done batch = %+v, %v; want DONE", c, err)
	}
}

// An express notification a dead worker was sending can be handed over at once after
// ReleaseExpressLeases; a final one, an ordinary one and an unknown id are left as they are.
func TestStoreReleaseExpressLeases(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t)
	ctx := t.Context()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	express := func(id string, status notify.NotificationStatus) *notify.Notification {
		push := notify.Delivery{ID: notify.DeliveryID(id, notify.ChannelPush, "tok-"+id), NotificationID: id, UserID: "u1",
			Channel: notify.ChannelPush, Provider: notify.ProviderFCM, App: "default", AddressMasked: "tok-…",
			Status: notify.DeliverySending, Attempts: 1, LeaseUntil: now.Add(time.Minute), UpdatedAt: now}
		if status.Final() {
			push.Status, push.LeaseUntil = notify.DeliverySent, time.Time{}
		}
		n := &notify.Notification{ID: id, Service: "shop", Category: notify.CategoryTransactional, Status: status,
			Channels: []notify.Channel{notify.ChannelPush}, Recipients: []notify.Recipient{{UserID: "u1"}},
			Express: &notify.Express{Deliveries: []notify.Delivery{push}, Lease: push.LeaseUntil},
			Stats:   notify.Stats{ChunksTotal: 1, ChunksPrepared: 1}, CreatedAt: now, UpdatedAt: now}
		if _, _, err := s.CreateNotification(ctx, n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	inFlight := express("n_inflight", notify.StatusProcessing)
	done := express("n_done", notify.StatusSent)
	plain := &notify.Notification{ID: "n_plain", Service: "shop", Status: notify.StatusProcessing, CreatedAt: now, UpdatedAt: now}
	if _, _, err := s.CreateNotification(ctx, plain); err != nil {
		t.Fatal(err)
	}
	later := now.Add(5 * time.Second)
	k, err := s.ReleaseExpressLeases(ctx, []string{inFlight.ID, done.ID, plain.ID, "n_unknown"}, later)
	if err != nil || k != 1 {
		t.Fatalf("ReleaseExpressLeases = %d, %v; want 1 (the express send in flight)", k, err)
	}
	got, err := s.GetNotification(ctx, inFlight.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Express == nil || got.Express.Lease.After(later) || got.Status != notify.StatusProcessing {
		t.Fatalf("in-flight express after the release: status %s, express %+v; want its lease ended by %v", got.Status, got.Express, later)
	}
	if d := got.Express.Deliveries[0]; d.Status != notify.DeliverySending || d.LeaseUntil.After(later) {
		t.Fatalf("its delivery: %+v; want SENDING under the ended lease", d)
	}
	if again, err := s.ReleaseExpressLeases(ctx, []string{inFlight.ID}, later); err != nil || again != 0 {
		t.Fatalf("a second release = %d, %v; want 0", again, err)
	}
	if got, err := s.GetNotification(ctx, done.ID); err != nil || got.Status != notify.StatusSent || got.Express == nil || !got.Express.Lease.IsZero() {
		t.Fatalf("the final express notification: %+v, %v", got, err)
	}
}
