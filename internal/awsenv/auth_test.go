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
