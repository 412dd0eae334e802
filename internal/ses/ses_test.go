package ses_test

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"herald/internal/notify"
	"herald/internal/sandbox"
	"herald/internal/ses"
)

// waitLimit only bounds a broken test; nothing asserts on time.
const waitLimit = 30 * time.Second

// testAWS has explicit credentials, so the SDK never looks at the environment, a profile or IMDS.
func testAWS() *aws.Config {
	return &aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
}

type fixture struct {
	srv      *sandbox.Server
	sender   *ses.Sender
	feedback chan []byte
}

func setup(t *testing.T) fixture {
	t.Helper()
	feedback := make(chan []byte, 64)
	srv, err := sandbox.Start(sandbox.Options{OnBounce: func(env []byte) { feedback <- env }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	s, err := ses.New(t.Context(), ses.Config{
		From: "Herald <no-reply@example.com>", ConfigurationSet: "herald-events",
		Endpoint: srv.URL(), MaxConcurrency: 4, AWS: testAWS(),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: idle client connections go before the sandbox closes,
	// which would otherwise wait for a connection dialed but never used.
	t.Cleanup(s.CloseIdleConnections)
	return fixture{srv: srv, sender: s, feedback: feedback}
}

func email(id, address string) notify.OutboundMessage {
	return notify.OutboundMessage{
		DeliveryID: "d_" + id, NotificationID: "n_" + id, Channel: notify.ChannelEmail, Address: address,
		Content: notify.Content{Title: "Subject " + id, Body: "Body " + id, Link: "https://example.com/" + id},
	}
}

type sesEvent struct {
	EventType string `json:"eventType"`
	Mail      struct {
		MessageID   string              `json:"messageId"`
		Destination []string            `json:"destination"`
		Tags        map[string][]string `json:"tags"`
	} `json:"mail"`
	Bounce *struct {
		BounceType        string `json:"bounceType"`
		BouncedRecipients []struct {
			EmailAddress string `json:"emailAddress"`
		} `json:"bouncedRecipients"`
	} `json:"bounce"`
	Complaint *struct {
		ComplainedRecipients []struct {
			EmailAddress string `json:"emailAddress"`
		} `json:"complainedRecipients"`
	} `json:"complaint"`
}

// nextFeedback decodes the next SNS envelope as the bounce stage will: outer SNS JSON, then the
// SES event in its Message.
func nextFeedback(t *testing.T, ch <-chan []byte) sesEvent {
	t.Helper()
	select {
	case body := <-ch:
		var env events.SNSEntity
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatalf("SNS envelope: %v\n%s", err, body)
		}
		if env.Type != "Notification" || env.TopicArn == "" {
			t.Fatalf("envelope %+v", env)
		}
		var ev sesEvent
		if err := json.Unmarshal([]byte(env.Message), &ev); err != nil {
			t.Fatalf("SES event: %v\n%s", err, env.Message)
		}
		return ev
	case <-time.After(waitLimit):
		t.Fatal("no SES feedback arrived")
		return sesEvent{}
	}
}

func TestSendRecordsAndAnswersInOrder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	msgs := []notify.OutboundMessage{
		email("1", "alice@example.com"),
		email("2", "not-an-address"),
		email("3", "bob@example.com"),
	}
	msgs[2].Content.HTML = "<p>Body 3</p>"
	res, err := f.sender.Send(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(msgs) {
		t.Fatalf("%d results for %d messages", len(res), len(msgs))
	}
	for i, r := range res {
		if r.DeliveryID != msgs[i].DeliveryID {
			t.Errorf("result %d is for %s, want %s", i, r.DeliveryID, msgs[i].DeliveryID)
		}
	}
	for _, i := range []int{0, 2} {
		if res[i].Err != nil || res[i].ProviderMessageID == "" {
			t.Fatalf("message %d: %+v", i, res[i])
		}
		got := f.srv.Recorder.List("ses", msgs[i].Address)
		if len(got) != 1 {
			t.Fatalf("recorded %d for %s", len(got), msgs[i].Address)
		}
		d := got[0]
		wantBody := msgs[i].Content.Body + "\n\n" + msgs[i].Content.Link
		if d.Title != msgs[i].Content.Title || d.Body != wantBody || d.MessageID != res[i].ProviderMessageID {
			t.Errorf("recorded %+v", d)
		}
		if d.Data["tag:notification_id"] != msgs[i].NotificationID || d.Data["tag:delivery_id"] != msgs[i].DeliveryID ||
			d.Data["configuration_set"] != "herald-events" || d.Data["html"] != msgs[i].Content.HTML {
			t.Errorf("recorded data %v", d.Data)
		}
	}
	if !notify.IsCode(res[1].Err, notify.EREJECTED) {
		t.Errorf("invalid address: %v, want %s", res[1].Err, notify.EREJECTED)
	}
	if strings.Contains(res[1].Err.Error(), "not-an-address") || strings.Contains(notify.ErrorMessage(res[1].Err), "not-an-address") {
		t.Errorf("error shows the raw address: %v", res[1].Err)
	}
	if got := f.srv.Recorder.Len(); got != 2 {
		t.Errorf("recorded %d deliveries, want 2", got)
	}
}

func TestFeedback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		address, eventType, bounceType string
	}{
		{"bounce@simulator.amazonses.com", "Bounce", "Permanent"},
		{"carol+bounce@example.com", "Bounce", "Permanent"},
		{"ooto@simulator.amazonses.com", "Bounce", "Transient"},
		{"complaint@simulator.amazonses.com", "Complaint", ""},
		{"dave+complaint@example.com", "Complaint", ""},
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			res, err := f.sender.Send(t.Context(), []notify.OutboundMessage{email("b", tt.address)})
			if err != nil || res[0].Err != nil {
				t.Fatalf("send: %v %v", err, res[0].Err) // SES accepts first; feedback comes later
			}
			ev := nextFeedback(t, f.feedback)
			if ev.EventType != tt.eventType || ev.Mail.MessageID != res[0].ProviderMessageID ||
				!slices.Equal(ev.Mail.Destination, []string{tt.address}) {
				t.Fatalf("event %+v", ev)
			}
			if got := ev.Mail.Tags["delivery_id"]; !slices.Equal(got, []string{"d_b"}) {
				t.Errorf("mail.tags.delivery_id = %v", got)
			}
			var rcpt string
			switch tt.eventType {
			case "Bounce":
				if ev.Bounce == nil || ev.Bounce.BounceType != tt.bounceType || len(ev.Bounce.BouncedRecipients) != 1 {
					t.Fatalf("bounce %+v", ev.Bounce)
				}
				rcpt = ev.Bounce.BouncedRecipients[0].EmailAddress
			case "Complaint":
				if ev.Complaint == nil || len(ev.Complaint.ComplainedRecipients) != 1 {
					t.Fatalf("complaint %+v", ev.Complaint)
				}
				rcpt = ev.Complaint.ComplainedRecipients[0].EmailAddress
			}
			if rcpt != tt.address {
				t.Errorf("feedback names %q, want %q", rcpt, tt.address)
			}
		})
	}
}

