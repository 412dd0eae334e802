package audience_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/audience"
	"herald/internal/notify"
	"herald/internal/seal"
	"herald/internal/sqlite"
)

// objects is an in-memory audience.Objects: content by key, ETag = the content itself.
type objects struct {
	mu    sync.Mutex
	byKey map[string]string
	opens int
}

func (o *objects) Open(_ context.Context, obj audience.Object) (io.ReadCloser, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.opens++
	c, ok := o.byKey[obj.Key]
	if !ok || c != obj.ETag {
		return nil, notify.Errorf(notify.ENOTFOUND, "%s is gone or changed", obj.Key)
	}
	return io.NopCloser(strings.NewReader(c)), nil
}

func (o *objects) put(key, content string) audience.Object {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.byKey[key] = content
	return audience.Object{Key: key, ETag: content, Size: int64(len(content))}
}

func newImporter(t *testing.T) (*audience.Importer, *sqlite.Store, *objects) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	box, err := seal.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.NewStore(db, box)
	if err != nil {
		t.Fatal(err)
	}
	objs := &objects{byKey: map[string]string{}}
	return &audience.Importer{Objects: objs, Lists: s, Markers: s, Source: "lists-bucket",
		Services: map[string]bool{"demo": true}, Log: slog.New(slog.DiscardHandler)}, s, objs
}

func members(t *testing.T, s *sqlite.Store, list string) int64 {
	t.Helper()
	n, err := s.AppendAudienceList(t.Context(), list, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestImporterImportsEachVersionOnce(t *testing.T) {
	t.Parallel()
	im, s, objs := newImporter(t)
	o := objs.put("lists/demo/vip.csv", "user_id\nalice\nbob\nalice\nbad id\ncarol\n")
	for range 2 { // the second is a redelivered event: the version is done, nothing is read
		if err := im.Import(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	if n := members(t, s, "demo/vip"); n != 3 || objs.opens != 1 {
		t.Fatalf("demo/vip has %d members after %d reads, want 3 after 1", n, objs.opens)
	}
	// A new version of the same key (a re-upload) is imported again, as its own version.
	o2 := objs.put("lists/demo/vip.csv", "dave\n")
	if err := im.Import(t.Context(), o2); err != nil {
		t.Fatal(err)
	}
	if n := members(t, s, "demo/vip"); n != 4 {
		t.Fatalf("demo/vip has %d members, want 4", n)
	}
}

func TestImporterResumesAfterTheDeadline(t *testing.T) {
	t.Parallel()
	im, s, objs := newImporter(t)
	var b strings.Builder
	for i := range 2500 {
		fmt.Fprintf(&b, "u%05d\n", i%2100)
	}
	o := objs.put("lists/demo/big/part-1", b.String())
	im.Margin = time.Hour // any deadline is near: stop after the first chunk
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if err := im.Import(ctx, o); !notify.IsCode(err, notify.EUNAVAILABLE) {
		t.Fatalf("first attempt = %v, want EUNAVAILABLE (checkpointed, retry)", err)
	}
	if n := members(t, s, "demo/big"); n != audience.DefaultChunkSize {
		t.Fatalf("after the first attempt demo/big has %d members, want one chunk", n)
	}
	// The retry comes at once: the first attempt released its lease.
	im.Margin = 0
	if err := im.Import(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	if n := members(t, s, "demo/big"); n != 2100 {
		t.Fatalf("demo/big has %d members, want 2100", n)
	}
}

func TestImporterLeavesALiveLeaseAlone(t *testing.T) {
	t.Parallel()
	im, s, objs := newImporter(t)
	o := objs.put("lists/demo/vip", "alice\n")
	now := time.Now()
	if _, err := s.ClaimImport(t.Context(), "lists-bucket/lists/demo/vip", "E#alice\n", "demo/vip", "other", now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := im.Import(t.Context(), o); !notify.IsCode(err, notify.EUNAVAILABLE) {
		t.Fatalf("Import while another attempt holds the lease = %v, want EUNAVAILABLE", err)
	}
	if objs.opens != 0 || members(t, s, "demo/vip") != 0 {
		t.Fatalf("read %d times, imported %d: want nothing", objs.opens, members(t, s, "demo/vip"))
	}
}

func TestImporterGoneObjectAndBadInput(t *testing.T) {
	t.Parallel()
	im, s, objs := newImporter(t)
	// Replaced since its event: nothing from this version, and it is done.
	objs.put("lists/demo/gone", "zed\n")
	stale := audience.Object{Key: "lists/demo/gone", ETag: "old content\n"}
	for range 2 {
		if err := im.Import(t.Context(), stale); err != nil {
			t.Fatal(err)
		}
	}
	if objs.opens != 1 || members(t, s, "demo/gone") != 0 {
		t.Fatalf("stale version: %d reads, %d members; want 1 read and nothing imported", objs.opens, members(t, s, "demo/gone"))
	}
	for _, key := range []string{"lists/nosuchservice/x", "elsewhere/demo/x", "lists/demo", "lists/demo/bad id"} {
		if err := im.Import(t.Context(), objs.put(key, "a\n")); !notify.IsCode(err, notify.EINVALID) {
			t.Errorf("%s: err = %v, want EINVALID", key, err)
		}
	}
	// No valid id at all: EINVALID (dead-lettered), and done, so a redelivery neither reads it
	// nor fails again.
	o := objs.put("lists/demo/empty", "bad id\n\n")
	opens := objs.opens
	if err := im.Import(t.Context(), o); !notify.IsCode(err, notify.EINVALID) {
		t.Fatalf("no members: err = %v, want EINVALID", err)
	}
	if err := im.Import(t.Context(), o); err != nil {
		t.Fatalf("redelivered upload without members: err = %v, want nil (done)", err)
	}
	if objs.opens != opens+1 {
		t.Fatalf("an upload without members was read %d times, want once", objs.opens-opens)
	}
}
