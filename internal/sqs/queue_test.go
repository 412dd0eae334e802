package sqs

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"herald/internal/notify"
	"herald/internal/notify/queuetest"
	"herald/internal/sqs/sqsfake"
)

// newClient serves a fresh fake and returns an SDK client pointed at it.
func newClient(t *testing.T, opts ...func(*sqs.Options)) (*sqs.Client, *sqsfake.Server) {
	t.Helper()
	fake := sqsfake.New()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	t.Cleanup(fake.Close) // runs first: ends long polls so that srv.Close need not wait
	transport := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(transport.CloseIdleConnections)
	client := sqs.New(sqs.Options{
		Region:       sqsfake.Region,
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret", ""),
		HTTPClient:   &http.Client{Transport: transport},
	}, opts...)
	return client, fake
}

// setup declares cfgs on a fresh fake and returns a Queue over them.
func setup(t *testing.T, cfgs []notify.QueueConfig, opts ...func(*sqs.Options)) (*Queue, *sqs.Client, *sqsfake.Server) {
	t.Helper()
	client, fake := newClient(t, opts...)
	urls, err := CreateQueues(t.Context(), client, cfgs)
	if err != nil {
		t.Fatalf("CreateQueues: %v", err)
	}
	return New(client, urls), client, fake
}

func TestQueueConformance(t *testing.T) {
	t.Parallel()
	queuetest.Run(t, queuetest.Features{PeekReceives: true, NoOldestAge: true}, func(t *testing.T, cfgs []notify.QueueConfig) notify.Queue {
		q, _, _ := setup(t, cfgs)
		return q
	})
}

var workCfgs = []notify.QueueConfig{{Name: "work", VisibilityTimeout: 30 * time.Second, MaxReceiveCount: 5, DLQ: "work-dlq"}}

func receiveAll(t *testing.T, q *Queue, queue string, n int) []notify.Message {
	t.Helper()
	var got []notify.Message
	seen := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		// A short visibility, counting each message once: a response lost on a loaded machine
		// (the SDK retries the call) brings its messages back instead of hiding them.
		ms, err := q.Receive(t.Context(), queue, 10, 3*time.Second, time.Second)
		if err != nil {
			t.Fatalf("Receive(%s): %v", queue, err)
		}
		for _, m := range ms {
			if !seen[m.ID] {
				seen[m.ID] = true
				got = append(got, m)
			}
		}
	}
	if len(got) != n {
		t.Fatalf("received %d messages from %s, want %d", len(got), queue, n)
	}
	return got
}

func TestSendRetriesFailedEntriesOnce(t *testing.T) {
	t.Parallel()
	q, _, fake := setup(t, workCfgs)
	ctx := t.Context()

	fake.FailEntries("flaky", 1)
	if err := q.Send(ctx, "work", notify.OutMessage{Body: []byte("a")}, notify.OutMessage{Body: []byte("flaky")}); err != nil {
		t.Fatalf("Send with one entry failing once: %v, want it retried", err)
	}
	receiveAll(t, q, "work", 2)

	fake.FailEntries("broken", 2)
	err := q.Send(ctx, "work", notify.OutMessage{Body: []byte("b")}, notify.OutMessage{Body: []byte("broken")}, notify.OutMessage{Body: []byte("c")})
	if !notify.IsCode(err, notify.EUNAVAILABLE) || !strings.Contains(err.Error(), "msgs[1]") || !strings.Contains(err.Error(), "1 of 3") {
		t.Fatalf("Send with an entry failing twice = %v; want EUNAVAILABLE naming msgs[1]", err)
	}
	got := receiveAll(t, q, "work", 2)
	for _, m := range got {
		if string(m.Body) == "broken" {
			t.Errorf("the failed entry arrived")
		}
	}
}

