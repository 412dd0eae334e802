package export_test

import (
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/export"
	"herald/internal/notify"
	"herald/internal/seal"
	"herald/internal/sqlite"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// failing fails ListDeliveries on call failAt (1-based), like a worker losing its store mid-file.
type failing struct {
	export.Deliveries
	mu     sync.Mutex
	calls  int
	failAt int
}

func (f *failing) ListDeliveries(ctx context.Context, id, cursor string, limit int) ([]notify.Delivery, string, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if n == f.failAt {
		return nil, "", notify.Errorf(notify.EUNAVAILABLE, "store went away")
	}
	return f.Deliveries.ListDeliveries(ctx, id, cursor, limit)
}

func newStore(t *testing.T) *sqlite.Store {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	box, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.NewStore(db, box)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// seed stores a notification with n email deliveries, and an export job of them.
func seed(t *testing.T, s *sqlite.Store, n int, format notify.ExportFormat, now time.Time) (nid, xid string) {
	t.Helper()
	ctx := t.Context()
	nt := &notify.Notification{ID: "n_export", Service: "demo", Status: notify.StatusProcessing, Lane: notify.LaneRealtime,
		Channels: []notify.Channel{notify.ChannelEmail}, CreatedAt: now}
	if _, _, err := s.CreateNotification(ctx, nt); err != nil {
		t.Fatal(err)
	}
	ds := make([]notify.Delivery, n)
	for i := range ds {
		addr := fmt.Sprintf("user%04d@example.com", i)
		ds[i] = notify.Delivery{ID: notify.DeliveryID(nt.ID, notify.ChannelEmail, addr), NotificationID: nt.ID, UserID: fmt.Sprintf("u%d", i),
			Channel: notify.ChannelEmail, Provider: notify.ProviderSES, AddressMasked: notify.MaskEmail(addr), Status: notify.DeliveryPending, UpdatedAt: now}
	}
	if _, err := s.CreateDeliveries(ctx, nt.ID, 0, ds); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateExport(ctx, notify.ExportJob{ID: "x_test", Service: "demo", Kind: notify.ExportDeliveries,
		Format: format, Filter: notify.ExportFilter{NotificationID: nt.ID}, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	return nt.ID, "x_test"
}

// TestBuildRestartsAfterAFailureMidFile: a build that fails half-way leaves the job PROCESSING
// and nothing under its key; once the lease ran out the next attempt writes the whole file and
// the job is DONE with every row, each once.
func TestBuildRestartsAfterAFailureMidFile(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := &clock{t: time.Now().UTC()}
	_, xid := seed(t, s, 2500, notify.ExportCSV, c.Now())
	dir := export.Dir{Root: t.TempDir()}
	deliveries := &failing{Deliveries: s, failAt: 2}
	b := export.New(export.Deps{Jobs: s, Deliveries: deliveries, Files: dir, Clock: c})
	b.Page = 1000
	if err := b.Build(t.Context(), xid); notify.ErrorCode(err) != notify.EUNAVAILABLE {
		t.Fatalf("first build: %v, want the store's failure", err)
	}
	j, _ := s.GetExport(t.Context(), xid)
	if j.Status != notify.ExportProcessing {
		t.Fatalf("after a failed attempt: %s", j.Status)
	}
	entries, _ := os.ReadDir(filepath.Join(dir.Root, "exports"))
	if len(entries) != 0 {
		t.Fatalf("files left after a failed attempt: %v", entries)
	}
	// Under the live lease, another worker backs off.
	if err := b.Build(t.Context(), xid); notify.ErrorCode(err) != notify.ECONFLICT {
		t.Fatalf("build under a live lease: %v", err)
	}
	c.add(b.Lease + time.Second)
	if err := b.Build(t.Context(), xid); err != nil {
		t.Fatal(err)
	}
	j, _ = s.GetExport(t.Context(), xid)
	if j.Status != notify.ExportDone || j.Rows != 2500 || j.Attempts != 2 || j.Object != export.Key(xid, notify.ExportCSV) {
		t.Fatalf("job %+v", j)
	}
	f, err := dir.Open(j.Object)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range recs[1:] {
		if seen[r[0]] || !strings.Contains(r[6], "***@example.com") {
			t.Fatalf("row %q repeated or unmasked", r)
		}
		seen[r[0]] = true
	}
	if len(seen) != 2500 {
		t.Fatalf("%d distinct rows, want 2500", len(seen))
	}
	// A message redelivered after DONE changes nothing.
	if err := b.Build(t.Context(), xid); err != nil {
		t.Fatal(err)
	}
}

// TestBuildStopsWhenCanceled: a job canceled while it is built stops at its next page, is not
// DONE, and leaves no file.
func TestBuildStopsWhenCanceled(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := &clock{t: time.Now().UTC()}
	_, xid := seed(t, s, 30, notify.ExportJSONL, c.Now())
	dir := export.Dir{Root: t.TempDir()}
	canceling := &cancelOnList{Deliveries: s, s: s, id: xid}
	b := export.New(export.Deps{Jobs: s, Deliveries: canceling, Files: dir, Clock: c})
	b.Page = 10
	if err := b.Build(t.Context(), xid); err != nil {
		t.Fatal(err)
	}
	j, _ := s.GetExport(t.Context(), xid)
	if j.Status != notify.ExportCanceled {
		t.Fatalf("status %s, want CANCELED", j.Status)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir.Root, "exports")); len(entries) != 0 {
		t.Fatalf("files left: %v", entries)
	}
}

type cancelOnList struct {
	export.Deliveries
	s  *sqlite.Store
	id string
}

func (c *cancelOnList) ListDeliveries(ctx context.Context, id, cursor string, limit int) ([]notify.Delivery, string, error) {
	if _, err := c.s.CancelExport(ctx, c.id, time.Now()); err != nil {
		return nil, "", err
	}
	return c.Deliveries.ListDeliveries(ctx, id, cursor, limit)
}

// TestBuildJSONLines: the jsonl format is one object per delivery, keyed by column.
func TestBuildJSONLines(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := &clock{t: time.Now().UTC()}
	_, xid := seed(t, s, 3, notify.ExportJSONL, c.Now())
	dir := export.Dir{Root: t.TempDir()}
	if err := export.New(export.Deps{Jobs: s, Deliveries: s, Files: dir, Clock: c}).Build(t.Context(), xid); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir.Root, export.Key(xid, notify.ExportJSONL)))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), raw)
	}
	for _, l := range lines {
		var row map[string]string
		if err := json.Unmarshal([]byte(l), &row); err != nil || row["channel"] != "email" || !strings.HasSuffix(row["address"], "***@example.com") {
			t.Fatalf("line %q: %v", l, err)
		}
	}
}

