package sqs

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/sqs/sqsfake"
)

// mappingEvent receives n messages from url as a Lambda event source mapping does and builds
// the event it would deliver.
func mappingEvent(t *testing.T, client *sqs.Client, url string, n int) events.SQSEvent {
	t.Helper()
	var ev events.SQSEvent
	deadline := time.Now().Add(10 * time.Second)
	for len(ev.Records) < n && time.Now().Before(deadline) {
		out, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		for _, m := range out.Messages {
			r := events.SQSMessage{
				MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
				Md5OfBody: aws.ToString(m.MD5OfBody), Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
				Attributes: m.Attributes, MessageAttributes: map[string]events.SQSMessageAttribute{},
				EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:" + sqsfake.Region + ":" + sqsfake.Account + ":work", AWSRegion: sqsfake.Region,
			}
			for k, v := range m.MessageAttributes {
				r.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue,
					StringListValues: []string{}, BinaryListValues: [][]byte{}}
			}
			ev.Records = append(ev.Records, r)
		}
	}
	if len(ev.Records) != n {
		t.Fatalf("mapping received %d messages, want %d", len(ev.Records), n)
	}
	return ev
}

// invoke runs the glue as the Lambda runtime would: the event as JSON through
// lambda.NewHandler, the response back as JSON.
func invoke(t *testing.T, g *Glue, raw []byte, h pipeline.Handler) events.SQSEventResponse {
	t.Helper()
	handler := lambda.NewHandler(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return g.Handle(ctx, ev, h)
	})
	out, err := handler.Invoke(t.Context(), raw)
	if err != nil {
		t.Fatalf("Invoke: %v (the glue must never fail the whole batch)", err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("response %s: %v", out, err)
	}
	return resp
}

func failedIDs(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	slices.Sort(ids)
	return ids
}

