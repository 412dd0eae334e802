// Package apidoc writes the API reference — a Markdown page per tag of the OpenAPI document,
// with every route, its parameters, request body, responses and error codes, and a page of the
// schemas — so the reference is the document itself, never a second copy kept by hand. `make
// docs` writes it into docs/api; a test fails when what is there is not what the document makes.
package apidoc

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Doc is the part of an OpenAPI 3.1 document the reference reads.
type Doc struct {
	Info struct {
		Title, Version, Description string
	} `json:"info"`
	Tags []struct {
		Name, Description string
	} `json:"tags"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas    map[string]*Schema   `json:"schemas"`
		Parameters map[string]Parameter `json:"parameters"`
		Responses  map[string]Response  `json:"responses"`
	} `json:"components"`
}

// Schema is a JSON Schema as the document writes them.
type Schema struct {
	Ref                  string             `json:"$ref"`
	Type                 any                `json:"type"`
	Description          string             `json:"description"`
	Enum                 []any              `json:"enum"`
	Properties           map[string]*Schema `json:"properties"`
	Required             []string           `json:"required"`
	Items                *Schema            `json:"items"`
	AdditionalProperties any                `json:"additionalProperties"`
	Format               string             `json:"format"`
	Default              any                `json:"default"`
	Minimum, Maximum     *float64
}

// Parameter is a route's parameter.
type Parameter struct {
	Ref         string  `json:"$ref"`
	Name        string  `json:"name"`
	In          string  `json:"in"`
	Required    bool    `json:"required"`
	Description string  `json:"description"`
	Schema      *Schema `json:"schema"`
}

// Response is a route's answer.
type Response struct {
	Ref         string `json:"$ref"`
	Description string `json:"description"`
	Content     map[string]struct {
		Schema *Schema `json:"schema"`
	} `json:"content"`
}

type operation struct {
	Summary     string              `json:"summary"`
	Description string              `json:"description"`
	Tags        []string            `json:"tags"`
	Parameters  []Parameter         `json:"parameters"`
	RequestBody *Response           `json:"requestBody"`
	Responses   map[string]Response `json:"responses"`
}

var methods = []string{"get", "put", "post", "patch", "delete"}

// Generate makes the reference from an OpenAPI document: file name → content.
func Generate(raw []byte) (map[string][]byte, error) {
	var d Doc
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("apidoc: the OpenAPI document: %w", err)
	}
	type route struct {
		method, path string
		op           operation
		shared       []Parameter
	}
	byTag := map[string][]route{}
	for _, path := range mapsKeys(d.Paths) {
		item := d.Paths[path]
		var shared []Parameter
		if p, ok := item["parameters"]; ok {
			if err := json.Unmarshal(p, &shared); err != nil {
				return nil, fmt.Errorf("apidoc: %s parameters: %w", path, err)
			}
		}
		for _, m := range methods {
			raw, ok := item[m]
			if !ok {
				continue
			}
			var op operation
			if err := json.Unmarshal(raw, &op); err != nil {
				return nil, fmt.Errorf("apidoc: %s %s: %w", m, path, err)
			}
			tag := "other"
			if len(op.Tags) > 0 {
				tag = op.Tags[0]
			}
			byTag[tag] = append(byTag[tag], route{strings.ToUpper(m), path, op, shared})
		}
	}
	out := map[string][]byte{}
	var index strings.Builder
	fmt.Fprintf(&index, "# %s — API reference\n\n%s\n\n", d.Info.Title, generated)
	fmt.Fprintf(&index, "Version %s. %s\n\n", d.Info.Version, firstParagraph(d.Info.Description))
	fmt.Fprintf(&index, "| page | routes |\n|---|---|\n")
	tags := d.Tags
	for tag := range byTag {
		if !slices.ContainsFunc(tags, func(t struct{ Name, Description string }) bool { return t.Name == tag }) {
			tags = append(tags, struct{ Name, Description string }{Name: tag})
		}
	}
	for _, t := range tags {
		routes := byTag[t.Name]
		if len(routes) == 0 {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "# %s\n\n%s\n\n", title(t.Name), generated)
		if t.Description != "" {
			fmt.Fprintf(&b, "%s\n\n", t.Description)
		}
		for _, r := range routes {
			fmt.Fprintf(&b, "## %s `%s`\n\n", r.method, r.path)
			if r.op.Summary != "" {
				fmt.Fprintf(&b, "%s\n\n", oneLine(r.op.Summary))
			}
			if r.op.Description != "" {
				fmt.Fprintf(&b, "%s\n\n", r.op.Description)
			}
			params := append(slices.Clone(r.shared), r.op.Parameters...)
			if len(params) > 0 {
				fmt.Fprintf(&b, "| parameter | in | type | required | description |\n|---|---|---|---|---|\n")
				for _, p := range params {
					p = d.param(p)
					fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", p.Name, p.In, d.typeOf(p.Schema), yes(p.Required), cell(p.Description))
				}
				b.WriteString("\n")
			}
			if rb := r.op.RequestBody; rb != nil {
				if c, ok := rb.Content["application/json"]; ok && c.Schema != nil {
					fmt.Fprintf(&b, "Request body: %s.\n\n", d.typeOf(c.Schema))
					d.fields(&b, c.Schema)
				}
			}
			fmt.Fprintf(&b, "| status | answer |\n|---|---|\n")
			for _, code := range mapsKeys(r.op.Responses) {
				resp := d.response(r.op.Responses[code])
				what := cell(resp.Description)
				if c, ok := resp.Content["application/json"]; ok && c.Schema != nil {
					what += " " + d.typeOf(c.Schema)
				}
				fmt.Fprintf(&b, "| %s | %s |\n", code, strings.TrimSpace(what))
			}
			b.WriteString("\n")
		}
		name := t.Name + ".md"
		out[name] = []byte(b.String())
		var paths []string
		for _, r := range routes {
			paths = append(paths, "`"+r.method+" "+r.path+"`")
		}
		fmt.Fprintf(&index, "| [%s](%s) | %s |\n", title(t.Name), name, strings.Join(paths, ", "))
	}
	fmt.Fprintf(&index, "| [Schemas](schemas.md) | the request and answer bodies |\n")
	out["README.md"] = []byte(index.String())

	var s strings.Builder
	fmt.Fprintf(&s, "# Schemas\n\n%s\n\n", generated)
	for _, name := range mapsKeys(d.Components.Schemas) {
		sc := d.Components.Schemas[name]
		fmt.Fprintf(&s, "## %s\n\n", name)
		if sc.Description != "" {
			fmt.Fprintf(&s, "%s\n\n", sc.Description)
		}
		if len(sc.Properties) == 0 {
			fmt.Fprintf(&s, "%s.\n\n", d.typeOf(sc))
			continue
		}
		d.fields(&s, sc)
	}
	out["schemas.md"] = []byte(s.String())
	return out, nil
}

const generated = "_Generated from `internal/api/openapi.json` by `make docs`: edit the document, not this page._"

// fields is the property table of an object schema.
func (d *Doc) fields(b *strings.Builder, sc *Schema) {
	sc = d.resolve(sc)
	if len(sc.Properties) == 0 {
		return
	}
	fmt.Fprintf(b, "| field | type | required | description |\n|---|---|---|---|\n")
	for _, name := range mapsKeys(sc.Properties) {
		p := sc.Properties[name]
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", name, d.typeOf(p), yes(slices.Contains(sc.Required, name)), cell(d.resolve(p).Description))
	}
	b.WriteString("\n")
}

func (d *Doc) resolve(sc *Schema) *Schema {
	for sc != nil && sc.Ref != "" {
		name := strings.TrimPrefix(sc.Ref, "#/components/schemas/")
		next := d.Components.Schemas[name]
		if next == nil {
			break
		}
		sc = next
	}
	return sc
}

func (d *Doc) param(p Parameter) Parameter {
	if p.Ref != "" {
		return d.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
	}
	return p
}

func (d *Doc) response(r Response) Response {
	if r.Ref != "" {
		return d.Components.Responses[strings.TrimPrefix(r.Ref, "#/components/responses/")]
	}
	return r
}

// typeOf writes a schema's type: a link to a named schema, an array of one, an enum's values.
func (d *Doc) typeOf(sc *Schema) string {
	if sc == nil {
		return "any"
	}
	if sc.Ref != "" {
		name := strings.TrimPrefix(sc.Ref, "#/components/schemas/")
		return fmt.Sprintf("[%s](schemas.md#%s)", name, strings.ToLower(name))
	}
	t := ""
	switch v := sc.Type.(type) {
	case string:
		t = v
	case []any:
		var parts []string
		for _, x := range v {
			parts = append(parts, fmt.Sprint(x))
		}
		t = strings.Join(parts, " or ")
	}
	switch {
	case t == "array" && sc.Items != nil:
		return "array of " + d.typeOf(sc.Items)
	case len(sc.Enum) > 0:
		var vals []string
		for _, e := range sc.Enum {
			vals = append(vals, fmt.Sprintf("`%v`", e))
		}
		return "one of " + strings.Join(vals, ", ")
	case sc.Format != "":
		return t + " (" + sc.Format + ")"
	case t == "":
		return "any"
	}
	return t
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

// cell is text fit for a table cell: one line, pipes escaped.
func cell(s string) string { return strings.ReplaceAll(oneLine(s), "|", `\|`) }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func firstParagraph(s string) string {
	p, _, _ := strings.Cut(strings.TrimSpace(s), "\n\n")
	return oneLine(p)
}

func title(tag string) string {
	if tag == "" {
		return tag
	}
	return strings.ToUpper(tag[:1]) + tag[1:]
}

func mapsKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
