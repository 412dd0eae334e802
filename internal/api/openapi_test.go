package api

import (
	"encoding/json"
	"herald/internal/apidoc"
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
				if apidoc.Resolve(whole, ref) == nil {
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
	answers, err := apidoc.NewChecker(openAPIDoc)
	if err != nil {
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
		if got := answers.Route(c.method, c.path); got != c.pattern {
			t.Errorf("%s: the document's route is %q, want %q", name, got, c.pattern)
		}
		for _, p := range answers.Answer(c.method, c.pattern, rec.Code, rec.Body.Bytes()) {
			t.Errorf("%s: %s", name, p)
		}
	}
}