func sortedIDs(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

// logLines decodes JSON log lines.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

const (
	goodBody   = `{"secret":"good-body"}`
	poisonBody = `{"secret":"poison-body"`
	retryBody  = `{"secret":"retry-body"}`
)

// stage fails poison permanently (a malformed body) and retry with a retryable error.
func stage(ctx context.Context, msgs []notify.Message) []pipeline.ItemFailure {
	var out []pipeline.ItemFailure
	for _, m := range msgs {
		switch string(m.Body) {
		case poisonBody:
			out = append(out, pipeline.ItemFailure{MessageID: m.ID, Err: notify.Errorf(notify.EINVALID, "malformed body")})
		case retryBody:
			out = append(out, pipeline.ItemFailure{MessageID: m.ID, Err: notify.Errorf(notify.EUNAVAILABLE, "provider down")})
		}
	}
	return out
}

func TestGlueSettlesBatch(t *testing.T) {
	t.Parallel()
	q, client, _ := setup(t, workCfgs)
	ctx := t.Context()
	attrs := map[string]string{"kind": "prepare"}
	if err := q.Send(ctx, "work",
		notify.OutMessage{Body: []byte(goodBody), GroupID: "svc-a", Attributes: attrs},
		notify.OutMessage{Body: []byte(poisonBody), GroupID: "svc-a", Attributes: attrs},
		notify.OutMessage{Body: []byte(retryBody), GroupID: "svc-b"},
	); err != nil {
		t.Fatal(err)
	}
	ev := mappingEvent(t, client, q.urls["work"], 3)
	byBody := map[string]events.SQSMessage{}
	for _, r := range ev.Records {
		byBody[r.Body] = r
	}
	good, poison, retry := byBody[goodBody], byBody[poisonBody], byBody[retryBody]
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	g := &Glue{Queue: q, QueueName: "work", DLQName: "work-dlq", RetryBase: 2 * time.Second, RetryMax: 8 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	var seen []notify.Message
	settled := time.Now()
	resp := invoke(t, g, raw, func(ctx context.Context, msgs []notify.Message) []pipeline.ItemFailure {
		seen = msgs
		return stage(ctx, msgs)
	})

	if got, want := failedIDs(resp), sortedIDs(poison.MessageId, retry.MessageId); !slices.Equal(got, want) {
		t.Fatalf("BatchItemFailures = %v, want exactly the poison and the retryable message %v", got, want)
	}
	for _, m := range seen {
		if m.ReceiveCount != 1 || m.SentAt.IsZero() || m.ReceiptHandle == "" {
			t.Errorf("stage saw %s with ReceiveCount %d, SentAt %v, receipt %q", m.Body, m.ReceiveCount, m.SentAt, m.ReceiptHandle)
		}
		if string(m.Body) == poisonBody && (m.GroupID != "svc-a" || !maps.Equal(m.Attributes, attrs)) {
			t.Errorf("stage saw poison with GroupID %q, Attributes %v", m.GroupID, m.Attributes)
		}
	}

	// The poison message: a copy with its reason in the DLQ, the original deleted.
	dead := receiveAll(t, q, "work-dlq", 1)[0]
	wantAttrs := map[string]string{"kind": "prepare", pipeline.AttrErrorCode: notify.EINVALID,
		pipeline.AttrErrorReason: "invalid: malformed body", pipeline.AttrSourceQueue: "work", pipeline.AttrReceiveCount: "1"}
	if string(dead.Body) != poisonBody || dead.GroupID != "svc-a" || !maps.Equal(dead.Attributes, wantAttrs) {
		t.Errorf("DLQ holds %q, group %q, attributes %v; want the poison body, svc-a, %v", dead.Body, dead.GroupID, dead.Attributes, wantAttrs)
	}
	if err := q.ChangeVisibility(ctx, "work", poison.ReceiptHandle, time.Minute); !notify.IsCode(err, notify.ENOTFOUND) {
		t.Errorf("ChangeVisibility of the poison original = %v, want ENOTFOUND (deleted)", err)
	}
	// The good message: untouched by the glue (the mapping deletes it), so still in flight under
	// the receipt the mapping got.
	if err := q.ChangeVisibility(ctx, "work", good.ReceiptHandle, time.Minute); err != nil {
		t.Errorf("ChangeVisibility of the good message = %v, want it in flight, untouched", err)
	}
	// The retryable message: back after its 2 s backoff, not before.
	if ms, err := q.Receive(ctx, "work", 10, time.Minute, 0); err != nil || len(ms) != 0 {
		t.Fatalf("right after settling: Receive = %d messages, %v; want none visible", len(ms), err)
	}
	back := receiveAll(t, q, "work", 1)[0]
	if string(back.Body) != retryBody || back.ReceiveCount != 2 {
		t.Fatalf("came back: %q (receive count %d), want the retryable message, second receive", back.Body, back.ReceiveCount)
	}
	if d := time.Since(settled); d < 1900*time.Millisecond {
		t.Errorf("retryable message visible again after %s, before its 2 s backoff", d)
	}

	lines := logLines(t, &logs)
	codes := map[string]string{}
	for _, l := range lines {
		if id, _ := l["message_id"].(string); id != "" {
			codes[id], _ = l["code"].(string)
		}
	}
	if codes[poison.MessageId] != notify.EINVALID || codes[retry.MessageId] != notify.EUNAVAILABLE || len(codes) != 2 {
		t.Errorf("logged message ids and codes %v; want the poison (invalid) and the retryable (unavailable) only", codes)
	}
	for _, body := range []string{"good-body", "poison-body", "retry-body"} {
		if strings.Contains(logs.String(), body) {
			t.Errorf("logs contain a message body (%s):\n%s", body, logs.String())
		}
	}
}

func TestGluePanicFailsEveryRecord(t *testing.T) {
	t.Parallel()
	q, client, _ := setup(t, workCfgs)
	if err := q.Send(t.Context(), "work", notify.OutMessage{Body: []byte("a")}, notify.OutMessage{Body: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	ev := mappingEvent(t, client, q.urls["work"], 2)
	g := &Glue{Queue: q, QueueName: "work", DLQName: "work-dlq", RetryBase: time.Second, RetryMax: time.Second,
		Logger: slog.New(slog.DiscardHandler)}
	resp, err := g.Handle(t.Context(), ev, func(context.Context, []notify.Message) []pipeline.ItemFailure { panic("boom") })
	if err != nil || len(resp.BatchItemFailures) != 2 {
		t.Fatalf("Handle = %v, %v; want both records listed, no error", failedIDs(resp), err)
	}
	for _, m := range receiveAll(t, q, "work", 2) { // retried after the 1 s backoff
		if m.ReceiveCount != 2 {
			t.Errorf("%q: ReceiveCount %d, want 2", m.Body, m.ReceiveCount)
		}
	}
}

// TestGlueDeadLetterFallsBack: when the DLQ copy cannot be sent, the message stays and is tried
// again; it is listed all the same.
func TestGlueDeadLetterFallsBack(t *testing.T) {
	t.Parallel()
	q, client, _ := setup(t, workCfgs)
	if err := q.Send(t.Context(), "work", notify.OutMessage{Body: []byte(poisonBody)}); err != nil {
		t.Fatal(err)
	}
	ev := mappingEvent(t, client, q.urls["work"], 1)
	var logs bytes.Buffer
	g := &Glue{Queue: q, QueueName: "work", DLQName: "no-such-dlq", RetryBase: time.Second, RetryMax: time.Second,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	resp, err := g.Handle(t.Context(), ev, stage)
	if err != nil || !slices.Equal(failedIDs(resp), []string{ev.Records[0].MessageId}) {
		t.Fatalf("Handle = %v, %v; want the poison listed", failedIDs(resp), err)
	}
	if m := receiveAll(t, q, "work", 1)[0]; string(m.Body) != poisonBody || m.ReceiveCount != 2 {
		t.Fatalf("got %q (receive count %d), want the poison message back", m.Body, m.ReceiveCount)
	}
	if !strings.Contains(logs.String(), "dead-letter failed") {
		t.Errorf("no log line about the failed dead-letter:\n%s", logs.String())
	}
}

// TestGlueEnvelope feeds a real SQS event envelope (testdata/sqs-batch.json) through the
// Lambda handler: records decode into messages, and the response names the failed ones.
func TestGlueEnvelope(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/sqs-batch.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	for _, r := range ev.Records { // the envelope's checksums are what SQS (and the fake) compute
		sum := md5.Sum([]byte(r.Body))
		attrs := map[string]sqsfake.AttributeValue{}
		for k, v := range r.MessageAttributes {
			attrs[k] = sqsfake.AttributeValue{DataType: v.DataType, StringValue: v.StringValue}
		}
		if r.Md5OfBody != hex.EncodeToString(sum[:]) || r.Md5OfMessageAttributes != sqsfake.MD5OfAttributes(attrs) {
			t.Errorf("record %s: checksums %s %s do not match its body and attributes", r.MessageId, r.Md5OfBody, r.Md5OfMessageAttributes)
		}
	}

	cfgs := []notify.QueueConfig{{Name: "prepare-realtime", MaxReceiveCount: 5, DLQ: "prepare-realtime-dlq"}}
	q, _, _ := setup(t, cfgs)
	g := &Glue{Queue: q, QueueName: "prepare-realtime", DLQName: "prepare-realtime-dlq", Logger: slog.New(slog.DiscardHandler)}
	var seen []notify.Message
	resp := invoke(t, g, raw, func(ctx context.Context, msgs []notify.Message) []pipeline.ItemFailure {
		seen = msgs
		var out []pipeline.ItemFailure
		for _, m := range msgs {
			var v struct{}
			switch {
			case json.Unmarshal(m.Body, &v) != nil:
				out = append(out, pipeline.ItemFailure{MessageID: m.ID, Err: notify.Wrap(notify.EINVALID, json.Unmarshal(m.Body, &v), "undecodable message body")})
			case m.Attributes["priority"] != "":
				out = append(out, pipeline.ItemFailure{MessageID: m.ID, Err: notify.Errorf(notify.ETHROTTLED, "slow down")})
			}
		}
		return out
	})
	want := []string{"2e1424d4-f796-459a-8184-9c92662be6da", "c80e8021-a70a-42c7-a470-796e1186f753"}
	if got := failedIDs(resp); !slices.Equal(got, want) {
		t.Errorf("BatchItemFailures = %v, want %v", got, want)
	}
	if len(seen) != 3 {
		t.Fatalf("stage saw %d messages, want 3", len(seen))
	}
	m := seen[2]
	wantAttrs := map[string]string{"herald-notification-id": "n_01HZX3K6Q8V2T4Y7B9C1D3E5F9", "priority": "10"}
	if m.ID != want[1] || m.ReceiveCount != 3 || m.GroupID != "svc-a" || !m.SentAt.Equal(time.UnixMilli(1717171717173)) ||
		!strings.HasPrefix(m.ReceiptHandle, "AQEB") || !maps.Equal(m.Attributes, wantAttrs) || !strings.Contains(string(m.Body), `"chunk":2`) {
		t.Errorf("third record became %+v", m)
	}
	if seen[1].Attributes != nil || seen[1].GroupID != "svc-b" {
		t.Errorf("second record: Attributes %v, GroupID %q", seen[1].Attributes, seen[1].GroupID)
	}
	// The poison record's copy reached the DLQ, though the envelope's receipt handles mean
	// nothing to the fake (its Delete and the retry's ChangeVisibility fail, and are logged).
	dead := receiveAll(t, q, "prepare-realtime-dlq", 1)[0]
	if dead.Attributes[pipeline.AttrErrorCode] != notify.EINVALID || dead.Attributes[pipeline.AttrSourceQueue] != "prepare-realtime" || dead.GroupID != "svc-b" {
		t.Errorf("DLQ copy: group %q, attributes %v", dead.GroupID, dead.Attributes)
	}
}

// TestGlueFailsForeignEnvelopes: an event that is not an SQS batch — an SNS or S3 envelope
// (a function subscribed or notified directly), {} or a JSON array — fails the invocation with
// an error naming what it got, and the stage never sees it; an empty Records list is an empty
// batch.
func TestGlueFailsForeignEnvelopes(t *testing.T) {
	t.Parallel()
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	g := &Glue{QueueName: "prepare-realtime", DLQName: "prepare-realtime-dlq", Logger: slog.New(slog.DiscardHandler)}
	called := 0
	handler := lambda.NewHandler(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return g.Handle(ctx, ev, func(context.Context, []notify.Message) []pipeline.ItemFailure {
			called++
			return nil
		})
	})
	for _, c := range []struct {
		name string
		raw  []byte
		want string // in the error
	}{
		{"SNS", read("sns-envelope.json"), `Records[0] has eventSource "aws:sns" (an event from SNS), want "aws:sqs"`},
		{"S3", read("s3-envelope.json"), `Records[0] has eventSource "aws:s3" (an event from S3), want "aws:sqs"`},
		{"EmptyObject", []byte(`{}`), "no Records list"},
		{"Array", []byte(`[]`), "cannot unmarshal array"},
		{"NoMessageID", []byte(`{"Records":[{"eventSource":"aws:sqs","body":"{}"}]}`), "Records[0] has no messageId"},
		{"MixedBatch", []byte(`{"Records":[{"eventSource":"aws:sqs","messageId":"m1","body":"{}"},{"body":"{}"}]}`), "Records[1] has no eventSource"},
	} {
		out, err := handler.Invoke(t.Context(), c.raw)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Invoke = %s, %v; want an error containing %q", c.name, out, err, c.want)
		}
	}
	if called != 0 {
		t.Fatalf("the stage ran %d times on events that are not SQS batches", called)
	}
	out, err := handler.Invoke(t.Context(), []byte(`{"Records":[]}`))
	if err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("empty batch: response %s (%v), want no failures", out, err)
	}
}