// TestBuildUnknownNotificationFails: an export of a notification that does not exist ends FAILED.
func TestBuildUnknownNotificationFails(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	now := time.Now().UTC()
	if _, _, err := s.CreateExport(t.Context(), notify.ExportJob{ID: "x_gone", Service: "demo", Kind: notify.ExportDeliveries,
		Format: notify.ExportCSV, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	dir := export.Dir{Root: t.TempDir()}
	if err := export.New(export.Deps{Jobs: s, Deliveries: s, Files: dir}).Build(t.Context(), "x_gone"); err != nil {
		t.Fatal(err)
	}
	j, _ := s.GetExport(t.Context(), "x_gone")
	if j.Status != notify.ExportFailed || !strings.Contains(j.Error, "notification_id") {
		t.Fatalf("job %+v", j)
	}
}

// readCSV reads a built CSV export as rows keyed by column.
func readCSV(t *testing.T, dir export.Dir, j *notify.ExportJob) []map[string]string {
	t.Helper()
	f, err := dir.Open(j.Object)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, r := range recs[1:] {
		row := map[string]string{}
		for i, c := range recs[0] {
			row[c] = r[i]
		}
		out = append(out, row)
	}
	return out
}

// build creates job kind/filter as service and builds it with pages of page rows.
func build(t *testing.T, s *sqlite.Store, id, service string, kind notify.ExportKind, f notify.ExportFilter, page int) (*notify.ExportJob, export.Dir) {
	t.Helper()
	if _, _, err := s.CreateExport(t.Context(), notify.ExportJob{ID: id, Service: service, Kind: kind, Format: notify.ExportCSV,
		Filter: f, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	dir := export.Dir{Root: t.TempDir()}
	b := export.New(export.Deps{Jobs: s, Deliveries: s, Notifications: s, Suppressions: s, Files: dir})
	b.Page = page
	if err := b.Build(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	j, err := s.GetExport(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != notify.ExportDone {
		t.Fatalf("job %+v, want DONE", j)
	}
	return j, dir
}

// TestBuildNotifications: a notifications export lists the asking service's notifications only
// (never another service's), each with its lane, channels, recipients, counters, template and
// campaign, filtered on status, channel and creation time, across pages.
func TestBuildNotifications(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	t0 := time.Date(2030, 3, 4, 5, 6, 7, 0, time.UTC)
	mk := func(id, service string, status notify.NotificationStatus, lane notify.Lane, at time.Duration, channels ...notify.Channel) *notify.Notification {
		n := &notify.Notification{ID: id, Service: service, Status: status, Lane: lane, Category: notify.CategoryTransactional,
			Channels: channels, Recipients: []notify.Recipient{{UserID: "a"}, {UserID: "b"}}, CreatedAt: t0.Add(at), UpdatedAt: t0.Add(at)}
		if lane == notify.LaneBulk {
			n.Category = notify.CategoryMarketing
		}
		return n
	}
	tmpl := mk("n_tmpl", "demo", notify.StatusProcessing, notify.LaneRealtime, 0, notify.ChannelEmail, notify.ChannelPush)
	tmpl.TemplateName, tmpl.TemplateVersion, tmpl.IdempotencyKey = "order-shipped", 3, "order-1"
	for _, n := range []*notify.Notification{
		tmpl,
		mk("n_sms", "demo", notify.StatusSent, notify.LaneRealtime, time.Hour, notify.ChannelSMS),
		mk("c_campaign", "demo", notify.StatusProcessing, notify.LaneBulk, 2*time.Hour, notify.ChannelPush),
		mk("n_other", "billing", notify.StatusProcessing, notify.LaneRealtime, time.Hour, notify.ChannelEmail),
	} {
		if _, _, err := s.CreateNotification(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	var ds []notify.Delivery
	for i := range 3 {
		addr := fmt.Sprintf("u%d@example.com", i)
		ds = append(ds, notify.Delivery{ID: notify.DeliveryID("n_tmpl", notify.ChannelEmail, addr), NotificationID: "n_tmpl",
			Channel: notify.ChannelEmail, Provider: notify.ProviderSES, AddressMasked: notify.MaskEmail(addr), Status: notify.DeliveryPending, UpdatedAt: t0})
	}
	if _, err := s.CreateDeliveries(ctx, "n_tmpl", 0, ds); err != nil {
		t.Fatal(err)
	}
	want, err := s.GetNotification(ctx, "n_tmpl")
	if err != nil {
		t.Fatal(err)
	}

	j, dir := build(t, s, "x_all", "demo", notify.ExportNotifications, notify.ExportFilter{}, 1)
	rows := readCSV(t, dir, j)
	if j.Rows != 3 || len(rows) != 3 {
		t.Fatalf("rows %d %v, want demo's 3 notifications", j.Rows, rows)
	}
	byID := map[string]map[string]string{}
	for _, r := range rows {
		byID[r["id"]] = r
	}
	if _, ok := byID["n_other"]; ok {
		t.Fatal("another service's notification is exported")
	}
	r := byID["n_tmpl"]
	if r["channels"] != "email push" || r["lane"] != "realtime" || r["recipients"] != "2" || r["template_name"] != "order-shipped" ||
		r["template_version"] != "3" || r["campaign_id"] != "" || r["idempotency_key"] != "order-1" || r["status"] != "PROCESSING" ||
		r["total"] != fmt.Sprint(want.Stats.Sum().Total) || r["total"] == "0" || r["created_at"] != t0.Format(time.RFC3339Nano) {
		t.Fatalf("row %v (stats %+v)", r, want.Stats)
	}
	if c := byID["c_campaign"]; c["campaign_id"] != "c_campaign" || c["lane"] != "bulk" || c["category"] != "marketing" {
		t.Fatalf("campaign row %v", c)
	}

	for name, c := range map[string]struct {
		f    notify.ExportFilter
		want []string
	}{
		"status":  {notify.ExportFilter{Status: "SENT"}, []string{"n_sms"}},
		"channel": {notify.ExportFilter{Channel: "push"}, []string{"c_campaign", "n_tmpl"}},
		"from to": {notify.ExportFilter{From: t0.Add(30 * time.Minute), To: t0.Add(2 * time.Hour)}, []string{"n_sms"}},
	} {
		j, dir := build(t, s, "x_"+strings.ReplaceAll(name, " ", ""), "demo", notify.ExportNotifications, c.f, 2)
		var got []string
		for _, r := range readCSV(t, dir, j) {
			got = append(got, r["id"])
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: exported %v, want %v", name, got, c.want)
		}
	}
}

// TestBuildSuppressions: a suppressions export lists every suppression, masked, filtered on
// channel, reason and creation time, across pages; the address hash is not in it.
func TestBuildSuppressions(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	t0 := time.Date(2030, 3, 4, 5, 6, 7, 0, time.UTC)
	for i, sp := range []struct {
		c      notify.Channel
		addr   string
		reason string
	}{
		{notify.ChannelEmail, "ann@example.com", "bounce"},
		{notify.ChannelEmail, "bob@example.com", "complaint"},
		{notify.ChannelSMS, "+821012345678", "invalid_number"},
	} {
		if err := s.Suppress(t.Context(), notify.Suppression{AddressKey: notify.AddressKey(sp.c, sp.addr), Masked: notify.MaskAddress(sp.c, sp.addr),
			Channel: sp.c, Reason: sp.reason, CreatedAt: t0.Add(time.Duration(i) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	j, dir := build(t, s, "x_supp", "ops", notify.ExportSuppressions, notify.ExportFilter{}, 1)
	raw, err := os.ReadFile(filepath.Join(dir.Root, j.Object))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"ann@", "bob@", "12345", notify.AddressKey(notify.ChannelEmail, "ann@example.com")} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("the export holds %q:\n%s", secret, raw)
		}
	}
	rows := readCSV(t, dir, j)
	if len(rows) != 3 || rows[0]["channel"] != "sms" || rows[0]["reason"] != "invalid_number" ||
		rows[0]["created_at"] != t0.Add(2*time.Hour).Format(time.RFC3339Nano) || rows[2]["address"] != notify.MaskEmail("ann@example.com") {
		t.Fatalf("rows %v, want 3, newest first", rows)
	}
	for name, c := range map[string]struct {
		f    notify.ExportFilter
		want int
	}{
		"channel": {notify.ExportFilter{Channel: "email"}, 2},
		"reason":  {notify.ExportFilter{Reason: "complaint"}, 1},
		"from":    {notify.ExportFilter{From: t0.Add(time.Minute)}, 2},
		"to":      {notify.ExportFilter{To: t0.Add(time.Minute)}, 1},
	} {
		j, dir := build(t, s, "x_supp_"+name, "ops", notify.ExportSuppressions, c.f, 1)
		if got := readCSV(t, dir, j); len(got) != c.want || j.Rows != int64(c.want) {
			t.Errorf("%s: %d rows (%d counted), want %d", name, len(got), j.Rows, c.want)
		}
	}
}
