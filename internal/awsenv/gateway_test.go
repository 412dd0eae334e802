package awsenv

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"herald/internal/notify"
)

// TestGatewayHandlerAnswersUnreadableRequestsWith400: what the adapter cannot turn into a
// request (a body that is not base64, a %zz path) is a 400 in the API's error shape, not a failed
// invocation (API Gateway's 500); an event that is no HTTP API request fails the invocation.
func TestGatewayHandlerAnswersUnreadableRequestsWith400(t *testing.T) {
	served := 0
	h := gatewayHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++; w.WriteHeader(http.StatusNoContent) }))
	ok := events.APIGatewayV2HTTPRequest{RawPath: "/healthz", RouteKey: "GET /healthz",
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/healthz"}}}
	if resp, err := h(context.Background(), ok); err != nil || resp.StatusCode != http.StatusNoContent || served != 1 {
		t.Fatalf("a good request: %d, %v", resp.StatusCode, err)
	}

	badBody := ok
	badBody.RequestContext.HTTP.Method, badBody.Body, badBody.IsBase64Encoded = "POST", "%%% not base64 %%%", true
	badPath := ok
	badPath.RawPath, badPath.RequestContext.HTTP.Path = "/v1/users/%zz/inbox", "/v1/users/%zz/inbox"
	for name, c := range map[string]struct {
		req   events.APIGatewayV2HTTPRequest
		field string
	}{"a body that is not base64": {badBody, "body"}, "a malformed path escape": {badPath, "path"}} {
		resp, err := h(context.Background(), c.req)
		if err != nil {
			t.Errorf("%s failed the invocation (%v): API Gateway would answer 500", name, err)
			continue
		}
		var body struct{ Error struct{ Code, Field string } }
		_ = json.Unmarshal([]byte(resp.Body), &body)
		if resp.StatusCode != http.StatusBadRequest || body.Error.Code != notify.EINVALID || body.Error.Field != c.field {
			t.Errorf("%s: %d %s, want 400 naming %s", name, resp.StatusCode, resp.Body, c.field)
		}
	}
	if served != 1 {
		t.Fatalf("unreadable requests reached the API: %d served", served)
	}

	// Envelopes of other services decode into an empty request: the invocation fails.
	for _, f := range []string{"../../events/ingest/send-request.json", "../../events/alerts/eventbridge-message-dead-lettered.json"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var req events.APIGatewayV2HTTPRequest
		_ = json.Unmarshal(raw, &req)
		if _, err := h(context.Background(), req); err == nil || !strings.Contains(err.Error(), "not an API Gateway") {
			t.Errorf("%s: %v, want the invocation failed", f, err)
		}
	}
}