func TestSendSplitsBatchesBySize(t *testing.T) {
	t.Parallel()
	q, _, _ := setup(t, workCfgs)
	big := strings.Repeat("x", 400<<10)
	var msgs []notify.OutMessage
	for i := range 14 {
		body := "small"
		if i%5 == 0 {
			body = big // three of 400 KiB: over 1 MiB in one batch, as the fake enforces
		}
		msgs = append(msgs, notify.OutMessage{Body: []byte(body), Attributes: map[string]string{"i": string(rune('a' + i))}})
	}
	if err := q.Send(t.Context(), "work", msgs...); err != nil {
		t.Fatalf("Send: %v", err)
	}
	receiveAll(t, q, "work", len(msgs))
}

func TestSendRejectsWhatSQSWould(t *testing.T) {
	t.Parallel()
	q, _, _ := setup(t, workCfgs)
	eleven := map[string]string{}
	for i := range 11 {
		eleven[string(rune('a'+i))] = "v"
	}
	for name, c := range map[string]struct {
		m    notify.OutMessage
		code string
	}{
		"empty body":         {notify.OutMessage{}, notify.EINVALID},
		"NUL in body":        {notify.OutMessage{Body: []byte("a\x00b")}, notify.EINVALID},
		"invalid UTF-8":      {notify.OutMessage{Body: []byte{0xff, 0xfe}}, notify.EINVALID},
		"negative delay":     {notify.OutMessage{Body: []byte("x"), Delay: -time.Second}, notify.EINVALID},
		"empty attribute":    {notify.OutMessage{Body: []byte("x"), Attributes: map[string]string{"k": ""}}, notify.EINVALID},
		"bad attribute name": {notify.OutMessage{Body: []byte("x"), Attributes: map[string]string{"AWS.k": "v"}}, notify.EINVALID},
		"11 attributes":      {notify.OutMessage{Body: []byte("x"), Attributes: eleven}, notify.EINVALID},
		"attributes over 1 MiB with the body": {notify.OutMessage{Body: []byte(strings.Repeat("x", 1<<20-10)),
			Attributes: map[string]string{"kind": "push"}}, notify.ETOOLARGE},
	} {
		err := q.Send(t.Context(), "work", notify.OutMessage{Body: []byte("ok")}, c.m)
		if !notify.IsCode(err, c.code) || !strings.Contains(err.Error(), "msgs[1]") {
			t.Errorf("%s: Send = %v, want %s naming msgs[1]", name, err, c.code)
		}
	}
	if s, err := q.Stats(t.Context(), "work"); err != nil || s != (notify.QueueStats{}) {
		t.Fatalf("Stats = %+v, %v; want nothing sent", s, err)
	}
}

func TestDelayRoundsUpAndCaps(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int32{0: 0, time.Millisecond: 1, 1500 * time.Millisecond: 2, 2 * time.Second: 2, 20 * time.Minute: 900} {
		e, _, err := toEntry(0, notify.OutMessage{Body: []byte("x"), Delay: d})
		if err != nil || e.DelaySeconds != want {
			t.Errorf("Delay %s: DelaySeconds %d, %v; want %d", d, e.DelaySeconds, err, want)
		}
	}
}

