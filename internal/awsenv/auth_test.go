package awsenv

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"herald/internal/api"
	"herald/internal/config"
	"herald/internal/notify"
	"herald/internal/seal"
	"herald/internal/sqlite"
)

// A SigV4 caller API Gateway verified is a service when its role is in that service's
// iam_principals; any other verified caller is refused with 403 — not 401 with a bearer
// challenge, since no API key would let it in behind the gateway.
func TestGatewayIAMCallerNotAServiceIs403(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	box, _ := seal.New(bytes.Repeat([]byte{7}, 32))
	store, err := sqlite.NewStore(db, box)
	if err != nil {
		t.Fatal(err)
	}
	queue, err := sqlite.NewQueue(db, []notify.QueueConfig{{Name: notify.IngestQueue("demo"), VisibilityTimeout: 30 * time.Second, MaxReceiveCount: 5, DLQ: notify.DLQName(notify.IngestQueue("demo"))}}, notify.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(queue.Close)
	cfg := &config.Config{Services: []config.Service{{Name: "demo", IAMPrincipals: []string{"arn:aws:iam::000000000000:role/demo-service"}}}}
	h := httpadapter.NewV2(api.New(api.Options{Store: store, Queue: queue, Authenticate: gatewayAuth(cfg), Routes: api.ServiceRoutes})).ProxyWithContext

	b, err := os.ReadFile("../../events/api/post-notification-iam.json")
	if err != nil {
		t.Fatal(err)
	}
	for arn, want := range map[string]int{
		"arn:aws:sts::000000000000:assumed-role/demo-service/i-0abc":  http.StatusAccepted,
		"arn:aws:sts::000000000000:assumed-role/other-service/i-0abc": http.StatusForbidden,
		"arn:aws:iam::000000000000:user/someone":                      http.StatusForbidden,
	} {
		var req events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatal(err)
		}
		req.RequestContext.Authorizer.IAM.UserARN = arn
		resp, err := h(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != want {
			t.Errorf("%s: %d %s, want %d", arn, resp.StatusCode, resp.Body, want)
		}
		if resp.StatusCode == http.StatusForbidden {
			for k, v := range resp.Headers {
				if http.CanonicalHeaderKey(k) == "Www-Authenticate" {
					t.Errorf("%s: 403 with WWW-Authenticate %q", arn, v)
				}
			}
			for k, v := range resp.MultiValueHeaders {
				if http.CanonicalHeaderKey(k) == "Www-Authenticate" {
					t.Errorf("%s: 403 with WWW-Authenticate %v", arn, v)
				}
			}
			var body struct {
				Error struct{ Code string } `json:"error"`
			}
			if json.Unmarshal([]byte(resp.Body), &body); body.Error.Code != notify.EFORBIDDEN {
				t.Errorf("%s: body %s, want code %s", arn, resp.Body, notify.EFORBIDDEN)
			}
		}
	}
}

// The console on the admin function: an operator's JWT (admin group or scope) reaches the
// operator routes under /console/api/… and is named in the audit log; a token of the issuer
// without them, or none, is refused; an IAM caller still uses /v1/admin/….
func TestConsoleOperatorSignIn(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	box, _ := seal.New(bytes.Repeat([]byte{7}, 32))
	store, err := sqlite.NewStore(db, box)
	if err != nil {
		t.Fatal(err)
	}
	q := notify.IngestQueue("demo")
	queue, err := sqlite.NewQueue(db, []notify.QueueConfig{{Name: q, VisibilityTimeout: 30 * time.Second, MaxReceiveCount: 5, DLQ: notify.DLQName(q)}}, notify.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(queue.Close)
	cfg := &config.Config{Services: []config.Service{{Name: "demo", Admin: true, IAMPrincipals: []string{"arn:aws:iam::000000000000:role/ops"}}}}
	h := httpadapter.NewV2(api.New(api.Options{Store: store, Queue: queue, Admin: queue, Queues: []string{q}, AdminServices: []string{"demo"},
		Audit: store, Authenticate: operatorAuth(gatewayAuth(cfg), "herald-operators", "herald/admin"), Routes: api.AdminRoutes})).ProxyWithContext

	call := func(method, path string, auth events.APIGatewayV2HTTPRequestContextAuthorizerDescription) int {
		t.Helper()
		resp, err := h(context.Background(), events.APIGatewayV2HTTPRequest{RawPath: path, RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path}, Authorizer: &auth}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	jwt := func(claims map[string]string) events.APIGatewayV2HTTPRequestContextAuthorizerDescription {
		return events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims}}
	}
	for name, c := range map[string]struct {
		claims map[string]string
		want   int
	}{
		"cognito group":  {map[string]string{"sub": "u-1", "username": "alice", "cognito:groups": "[readers herald-operators]"}, http.StatusOK},
		"groups as JSON": {map[string]string{"sub": "u-2", "groups": `["herald-operators"]`}, http.StatusOK},
		"scope":          {map[string]string{"sub": "u-3", "scope": "openid herald/admin"}, http.StatusOK},
		"no admin claim": {map[string]string{"sub": "u-4", "cognito:groups": "[readers]", "scope": "openid"}, http.StatusForbidden},
		"similar group":  {map[string]string{"sub": "u-5", "cognito:groups": "[herald-operators-x]"}, http.StatusForbidden},
		"no subject":     {map[string]string{"cognito:groups": "[herald-operators]"}, http.StatusUnauthorized},
	} {
		if got := call("GET", "/console/api/queues", jwt(c.claims)); got != c.want {
			t.Errorf("%s: GET /console/api/queues = %d, want %d", name, got, c.want)
		}
	}
	operator := jwt(map[string]string{"sub": "u-1", "username": "alice", "cognito:groups": "[herald-operators]"})
	if got := call("GET", "/v1/admin/queues", operator); got != http.StatusForbidden {
		t.Errorf("an operator's JWT on /v1/admin/queues = %d, want 403 (that path is IAM's)", got)
	}
	if got := call("GET", "/console/api/queues", events.APIGatewayV2HTTPRequestContextAuthorizerDescription{}); got != http.StatusUnauthorized {
		t.Errorf("no token: GET /console/api/queues = %d, want 401", got)
	}
	iam := events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:sts::000000000000:assumed-role/ops/cli"}}
	if got := call("GET", "/v1/admin/queues", iam); got != http.StatusOK {
		t.Errorf("IAM caller: GET /v1/admin/queues = %d, want 200", got)
	}
	if got := call("POST", "/console/api/queues/"+q+"/redrive", operator); got != http.StatusOK {
		t.Fatalf("operator redrive = %d", got)
	}
	entries, _, err := store.ListAudit(context.Background(), notify.AuditFilter{Action: notify.AuditQueueRedrive}, "", 10)
	if err != nil || len(entries) != 1 || entries[0].Actor != "alice" || entries[0].ActorKind != notify.ActorUser {
		t.Fatalf("audit = %+v %v, want the redrive by alice", entries, err)
	}
}
