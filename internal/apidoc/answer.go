package apidoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Checker checks answers against the document: that the status is one the route documents, and
// that the body has the shape of that status's schema. The API's own tests and the test that runs
// the docs' examples against `herald dev` share it, so an answer is held to the one document.
type Checker struct {
	doc   map[string]any
	paths []string // the document's path templates
}

// NewChecker reads an OpenAPI document.
func NewChecker(raw []byte) (*Checker, error) {
	c := &Checker{}
	if err := json.Unmarshal(raw, &c.doc); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	paths, _ := c.doc["paths"].(map[string]any)
	for p := range paths {
		c.paths = append(c.paths, p)
	}
	slices.Sort(c.paths)
	return c, nil
}

// Route is the path template documenting method on path (a URL path, its query ignored), or ""
// when none does. Where two templates match, the one with more literal segments wins
// (/v1/notifications/batch before /v1/notifications/{id}).
func (c *Checker) Route(method, path string) string {
	path, _, _ = strings.Cut(path, "?")
	segs := strings.Split(path, "/")
	best, bestLit := "", -1
	for _, tmpl := range c.paths {
		if Resolve(c.doc, pointer("paths", tmpl, strings.ToLower(method))) == nil {
			continue
		}
		ts := strings.Split(tmpl, "/")
		if len(ts) != len(segs) {
			continue
		}
		lit, ok := 0, true
		for i, s := range ts {
			switch {
			case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}"):
				ok = ok && segs[i] != ""
			case s == segs[i]:
				lit++
			default:
				ok = false
			}
		}
		if ok && lit > bestLit {
			best, bestLit = tmpl, lit
		}
	}
	return best
}

// Answer checks one answer to method on the path template pattern and returns what is wrong with
// it, if anything: an undocumented status, a body where none is documented, a body that is not
// JSON, or one that does not conform to the schema.
func (c *Checker) Answer(method, pattern string, status int, body []byte) []string {
	op := Resolve(c.doc, pointer("paths", pattern, strings.ToLower(method)))
	if op == nil {
		return []string{fmt.Sprintf("%s %s is not documented", method, pattern)}
	}
	resp, _ := Resolve(op, pointer("responses", strconv.Itoa(status))).(map[string]any)
	if resp == nil {
		return []string{fmt.Sprintf("status %d is not documented for %s %s", status, method, pattern)}
	}
	if ref, ok := resp["$ref"].(string); ok {
		resp, _ = Resolve(c.doc, ref).(map[string]any)
	}
	schema := Resolve(resp, "#/content/application~1json/schema")
	if schema == nil {
		if len(bytes.TrimSpace(body)) != 0 && Resolve(resp, "#/content") == nil {
			return []string{fmt.Sprintf("documented without a body, got %.200s", body)}
		}
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return []string{fmt.Sprintf("the body is not JSON (%v): %.200s", err, body)}
	}
	return Conform(c.doc, schema, v, "$")
}

func pointer(parts ...string) string {
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1")
	}
	return "#/" + strings.Join(parts, "/")
}

// Resolve follows a JSON pointer ("#/a/b") into a decoded JSON document; nil when it leads nowhere.
func Resolve(doc any, ref string) any {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	cur := doc
	for _, part := range strings.Split(rest, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")]
	}
	return cur
}

// Conform checks v against the subset of JSON Schema the document uses for responses: $ref,
// type, enum, const, properties, required, additionalProperties and items. at names v in what it
// returns ("$", "$.deliveries[0].status").
func Conform(doc map[string]any, schema any, v any, at string) []string {
	s, ok := schema.(map[string]any)
	if !ok {
		return nil
	}
	if ref, ok := s["$ref"].(string); ok {
		return Conform(doc, Resolve(doc, ref), v, at)
	}
	var problems []string
	if ty, ok := s["type"]; ok {
		var types []string
		switch x := ty.(type) {
		case string:
			types = []string{x}
		case []any:
			for _, y := range x {
				types = append(types, y.(string))
			}
		}
		if !slices.Contains(types, jsonType(v)) && !(jsonType(v) == "integer" && slices.Contains(types, "number")) {
			return []string{fmt.Sprintf("%s: %s, want %v", at, jsonType(v), types)}
		}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, v) {
		problems = append(problems, fmt.Sprintf("%s: %v not in %v", at, v, enum))
	}
	if c, ok := s["const"]; ok && c != v {
		problems = append(problems, fmt.Sprintf("%s: %v, want %v", at, v, c))
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for _, r := range asStrings(s["required"]) {
			if _, ok := x[r]; !ok {
				problems = append(problems, fmt.Sprintf("%s: required %q missing", at, r))
			}
		}
		for k, val := range x {
			if ps, ok := props[k]; ok {
				problems = append(problems, Conform(doc, ps, val, at+"."+k)...)
			} else if ap, ok := s["additionalProperties"]; ok && ap != false {
				problems = append(problems, Conform(doc, ap, val, at+"."+k)...)
			} else if props != nil {
				problems = append(problems, fmt.Sprintf("%s: undocumented property %q", at, k))
			}
		}
	case []any:
		for i, it := range x {
			problems = append(problems, Conform(doc, s["items"], it, fmt.Sprintf("%s[%d]", at, i))...)
		}
	}
	return problems
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

func asStrings(v any) []string {
	var out []string
	if xs, ok := v.([]any); ok {
		for _, x := range xs {
			out = append(out, x.(string))
		}
	}
	return out
}
