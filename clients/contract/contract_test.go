// Package contract is the producer clients' contract suite: each case runs against a real Herald
// — `herald dev`'s runtime for HTTP with an API key, the AWS runtime's functions on DynamoDB
// Local and the SQS fake for the ingest queue — through each client and transport, and prints
// one line per case ("contract: go http send PASS").
package contract

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	herald "herald/clients/go"
	"herald/internal/awsenv/awsenvtest"
	"herald/internal/config"
	"herald/internal/local"
	"herald/internal/notify"
	"herald/internal/pipeline"
)

// report runs a case as a subtest and prints its verdict line.
func report(t *testing.T, client, transport, name string, f func(t *testing.T)) {
	t.Helper()
	ok := t.Run(client+"/"+transport+"/"+name, f)
	verdict := "PASS"
	if !ok {
		verdict = "FAIL"
	}
	fmt.Printf("contract: %-10s %-5s %-40s %s\n", client, transport, name, verdict)
}

func startLocal(t *testing.T) *local.Runtime {
	t.Helper()
	cfg := config.Dev()
	cfg.Retry.Base = config.Duration(100 * time.Millisecond)
	rt, err := local.Start(context.Background(), local.Options{Config: cfg, DataDir: t.TempDir(), Addr: "127.0.0.1:0",
		Logger: slog.New(slog.DiscardHandler), SandboxInMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})
	return rt
}

func pushTo(key, user string) *herald.SendRequest {
	return &herald.SendRequest{IdempotencyKey: key, Channels: []herald.Channel{herald.Push},
		Content: &herald.Content{Title: "Your order shipped", Body: "It is on its way."}, Recipients: []herald.Recipient{{UserID: user}}}
}

// throttleOnce is a proxy in front of Herald that answers the first POST 429 with Retry-After:
// 1 and records every body it passed on.
type throttleOnce struct {
	mu     sync.Mutex
	next   http.Handler
	bodies []string
	hit    time.Time
	again  time.Time
}

