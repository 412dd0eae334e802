package awsenv_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"herald/internal/awsenv/awsenvtest"
	"herald/internal/notify"
	"herald/internal/pipeline"
)

// TestFunctionsOnAWSAdapters runs every function's handler exactly as Lambda would
// (lambda.NewHandler(...).Invoke with the envelopes in events/) on DynamoDB Local and the SQS fake.
func TestFunctionsOnAWSAdapters(t *testing.T) {
	w := awsenvtest.Setup(t)
	e := w.Env

	// ingest: a batch with one poison message reports exactly that message, and its copy is in
	// the DLQ with the reason.
	ingest := e.SQSHandler(e.IngestStage)
	ev := w.EnqueueFixture("ingest/sqs-batch-with-poison.json")
	if len(ev.Records) != 2 {
		t.Fatalf("received %d records", len(ev.Records))
	}
	var poisonID string
	for _, r := range ev.Records {
		if strings.Contains(r.Body, "idempotency_key") {
			continue
		}
		poisonID = r.MessageId
	}
	resp := awsenvtest.Invoke[events.SQSEventResponse](t, ingest, ev)
	if got := awsenvtest.FailedIDs(resp); len(got) != 1 || got[0] != poisonID {
		t.Fatalf("batchItemFailures = %v, want exactly the poison message %s", got, poisonID)
	}
	dlq := w.Receive("ingest-demo-dlq", 1)
	if len(dlq.Records) != 1 || dlq.Records[0].MessageAttributes[pipeline.AttrErrorCode].StringValue == nil ||
		*dlq.Records[0].MessageAttributes[pipeline.AttrErrorCode].StringValue != notify.EINVALID {
		t.Fatalf("DLQ = %+v, want the poison message with its error code", dlq.Records)
	}

	// prepare → send (twice: a redelivered batch sends nothing again) → record.
	prep := w.Receive("prepare-realtime", 1)
	if r := awsenvtest.Invoke[events.SQSEventResponse](t, e.SQSHandler(func(string) pipeline.Handler { return e.Pipeline.Prepare() }), prep); len(r.BatchItemFailures) != 0 {
		t.Fatalf("prepare failures: %v", awsenvtest.FailedIDs(r))
	}
	sendEv := w.Receive("send-realtime", 1)
	send := e.SQSHandler(func(string) pipeline.Handler { return e.Pipeline.Send() })
	w0 := e.Writes.Writes()
	for range 2 {
		if r := awsenvtest.Invoke[events.SQSEventResponse](t, send, sendEv); len(r.BatchItemFailures) != 0 {
			t.Fatalf("send failures: %v", awsenvtest.FailedIDs(r))
		}
	}
	// The store writes are counted: claim and complete (with their counters) of the delivery.
	if n := e.Writes.Writes() - w0; n < 2 {
		t.Fatalf("%d DynamoDB writes counted for a send batch, want its claim and completion", n)
	}
	if n := len(w.Sandbox.Recorder.List("fcm", "fcm-carol-direct-0001")); n != 1 {
		t.Fatalf("the same send batch fed twice delivered %d times, want 1", n)
	}
	rec := w.Receive("record-realtime", 10)
	awsenvtest.Invoke[events.SQSEventResponse](t, e.SQSHandler(func(string) pipeline.Handler { return e.Pipeline.Record() }), rec)
	id := notify.NotificationIDFor("demo", "order-2002-shipped", time.Now())
	n, err := e.Store.GetNotification(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != notify.StatusSent {
		t.Fatalf("status = %s (%+v), want SENT", n.Status, n.Stats)
	}

	// A fire naming no notification or campaign of this service is refused: dead-lettered at
	// once with its reason.
	if r := awsenvtest.Invoke[events.SQSEventResponse](t, ingest, w.EnqueueFixture("ingest/sqs-scheduler-fire.json")); len(r.BatchItemFailures) != 1 {
		t.Fatalf("fire failures: %v, want the fire for an unknown notification", awsenvtest.FailedIDs(r))
	}
	if dl := w.Receive("ingest-demo-dlq", 1); len(dl.Records) != 1 ||
		dl.Records[0].MessageAttributes[pipeline.AttrErrorCode].StringValue == nil ||
		*dl.Records[0].MessageAttributes[pipeline.AttrErrorCode].StringValue != notify.ENOTFOUND {
		t.Fatalf("ingest-demo-dlq: %+v, want the fire with code %s", dl.Records, notify.ENOTFOUND)
	}

	// api: without a key 401; with one 202.
	apiH := e.APIHandler(nil)
	var req events.APIGatewayV2HTTPRequest
	_ = json.Unmarshal(awsenvtest.Fixture(t, "api/post-notification-no-key.json"), &req)
	if r := awsenvtest.Invoke[events.APIGatewayV2HTTPResponse](t, apiH, req); r.StatusCode != 401 {
		t.Fatalf("no key: %d %s", r.StatusCode, r.Body)
	}
	_ = json.Unmarshal(awsenvtest.Fixture(t, "api/post-notification.json"), &req)
	if r := awsenvtest.Invoke[events.APIGatewayV2HTTPResponse](t, apiH, req); r.StatusCode != 202 {
		t.Fatalf("with key: %d %s", r.StatusCode, r.Body)
	}
	// Behind the gateway: a SigV4 caller is the service listing its role; a JWT's subject may
	// read only their own inbox.
	for file, want := range map[string]int{
		"api/post-notification-iam.json": 202, "api/get-inbox-jwt.json": 200, "api/get-inbox-jwt-other-user.json": 403,
	} {
		req = events.APIGatewayV2HTTPRequest{}
		_ = json.Unmarshal(awsenvtest.Fixture(t, file), &req)
		if r := awsenvtest.Invoke[events.APIGatewayV2HTTPResponse](t, apiH, req); r.StatusCode != want {
			t.Errorf("%s: %d %s, want %d", file, r.StatusCode, r.Body, want)
		}
	}

	// The operator routes are the admin function's: api answers 404 for them, admin serves them
	// (and nothing else).
	adminH := e.AdminHandler(nil)
	for _, c := range []struct {
		name    string
		h       func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
		method  string
		path    string
		want    int
		contain string
	}{
		{"api", apiH, "GET", "/v1/admin/queues", 404, `"not_found"`},
		{"admin", adminH, "GET", "/v1/admin/queues", 200, `"ingest-demo"`},
		{"admin", adminH, "GET", "/v1/notifications/n_1", 404, `"not_found"`},
	} {
		req = events.APIGatewayV2HTTPRequest{}
		_ = json.Unmarshal(awsenvtest.Fixture(t, "api/post-notification-iam.json"), &req)
		req.RawPath, req.RequestContext.HTTP.Path, req.RequestContext.HTTP.Method, req.Body = c.path, c.path, c.method, ""
		if r := awsenvtest.Invoke[events.APIGatewayV2HTTPResponse](t, c.h, req); r.StatusCode != c.want || !strings.Contains(r.Body, c.contain) {
			t.Errorf("%s %s %s: %d %s, want %d with %s", c.name, c.method, c.path, r.StatusCode, r.Body, c.want, c.contain)
		}
	}

	// Operator actions are audited in DynamoDB under the gateway's request id: the same request
	// served twice is one entry, by the service the caller's role maps to.
	adminReq := func(method, path, requestID string) events.APIGatewayV2HTTPResponse {
		req := events.APIGatewayV2HTTPRequest{}
		_ = json.Unmarshal(awsenvtest.Fixture(t, "api/post-notification-iam.json"), &req)
		req.RawPath, req.RequestContext.HTTP.Path, req.RequestContext.HTTP.Method, req.Body = path, path, method, ""
		req.RequestContext.RequestID = requestID
		return awsenvtest.Invoke[events.APIGatewayV2HTTPResponse](t, adminH, req)
	}
	for range 2 {
		if r := adminReq("POST", "/v1/admin/queues/ingest-demo/redrive", "req-redrive-1"); r.StatusCode != 200 {
			t.Fatalf("redrive: %d %s", r.StatusCode, r.Body)
		}
	}
	r := adminReq("GET", "/v1/admin/audit", "req-audit-read")
	var audit struct {
		Entries []notify.AuditEntry `json:"entries"`
	}
	if err := json.Unmarshal([]byte(r.Body), &audit); err != nil || r.StatusCode != 200 {
		t.Fatalf("GET /v1/admin/audit: %d %s", r.StatusCode, r.Body)
	}
	if len(audit.Entries) != 1 || audit.Entries[0].Action != notify.AuditQueueRedrive || audit.Entries[0].RequestID != "req-redrive-1" ||
		audit.Entries[0].Actor != "demo" || audit.Entries[0].TargetID != "ingest-demo" || audit.Entries[0].Result != notify.AuditResultOK {
		t.Fatalf("audit log %s, want the one redrive by demo", r.Body)
	}

	// bounce: permanent bounces and complaints suppress; transient bounces and deliveries don't.
	bounce := e.SQSHandler(func(string) pipeline.Handler { return e.Pipeline.Bounce() })
	for _, f := range []string{"sqs-ses-bounce-permanent", "sqs-ses-bounce-transient", "sqs-ses-complaint", "sqs-ses-delivery"} {
		if r := awsenvtest.Invoke[events.SQSEventResponse](t, bounce, w.EnqueueFixture("bounce/"+f+".json")); len(r.BatchItemFailures) != 0 {
			t.Fatalf("%s failures: %v", f, awsenvtest.FailedIDs(r))
		}
	}
	key := func(a string) string { return notify.AddressKey(notify.ChannelEmail, a) }
	sup, err := e.Store.Suppressed(context.Background(), []string{key("gone@example.com"), key("also-gone@example.com"), key("full@example.com"), key("angry@example.com"), key("fine@example.com")})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"gone@example.com", "also-gone@example.com", "angry@example.com"} {
		if _, ok := sup[key(a)]; !ok {
			t.Errorf("%s not suppressed", a)
		}
	}
	for _, a := range []string{"full@example.com", "fine@example.com"} {
		if _, ok := sup[key(a)]; ok {
			t.Errorf("%s suppressed by a transient bounce or a delivery", a)
		}
	}
}
