package herald

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// fakeHerald answers from a script, one entry per call, and records what it got.
type fakeHerald struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter)
	got     []recorded
}

type recorded struct {
	method, path, auth, body string
	header                   http.Header
}

func (f *fakeHerald) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.got = append(f.got, recorded{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), string(b), r.Header.Clone()})
	var a func(w http.ResponseWriter)
	if len(f.answers) > 0 {
		a, f.answers = f.answers[0], f.answers[1:]
	}
	f.mu.Unlock()
	if a == nil {
		http.Error(w, "unexpected call", http.StatusTeapot)
		return
	}
	a(w)
}

func answer(status int, body string, header ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func start(t *testing.T, answers ...func(w http.ResponseWriter)) (*fakeHerald, *HTTPTransport) {
	t.Helper()
	f := &fakeHerald{answers: answers}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	h := NewHTTP(srv.URL, APIKey("dev-demo-key"))
	h.Retry = Retry{Base: time.Millisecond, Max: 5 * time.Millisecond}
	return f, h
}

func push(key string) *SendRequest {
	return &SendRequest{IdempotencyKey: key, Channels: []Channel{Push}, Content: &Content{Title: "Shipped", Body: "On its way."},
		Recipients: []Recipient{{UserID: "u1"}}}
}

func TestSendRetries429WithTheSameBody(t *testing.T) {
	f, h := start(t,
		answer(429, `{"error":{"code":"throttled","message":"slow down"}}`, "Retry-After", "0"),
		answer(503, `not json`),
		answer(202, `{"id":"n_1","status":"ACCEPTED"}`))
	a, err := h.Send(context.Background(), push("order-1"))
	if err != nil || a.ID != "n_1" || a.Replayed {
		t.Fatalf("Send = %+v, %v", a, err)
	}
	if len(f.got) != 3 || f.got[0].body != f.got[2].body || !strings.Contains(f.got[0].body, `"idempotency_key":"order-1"`) {
		t.Fatalf("calls %+v: want three with one body and its key", f.got)
	}
	if f.got[0].auth != "Bearer dev-demo-key" || f.got[0].path != "/v1/notifications" || f.got[0].method != "POST" {
		t.Fatalf("call %+v", f.got[0])
	}
}

func TestSendReplayedIs200(t *testing.T) {
	_, h := start(t, answer(200, `{"id":"n_1","status":"PROCESSING"}`))
	if a, err := h.Send(context.Background(), push("order-1")); err != nil || !a.Replayed || a.Status != "PROCESSING" {
		t.Fatalf("Send = %+v, %v", a, err)
	}
}

func TestErrorsCarryCodeAndField(t *testing.T) {
	f, h := start(t,
		answer(400, `{"error":{"code":"invalid","message":"not a user id","field":"recipients[0].user_id"}}`),
		answer(409, `{"error":{"code":"idempotency_key_reused","message":"used","field":"idempotency_key"}}`))
	_, err := h.Send(context.Background(), push("k1"))
	var e *Error
	if !errors.As(err, &e) || e.Status != 400 || e.Code != CodeInvalid || e.Field != "recipients[0].user_id" {
		t.Fatalf("400 = %v", err)
	}
	_, err = h.Send(context.Background(), push("k1"))
	if !IsCode(err, CodeKeyReused) || FieldOf(err) != "idempotency_key" {
		t.Fatalf("409 = %v", err)
	}
	if len(f.got) != 2 {
		t.Fatalf("%d calls: a 4xx is never retried", len(f.got))
	}
}

func TestKeyRequiredBeforeAnyCall(t *testing.T) {
	f, h := start(t)
	if _, err := h.Send(context.Background(), push("")); !IsCode(err, CodeInvalid) || FieldOf(err) != "idempotency_key" {
		t.Fatalf("no key = %v", err)
	}
	_, err := h.SendBatch(context.Background(), []*SendRequest{push("a"), push("")})
	if FieldOf(err) != "notifications[1].idempotency_key" {
		t.Fatalf("batch without a key = %v", err)
	}
	if len(f.got) != 0 {
		t.Fatalf("%d calls made for requests without keys", len(f.got))
	}
}

func TestSendBatch(t *testing.T) {
	f, h := start(t, answer(202, `{"notifications":[{"id":"n_a","status":"ACCEPTED"},{"id":"n_b","status":"SCHEDULED"}]}`))
	got, err := h.SendBatch(context.Background(), []*SendRequest{push("a"), push("b")})
	if err != nil || len(got) != 2 || got[1].Status != "SCHEDULED" {
		t.Fatalf("SendBatch = %+v, %v", got, err)
	}
	var body struct {
		Notifications []SendRequest `json:"notifications"`
	}
	if json.Unmarshal([]byte(f.got[0].body), &body) != nil || len(body.Notifications) != 2 || f.got[0].path != "/v1/notifications/batch" {
		t.Fatalf("call %+v", f.got[0])
	}
}

func TestCancelStopsTheBackoff(t *testing.T) {
	f, h := start(t, answer(503, `{"error":{"code":"unavailable","message":"later"}}`, "Retry-After", "30"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := h.Send(ctx, push("k"))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 5*time.Second {
		t.Fatalf("Send = %v after %v: want the context's end, not a 30 s wait", err, time.Since(began))
	}
	if len(f.got) != 1 {
		t.Fatalf("%d calls", len(f.got))
	}
}

func TestSigV4AndJWT(t *testing.T) {
	f, h := start(t, answer(202, `{"id":"n_1","status":"ACCEPTED"}`), answer(200, `{"items":[],"next_cursor":""}`))
	h.Auth = SigV4("ap-northeast-2", aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}, nil
	})))
	if _, err := h.Send(context.Background(), push("k")); err != nil {
		t.Fatal(err)
	}
	a := f.got[0]
	if !strings.HasPrefix(a.auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(a.auth, "/ap-northeast-2/execute-api/aws4_request") ||
		a.header.Get("X-Amz-Date") == "" || a.header.Get("X-Amz-Content-Sha256") == "" && !strings.Contains(a.auth, "SignedHeaders=") {
		t.Fatalf("SigV4 call %+v", a)
	}
	c := New(&HTTPTransport{BaseURL: h.BaseURL, Auth: JWT(func(context.Context) (string, error) { return "eyJ.user.sig", nil })}, nil)
	if _, err := c.ListInbox(context.Background(), "u 1", "", 20); err != nil {
		t.Fatal(err)
	}
	if f.got[1].auth != "Bearer eyJ.user.sig" || f.got[1].path != "/v1/users/u%201/inbox?limit=20" {
		t.Fatalf("inbox call %+v", f.got[1])
	}
}

