package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes keeps openapi.json and the routes table in step: the same set of
// (method, path), the same public routes, and every $ref resolving.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI  string                                `json:"openapi"`
		Security []map[string][]string                 `json:"security"`
		Paths    map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	if len(doc.Security) != 1 || doc.Security[0]["bearer"] == nil {
		t.Fatalf("top-level security = %v, want bearer", doc.Security)
	}

	methods := []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}
	documented := map[string]bool{} // "METHOD path" → public
	for path, item := range doc.Paths {
		for m, raw := range item {
			if !slices.Contains(methods, m) {
				continue // "parameters", "summary"…
			}
			var op struct {
				OperationID string             `json:"operationId"`
				Security    *[]json.RawMessage `json:"security"`
				Responses   map[string]any     `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", m, path, err)
			}
			if op.OperationID == "" || len(op.Responses) == 0 {
				t.Errorf("%s %s: needs an operationId and responses", m, path)
			}
			documented[strings.ToUpper(m)+" "+path] = op.Security != nil && len(*op.Security) == 0
		}
	}
	registered := map[string]bool{}
	for _, rt := range routes {
		registered[rt.Method+" "+rt.Path] = rt.Public
	}
	for k, public := range registered {
		dp, ok := documented[k]
		switch {
		case !ok:
			t.Errorf("route %s is not in openapi.json", k)
		case dp != public:
			t.Errorf("route %s: public %v in code, %v in openapi.json (security: [])", k, public, dp)
		}
	}
	for k := range documented {
		if _, ok := registered[k]; !ok {
			t.Errorf("openapi.json documents %s, which no route serves", k)
		}
	}

	// Every $ref points at something that exists.
	var whole map[string]any
	if err := json.Unmarshal(openAPIDoc, &whole); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				if resolve(whole, ref) == nil {
					t.Errorf("unresolved $ref %s", ref)
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(whole)
}

// resolve follows a local JSON pointer ("#/components/schemas/Error").
func resolve(doc map[string]any, ref string) any {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var cur any = doc
	for _, part := range strings.Split(rest, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")]
	}
	return cur
}

func TestRoutesHaveUniquePatterns(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, rt := range routes {
		k := rt.Method + " " + rt.Path
		if seen[k] {
			t.Errorf("route %s listed twice", k)
		}
		seen[k] = true
		if !rt.Public && !strings.HasPrefix(rt.Path, "/v1/") {
			t.Errorf("route %s needs a key but is outside /v1", k)
		}
	}
}

// TestResponsesMatchOpenAPI sends real requests and checks each response body against the schema
// openapi.json documents for its route and status, so the views and the document cannot drift.
func TestResponsesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var doc map[string]any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	seedNotification(t, e, "n_doc")
	seedInbox(t, e, "u1", 3)
	token := "doc:APA91bTokenForTheOpenAPICheck_0123456789"
	cases := []struct {
		method, pattern, path string
		key                   string
		body                  any
		status                int
	}{
		{"GET", "/healthz", "/healthz", "", nil, 200},
		{"POST", "/v1/notifications", "/v1/notifications", ordersKey, pushRequest(), 202},
		{"POST", "/v1/notifications", "/v1/notifications", ordersKey, `{"channels": 1}`, 400},
		{"POST", "/v1/notifications", "/v1/notifications", "", pushRequest(), 401},
		{"GET", "/v1/notifications/{id}", "/v1/notifications/n_doc", ordersKey, nil, 200},
		{"GET", "/v1/notifications/{id}", "/v1/notifications/n_none", ordersKey, nil, 404},
		{"PUT", "/v1/users/{user}/devices/{token}", "/v1/users/u1/devices/" + token, ordersKey, map[string]any{"platform": "apns", "environment": "sandbox"}, 200},
		{"DELETE", "/v1/users/{user}/devices/{token}", "/v1/users/u1/devices/nope", ordersKey, nil, 404},
		{"PUT", "/v1/users/{user}/contacts", "/v1/users/u1/contacts", ordersKey, map[string]any{"email": "a@example.com", "locale": "en-US"}, 200},
		{"GET", "/v1/users/{user}/preferences", "/v1/users/u1/preferences", ordersKey, nil, 200},
		{"PUT", "/v1/users/{user}/preferences", "/v1/users/u1/preferences", ordersKey, map[string]any{"opt_out": map[string][]string{"sms": {"*"}}, "marketing_consent": true}, 200},
		{"GET", "/v1/users/{user}/preferences", "/v1/users/u1/preferences", ordersKey, nil, 200},
		{"GET", "/v1/users/{user}/inbox", "/v1/users/u1/inbox?limit=2", ordersKey, nil, 200},
		{"GET", "/v1/users/{user}/inbox/unread-count", "/v1/users/u1/inbox/unread-count", ordersKey, nil, 200},
		{"POST", "/v1/users/{user}/inbox/{id}/read", "/v1/users/u1/inbox/n_00/read", ordersKey, nil, 204},
		{"POST", "/v1/users/{user}/inbox/{id}/read", "/v1/users/u1/inbox/n_none/read", ordersKey, nil, 404},
		{"POST", "/v1/users/{user}/inbox/read-all", "/v1/users/u1/inbox/read-all", ordersKey, nil, 200},
		{"GET", "/v1/users/{user}/inbox", "/v1/users/u1/inbox", ordersKey, nil, 200},
		{"DELETE", "/v1/users/{user}/inbox/{id}", "/v1/users/u1/inbox/n_01", ordersKey, nil, 204},
		{"GET", "/v1/users/{user}/inbox", "/v1/users/u%201/inbox", ordersKey, nil, 400},
	}
	for _, c := range cases {
		name := c.method + " " + c.path
		rec := e.do(t, c.method, c.path, c.key, c.body)
		if rec.Code != c.status {
			t.Errorf("%s: status %d, want %d: %s", name, rec.Code, c.status, rec.Body)
			continue
		}
		op, _ := resolve(doc, "#/paths/"+strings.ReplaceAll(c.pattern, "/", "~1")+"/"+strings.ToLower(c.method)).(map[string]any)
		resp, _ := resolve(op, "#/responses/"+fmt.Sprint(c.status)).(map[string]any)
		if resp == nil {
			t.Errorf("%s: status %d is not documented", name, c.status)
			continue
		}
		if ref, ok := resp["$ref"].(string); ok {
			resp, _ = resolve(doc, ref).(map[string]any)
		}
		schema := resolve(resp, "#/content/application~1json/schema")
		if schema == nil {
			if rec.Body.Len() != 0 {
				t.Errorf("%s: documented without a body, got %s", name, rec.Body)
			}
			continue
		}
		var body any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, p := range conform(doc, schema, body, "$") {
			t.Errorf("%s: %s", name, p)
		}
	}
}

// conform checks v against the subset of JSON Schema openapi.json uses for responses: $ref,
// type, enum, const, properties, required, additionalProperties and items.
func conform(doc map[string]any, schema any, v any, at string) []string {
	s, ok := schema.(map[string]any)
	if !ok {
		return nil
	}
	if ref, ok := s["$ref"].(string); ok {
		return conform(doc, resolve(doc, ref), v, at)
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
				problems = append(problems, conform(doc, ps, val, at+"."+k)...)
			} else if ap, ok := s["additionalProperties"]; ok && ap != false {
				problems = append(problems, conform(doc, ap, val, at+"."+k)...)
			} else if props != nil {
				problems = append(problems, fmt.Sprintf("%s: undocumented property %q", at, k))
			}
		}
	case []any:
		for i, it := range x {
			problems = append(problems, conform(doc, s["items"], it, fmt.Sprintf("%s[%d]", at, i))...)
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
