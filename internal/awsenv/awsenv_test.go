package awsenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/awsenv"
	"herald/internal/ddb"
	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/sandbox"
	"herald/internal/sqs/sqsfake"
)

// These tests run every function's handler exactly as Lambda would (lambda.NewHandler(...).Invoke
// with the JSON envelopes in events/), on the AWS adapters: DynamoDB Local and the SQS fake.

const queuePrefix = "herald-test-"

type world struct {
	t       *testing.T
	env     *awsenv.Env
	sqs     *awssqs.Client
	urlBase string
	sb      *sandbox.Server
}

func setup(t *testing.T) *world {
	ep := os.Getenv("HERALD_DYNAMODB_ENDPOINT")
	if ep == "" {
		t.Skip("set HERALD_DYNAMODB_ENDPOINT (make test starts DynamoDB Local) to run the AWS runtime tests")
	}
	ctx := context.Background()
	fake := sqsfake.New()
	srv := httptest.NewServer(fake)
	t.Cleanup(func() { fake.Close(); srv.Close() })
	sb, err := sandbox.Start(sandbox.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })

	cfg := fmt.Sprintf(`
env: test
services:
  - name: demo
    api_keys: [test-demo-key-123]
retry: {base: 1s, max: 2s}
providers:
  fcm: {apps: {default: {project_id: herald-test, endpoint: %q}}}
  ses: {from: noreply@example.com, endpoint: %q}
  twilio: {account_sid: AC00000000000000000000000000000000, auth_token: sandboxtoken0000, from: "+15005550006", base_url: %q}
contacts: {encryption_key: aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=}
`, sb.URL()+"/v1", sb.URL(), sb.URL())
	tables := fmt.Sprintf("herald-test-%d-", time.Now().UnixNano())
	for k, v := range map[string]string{
		awsenv.EnvConfig: cfg, awsenv.EnvTablePrefix: tables,
		awsenv.EnvQueueURLPrefix:    srv.URL + "/" + sqsfake.Account + "/" + queuePrefix,
		"AWS_ENDPOINT_URL_DYNAMODB": ep, "AWS_ENDPOINT_URL_SQS": srv.URL,
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
		"AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}

	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	sqsClient := awssqs.NewFromConfig(awsCfg, func(o *awssqs.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	for _, q := range []string{"ingest-demo", "prepare-realtime", "send-realtime", "record-realtime", "prepare-bulk", "send-bulk", "record-bulk", "cleanup", "bounce"} {
		dlq, err := sqsClient.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(queuePrefix + q + "-dlq")})
		if err != nil {
			t.Fatal(err)
		}
		attrs, _ := sqsClient.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl, AttributeNames: []types.QueueAttributeName{"QueueArn"}})
		policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"5"}`, attrs.Attributes["QueueArn"])
		if _, err := sqsClient.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(queuePrefix + q),
			Attributes: map[string]string{"RedrivePolicy": policy, "VisibilityTimeout": "30"}}); err != nil {
			t.Fatal(err)
		}
	}
	db := dynamo.New(awsCfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(ep); o.DisableValidateResponseChecksum = true })
	if err := ddb.CreateTables(ctx, db, ddb.TablesWithPrefix(tables)); err != nil {
		t.Fatal(err)
	}
	env, err := awsenv.Load(ctx, awsenv.Options{Senders: true})
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, env: env, sqs: sqsClient, urlBase: srv.URL + "/" + sqsfake.Account + "/" + queuePrefix, sb: sb}
}

// fixture reads an event file from events/.
func fixture(t *testing.T, name string) []byte {
	b, err := os.ReadFile("../../events/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// enqueueFixture puts a fixture's record bodies on their queue and returns the event with the
// records' ids and receipt handles replaced by the real ones, as Lambda would deliver it.
func (w *world) enqueueFixture(name string) events.SQSEvent {
	var ev events.SQSEvent
	if err := json.Unmarshal(fixture(w.t, name), &ev); err != nil {
		w.t.Fatal(err)
	}
	for _, r := range ev.Records {
		q := w.env.LogicalQueue(r.EventSourceARN)
		if _, err := w.sqs.SendMessage(context.Background(), &awssqs.SendMessageInput{QueueUrl: aws.String(w.urlBase + q), MessageBody: aws.String(r.Body)}); err != nil {
			w.t.Fatal(err)
		}
	}
	return w.receive(w.env.LogicalQueue(ev.Records[0].EventSourceARN), len(ev.Records))
}

// receive takes up to n messages off queue as a Lambda SQS event.
func (w *world) receive(queue string, n int) events.SQSEvent {
	var ev events.SQSEvent
	for tries := 0; len(ev.Records) < n && tries < 5; tries++ {
		out, err := w.sqs.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{
			QueueUrl: aws.String(w.urlBase + queue), MaxNumberOfMessages: int32(min(10, n-len(ev.Records))), WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}, MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			w.t.Fatal(err)
		}
		for _, m := range out.Messages {
			attrs := map[string]events.SQSMessageAttribute{}
			for k, v := range m.MessageAttributes {
				attrs[k] = events.SQSMessageAttribute{StringValue: v.StringValue, DataType: "String"}
			}
			ev.Records = append(ev.Records, events.SQSMessage{
				MessageId: *m.MessageId, ReceiptHandle: *m.ReceiptHandle, Body: *m.Body, MessageAttributes: attrs,
				Attributes:     map[string]string{"ApproximateReceiveCount": m.Attributes["ApproximateReceiveCount"]},
				EventSource:    "aws:sqs",
				EventSourceARN: "arn:aws:sqs:us-east-1:" + sqsfake.Account + ":" + queuePrefix + queue,
			})
		}
	}
	return ev
}

// invoke runs handler h with ev as raw JSON, as the Lambda runtime does.
func invoke[T any](t *testing.T, h any, ev any) T {
	t.Helper()
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	out, err := lambda.NewHandler(h).Invoke(context.Background(), raw)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	var resp T
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("decode response %s: %v", out, err)
	}
	return resp
}

func failedIDs(r events.SQSEventResponse) []string {
	var out []string
	for _, f := range r.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

func TestFunctionsOnAWSAdapters(t *testing.T) {
	w := setup(t)
	e := w.env

	// ingest: a batch with one poison message reports exactly that message, and its copy is in
	// the DLQ with the reason.
	ingest := e.SQSHandler(e.IngestStage)
	ev := w.enqueueFixture("ingest/sqs-batch-with-poison.json")
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
	resp := invoke[events.SQSEventResponse](t, ingest, ev)
	if got := failedIDs(resp); len(got) != 1 || got[0] != poisonID {
		t.Fatalf("batchItemFailures = %v, want exactly the poison message %s", got, poisonID)
	}
	dlq := w.receive("ingest-demo-dlq", 1)
	if len(dlq.Records) != 1 || dlq.Records[0].MessageAttributes[pipeline.AttrErrorCode].StringValue == nil ||
		*dlq.Records[0].MessageAttributes[pipeline.AttrErrorCode].StringValue != notify.EINVALID {
		t.Fatalf("DLQ = %+v, want the poison message with its error code", dlq.Records)
	}

	// prepare → send (twice: a redelivered batch sends nothing again) → record.
	prep := w.receive("prepare-realtime", 1)
	if r := invoke[events.SQSEventResponse](t, e.SQSHandler(func(string) pipeline.Handler { return e.Pipeline.Prepare() }), prep); len(r.BatchItemFailures) != 0 {
		t.Fatalf("prepare failures: %v", failedIDs(r))
	}
	sendEv := w.receive("send-realtime", 1)
	send := e.SQSHandler(func(string) pipeline.Handler { return e.Pipeline.Send() })
	for range 2 {
		if r := invoke[events.SQSEventResponse](t, send, sendEv); len(r.BatchItemFailures) != 0 {
			t.Fatalf("send failures: %v", failedIDs(r))
		}
	}
	if n := len(w.sb.Recorder.List("fcm", "fcm-carol-direct-0001")); n != 1 {
		t.Fatalf("the same send batch fed twice delivered %d times, want 1", n)
	}
	rec := w.receive("record-realtime", 10)
	invoke[events.SQSEventResponse](t, e.SQSHandler(func(string) pipeline.Handler { return e.Pipeline.Record() }), rec)
	id := notify.NotificationIDFor("demo", "order-2002-shipped", time.Now())
	n, err := e.Store.GetNotification(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != notify.StatusSent {
		t.Fatalf("status = %s (%+v), want SENT", n.Status, n.Stats)
	}

	// A schedule's fire for a notification that is not SCHEDULED does nothing.
	if r := invoke[events.SQSEventResponse](t, ingest, w.enqueueFixture("ingest/sqs-scheduler-fire.json")); len(r.BatchItemFailures) != 0 {
		t.Fatalf("fire failures: %v", failedIDs(r))
	}

	// api: without a key 401; with one 202.
	apiH := e.APIHandler()
	var req events.APIGatewayV2HTTPRequest
	_ = json.Unmarshal(fixture(t, "api/post-notification-no-key.json"), &req)
	if r := invoke[events.APIGatewayV2HTTPResponse](t, apiH, req); r.StatusCode != 401 {
		t.Fatalf("no key: %d %s", r.StatusCode, r.Body)
	}
	_ = json.Unmarshal(fixture(t, "api/post-notification.json"), &req)
	if r := invoke[events.APIGatewayV2HTTPResponse](t, apiH, req); r.StatusCode != 202 {
		t.Fatalf("with key: %d %s", r.StatusCode, r.Body)
	}

	// bounce: permanent bounces and complaints suppress; transient bounces and deliveries don't.
	bounce := e.SQSHandler(func(string) pipeline.Handler { return e.Pipeline.Bounce() })
	for _, f := range []string{"sqs-ses-bounce-permanent", "sqs-ses-bounce-transient", "sqs-ses-complaint", "sqs-ses-delivery"} {
		if r := invoke[events.SQSEventResponse](t, bounce, w.enqueueFixture("bounce/"+f+".json")); len(r.BatchItemFailures) != 0 {
			t.Fatalf("%s failures: %v", f, failedIDs(r))
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
