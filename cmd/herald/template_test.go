package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	heraldapi "herald/internal/api"
)

// TestTemplateCommands runs `herald template put`, `show` and `preview` against the API on a
// SQLite store.
func TestTemplateCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, store, queue := openSQLite(t)
	srv := httptest.NewServer(heraldapi.New(heraldapi.Options{Store: store, Queue: queue, Keys: map[string]string{"k": "demo"}}))
	t.Cleanup(srv.Close)
	api := []string{"--api", srv.URL, "--key", "k"}
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(args ...string) (string, error) {
		var out strings.Builder
		err := runTemplate(append(args, api...), &out)
		return out.String(), err
	}

	v1 := file("v1.json", `{"channels": {"push": {"title": "Order {{order_id}}", "body": "Shipped"}}, "variables": [{"name": "order_id"}]}`)
	v2 := file("v2.json", `{"channels": {"email": {"title": "Order {{order_id}}", "html": "<p>{{name}}</p>"}},
		"variables": [{"name": "order_id"}, {"name": "name"}]}`)
	if out, err := run("put", "shipped", v1); err != nil || !strings.Contains(out, "stored version 1") {
		t.Fatalf("put v1: %q %v", out, err)
	}
	if out, err := run("put", "shipped", v2); err != nil || !strings.Contains(out, "stored version 2") {
		t.Fatalf("put v2: %q %v", out, err)
	}
	if out, err := run("show", "shipped"); err != nil || !strings.Contains(out, `"version": 2`) || !strings.Contains(out, "<p>{{name}}</p>") {
		t.Fatalf("show: %q %v", out, err)
	}
	if out, err := run("show", "shipped", "--version", "1"); err != nil || !strings.Contains(out, `"version": 1`) {
		t.Fatalf("show --version 1: %q %v", out, err)
	}
	out, err := run("preview", "shipped", "--data", `{"order_id": 1001, "name": "<Tom>"}`)
	if err != nil || !strings.Contains(out, `"title": "Order 1001"`) || !strings.Contains(out, "<p>&lt;Tom&gt;</p>") {
		t.Fatalf("preview: %q %v", out, err)
	}
	if out, err := run("preview", "shipped", "--data", `{"name": "Tom"}`); err != nil || !strings.Contains(out, `"channels.email.title": [`) {
		t.Fatalf("preview without order_id does not report it missing: %q %v", out, err)
	}

	bad := file("bad.json", `{"channels": {"email": {"title": "x", "html": "{{#a}}"}}, "variables": [{"name": "a"}]}`)
	if _, err := run("put", "shipped", bad); err == nil || !strings.Contains(err.Error(), "channels.email.html") {
		t.Fatalf("put of a broken template: %v, want the field named", err)
	}
	if _, err := run("show", "nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("show of an unknown template: %v", err)
	}
}
