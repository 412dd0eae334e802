// Package awsenvtest sets up the AWS runtime's world for tests: DynamoDB Local tables, the SQS
// fake with every queue and its DLQ, an EventBridge fake, the sandbox providers, and the
// environment a function reads.
// The same world drives handlers in-process and built function binaries under aws-lambda-rie.
package awsenvtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
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
	"herald/internal/awsenv/provider"
	"herald/internal/ddb"
	"herald/internal/eventbus/eventbusfake"
	"herald/internal/sandbox"
	"herald/internal/sqs/sqsfake"
)

// These tests run every function's handler exactly as Lambda would (lambda.NewHandler(...).Invoke
// with the JSON envelopes in events/), on the AWS adapters: DynamoDB Local and the SQS fake.

const queuePrefix = "herald-test-"

// World is a running AWS test environment.
type World struct {
	T       *testing.T
	Env     *awsenv.Env // built in-process from the same environment the binaries get
	SQS     *awssqs.Client
	URLBase string
	Sandbox *sandbox.Server
	Events  *eventbusfake.Fake // the EventBridge the functions put operator events on (bus EventBus)
	Vars    map[string]string  // the function environment (also set on this process)
}

// EventBus is the bus the world's functions put operator events on.
const EventBus = "herald-test-events"

// Setup starts the world, or skips t when DynamoDB Local is not configured.
func Setup(t *testing.T) *World {
	ep := os.Getenv("HERALD_DYNAMODB_ENDPOINT")
	if ep == "" {
		t.Skip("set HERALD_DYNAMODB_ENDPOINT (make test starts DynamoDB Local) to run the AWS runtime tests")
	}
	ctx := context.Background()
	fake := sqsfake.New()
	srv := httptest.NewServer(fake)
	t.Cleanup(func() { fake.Close(); srv.Close() })
	bus := eventbusfake.New()
	busSrv := httptest.NewServer(bus)
	t.Cleanup(busSrv.Close)
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
    iam_principals: ["arn:aws:iam::000000000000:role/demo-service"]
    admin: true
retry: {base: 1s, max: 2s}
# The stage path: these tests follow a notification through every stage's queue (the express
# path is the cost bench's and the stack box's).
lanes: {realtime: {express_max_recipients: 0}}
providers:
  fcm: {apps: {default: {project_id: herald-test, endpoint: %q}}}
  ses: {from: noreply@example.com, endpoint: %q}
  twilio: {account_sid: AC00000000000000000000000000000000, auth_token: sandboxtoken0000, from: "+15005550006", base_url: %q}
contacts: {encryption_key: aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=}
`, sb.URL()+"/v1", sb.URL(), sb.URL())
	tables := fmt.Sprintf("herald-test-%d-", time.Now().UnixNano())
	vars := map[string]string{}
	for k, v := range map[string]string{
		awsenv.EnvConfig: cfg, awsenv.EnvTablePrefix: tables,
		awsenv.EnvQueueURLPrefix:    srv.URL + "/" + sqsfake.Account + "/" + queuePrefix,
		awsenv.EnvEventBus:          EventBus,
		"AWS_ENDPOINT_URL_DYNAMODB": ep, "AWS_ENDPOINT_URL_SQS": srv.URL, "AWS_ENDPOINT_URL_EVENTBRIDGE": busSrv.URL,
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
		"AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
		vars[k] = v
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
	env, err := awsenv.Load(ctx, awsenv.Options{Senders: provider.Senders, API: true})
	if err != nil {
		t.Fatal(err)
	}
	return &World{T: t, Env: env, SQS: sqsClient, URLBase: srv.URL + "/" + sqsfake.Account + "/" + queuePrefix, Sandbox: sb, Events: bus, Vars: vars}
}

// EventsDir is where the event fixtures are, relative to the test's package directory.
var EventsDir = "../../events/"

// Fixture reads an event file from events/.
func Fixture(t *testing.T, name string) []byte {
	b, err := os.ReadFile(EventsDir + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// EnqueueFixture puts a fixture's record bodies on their queue and returns the event with the
// records' ids and receipt handles replaced by the real ones, as Lambda would deliver it.
func (w *World) EnqueueFixture(name string) events.SQSEvent {
	var ev events.SQSEvent
	if err := json.Unmarshal(Fixture(w.T, name), &ev); err != nil {
		w.T.Fatal(err)
	}
	for _, r := range ev.Records {
		q := w.Env.LogicalQueue(r.EventSourceARN)
		if _, err := w.SQS.SendMessage(context.Background(), &awssqs.SendMessageInput{QueueUrl: aws.String(w.URLBase + q), MessageBody: aws.String(r.Body)}); err != nil {
			w.T.Fatal(err)
		}
	}
	return w.Receive(w.Env.LogicalQueue(ev.Records[0].EventSourceARN), len(ev.Records))
}

// Receive takes up to n messages off queue as a Lambda SQS event, waiting up to 10 s for them;
// when fewer came, the test log says where the queue's messages are (a caller may expect none).
func (w *World) Receive(queue string, n int) events.SQSEvent {
	var ev events.SQSEvent
	defer func() {
		if len(ev.Records) >= n {
			return
		}
		out, err := w.SQS.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{
			QueueUrl: aws.String(w.URLBase + queue), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
		if err == nil {
			a := out.Attributes
			w.T.Logf("receive %s: %d of %d messages; the queue has %s visible, %s in flight, %s delayed", queue, len(ev.Records), n,
				a["ApproximateNumberOfMessages"], a["ApproximateNumberOfMessagesNotVisible"], a["ApproximateNumberOfMessagesDelayed"])
		}
	}()
	for tries := 0; len(ev.Records) < n && tries < 10; tries++ {
		out, err := w.SQS.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{
			QueueUrl: aws.String(w.URLBase + queue), MaxNumberOfMessages: int32(min(10, n-len(ev.Records))), WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}, MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			w.T.Fatal(err)
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

// Invoke runs handler h with ev as raw JSON, as the Lambda runtime does.
func Invoke[T any](t *testing.T, h any, ev any) T {
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

// FailedIDs lists the ids in a partial batch response.
func FailedIDs(r events.SQSEventResponse) []string {
	var out []string
	for _, f := range r.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}