func TestErrorsTranslated(t *testing.T) {
	t.Parallel()
	q, _, fake := setup(t, workCfgs, func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	ctx := t.Context()
	for _, c := range []struct {
		status int
		code   string
		want   string
	}{
		{400, "RequestThrottled", notify.ETHROTTLED},
		{400, "ThrottlingException", notify.ETHROTTLED},
		{500, "InternalError", notify.EUNAVAILABLE},
		{503, "ServiceUnavailable", notify.EUNAVAILABLE},
		{403, "AccessDeniedException", notify.EAUTH},
		{400, "QueueDoesNotExist", notify.ENOTFOUND},
	} {
		fake.FailNext("ReceiveMessage", 1, c.status, c.code)
		_, err := q.Receive(ctx, "work", 1, 0, 0)
		if !notify.IsCode(err, c.want) || !strings.Contains(err.Error(), "receive from work") {
			t.Errorf("%d %s: Receive = %v, want %s with context", c.status, c.code, err, c.want)
		}
	}

	down := New(sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1"), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret", "")}), map[string]string{"work": "http://127.0.0.1:1/0/work"})
	if err := down.Send(ctx, "work", notify.OutMessage{Body: []byte("x")}); !notify.IsCode(err, notify.EUNAVAILABLE) {
		t.Errorf("Send to an endpoint that refuses connections = %v, want EUNAVAILABLE", err)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	client, _ := newClient(t)
	created, err := CreateQueues(t.Context(), client, workCfgs)
	if err != nil {
		t.Fatal(err)
	}
	urls, err := Resolve(t.Context(), client, []string{"work", "work-dlq"})
	if err != nil || urls["work"] != created["work"] || urls["work-dlq"] != created["work-dlq"] {
		t.Fatalf("Resolve = %v, %v; want %v", urls, err, created)
	}
	_, err = Resolve(t.Context(), client, []string{"work", "nope", "gone"})
	if !notify.IsCode(err, notify.ENOTFOUND) || !strings.Contains(err.Error(), "nope") || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("Resolve of unknown queues = %v, want ENOTFOUND naming both", err)
	}
}

// TestRedriveDirectCopies: copies the glue sends straight to a DLQ have no source queue in
// SQS's eyes; a DLQ with one source sends them there.
func TestRedriveDirectCopies(t *testing.T) {
	t.Parallel()
	q, _, _ := setup(t, workCfgs)
	ctx := t.Context()
	if err := q.Send(ctx, "work-dlq", notify.OutMessage{Body: []byte("copy"), Attributes: map[string]string{"herald-error": "bad"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Redrive(ctx, "work-dlq"); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v; want 1", n, err)
	}
	if m := receiveAll(t, q, "work", 1)[0]; string(m.Body) != "copy" || m.Attributes["herald-error"] != "bad" {
		t.Fatalf("redriven message = %q %v", m.Body, m.Attributes)
	}
}

// TestRedriveSharedDLQ: with two sources, messages go back where they came from; a direct copy
// has nowhere to go, and Redrive says so.
func TestRedriveSharedDLQ(t *testing.T) {
	t.Parallel()
	q, _, _ := setup(t, []notify.QueueConfig{
		{Name: "a", MaxReceiveCount: 1, DLQ: "shared-dlq"},
		{Name: "b", MaxReceiveCount: 1, DLQ: "shared-dlq"},
	})
	ctx := t.Context()
	for _, name := range []string{"a", "b"} {
		if err := q.Send(ctx, name, notify.OutMessage{Body: []byte("from-" + name)}); err != nil {
			t.Fatal(err)
		}
		m := receiveAll(t, q, name, 1)[0]
		if err := q.ChangeVisibility(ctx, name, m.ReceiptHandle, 0); err != nil {
			t.Fatal(err)
		}
		if ms, err := q.Receive(ctx, name, 10, 0, 0); err != nil || len(ms) != 0 { // moves it to the DLQ
			t.Fatalf("Receive past maxReceiveCount = %d, %v", len(ms), err)
		}
	}
	if err := q.Send(ctx, "shared-dlq", notify.OutMessage{Body: []byte("direct")}); err != nil {
		t.Fatal(err)
	}
	n, err := q.Redrive(ctx, "shared-dlq")
	if n != 2 || !notify.IsCode(err, notify.EINTERNAL) {
		t.Fatalf("Redrive = %d, %v; want 2 and an error about the message without a source", n, err)
	}
	for _, name := range []string{"a", "b"} {
		if m := receiveAll(t, q, name, 1)[0]; string(m.Body) != "from-"+name || m.ReceiveCount != 1 {
			t.Errorf("%s got %q (receive count %d) back", name, m.Body, m.ReceiveCount)
		}
	}
}
