package export_test

import (
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
