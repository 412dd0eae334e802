package main

import (
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	heraldapi "herald/internal/api"
)

// TestAudienceUpload runs `herald audience upload` and `show` against the API on a SQLite store.
func TestAudienceUpload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, store, queue := openSQLite(t)
	srv := httptest.NewServer(heraldapi.New(heraldapi.Options{Store: store, Queue: queue, Keys: map[string]string{"k": "demo"}}))
	t.Cleanup(srv.Close)

	var b strings.Builder
	b.WriteString("user_id,segment\n")
	for i := range 3000 {
		fmt.Fprintf(&b, "u%d,gold\n", i%2500)
	}
	b.WriteString("not valid,x\n")
	file := filepath.Join(dir, "vip.csv")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runAudience([]string{"upload", "--api", srv.URL, "--key", "k", "vip", file}, io.Discard); err != nil {
		t.Fatalf("upload: %v", err)
	}
	n, err := store.AppendAudienceList(t.Context(), "demo/vip", nil)
	if err != nil || n != 2500 {
		t.Fatalf("demo/vip has %d members (%v), want 2500", n, err)
	}
	if err := runAudience([]string{"show", "--api", srv.URL, "--key", "k", "vip"}, io.Discard); err != nil {
		t.Fatalf("show: %v", err)
	}

	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("a b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"upload", "--api", srv.URL, "--key", "k", "vip", bad},                           // nothing valid: 400
		{"upload", "--api", srv.URL, "--key", "k", "vip", filepath.Join(dir, "missing")}, // no such file
		{"upload", "--api", srv.URL, "--key", "wrong", "vip", file},                      // 401
		{"upload", "vip"},
		{"nope"},
	} {
		if err := runAudience(args, io.Discard); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
