// Package functions_test runs the built function binaries under the AWS Lambda Runtime Interface
// Emulator (aws-lambda-rie) with the envelopes in events/, on DynamoDB Local and the SQS fake.
package functions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"herald/internal/awsenv"
	"herald/internal/awsenv/awsenvtest"
	"herald/internal/campaign"
	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/s3/s3fake"
)

// binDir holds one binary per function: $HERALD_FUNCTIONS_BIN (`make test` builds them once,
// see the test-binaries target), or a temporary directory TestMain builds them into.
var binDir string

func TestMain(m *testing.M) {
	code := func() int {
		if os.Getenv("HERALD_DYNAMODB_ENDPOINT") == "" || rie() == "" {
			return m.Run() // the tests skip with a message
		}
		if binDir = os.Getenv("HERALD_FUNCTIONS_BIN"); binDir == "" {
			dir, err := os.MkdirTemp("", "herald-fn-")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(dir)
			binDir = dir
			// One go build for every function (the linker runs in parallel), with the settings
			// go test compiles with, so every package comes from the build cache: no -trimpath,
			// no CGO_ENABLED or GOARCH change (the release build, make build-lambda, has those).
			// -s -w changes no compile and links faster.
			cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-ldflags=-s -w", "-o", dir+"/", "./...")
			if b, err := cmd.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "build functions: %v\n%s", err, b)
				return 1
			}
		}
		if err := haveEveryFunction(binDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// haveEveryFunction checks dir holds a binary for every functions/<name>.
func haveEveryFunction(dir string) error {
	mains, err := filepath.Glob("*/main.go")
	if err != nil || len(mains) == 0 {
		return fmt.Errorf("no functions/*/main.go found (%v)", err)
	}
	for _, m := range mains {
		if name := filepath.Dir(m); !fileExists(filepath.Join(dir, name)) {
			return fmt.Errorf("%s has no %s binary: build it with `make test-binaries` or unset HERALD_FUNCTIONS_BIN", dir, name)
		}
	}
	return nil
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

// TestBinariesUnderEmulator runs every function binary on its envelopes in events/<function>/,
// each stage on the messages the stage before really produced (the fixtures are checked against
// them), and checks what each answered and did.
func TestBinariesUnderEmulator(t *testing.T) {
	if os.Getenv("HERALD_DYNAMODB_ENDPOINT") == "" || rie() == "" {
		t.Skip("needs aws-lambda-rie and DynamoDB Local: `make test` installs the one and starts the other")
	}
	awsenvtest.EventsDir = "../events/"
	w := awsenvtest.Setup(t)
	ctx := context.Background()
	orderID := notify.NotificationIDFor("demo", "order-2002-shipped", time.Now())

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

	// prepare: the fixture's first message is the one ingest enqueued; the second names a
	// notification that does not exist and is reported failed (and dead-lettered as invalid).
	prepare, send := start(t, w, "prepare"), start(t, w, "send")
	sameAsFixture(t, drain(t, w, "prepare-realtime"), "prepare/sqs-prepare-realtime-with-unknown.json", 0)
	ev = w.EnqueueFixture("prepare/sqs-prepare-realtime-with-unknown.json")
	resp, _ = invoke[events.SQSEventResponse](prepare, ev)
	wantFailed(t, "prepare", resp, ev, `"n_0000000000000000000000unkn"`, prepare)
	wantDeadLetter(t, w, "prepare-realtime-dlq", notify.EINVALID)
	wantDeadLetterEvent(t, w, "prepare-realtime")

	// send: the fixture's batch is the one prepare enqueued; fed twice it delivers once, and the
	// undecodable message beside it is reported failed both times.
	sameAsFixture(t, drain(t, w, "send-realtime"), "send/sqs-send-realtime-with-poison.json", 0)
	ev = w.EnqueueFixture("send/sqs-send-realtime-with-poison.json")
	for range 2 {
		resp, _ = invoke[events.SQSEventResponse](send, ev)
		wantFailed(t, "send", resp, ev, `"notification_id": 2002`, send)
	}
	if n := len(w.Sandbox.Recorder.List("fcm", "fcm-carol-direct-0001")); n != 1 {
		t.Fatalf("delivered %d times, want 1\n%s", n, send.logs)
	}

	// record: the fixture's message is what send enqueued; two for one notification in a batch
	// are looked at once, one for an unknown notification is reported failed, and the
	// notification ends SENT.
	record := start(t, w, "record")
	sameAsFixture(t, drain(t, w, "record-realtime"), "record/sqs-record-realtime-with-unknown.json", 0)
	ev = w.EnqueueFixture("record/sqs-record-realtime-with-unknown.json")
	resp, _ = invoke[events.SQSEventResponse](record, ev)
	wantFailed(t, "record", resp, ev, `"n_0000000000000000000000unkn"`, record)
	if n, err := w.Env.Store.GetNotification(ctx, orderID); err != nil || n.Status != notify.StatusSent {
		t.Fatalf("notification after record: %+v %v, want SENT\n%s", n, err, record.logs)
	}

	// cleanup: a dead token registered before the send that found it dead is removed, a dead
	// mailbox is suppressed, and a message of the wrong shape is reported failed.
	registered := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC) // before the fixture's seen_before
	if err := w.Env.Store.PutDevice(ctx, notify.Device{UserID: "dave", Token: "fcm-dave-unregistered-0001", App: "default",
		Platform: notify.PlatformFCM, Environment: "production", UpdatedAt: registered}); err != nil {
		t.Fatal(err)
	}
	cleanup := start(t, w, "cleanup")
	ev = w.EnqueueFixture("cleanup/sqs-cleanup-with-poison.json")
	resp, _ = invoke[events.SQSEventResponse](cleanup, ev)
	wantFailed(t, "cleanup", resp, ev, `{"dead_tokens": {`, cleanup)
	if ds, err := w.Env.Store.ListDevices(ctx, []string{"dave"}); err != nil || len(ds["dave"]) != 0 {
		t.Fatalf("dave's devices after cleanup: %+v %v, want none\n%s", ds, err, cleanup.logs)
	}
	gone := notify.AddressKey(notify.ChannelEmail, "gone-mailbox@example.com")
	if sup, err := w.Env.Store.Suppressed(ctx, []string{gone}); err != nil || sup[gone].Reason != notify.ReasonBounced {
		t.Fatalf("suppressions after cleanup: %+v %v, want gone-mailbox@example.com bounced\n%s", sup, err, cleanup.logs)
	}

	// campaign: the state machine's task inputs, each step's output the next step's input (as
	// the fixtures show it), and an unknown step failing the task.
	campaignSteps(t, w, start(t, w, "campaign"), prepare, send)
	// alerts: a dead letter's operator event, in its EventBridge envelope, becomes one post on the
	// (sandbox's) Slack webhook naming the queue and the reason.
	aw := *w
	aw.Vars = maps.Clone(w.Vars)
	aw.Vars[awsenv.EnvConfig] += "alerts: {slack: {webhook_url: " + strconv.Quote(w.Sandbox.SlackWebhookURL()) + "}}\n"
	alerts := start(t, &aw, "alerts")
	var bridged events.EventBridgeEvent
	if err := json.Unmarshal(awsenvtest.Fixture(t, "alerts/eventbridge-message-dead-lettered.json"), &bridged); err != nil {
		t.Fatal(err)
	}
	invoke[json.RawMessage](alerts, bridged)
	if posts := w.Sandbox.SlackPosts(); len(posts) != 1 || !strings.Contains(posts[0].Text, "dead-lettered on `send-realtime`: send: body is not a send batch") {
		t.Fatalf("slack posts %+v, want one naming send-realtime and its reason\n%s", posts, alerts.logs)
	}

	streamSteps(t, w)
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
	_ = json.Unmarshal(awsenvtest.Fixture(t, "admin/get-queues-iam.json"), &req)
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

	// export: the job the fixture names — the order's deliveries — is built into the exports
	// bucket (a multipart upload, completed whole) and DONE; the message of the wrong shape is
	// reported failed.
	s3 := s3fake.New()
	s3srv := httptest.NewServer(s3)
	t.Cleanup(s3srv.Close)
	t.Setenv("HERALD_EXPORTS_BUCKET", "herald-test-exports")
	t.Setenv("AWS_ENDPOINT_URL_S3", s3srv.URL)
	for _, q := range []string{"export-dlq", "export"} {
		if _, err := w.SQS.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("herald-test-" + q)}); err != nil {
			t.Fatal(err)
		}
	}
	const exportID = "x_0000000000000000000000rie1"
	if _, _, err := w.Env.Store.CreateExport(ctx, notify.ExportJob{ID: exportID, Service: "demo", Kind: notify.ExportDeliveries,
		Format: notify.ExportCSV, Filter: notify.ExportFilter{NotificationID: orderID}}); err != nil {
		t.Fatal(err)
	}
	exp := start(t, w, "export")
	ev = w.EnqueueFixture("export/sqs-export-with-poison.json")
	resp, _ = invoke[events.SQSEventResponse](exp, ev)
	wantFailed(t, "export", resp, ev, `{"export": 1}`, exp)
	job, err := w.Env.Store.GetExport(ctx, exportID)
	if err != nil || job.Status != notify.ExportDone || job.Rows == 0 {
		t.Fatalf("export job %+v %v, want DONE with rows\n%s", job, err, exp.logs)
	}
	file, ok := s3.Object("herald-test-exports", "exports/"+exportID+".csv")
	if !ok || strings.Count(file, "\n") != int(job.Rows)+1 || !strings.Contains(file, orderID) || s3.Uploads() != 0 {
		t.Fatalf("export file %q (%v), %d open uploads, want a header and %d rows", file, ok, s3.Uploads(), job.Rows)
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

// drain takes every visible message off queue, deletes it, and returns the bodies.
func drain(t *testing.T, w *awsenvtest.World, queue string) []string {
	t.Helper()
	var bodies []string
	for {
		out, err := w.SQS.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{
			QueueUrl: aws.String(w.URLBase + queue), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return bodies
		}
		for _, m := range out.Messages {
			bodies = append(bodies, *m.Body)
			if _, err := w.SQS.DeleteMessage(context.Background(), &awssqs.DeleteMessageInput{
				QueueUrl: aws.String(w.URLBase + queue), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// sameAsFixture checks that the stage before really produced the body of record i of an events/
// file: every body in got must be it, and there must be at least one.
func sameAsFixture(t *testing.T, got []string, file string, i int) {
	t.Helper()
	var ev events.SQSEvent
	if err := json.Unmarshal(awsenvtest.Fixture(t, file), &ev); err != nil {
		t.Fatal(err)
	}
	want := ev.Records[i].Body
	if len(got) == 0 {
		t.Fatalf("%s record %d: the stage before enqueued nothing, want %s", file, i, want)
	}
	for _, b := range got {
		if !sameJSON([]byte(b), []byte(want)) {
			t.Fatalf("%s record %d is\n  %s\nbut the stage before enqueued\n  %s", file, i, want, b)
		}
	}
}

// wantFailed checks that the batch response names exactly the records of ev whose body
// contains marker.
func wantFailed(t *testing.T, name string, resp events.SQSEventResponse, ev events.SQSEvent, marker string, f *function) {
	t.Helper()
	var want []string
	for _, r := range ev.Records {
		if strings.Contains(r.Body, marker) {
			want = append(want, r.MessageId)
		}
	}
	got := awsenvtest.FailedIDs(resp)
	slices.Sort(got)
	slices.Sort(want)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("%s batchItemFailures = %v, want %v (the records with %s)\n%s", name, got, want, marker, f.logs)
	}
}

// wantDeadLetter checks that dlq holds a message dead-lettered at once with error code code.
func wantDeadLetter(t *testing.T, w *awsenvtest.World, dlq, code string) {
	t.Helper()
	ev := w.Receive(dlq, 1)
	if len(ev.Records) != 1 {
		t.Fatalf("%s holds %d messages, want 1", dlq, len(ev.Records))
	}
	if got := ev.Records[0].MessageAttributes[pipeline.AttrErrorCode].StringValue; got == nil || *got != code {
		t.Fatalf("%s message attributes %+v, want error code %s", dlq, ev.Records[0].MessageAttributes, code)
	}
}

// wantDeadLetterEvent checks a message_dead_lettered event for queue went on the bus.
func wantDeadLetterEvent(t *testing.T, w *awsenvtest.World, queue string) {
	t.Helper()
	for _, e := range w.Events.Entries() {
		var ev notify.Event
		if e.DetailType == "Message Dead Lettered" && json.Unmarshal([]byte(e.Detail), &ev) == nil && ev.Detail["queue"] == queue {
			return
		}
	}
	t.Fatalf("no Message Dead Lettered event for %s on the bus: %+v", queue, w.Events.Entries())
}

// lambdaError is the body the runtime answers a failed invocation with.
type lambdaError struct {
	ErrorMessage string `json:"errorMessage"`
	ErrorType    string `json:"errorType"`
}

// taskState reads an events/campaign file's state.
func taskState(t *testing.T, file string) campaign.MachineState {
	t.Helper()
	var in awsenv.CampaignEvent
	if err := json.Unmarshal(awsenvtest.Fixture(t, file), &in); err != nil {
		t.Fatal(err)
	}
	return in.State
}

func sameState(a, b campaign.MachineState) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return sameJSON(x, y)
}

// campaignSteps runs a campaign to two devices through the campaign function on the task inputs
// in events/campaign — CheckWindow opens, FetchPage commits the page and answers the prepare
// message the state machine's Map puts on prepare-bulk, SaveCursor finishes — then that message
// (events/prepare/sqs-prepare-bulk-campaign.json) through prepare and send.
func campaignSteps(t *testing.T, w *awsenvtest.World, fn, prepare, send *function) {
	t.Helper()
	ctx := context.Background()
	id := taskState(t, "campaign/check-window.json").CampaignID
	now := time.Now().UTC()
	for i, u := range []string{"erin", "frank"} {
		if err := w.Env.Store.PutDevice(ctx, notify.Device{UserID: u, Token: "fcm-campaign-" + u, App: "default",
			Platform: notify.PlatformFCM, Environment: "production", UpdatedAt: now.Add(time.Duration(i))}); err != nil {
			t.Fatal(err)
		}
	}
	c := &notify.Campaign{ID: id, Service: "demo",
		Notification: notify.Notification{Category: notify.CategoryTransactional, Channels: []notify.Channel{notify.ChannelPush},
			Content: notify.Content{Title: "Spring sale", Body: "Starts now"}},
		Audience: notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceAppDevices, App: "default"}}},
		State:    notify.CampaignScheduled, CreatedAt: now, UpdatedAt: now}
	if _, _, err := w.Env.Store.CreateCampaign(ctx, c); err != nil {
		t.Fatal(err)
	}

	var in awsenv.CampaignEvent
	for _, step := range []struct{ file, next string }{
		{"campaign/check-window.json", "campaign/fetch-page.json"},
		{"campaign/fetch-page.json", "campaign/save-cursor.json"},
	} {
		_ = json.Unmarshal(awsenvtest.Fixture(t, step.file), &in)
		got, _ := invoke[campaign.MachineState](fn, in)
		if want := taskState(t, step.next); !sameState(got, want) {
			t.Fatalf("%s answered %+v, want the state in %s: %+v\n%s", step.file, got, step.next, want, fn.logs)
		}
	}
	_ = json.Unmarshal(awsenvtest.Fixture(t, "campaign/save-cursor.json"), &in)
	if got, _ := invoke[campaign.MachineState](fn, in); !got.Done || len(got.Batches) != 0 {
		t.Fatalf("SaveCursor answered %+v, want done with no batches\n%s", got, fn.logs)
	}
	if got, err := w.Env.Store.GetCampaign(ctx, id); err != nil || !got.State.Final() || got.Cursor.Members != 2 {
		t.Fatalf("campaign after SaveCursor: %+v %v, want ended with 2 members", got, err)
	}
	_ = json.Unmarshal(awsenvtest.Fixture(t, "campaign/unknown-step.json"), &in)
	if got, _ := invoke[lambdaError](fn, in); !strings.Contains(got.ErrorMessage, `unknown campaign step "SendEverything"`) {
		t.Fatalf("unknown step answered %+v, want the task failed naming the step\n%s", got, fn.logs)
	}

	// The Map's message: FetchPage's batch, on prepare-bulk; prepare makes one send batch of
	// both devices, and send delivers it.
	sameAsFixture(t, []string{string(taskState(t, "campaign/save-cursor.json").Batches[0])}, "prepare/sqs-prepare-bulk-campaign.json", 0)
	ev := w.EnqueueFixture("prepare/sqs-prepare-bulk-campaign.json")
	if r, _ := invoke[events.SQSEventResponse](prepare, ev); len(r.BatchItemFailures) != 0 {
		t.Fatalf("prepare (bulk) failures %v\n%s", r.BatchItemFailures, prepare.logs)
	}
	batch := w.Receive("send-bulk", 1)
	if len(batch.Records) != 1 || !strings.Contains(batch.Records[0].Body, `"batch":`) {
		t.Fatalf("send-bulk after prepare: %+v, want one batch with its batch id", batch.Records)
	}
	if r, _ := invoke[events.SQSEventResponse](send, batch); len(r.BatchItemFailures) != 0 {
		t.Fatalf("send (bulk) failures %v\n%s", r.BatchItemFailures, send.logs)
	}
	for _, u := range []string{"erin", "frank"} {
		if n := len(w.Sandbox.Recorder.List("fcm", "fcm-campaign-"+u)); n != 1 {
			t.Fatalf("campaign push to %s delivered %d times, want 1\n%s", u, n, send.logs)
		}
	}
}
