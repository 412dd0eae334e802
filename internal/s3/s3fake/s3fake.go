// Package s3fake is an in-memory Amazon S3 serving GetObject and multipart uploads (path-style,
// REST-XML errors) over httptest, so the real aws-sdk-go-v2 client can be tested against it. It
// honours If-Match on the ETag, which it derives from the content, and counts the reads. An
// upload's object appears only when the upload is completed.
package s3fake

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Fake is the service. Its zero value is not usable; call New.
type Fake struct {
	mu      sync.Mutex
	objects map[string]string // "bucket/key" → content
	gets    int
	uploads map[string]map[int]string // upload id → part number → content
	nextID  int
}

// New returns a fake without objects; serve it with httptest.NewServer.
func New() *Fake { return &Fake{objects: map[string]string{}, uploads: map[string]map[int]string{}} }

// Object returns bucket/key's content and whether it exists.
func (f *Fake) Object(bucket, key string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.objects[bucket+"/"+key]
	return c, ok
}

// Uploads is how many multipart uploads are open (neither completed nor aborted).
func (f *Fake) Uploads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.uploads)
}

// multipart serves CreateMultipartUpload, UploadPart, CompleteMultipartUpload and
// AbortMultipartUpload; it reports whether r was one of them.
func (f *Fake) multipart(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	path := strings.TrimPrefix(r.URL.Path, "/")
	w.Header().Set("Content-Type", "application/xml")
	switch {
	case r.Method == http.MethodPost && q.Has("uploads"):
		f.nextID++
		id := fmt.Sprintf("upload-%d", f.nextID)
		f.uploads[id] = map[int]string{}
		bucket, key, _ := strings.Cut(path, "/")
		fmt.Fprintf(w, `<InitiateMultipartUploadResult><Bucket>%s</Bucket><Key>%s</Key><UploadId>%s</UploadId></InitiateMultipartUploadResult>`, bucket, key, id)
	case r.Method == http.MethodPut && q.Has("uploadId"):
		parts, ok := f.uploads[q.Get("uploadId")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `<Error><Code>NoSuchUpload</Code><Message>no such upload</Message></Error>`)
			return true
		}
		var n int
		fmt.Sscan(q.Get("partNumber"), &n)
		b, _ := io.ReadAll(r.Body)
		parts[n] = string(b)
		w.Header().Set("ETag", `"`+ETag(string(b))+`"`)
	case r.Method == http.MethodPost && q.Has("uploadId"):
		parts, ok := f.uploads[q.Get("uploadId")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `<Error><Code>NoSuchUpload</Code><Message>no such upload</Message></Error>`)
			return true
		}
		var sb strings.Builder
		for i := 1; i <= len(parts); i++ {
			sb.WriteString(parts[i])
		}
		f.objects[path] = sb.String()
		delete(f.uploads, q.Get("uploadId"))
		fmt.Fprintf(w, `<CompleteMultipartUploadResult><Key>%s</Key><ETag>"%s"</ETag></CompleteMultipartUploadResult>`, path, ETag(sb.String()))
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		delete(f.uploads, q.Get("uploadId"))
		w.WriteHeader(http.StatusNoContent)
	default:
		return false
	}
	return true
}

// ETag is the ETag the fake gives content (without quotes): its MD5, as S3 does for an object
// uploaded in one part.
func ETag(content string) string {
	sum := md5.Sum([]byte(content))
	return hex.EncodeToString(sum[:])
}

// Put stores content as bucket/key, replacing what was there.
func (f *Fake) Put(bucket, key, content string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects[bucket+"/"+key] = content
}

// Gets is how many GetObject calls were answered.
func (f *Fake) Gets() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets
}

func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.multipart(w, r) {
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, "only GetObject and multipart uploads", http.StatusNotImplemented)
		return
	}
	f.gets++
	body, ok := f.objects[strings.TrimPrefix(r.URL.Path, "/")]
	w.Header().Set("Content-Type", "application/xml")
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>`)
		return
	}
	etag := `"` + ETag(body) + `"`
	if m := r.Header.Get("If-Match"); m != "" && m != etag {
		w.WriteHeader(http.StatusPreconditionFailed)
		fmt.Fprint(w, `<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error>`)
		return
	}
	w.Header().Set("Content-Type", "text/csv")
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	fmt.Fprint(w, body)
}
