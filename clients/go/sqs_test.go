package herald

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// fakeSQS speaks SQS's JSON protocol for SendMessageBatch; fail decides an entry's failure by
// its body (code "" accepts it).
type fakeSQS struct {
	mu    sync.Mutex
	calls [][]fakeEntry
	fail  func(body string, seen int) (code string, senderFault bool)
	seen  map[string]int
}

type fakeEntry struct {
	ID, MessageBody, MessageGroupID string
	Lane                            string
}

func (f *fakeSQS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Amz-Target") != "AmazonSQS.SendMessageBatch" {
		http.Error(w, "unexpected "+r.Header.Get("X-Amz-Target"), http.StatusBadRequest)
		return
	}
	var in struct {
		QueueUrl string
		Entries  []struct {
			Id, MessageBody, MessageGroupId string
			MessageAttributes               map[string]struct{ DataType, StringValue string }
		}
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	type ok struct{ Id, MessageId, MD5OfMessageBody string }
	type failed struct {
		Id, Code, Message string
		SenderFault       bool
	}
	out := struct {
		Successful []ok
		Failed     []failed
	}{Successful: []ok{}, Failed: []failed{}}
	f.mu.Lock()
	var call []fakeEntry
	for _, e := range in.Entries {
		call = append(call, fakeEntry{e.Id, e.MessageBody, e.MessageGroupId, e.MessageAttributes[attrLane].StringValue})
		f.seen[e.MessageBody]++
		if code, sf := f.fail(e.MessageBody, f.seen[e.MessageBody]); code != "" {
			out.Failed = append(out.Failed, failed{e.Id, code, "injected", sf})
			continue
		}
		sum := md5.Sum([]byte(e.MessageBody))
		out.Successful = append(out.Successful, ok{e.Id, fmt.Sprintf("m-%d-%s", len(f.calls), e.Id), hex.EncodeToString(sum[:])})
	}
	f.calls = append(f.calls, call)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(out)
}

func startSQS(t *testing.T, fail func(body string, seen int) (string, bool), o SQSOptions) (*fakeSQS, *SQSTransport) {
	t.Helper()
	if fail == nil {
		fail = func(string, int) (string, bool) { return "", false }
	}
	f := &fakeSQS{fail: fail, seen: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	api := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.AnonymousCredentials{}})
	o.Retry = Retry{Base: time.Millisecond, Max: 5 * time.Millisecond}
	tr := NewSQS(api, srv.URL+"/000000000000/herald-test-ingest-orders", "orders", o)
	t.Cleanup(func() { _ = tr.Close(context.Background()) })
	return f, tr
}

// TestSQSBatchesTenAtATime: 25 concurrent sends are 3 SendMessageBatch calls of at most 10
// messages, each one request with the lane attribute and the service as its group; each send
// answers the id Herald derives from its key.
func TestSQSBatchesTenAtATime(t *testing.T) {
	f, tr := startSQS(t, nil, SQSOptions{FlushInterval: 50 * time.Millisecond})
	var wg sync.WaitGroup
	ids := make([]string, 25)
	errs := make([]error, 25)
	for i := range 25 {
		wg.Go(func() {
			r := push(fmt.Sprintf("k-%02d", i))
			if i == 3 {
				r.Category = Marketing
			}
			a, err := tr.Send(context.Background(), r)
			errs[i] = err
			if a != nil {
				ids[i] = a.ID
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil || ids[i] != NotificationID("orders", fmt.Sprintf("k-%02d", i)) {
			t.Fatalf("send %d: %s, %v (%v)", i, ids[i], err, errors.Unwrap(err))
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	total := 0
	for _, c := range f.calls {
		if len(c) > MaxSQSBatch {
			t.Fatalf("a call of %d entries", len(c))
		}
		for _, e := range c {
			total++
			var r SendRequest
			if json.Unmarshal([]byte(e.MessageBody), &r) != nil || e.MessageGroupID != "orders" {
				t.Fatalf("entry %+v", e)
			}
			if want := map[bool]string{true: "bulk", false: "realtime"}[r.Category == Marketing]; e.Lane != want {
				t.Fatalf("entry %s lane %q, want %s", r.IdempotencyKey, e.Lane, want)
			}
		}
	}
	if total != 25 || len(f.calls) > 5 {
		t.Fatalf("%d entries in %d calls, want 25 in about 3", total, len(f.calls))
	}
}

// TestSQSPartialFailures: a throttled entry is retried alone until it goes; an entry the queue
// refuses as the sender's fault fails alone; the others are sent once.
func TestSQSPartialFailures(t *testing.T) {
	f, tr := startSQS(t, func(body string, seen int) (string, bool) {
		switch {
		case strings.Contains(body, `"throttled"`) && seen < 3:
			return "ThrottlingException", false
		case strings.Contains(body, `"poison"`):
			return "InvalidMessageContents", true
		}
		return "", false
	}, SQSOptions{})
	_, err := tr.SendBatch(context.Background(), []*SendRequest{push("fine"), push("throttled"), push("poison"), push("also-fine")})
	var be *BatchError
	if !asBatch(err, &be) || be.Errs[0] != nil || be.Errs[1] != nil || be.Errs[3] != nil || !IsCode(be.Errs[2], CodeInvalid) {
		t.Fatalf("SendBatch = %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for body, n := range f.seen {
		want := 1
		if strings.Contains(body, `"throttled"`) {
			want = 3
		}
		if n != want {
			t.Errorf("%s sent %d times, want %d", body, n, want)
		}
	}
}

func asBatch(err error, be **BatchError) bool {
	b, ok := err.(*BatchError)
	*be = b
	return ok
}

// TestSQSFullBufferFailsFast: with FailFast, a full buffer refuses a send at once; nothing
// buffered is lost, and Close sends what is buffered.
func TestSQSFullBufferFailsFast(t *testing.T) {
	block := make(chan struct{})
	f := &fakeSQS{fail: func(string, int) (string, bool) { return "", false }, seen: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block; f.ServeHTTP(w, r) }))
	defer srv.Close()
	defer close(block)
	api := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: aws.AnonymousCredentials{}})
	tr := NewSQS(api, srv.URL+"/q", "orders", SQSOptions{MaxBuffered: 2, Concurrency: 1, FlushInterval: time.Millisecond, FailFast: true})
	refused := 0
	for i := range 40 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := tr.Send(ctx, push(fmt.Sprintf("k%d", i)))
		cancel()
		if IsCode(err, CodeTooMany) {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("a full buffer never refused a send")
	}
	if _, err := tr.Send(context.Background(), push("")); FieldOf(err) != "idempotency_key" {
		t.Fatalf("no key = %v", err)
	}
}