func TestDeriveKeyAndIDs(t *testing.T) {
	k := DeriveKey("order-1001", "user-7")
	if k != DeriveKey("order-1001", "user-7") || k == DeriveKey("order-1001", "user-8") || len(k) > MaxKey || checkKey(k, "") != nil {
		t.Fatalf("DeriveKey = %q", k)
	}
	if long := DeriveKey(strings.Repeat("x", 400), "u"); len(long) > MaxKey || checkKey(long, "") != nil {
		t.Fatalf("a long key derives %q", long)
	}
	if DeriveKey("", "user-7") != "" || checkKey(DeriveKey("", "user-7"), "") == nil {
		t.Fatal("an empty caller key derives a key")
	}
	if DeriveKey("plain") != "plain" || checkKey(DeriveKey("has space"), "") != nil {
		t.Fatal("a key that fits is kept; one that does not is made to")
	}
	// Herald's own ids for these keys (internal/notify.NotificationIDFor).
	for _, c := range [][3]string{
		{"orders", "order-1001-shipped", "n_q41xs0dbsn3jv1prrbfscfjas8"},
		{"billing", "invoice/42", "n_dsstwd0a6bazzsqc72fz59p9h4"},
		{"demo", "k", "n_fm6bgk7y1t2wzsca9tcjjm6zk0"},
	} {
		if got := NotificationID(c[0], c[1]); got != c[2] {
			t.Errorf("NotificationID(%s, %s) = %s, want %s", c[0], c[1], got, c[2])
		}
	}
}
