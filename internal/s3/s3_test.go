package s3_test

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"herald/internal/audience"
	"herald/internal/notify"
	"herald/internal/s3"
	"herald/internal/s3/s3fake"
)

const bucket = "herald-test-lists"

func TestOpenReadsTheEventsVersion(t *testing.T) {
	t.Parallel()
	fake := s3fake.New()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	client := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), RetryMaxAttempts: 1})
	objs, err := s3.NewObjects(client, bucket)
	if err != nil {
		t.Fatal(err)
	}
	fake.Put(bucket, "lists/demo/vip.csv", "alice\nbob\n")
	body, err := objs.Open(t.Context(), audience.Object{Key: "lists/demo/vip.csv", ETag: s3fake.ETag("alice\nbob\n")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(body)
	body.Close()
	if string(b) != "alice\nbob\n" {
		t.Fatalf("read %q", b)
	}
	// Overwritten since the event, or deleted: ENOTFOUND, the new version has its own event.
	for _, o := range []audience.Object{
		{Key: "lists/demo/vip.csv", ETag: s3fake.ETag("an older content\n")},
		{Key: "lists/demo/gone.csv", ETag: s3fake.ETag("x\n")},
	} {
		if _, err := objs.Open(t.Context(), o); !notify.IsCode(err, notify.ENOTFOUND) {
			t.Errorf("Open(%+v) = %v, want ENOTFOUND", o, err)
		}
	}
	if _, err := s3.NewObjects(client, ""); err == nil {
		t.Fatal("NewObjects accepted no bucket")
	}
}

func TestObjectsCreated(t *testing.T) {
	t.Parallel()
	// The body of the recorded envelope in events/.
	raw, err := os.ReadFile("../../events/audience/sqs-s3-object-created.json")
	if err != nil {
		t.Fatal(err)
	}
	var env events.SQSEvent
	if err := json.Unmarshal(raw, &env); err != nil || len(env.Records) != 1 {
		t.Fatalf("fixture: %v", err)
	}
	got, err := s3.ObjectsCreated([]byte(env.Records[0].Body), bucket)
	want := []audience.Object{{Key: "lists/demo/spring-vip.csv", ETag: "6b0b8d6f5e4e4f0f9c2f1d1e1a2b3c4d", Size: 36}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ObjectsCreated = %+v, %v; want %+v", got, err, want)
	}

	event := func(bucket, name, key, version string) []byte {
		b, _ := json.Marshal(events.S3Event{Records: []events.S3EventRecord{{EventSource: "aws:s3", EventName: name,
			S3: events.S3Entity{Bucket: events.S3Bucket{Name: bucket}, Object: events.S3Object{Key: key, VersionID: version, ETag: `"abc"`, Size: 3}}}}})
		return b
	}
	got, err = s3.ObjectsCreated(event(bucket, "ObjectCreated:CompleteMultipartUpload", "lists/demo/spring+sale%2B1.csv", "v1"), bucket)
	if want := []audience.Object{{Key: "lists/demo/spring sale+1.csv", VersionID: "v1", ETag: "abc", Size: 3}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("URL-encoded key: %+v, %v; want %+v", got, err, want)
	}
	if got, err := s3.ObjectsCreated([]byte(`{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-05-01T09:00:00.000Z","Bucket":"herald-test-lists"}`), bucket); err != nil || got != nil {
		t.Fatalf("the test event: %+v, %v; want nothing", got, err)
	}
	for name, body := range map[string][]byte{
		"another bucket": event("another-bucket", "ObjectCreated:Put", "lists/demo/x", ""),
		"bad encoding":   event(bucket, "ObjectCreated:Put", "lists/demo/%zz", ""),
		"not S3":         []byte(`{"not": "an s3 event"}`),
		"not JSON":       []byte(`lists/demo/x`),
		// The bucket notifies ObjectCreated only: anything else is not its own.
		"a removal":                   event(bucket, "ObjectRemoved:Delete", "lists/demo/x", ""),
		"another bucket's test event": []byte(`{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-05-01T09:00:00.000Z","Bucket":"someone-else"}`),
	} {
		if _, err := s3.ObjectsCreated(body, bucket); !notify.IsCode(err, notify.EINVALID) {
			t.Errorf("%s: err = %v, want EINVALID", name, err)
		}
	}
}
