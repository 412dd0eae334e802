package s3

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"herald/internal/awserr"
	"herald/internal/export"
	"herald/internal/notify"
)

// Uploader is the part of the S3 API export files are written with (*s3.Client): a multipart
// upload, which makes the object visible only when it is completed — so an export worker that
// crashes mid-file leaves an incomplete upload (removed by the bucket's lifecycle rule), never
// a partial object.
type Uploader interface {
	CreateMultipartUpload(ctx context.Context, in *awss3.CreateMultipartUploadInput, opts ...func(*awss3.Options)) (*awss3.CreateMultipartUploadOutput, error)
	UploadPart(ctx context.Context, in *awss3.UploadPartInput, opts ...func(*awss3.Options)) (*awss3.UploadPartOutput, error)
	CompleteMultipartUpload(ctx context.Context, in *awss3.CompleteMultipartUploadInput, opts ...func(*awss3.Options)) (*awss3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(ctx context.Context, in *awss3.AbortMultipartUploadInput, opts ...func(*awss3.Options)) (*awss3.AbortMultipartUploadOutput, error)
}

// PartSize is the size of each uploaded part but the last (S3's minimum is 5 MiB).
const PartSize = 8 << 20

// Exports are the export files in the exports bucket, under export.Prefix.
type Exports struct {
	client  Uploader
	presign *awss3.PresignClient
	bucket  string
}

var _ export.Files = (*Exports)(nil)

// NewExports returns the export files of bucket. presign may be nil where no link is minted
// (the export worker).
func NewExports(client Uploader, presign *awss3.PresignClient, bucket string) (*Exports, error) {
	if client == nil || bucket == "" {
		return nil, errors.New("s3: exports need a client and a bucket")
	}
	return &Exports{client: client, presign: presign, bucket: bucket}, nil
}

// Create implements export.Files: CreateMultipartUpload; parts go up as PartSize fills.
func (x *Exports) Create(ctx context.Context, key string) (export.Object, error) {
	if !strings.HasPrefix(key, export.Prefix) {
		return nil, notify.Errorf(notify.EINVALID, "s3: export key %q is not under %s", key, export.Prefix)
	}
	out, err := x.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String(x.bucket),
		Key: aws.String(key), ServerSideEncryption: types.ServerSideEncryptionAes256})
	if err != nil {
		return nil, awserr.Wrap(err, codes, "s3: create upload %s", key)
	}
	return &upload{x: x, key: key, id: aws.ToString(out.UploadId), ctx: ctx}, nil
}

// ExportLink presigns GetObject of j's file, valid ttl.
func (x *Exports) ExportLink(ctx context.Context, j *notify.ExportJob, ttl time.Duration) (string, time.Time, error) {
	if x.presign == nil {
		return "", time.Time{}, errors.New("s3: exports have no presigner")
	}
	exp := time.Now().Add(ttl)
	if exp.After(j.ExpiresAt) {
		ttl = time.Until(j.ExpiresAt)
		exp = j.ExpiresAt
	}
	req, err := x.presign.PresignGetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(x.bucket), Key: aws.String(j.Object),
		ResponseContentDisposition: aws.String(`attachment; filename="` + j.ID + "." + string(j.Format) + `"`)},
		awss3.WithPresignExpires(ttl))
	if err != nil {
		return "", time.Time{}, awserr.Wrap(err, codes, "s3: presign %s", j.Object)
	}
	return req.URL, exp, nil
}

// upload is one export file being written.
type upload struct {
	x     *Exports
	key   string
	id    string
	ctx   context.Context
	buf   bytes.Buffer
	parts []types.CompletedPart
}

func (u *upload) Write(p []byte) (int, error) {
	n, _ := u.buf.Write(p)
	for u.buf.Len() >= PartSize {
		if err := u.flush(u.ctx, PartSize); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// flush uploads the next n buffered bytes as a part.
func (u *upload) flush(ctx context.Context, n int) error {
	num := int32(len(u.parts) + 1)
	body := u.buf.Next(n)
	out, err := u.x.client.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String(u.x.bucket), Key: aws.String(u.key),
		UploadId: aws.String(u.id), PartNumber: aws.Int32(num), Body: bytes.NewReader(body)})
	if err != nil {
		return awserr.Wrap(err, codes, "s3: upload part %d of %s", num, u.key)
	}
	u.parts = append(u.parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
	return nil
}

func (u *upload) Commit(ctx context.Context) error {
	if u.buf.Len() > 0 || len(u.parts) == 0 {
		if err := u.flush(ctx, u.buf.Len()); err != nil {
			return err
		}
	}
	_, err := u.x.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String(u.x.bucket),
		Key: aws.String(u.key), UploadId: aws.String(u.id), MultipartUpload: &types.CompletedMultipartUpload{Parts: u.parts}})
	if err != nil {
		return awserr.Wrap(err, codes, "s3: complete upload %s", u.key)
	}
	return nil
}

func (u *upload) Abort(ctx context.Context) error {
	_, err := u.x.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: aws.String(u.x.bucket),
		Key: aws.String(u.key), UploadId: aws.String(u.id)})
	if err != nil {
		return awserr.Wrap(err, codes, "s3: abort upload %s", u.key)
	}
	return nil
}
