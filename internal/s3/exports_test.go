package s3_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"herald/internal/notify"
	"herald/internal/s3"
	"herald/internal/s3/s3fake"
)

func exportsOn(t *testing.T) (*s3.Exports, *s3fake.Fake) {
	t.Helper()
	fake := s3fake.New()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	client := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), RetryMaxAttempts: 1})
	x, err := s3.NewExports(client, awss3.NewPresignClient(client), "herald-test-exports")
	if err != nil {
		t.Fatal(err)
	}
	return x, fake
}

// TestExportUploadAppearsOnlyWhenCommitted: the object is a multipart upload across parts; it is
// not there before Commit, is whole after, and an aborted upload leaves nothing.
func TestExportUploadAppearsOnlyWhenCommitted(t *testing.T) {
	t.Parallel()
	x, fake := exportsOn(t)
	obj, err := x.Create(t.Context(), "exports/x_1.csv")
	if err != nil {
		t.Fatal(err)
	}
	row := strings.Repeat("a", 1023) + "\n"
	n := s3.PartSize/len(row) + 10 // two parts
	for range n {
		if _, err := obj.Write([]byte(row)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := fake.Object("herald-test-exports", "exports/x_1.csv"); ok {
		t.Fatal("the object is visible before Commit")
	}
	if err := obj.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, ok := fake.Object("herald-test-exports", "exports/x_1.csv")
	if !ok || len(got) != n*len(row) {
		t.Fatalf("object of %d bytes, want %d", len(got), n*len(row))
	}

	obj, err = x.Create(t.Context(), "exports/x_2.csv")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = obj.Write([]byte("half"))
	if err := obj.Abort(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := fake.Object("herald-test-exports", "exports/x_2.csv"); ok || fake.Uploads() != 0 {
		t.Fatalf("an aborted upload left an object or an open upload (%d)", fake.Uploads())
	}
	if _, err := x.Create(t.Context(), "lists/other.csv"); notify.ErrorCode(err) != notify.EINVALID {
		t.Fatalf("a key outside exports/: %v", err)
	}
}

// TestExportLinkIsPresigned: the link is a SigV4 presigned GetObject of the file, valid the TTL
// asked for but never past the job's retention.
func TestExportLinkIsPresigned(t *testing.T) {
	t.Parallel()
	x, _ := exportsOn(t)
	j := &notify.ExportJob{ID: "x_1", Format: notify.ExportCSV, Object: "exports/x_1.csv", ExpiresAt: time.Now().Add(time.Hour)}
	link, exp, err := x.ExportLink(t.Context(), j, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(u.Path, "/herald-test-exports/exports/x_1.csv") || u.Query().Get("X-Amz-Expires") != "900" ||
		u.Query().Get("X-Amz-Signature") == "" || time.Until(exp) > 15*time.Minute {
		t.Fatalf("link %s expires %v", link, exp)
	}
	res, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	j.ExpiresAt = time.Now().Add(5 * time.Minute)
	link, _, err = x.ExportLink(t.Context(), j, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := url.Parse(link); u.Query().Get("X-Amz-Expires") > "300" {
		t.Fatalf("link outlives the file: %s", link)
	}
}
