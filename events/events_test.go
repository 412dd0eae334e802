// Package events holds the event envelopes and message bodies Herald's functions receive, and
// the JSON Schema of the SendRequest. The tests keep them decodable and in step with the code.
package events

import (
	"bytes"
	"encoding/json"
	"os"
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