func TestNoFeedbackForOrdinaryAddress(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// An ordinary message, then a bounce: if the first produced feedback it would arrive first.
	for _, addr := range []string{"erin@example.com", "bounce@simulator.amazonses.com"} {
		if res, err := f.sender.Send(t.Context(), []notify.OutboundMessage{email("x", addr)}); err != nil || res[0].Err != nil {
			t.Fatalf("send %s: %v %v", addr, err, res[0].Err)
		}
	}
	if ev := nextFeedback(t, f.feedback); !slices.Equal(ev.Mail.Destination, []string{"bounce@simulator.amazonses.com"}) {
		t.Errorf("first feedback is for %v", ev.Mail.Destination)
	}
}

func TestThrottledThenAccepted(t *testing.T) {
	t.Parallel()
	f := setup(t)
	m := []notify.OutboundMessage{email("t", "throttle2@example.com")}
	for attempt := 1; attempt <= 2; attempt++ {
		res, err := f.sender.Send(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		if !notify.IsCode(res[0].Err, notify.ETHROTTLED) || !notify.IsRetryable(res[0].Err) {
			t.Fatalf("attempt %d: %v, want %s (one HTTP attempt each: SDK retries are off)", attempt, res[0].Err, notify.ETHROTTLED)
		}
		if got := notify.RetryAfter(res[0].Err); got != time.Second {
			t.Errorf("attempt %d: RetryAfter %v, want 1s", attempt, got)
		}
	}
	res, err := f.sender.Send(t.Context(), m)
	if err != nil || res[0].Err != nil {
		t.Fatalf("attempt 3: %v %v", err, res[0].Err)
	}
	if got := f.srv.Recorder.List("ses", "throttle2@example.com"); len(got) != 1 {
		t.Errorf("recorded %d, want 1", len(got))
	}
}

func TestUnavailableIsRetryable(t *testing.T) {
	t.Parallel()
	f := setup(t)
	res, err := f.sender.Send(t.Context(), []notify.OutboundMessage{email("u", "unavailable1@example.com")})
	if err != nil {
		t.Fatal(err)
	}
	if !notify.IsCode(res[0].Err, notify.EUNAVAILABLE) {
		t.Errorf("got %v, want %s", res[0].Err, notify.EUNAVAILABLE)
	}
}

func TestUnsignedRequestIsAuthError(t *testing.T) {
	t.Parallel()
	srv, err := sandbox.Start(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	s, err := ses.New(t.Context(), ses.Config{
		From: "no-reply@example.com", Endpoint: srv.URL(),
		AWS: &aws.Config{Region: "us-east-1", Credentials: aws.AnonymousCredentials{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.CloseIdleConnections)
	res, err := s.Send(t.Context(), []notify.OutboundMessage{email("a", "frank@example.com")})
	if err != nil {
		t.Fatal(err)
	}
	if !notify.IsCode(res[0].Err, notify.EAUTH) {
		t.Errorf("got %v, want %s", res[0].Err, notify.EAUTH)
	}
}

func TestConnectionRefusedIsUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	s, err := ses.New(t.Context(), ses.Config{From: "no-reply@example.com", Endpoint: "http://" + addr, AWS: testAWS()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Send(t.Context(), []notify.OutboundMessage{email("c", "gina@example.com")})
	if err != nil {
		t.Fatal(err)
	}
	if !notify.IsCode(res[0].Err, notify.EUNAVAILABLE) {
		t.Errorf("got %v, want %s", res[0].Err, notify.EUNAVAILABLE)
	}
	if strings.Contains(res[0].Err.Error(), "gina@example.com") {
		t.Errorf("error shows the raw address: %v", res[0].Err)
	}
}

func TestSendLimits(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if got := f.sender.MaxBatch(); got != 50 {
		t.Errorf("MaxBatch %d", got)
	}
	if got := f.sender.Provider(); got != notify.ProviderSES {
		t.Errorf("Provider %s", got)
	}
	if _, err := f.sender.Send(t.Context(), make([]notify.OutboundMessage, 51)); !notify.IsCode(err, notify.ETOOLARGE) {
		t.Errorf("51 messages: %v, want %s", err, notify.ETOOLARGE)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.sender.Send(ctx, []notify.OutboundMessage{email("z", "hana@example.com")}); !notify.IsCode(err, notify.EUNAVAILABLE) {
		t.Errorf("canceled: %v, want %s", err, notify.EUNAVAILABLE)
	}
	if f.srv.Recorder.Len() != 0 {
		t.Errorf("something was sent")
	}
}

func TestFullBatch(t *testing.T) {
	t.Parallel()
	f := setup(t)
	msgs := make([]notify.OutboundMessage, ses.MaxBatch)
	for i := range msgs {
		msgs[i] = email(strings.Repeat("x", i+1), "user"+strings.Repeat("x", i+1)+"@example.com")
	}
	res, err := f.sender.Send(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.DeliveryID != msgs[i].DeliveryID {
			t.Fatalf("result %d: %+v", i, r)
		}
		if got := f.srv.Recorder.List("ses", msgs[i].Address); len(got) != 1 || got[0].MessageID != r.ProviderMessageID {
			t.Fatalf("message %d recorded as %+v, answered %s", i, got, r.ProviderMessageID)
		}
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  ses.Config
		want []string
	}{
		{"no from", ses.Config{AWS: testAWS()}, []string{"From is required"}},
		{"bad from", ses.Config{From: "nope", AWS: testAWS()}, []string{"not an email address"}},
		{"everything", ses.Config{From: "nope", Endpoint: "127.0.0.1:9", MaxConcurrency: -1, Timeout: -1, AWS: testAWS()},
			[]string{"not an email address", "Endpoint", "MaxConcurrency", "Timeout"}},
		{"no region", ses.Config{From: "a@example.com", AWS: &aws.Config{Credentials: aws.AnonymousCredentials{}}}, []string{"no region"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ses.New(t.Context(), tt.cfg)
			if err == nil {
				t.Fatal("New accepted an invalid config")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
