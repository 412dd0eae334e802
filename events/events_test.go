// Package events holds the event envelopes and message bodies Herald's functions receive, and
// the JSON Schema of the SendRequest. The tests keep them decodable and in step with the code.
package events

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
)

func TestSendRequestExampleIsValid(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("ingest/send-request.json")
	if err != nil {
		t.Fatal(err)
	}
	var req notify.SendRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		t.Fatal(err)
	}
	if err := req.Validate(time.Now()); err != nil {
		t.Fatal(err)
	}
}

func TestFireExampleDecodes(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("ingest/fire.json")
	if err != nil {
		t.Fatal(err)
	}
	var f notify.FireMessage
	if err := json.Unmarshal(b, &f); err != nil || f.Fire == "" {
		t.Fatalf("fire.json: %v %+v", err, f)
	}
}

// jsonFields lists the JSON names of a struct type's fields.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func TestSchemaMatchesTypes(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("schema/send-request.v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
		Defs       map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	for _, c := range []struct {
		name   string
		schema []string
		typ    reflect.Type
	}{
		{"SendRequest", keys(schema.Properties), reflect.TypeFor[notify.SendRequest]()},
		{"content", keys(schema.Defs["content"].Properties), reflect.TypeFor[notify.Content]()},
		{"recipient", keys(schema.Defs["recipient"].Properties), reflect.TypeFor[notify.Recipient]()},
	} {
		if got := jsonFields(c.typ); !reflect.DeepEqual(got, c.schema) {
			t.Errorf("%s: schema properties %v, Go fields %v", c.name, c.schema, got)
		}
	}
}

// TestEveryFunctionHasEvents: every functions/<name> has its folder here, with at least one
// envelope, so the emulator test (functions/rie_test.go) has something real to run it on.
func TestEveryFunctionHasEvents(t *testing.T) {
	t.Parallel()
	mains, err := filepath.Glob("../functions/*/main.go")
	if err != nil || len(mains) == 0 {
		t.Fatalf("no functions found: %v", err)
	}
	for _, m := range mains {
		name := filepath.Base(filepath.Dir(m))
		if files, _ := filepath.Glob(filepath.Join(name, "*.json")); len(files) == 0 {
			t.Errorf("function %s has no events/%s/*.json", name, name)
		}
	}
}

// TestEveryEventIsUsed: every file here is named by some test of the module (by its path under
// events/, or by its base name where a test builds the path), so none rots unread.
func TestEveryEventIsUsed(t *testing.T) {
	t.Parallel()
	var tests []string
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "infra"):
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(p, "_test.go"):
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tests = append(tests, string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(tests, "\n")
	files, _ := filepath.Glob("*/*.json")
	if len(files) == 0 {
		t.Fatal("no event files")
	}
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".json")
		if !strings.Contains(all, filepath.ToSlash(f)) && !strings.Contains(all, `"`+base+`"`) {
			t.Errorf("events/%s is used by no test", f)
		}
	}
}
