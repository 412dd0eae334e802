package apidoc

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReferenceIsCurrent: docs/api is exactly what internal/api/openapi.json makes — a page
// edited by hand, or a document changed without `make docs`, fails here.
func TestReferenceIsCurrent(t *testing.T) {
	raw, err := os.ReadFile("../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Generate(raw)
	if err != nil {
		t.Fatal(err)
	}
	dir := "../../docs/api"
	have, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	var names []string
	for _, p := range have {
		names = append(names, filepath.Base(p))
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != string(b) {
			t.Errorf("docs/api/%s is stale (%v): run make docs", name, err)
		}
	}
	for _, n := range names {
		if _, ok := want[n]; !ok {
			t.Errorf("docs/api/%s is no page of the reference: remove it", n)
		}
	}
	// Every route of the document is on a page.
	all := ""
	for _, b := range want {
		all += string(b)
	}
	for _, route := range []string{"## POST `/v1/notifications`", "## DELETE `/v1/admin/queues/{queue}/dead-letters`", "## GET `/v1/users/{user}/inbox`"} {
		if !strings.Contains(all, route) {
			t.Errorf("the reference lacks %s", route)
		}
	}
	if !slices.Contains(mapsKeys(want), "schemas.md") {
		t.Error("no schemas page")
	}
}