func (p *throttleOnce) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(b)))
	p.mu.Lock()
	p.bodies = append(p.bodies, string(b))
	first := len(p.bodies) == 1
	if first {
		p.hit = time.Now()
	} else if p.again.IsZero() {
		p.again = time.Now()
	}
	p.mu.Unlock()
	if first && r.Method == http.MethodPost {
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"code":"throttled","message":"slow down"}}`)
		return
	}
	p.next.ServeHTTP(w, r)
}

// TestContractGoHTTP runs the HTTP cases with the Go client against `herald dev`'s runtime.
func TestContractGoHTTP(t *testing.T) {
	rt := startLocal(t)
	ctx := context.Background()
	c := herald.New(herald.NewHTTP(rt.URL, herald.APIKey("dev-demo-key")), nil)
	if _, err := c.PutDevice(ctx, "mina", "fcm-contract-mina-0001", &herald.DeviceRequest{Platform: "fcm"}); err != nil {
		t.Fatal(err)
	}
	var first *herald.Accepted
	report(t, "go", "http", "send", func(t *testing.T) {
		a, err := c.Send(ctx, pushTo("contract-order-1", "mina"))
		if err != nil || a.Replayed || a.ID != herald.NotificationID("demo", "contract-order-1") {
			t.Fatalf("Send = %+v, %v", a, err)
		}
		first = a
		waitSent(t, c, a.ID)
		if n := len(rt.Sandbox.Recorder.List("fcm", "fcm-contract-mina-0001")); n != 1 {
			t.Fatalf("%d pushes, want 1", n)
		}
	})
	report(t, "go", "http", "batch", func(t *testing.T) {
		got, err := c.SendBatch(ctx, []*herald.SendRequest{pushTo("contract-b-1", "mina"), pushTo("contract-b-2", "mina"), pushTo("contract-b-3", "mina")})
		if err != nil || len(got) != 3 || got[0].ID == got[1].ID {
			t.Fatalf("SendBatch = %+v, %v", got, err)
		}
		for _, a := range got {
			waitSent(t, c, a.ID)
		}
	})
	report(t, "go", "http", "idempotent retry", func(t *testing.T) {
		a, err := c.Send(ctx, pushTo("contract-order-1", "mina"))
		if err != nil || !a.Replayed || first == nil || a.ID != first.ID {
			t.Fatalf("retry = %+v, %v; want the first's id, replayed", a, err)
		}
		time.Sleep(200 * time.Millisecond)
		if n := len(rt.Sandbox.Recorder.List("fcm", "fcm-contract-mina-0001")); n != 4 { // the send and the batch's three
			t.Fatalf("%d pushes after the retry, want 4: it sent again", n)
		}
	})
	report(t, "go", "http", "409 on key reuse", func(t *testing.T) {
		other := pushTo("contract-order-1", "mina")
		other.Content.Body = "Another text."
		_, err := c.Send(ctx, other)
		if !herald.IsCode(err, herald.CodeKeyReused) || herald.FieldOf(err) != "idempotency_key" {
			t.Fatalf("reuse = %v", err)
		}
	})
	report(t, "go", "http", "400 with its field", func(t *testing.T) {
		bad := &herald.SendRequest{IdempotencyKey: "contract-bad-1", Channels: []herald.Channel{herald.Email},
			Content: &herald.Content{Title: "Hi", Body: "x"}, Recipients: []herald.Recipient{{Email: "not-an-address"}}}
		_, err := c.Send(ctx, bad)
		if !herald.IsCode(err, herald.CodeInvalid) || herald.FieldOf(err) != "recipients[0].email" {
			t.Fatalf("bad = %v", err)
		}
	})
	report(t, "go", "http", "429 backoff", func(t *testing.T) {
		u, _ := url.Parse(rt.URL)
		p := &throttleOnce{next: httputil.NewSingleHostReverseProxy(u)}
		front := httptest.NewServer(p)
		defer front.Close()
		tc := herald.New(herald.NewHTTP(front.URL, herald.APIKey("dev-demo-key")), nil)
		a, err := tc.Send(ctx, pushTo("contract-throttled-1", "mina"))
		if err != nil || a.Replayed {
			t.Fatalf("Send through a 429 = %+v, %v", a, err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.bodies) != 2 || p.bodies[0] != p.bodies[1] || p.again.Sub(p.hit) < time.Second {
			t.Fatalf("%d tries, %v apart; want 2 with one body, Retry-After (1 s) apart", len(p.bodies), p.again.Sub(p.hit))
		}
	})
}

func waitSent(t *testing.T, c *herald.Client, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := c.GetNotification(context.Background(), id)
		if err == nil && n.Status == "SENT" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("notification %s: %+v, %v; want SENT", id, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestContractGoSQS runs the SQS case with the Go client against the AWS runtime: a batch with
// one poison entry reaches the ingest queue whole; ingest stores the good requests under the ids
// the client answered and dead-letters only the poison one, with its reason.
func TestContractGoSQS(t *testing.T) {
	w := awsenvtest.Setup(t)
	e := w.Env
	ctx := context.Background()
	report(t, "go", "sqs", "batch with one poison entry", func(t *testing.T) {
		tr := herald.NewSQS(w.SQS, w.URLBase+notify.IngestQueue("demo"), "demo", herald.SQSOptions{})
		defer tr.Close(ctx)
		poison := &herald.SendRequest{IdempotencyKey: "contract-sqs-poison", Channels: []herald.Channel{herald.Email},
			Content: &herald.Content{Title: "Hi", Body: "x"}, Recipients: []herald.Recipient{{Email: "not-an-address"}}}
		got, err := tr.SendBatch(ctx, []*herald.SendRequest{pushTo("contract-sqs-1", "dave"), poison, pushTo("contract-sqs-2", "dave")})
		if err != nil || len(got) != 3 {
			t.Fatalf("SendBatch = %+v, %v: the queue takes all three", got, err)
		}
		ev := w.Receive(notify.IngestQueue("demo"), 3)
		if len(ev.Records) != 3 {
			t.Fatalf("%d messages on the queue, want 3 (one a request)", len(ev.Records))
		}
		r := awsenvtest.Invoke[events.SQSEventResponse](t, e.SQSHandler(e.IngestStage), ev)
		// The poison one alone is settled as failed: its copy goes to the DLQ with its reason.
		if len(r.BatchItemFailures) != 1 || !strings.Contains(bodyOf(ev, r.BatchItemFailures[0].ItemIdentifier), "contract-sqs-poison") {
			t.Fatalf("ingest reported %v, want the poison message alone", awsenvtest.FailedIDs(r))
		}
		for _, i := range []int{0, 2} {
			if _, err := e.Store.GetNotification(ctx, got[i].ID); err != nil {
				t.Fatalf("request %d: %s not stored: %v", i, got[i].ID, err)
			}
		}
		if _, err := e.Store.GetNotification(ctx, got[1].ID); !notify.IsCode(err, notify.ENOTFOUND) {
			t.Fatalf("the poison request was stored: %v", err)
		}
		dl := w.Receive(notify.DLQName(notify.IngestQueue("demo")), 1)
		if len(dl.Records) != 1 {
			t.Fatalf("%d dead letters, want the poison one", len(dl.Records))
		}
		var body herald.SendRequest
		_ = json.Unmarshal([]byte(dl.Records[0].Body), &body)
		code := dl.Records[0].MessageAttributes[pipeline.AttrErrorCode].StringValue
		reason := dl.Records[0].MessageAttributes[pipeline.AttrErrorReason].StringValue
		if body.IdempotencyKey != "contract-sqs-poison" || code == nil || *code != notify.EINVALID || reason == nil || !strings.Contains(*reason, "email") {
			t.Fatalf("dead letter %s: code %v reason %v", dl.Records[0].Body, code, reason)
		}
	})
}

func bodyOf(ev events.SQSEvent, id string) string {
	for _, r := range ev.Records {
		if r.MessageId == id {
			return r.Body
		}
	}
	return ""
}
