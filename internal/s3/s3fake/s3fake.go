// Package s3fake is an in-memory Amazon S3 serving GetObject (path-style, REST-XML errors) over
// httptest, so the real aws-sdk-go-v2 client can be tested against it. It honours If-Match on
// the ETag, which it derives from the content, and counts the reads.
package s3fake

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// Fake is the service. Its zero value is not usable; call New.
type Fake struct {
	mu      sync.Mutex
	objects map[string]string // "bucket/key" → content
	gets    int
}

// New returns a fake without objects; serve it with httptest.NewServer.
func New() *Fake { return &Fake{objects: map[string]string{}} }

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
	if r.Method != http.MethodGet {
		http.Error(w, "only GetObject", http.StatusNotImplemented)
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
