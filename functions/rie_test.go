// Package functions_test runs the built function binaries under the AWS Lambda Runtime Interface
// Emulator (aws-lambda-rie) with the envelopes in events/, on DynamoDB Local and the SQS fake.
package functions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"herald/internal/awsenv/awsenvtest"
	"herald/internal/notify"
)

var binDir string

func TestMain(m *testing.M) {
	code := func() int {
		if os.Getenv("HERALD_DYNAMODB_ENDPOINT") == "" || rie() == "" {
			return m.Run() // the tests skip with a message
		}
		dir, err := os.MkdirTemp("", "herald-fn-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binDir = dir
		// One go build for every function: the linker runs in parallel.
		cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", dir+"/", "./...")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build functions: %v\n%s", err, b)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// rie finds aws-lambda-rie: $HERALD_RIE, then .tools/bin (where make installs it), then PATH.
func rie() string {
	if p := os.Getenv("HERALD_RIE"); p != "" {
		return p
	}
	if p, _ := filepath.Abs("../.tools/bin/aws-lambda-rie"); fileExists(p) {
		return p
	}
	p, _ := exec.LookPath("aws-lambda-rie")
	return p
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// function is one binary running under the emulator.
type function struct {
	t    *testing.T
	url  string
	logs *bytes.Buffer
}

func start(t *testing.T, w *awsenvtest.World, name string) *function {
	t.Helper()
	addr := freePort(t)
	cmd := exec.Command(rie(), "--runtime-interface-emulator-address", addr, "--runtime-api-address", freePort(t),
		filepath.Join(binDir, name))
	cmd.Dir = binDir
	env := os.Environ()
	for k, v := range w.Vars {
		env = append(env, k+"="+v)
	}
	cmd.Env = append(env, "AWS_LAMBDA_FUNCTION_NAME=herald-test-"+name)
	logs := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	f := &function{t: t, url: "http://" + addr + "/2015-03-31/functions/function/invocations", logs: logs}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return f
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: emulator not listening\n%s", name, logs)
	return nil
}

// invoke posts ev and decodes the answer into T; it returns the round-trip time too.
func invoke[T any](f *function, ev any) (T, time.Duration) {
	f.t.Helper()
	raw, _ := json.Marshal(ev)
	t0 := time.Now()
	resp, err := http.Post(f.url, "application/json", bytes.NewReader(raw))
	if err != nil {
		f.t.Fatalf("invoke: %v\n%s", err, f.logs)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	d := time.Since(t0)
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		f.t.Fatalf("decode %s: %v\n%s", b, err, f.logs)
	}
	return out, d
}

func TestBinariesUnderEmulator(t *testing.T) {
	if os.Getenv("HERALD_DYNAMODB_ENDPOINT") == "" || rie() == "" {
		t.Skip("needs aws-lambda-rie and DynamoDB Local: `make test` installs the one and starts the other")
	}
	awsenvtest.EventsDir = "../events/"
	w := awsenvtest.Setup(t)
	ctx := context.Background()

	// ingest: the poison message, and only it, is reported failed.
	ingest := start(t, w, "ingest")
	ev := w.EnqueueFixture("ingest/sqs-batch-with-poison.json")
	var poison string
	for _, r := range ev.Records {
		if !strings.Contains(r.Body, "idempotency_key") {
			poison = r.MessageId
		}
	}
	resp, _ := invoke[events.SQSEventResponse](ingest, ev)
	if got := awsenvtest.FailedIDs(resp); len(got) != 1 || got[0] != poison {
		t.Fatalf("ingest batchItemFailures = %v, want [%s]\n%s", got, poison, ingest.logs)
	}

	// send: the same batch fed twice delivers once.
	prepare, send := start(t, w, "prepare"), start(t, w, "send")
	if r, _ := invoke[events.SQSEventResponse](prepare, w.Receive("prepare-realtime", 1)); len(r.BatchItemFailures) != 0 {
		t.Fatalf("prepare failures %v\n%s", r.BatchItemFailures, prepare.logs)
	}
	batch := w.Receive("send-realtime", 1)
	for range 2 {
		if r, _ := invoke[events.SQSEventResponse](send, batch); len(r.BatchItemFailures) != 0 {
			t.Fatalf("send failures %v\n%s", r.BatchItemFailures, send.logs)
		}
	}
	if n := len(w.Sandbox.Recorder.List("fcm", "fcm-carol-direct-0001")); n != 1 {
		t.Fatalf("delivered %d times, want 1\n%s", n, send.logs)
	}

	// api: 401 without a key.
	api := start(t, w, "api")
	var req events.APIGatewayV2HTTPRequest
	_ = json.Unmarshal(awsenvtest.Fixture(t, "api/post-notification-no-key.json"), &req)
	if r, _ := invoke[events.APIGatewayV2HTTPResponse](api, req); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("api without key: %d %s", r.StatusCode, r.Body)
	}

	// admin: serves the operator routes to an admin service's signed caller; api does not.
	admin := start(t, w, "admin")
	req = events.APIGatewayV2HTTPRequest{}
	_ = json.Unmarshal(awsenvtest.Fixture(t, "api/post-notification-iam.json"), &req)
	req.RawPath, req.RequestContext.HTTP.Path, req.RequestContext.HTTP.Method, req.Body = "/v1/admin/queues", "/v1/admin/queues", "GET", ""
	if r, _ := invoke[events.APIGatewayV2HTTPResponse](admin, req); r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `"ingest-demo"`) {
		t.Fatalf("admin GET /v1/admin/queues: %d %s\n%s", r.StatusCode, r.Body, admin.logs)
	}
	if r, _ := invoke[events.APIGatewayV2HTTPResponse](api, req); r.StatusCode != http.StatusNotFound {
		t.Fatalf("api GET /v1/admin/queues: %d %s, want 404", r.StatusCode, r.Body)
	}

	// audience: starts, acknowledges S3's test event, dead-letters an object outside lists/.
	t.Setenv("HERALD_AUDIENCE_BUCKET", "herald-test-lists")
	for _, q := range []string{"audience-dlq", "audience"} {
		if _, err := w.SQS.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("herald-test-" + q)}); err != nil {
			t.Fatal(err)
		}
	}
	aud := start(t, w, "audience")
	for _, c := range []struct {
		body   string
		failed int
	}{
		{`{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"herald-test-lists"}`, 0},
		{`{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"herald-test-lists"},"object":{"key":"other/demo/x","eTag":"e"}}}]}`, 1},
	} {
		if _, err := w.SQS.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(w.URLBase + "audience"), MessageBody: aws.String(c.body)}); err != nil {
			t.Fatal(err)
		}
		if r, _ := invoke[events.SQSEventResponse](aud, w.Receive("audience", 1)); len(r.BatchItemFailures) != c.failed {
			t.Fatalf("audience %s: failures %v, want %d\n%s", c.body, r.BatchItemFailures, c.failed, aud.logs)
		}
	}

	// bounce: a permanent bounce suppresses, and a later email to that address is SKIPPED
	// suppressed; a transient bounce does not suppress.
	bounce := start(t, w, "bounce")
	for _, f := range []string{"bounce/sqs-ses-bounce-permanent.json", "bounce/sqs-ses-bounce-transient.json"} {
		if r, _ := invoke[events.SQSEventResponse](bounce, w.EnqueueFixture(f)); len(r.BatchItemFailures) != 0 {
			t.Fatalf("%s failures %v\n%s", f, r.BatchItemFailures, bounce.logs)
		}
	}
	body := `{"channels":["email"],"content":{"title":"Hi","body":"again"},"recipients":[{"email":"gone@example.com"},{"email":"full@example.com"}]}`
	if err := w.Env.Queue.Send(ctx, "ingest-demo", notify.OutMessage{Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	if r, _ := invoke[events.SQSEventResponse](ingest, w.Receive("ingest-demo", 1)); len(r.BatchItemFailures) != 0 {
		t.Fatalf("ingest failures %v\n%s", r.BatchItemFailures, ingest.logs)
	}
	if r, _ := invoke[events.SQSEventResponse](prepare, w.Receive("prepare-realtime", 1)); len(r.BatchItemFailures) != 0 {
		t.Fatalf("prepare failures %v\n%s", r.BatchItemFailures, prepare.logs)
	}
	// Find the notification through the send batch: only full@example.com may be in it.
	sendEv := w.Receive("send-realtime", 1)
	if len(sendEv.Records) != 1 || strings.Contains(sendEv.Records[0].Body, "gone@example.com") || !strings.Contains(sendEv.Records[0].Body, "full@example.com") {
		t.Fatalf("send batch after a permanent bounce = %+v, want only full@example.com", sendEv.Records)
	}
	var sm struct {
		NotificationID string `json:"notification_id"`
	}
	_ = json.Unmarshal([]byte(sendEv.Records[0].Body), &sm)
	ds, _, err := w.Env.Store.ListDeliveries(ctx, sm.NotificationID, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	skipped := false
	for _, d := range ds {
		if d.Status == notify.DeliverySkipped && d.Reason == notify.ReasonSuppressed {
			skipped = true
		}
	}
	if !skipped {
		t.Fatalf("deliveries %+v: want gone@example.com SKIPPED suppressed", ds)
	}
}

// TestInvoke runs one function on one event file, for `make invoke FN=send EVENT=events/…`:
// SQS events have their bodies put on the queue first, so the receipt handles are real.
func TestInvoke(t *testing.T) {
	fn, file := os.Getenv("HERALD_INVOKE_FN"), os.Getenv("HERALD_INVOKE_EVENT")
	if fn == "" {
		t.Skip("`make invoke FN=<function> EVENT=<file>` runs this")
	}
	if os.Getenv("HERALD_DYNAMODB_ENDPOINT") == "" || rie() == "" {
		t.Skip("needs aws-lambda-rie and DynamoDB Local")
	}
	awsenvtest.EventsDir = "../"
	w := awsenvtest.Setup(t)
	f := start(t, w, fn)
	var out any
	var d time.Duration
	if fn == "api" || fn == "admin" { // HTTP API functions
		var req events.APIGatewayV2HTTPRequest
		_ = json.Unmarshal(awsenvtest.Fixture(t, file), &req)
		out, d = invoke[events.APIGatewayV2HTTPResponse](f, req)
	} else {
		out, d = invoke[events.SQSEventResponse](f, w.EnqueueFixture(file))
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	fmt.Printf("%s\n(%v)\n--- function log ---\n%s", b, d.Round(time.Millisecond), f.logs)
}
