// Package s3 reads uploaded audience lists from an Amazon S3 bucket: the ObjectCreated event
// notifications S3 sends for them (through the audience queue), and the objects themselves,
// read with If-Match on the event's ETag so an import resumed later reads the same bytes
// (audience.Objects). The local runtime's counterpart is the HTTP upload route.
package s3

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"herald/internal/audience"
	"herald/internal/awserr"
	"herald/internal/notify"
)

// Getter is the part of the S3 API the objects are read with (*s3.Client).
type Getter interface {
	GetObject(ctx context.Context, in *awss3.GetObjectInput, opts ...func(*awss3.Options)) (*awss3.GetObjectOutput, error)
}

// Objects are the uploaded objects of one bucket.
type Objects struct {
	client Getter
	bucket string
}

var _ audience.Objects = (*Objects)(nil)

// NewObjects returns the objects of bucket, read through client.
func NewObjects(client Getter, bucket string) (*Objects, error) {
	if client == nil || bucket == "" {
		return nil, errors.New("s3: a client and a bucket are required")
	}
	return &Objects{client: client, bucket: bucket}, nil
}

// Bucket is the bucket the objects are in.
func (b *Objects) Bucket() string { return b.bucket }

// Open implements audience.Objects: GetObject of o's version with If-Match on its ETag.
// ENOTFOUND when it is gone (NoSuchKey, NoSuchVersion) or was overwritten (PreconditionFailed);
// other failures carry awserr's codes.
func (b *Objects) Open(ctx context.Context, o audience.Object) (io.ReadCloser, error) {
	in := &awss3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(o.Key)}
	if o.VersionID != "" {
		in.VersionId = aws.String(o.VersionID)
	}
	if o.ETag != "" {
		in.IfMatch = aws.String(`"` + o.ETag + `"`)
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		var api smithy.APIError
		if errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "PreconditionFailed" || api.ErrorCode() == "NoSuchVersion") {
			return nil, notify.Wrap(notify.ENOTFOUND, err, "s3: get %s: %s", o.Key, api.ErrorCode())
		}
		return nil, awserr.Wrap(err, codes, "s3: get %s", o.Key)
	}
	return out.Body, nil
}

// codes are the S3 error codes with a code of their own.
var codes = map[string]string{
	"AccessDenied":          notify.EAUTH,
	"InvalidAccessKeyId":    notify.EAUTH,
	"ExpiredToken":          notify.EAUTH,
	"SlowDown":              notify.ETHROTTLED,
	"ServiceUnavailable":    notify.EUNAVAILABLE,
	"InternalError":         notify.EUNAVAILABLE,
	"NoSuchBucket":          notify.ENOTFOUND,
	"RequestTimeTooSkewed":  notify.EAUTH,
	"SignatureDoesNotMatch": notify.EAUTH,
}

// ObjectsCreated reads an S3 event notification (an SQS message body) for bucket and returns
// the objects it says were created. S3's test event for bucket, sent once when the
// notification is configured, has none. EINVALID — dead-lettered with its reason, never
// acknowledged as nothing to do — for a body that is not an S3 event notification, a test event
// or a record of another bucket, a record of another kind than ObjectCreated (the bucket sends
// only those), or a key that is not URL-encoded.
func ObjectsCreated(body []byte, bucket string) ([]audience.Object, error) {
	var probe struct {
		Event  string `json:"Event"`
		Bucket string `json:"Bucket"`
	}
	if json.Unmarshal(body, &probe) == nil && probe.Event == "s3:TestEvent" {
		if probe.Bucket != bucket {
			return nil, notify.Errorf(notify.EINVALID, "S3 test event for bucket %q; this function imports from %q only", probe.Bucket, bucket)
		}
		return nil, nil
	}
	var ev events.S3Event
	if err := json.Unmarshal(body, &ev); err != nil || len(ev.Records) == 0 {
		return nil, notify.Errorf(notify.EINVALID, "not an S3 event notification")
	}
	var out []audience.Object
	for _, r := range ev.Records {
		if r.S3.Bucket.Name != bucket {
			return nil, notify.Errorf(notify.EINVALID, "event for bucket %q; this function imports from %q only", r.S3.Bucket.Name, bucket)
		}
		if !strings.HasPrefix(r.EventName, "ObjectCreated:") {
			return nil, notify.Errorf(notify.EINVALID, "a %q event; the lists bucket notifies ObjectCreated only", r.EventName)
		}
		o := r.S3.Object
		key, err := url.QueryUnescape(o.Key) // S3 event keys are URL-encoded, spaces as +
		if err != nil {
			return nil, notify.Errorf(notify.EINVALID, "object key %q is not URL-encoded", o.Key)
		}
		out = append(out, audience.Object{Key: key, VersionID: o.VersionID, ETag: strings.Trim(o.ETag, `"`), Size: o.Size})
	}
	return out, nil
}
