package awsenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"herald/internal/awsenv"
	"herald/internal/awsenv/awsenvtest"
	"herald/internal/s3"
	"herald/internal/s3/s3fake"
)

// s3Event is the SQS body S3 sends for one created object.
func s3Event(bucket, key, content string) string {
	b, _ := json.Marshal(events.S3Event{Records: []events.S3EventRecord{{
		EventSource: "aws:s3", EventName: "ObjectCreated:Put",
		S3: events.S3Entity{Bucket: events.S3Bucket{Name: bucket},
			Object: events.S3Object{Key: key, Size: int64(len(content)), ETag: s3fake.ETag(content)}},
	}}})
	return string(b)
}

func TestAudienceImportFromS3(t *testing.T) {
	w := awsenvtest.Setup(t)
	ctx := context.Background()
	const bucket = "herald-test-lists"
	t.Setenv(awsenv.EnvAudienceBucket, bucket)
	for _, q := range []string{"audience-dlq", "audience"} {
		if _, err := w.SQS.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("herald-test-" + q)}); err != nil {
			t.Fatal(err)
		}
	}
	fake := s3fake.New()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	im, err := w.Env.AudienceImporter()
	if err != nil {
		t.Fatal(err)
	}
	if im.Objects, err = s3.NewObjects(awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}), bucket); err != nil {
		t.Fatal(err)
	}
	h := w.Env.AudienceHandler(im)
	// invokeNext hands the next message of the audience queue to the handler, as Lambda would.
	invokeNext := func(t *testing.T, ctx context.Context) events.SQSEventResponse {
		t.Helper()
		ev := w.Receive("audience", 1)
		if len(ev.Records) != 1 {
			t.Fatalf("no message on the audience queue")
		}
		resp, err := h(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	deliver := func(t *testing.T, ctx context.Context, body string) events.SQSEventResponse {
		t.Helper()
		if _, err := w.SQS.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(w.URLBase + "audience"), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
		return invokeNext(t, ctx)
	}
	members := func(list string) int64 {
		n, err := w.Env.Store.AppendAudienceList(ctx, list, nil)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The fixture's object: a CSV with a header, a duplicate and a bad line.
	var fixture events.SQSEvent
	if err := json.Unmarshal(awsenvtest.Fixture(t, "audience/sqs-s3-object-created.json"), &fixture); err != nil {
		t.Fatal(err)
	}
	var s3ev events.S3Event
	if err := json.Unmarshal([]byte(fixture.Records[0].Body), &s3ev); err != nil || len(s3ev.Records) != 1 {
		t.Fatalf("fixture body: %v", err)
	}
	small := "user_id,name\nalice,A\nbob,B\nalice,A\nbad id,X\ncarol,C\n"
	key := s3ev.Records[0].S3.Object.Key
	fake.Put(bucket, key, small)
	body := s3Event(bucket, key, small)
	for range 2 { // the second delivery is a redelivery: nothing more is appended
		if r := deliver(t, ctx, body); len(r.BatchItemFailures) != 0 {
			t.Fatalf("failures %v", r.BatchItemFailures)
		}
		if n := members("demo/spring-vip"); n != 3 {
			t.Fatalf("demo/spring-vip has %d members, want 3", n)
		}
	}
	if fake.Gets() != 1 {
		t.Fatalf("object read %d times, want once (the redelivery finds the import done)", fake.Gets())
	}

	// A large object whose invocation runs out of time after a chunk resumes in the next one and
	// ends with every id once.
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "u%05d\n", i%4200)
	}
	big := b.String()
	fake.Put(bucket, "lists/demo/big/part-1", big)
	im.Margin = time.Hour // any deadline is near: stop after the first chunk
	short, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if r := deliver(t, short, s3Event(bucket, "lists/demo/big/part-1", big)); len(r.BatchItemFailures) != 1 {
		t.Fatalf("first invocation: failures %v, want the message retried", r.BatchItemFailures)
	}
	if n := members("demo/big"); n != 1000 {
		t.Fatalf("after the first invocation demo/big has %d members, want one chunk of 1000", n)
	}
	im.Margin = 0
	if r := invokeNext(t, ctx); len(r.BatchItemFailures) != 0 { // the same message, back after its backoff
		t.Fatalf("resumed invocation: failures %v", r.BatchItemFailures)
	}
	if n := members("demo/big"); n != 4200 {
		t.Fatalf("demo/big has %d members, want 4200", n)
	}

	// What can never succeed is dead-lettered at once; the S3 test event is acknowledged.
	for _, bad := range []string{
		s3Event(bucket, "lists/nosuchservice/x", "a\n"),
		s3Event(bucket, "elsewhere/demo/x", "a\n"),
		s3Event("another-bucket", "lists/demo/x", "a\n"),
		`{"not": "an s3 event"}`,
	} {
		if r := deliver(t, ctx, bad); len(r.BatchItemFailures) != 1 {
			t.Fatalf("%s: failures %v, want 1", bad, r.BatchItemFailures)
		}
	}
	if got := len(w.Receive("audience-dlq", 4).Records); got != 4 {
		t.Fatalf("audience-dlq holds %d, want 4", got)
	}
	if r := deliver(t, ctx, `{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-05-01T09:00:00.000Z","Bucket":"herald-test-lists"}`); len(r.BatchItemFailures) != 0 {
		t.Fatalf("test event: failures %v", r.BatchItemFailures)
	}
	// An object replaced after its event: its ETag no longer matches, nothing is imported.
	fake.Put(bucket, "lists/demo/gone", "zed\n")
	stale := s3Event(bucket, "lists/demo/gone", "old content\n")
	if r := deliver(t, ctx, stale); len(r.BatchItemFailures) != 0 {
		t.Fatalf("stale event: failures %v", r.BatchItemFailures)
	}
	if n := members("demo/gone"); n != 0 {
		t.Fatalf("stale event imported %d members", n)
	}
}
