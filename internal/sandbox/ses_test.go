package sandbox_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"herald/internal/sandbox"
)

// sesEventForTest is the part of an SES configuration-set event the tests read.
type sesEventForTest struct {
	EventType string `json:"eventType"`
	Mail      struct {
		MessageID        string              `json:"messageId"`
		Source           string              `json:"source"`
		Destination      []string            `json:"destination"`
		HeadersTruncated *bool               `json:"headersTruncated"`
		Timestamp        time.Time           `json:"timestamp"`
		Tags             map[string][]string `json:"tags"`
	} `json:"mail"`
	Bounce *struct {
		BounceType        string `json:"bounceType"`
		BounceSubType     string `json:"bounceSubType"`
		BouncedRecipients []struct {
			EmailAddress, Action, Status, DiagnosticCode string
		} `json:"bouncedRecipients"`
		Timestamp  time.Time `json:"timestamp"`
		FeedbackID string    `json:"feedbackId"`
	} `json:"bounce"`
	Complaint *struct {
		ComplainedRecipients  []struct{ EmailAddress string } `json:"complainedRecipients"`
		ComplaintFeedbackType string                          `json:"complaintFeedbackType"`
		FeedbackID            string                          `json:"feedbackId"`
	} `json:"complaint"`
	Delivery *struct {
		Recipients []string `json:"recipients"`
	} `json:"delivery"`
}

// decodeSESEnvelope decodes body as the Lambda glue will: SNS envelope, then the SES event.
func decodeSESEnvelope(t *testing.T, body []byte) (events.SNSEntity, sesEventForTest) {
	t.Helper()
	var env events.SNSEntity
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("decode SNS envelope: %v\n%s", err, body)
	}
	var ev sesEventForTest
	if err := json.Unmarshal([]byte(env.Message), &ev); err != nil {
		t.Fatalf("decode SES event: %v\n%s", err, env.Message)
	}
	return env, ev
}

func TestSESEventShapes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rcpts := []string{"a@example.com", "b@example.com"}
	tests := []struct {
		kind, bounceType string
		check            func(t *testing.T, ev sesEventForTest)
	}{
		{"Bounce", "Permanent", func(t *testing.T, ev sesEventForTest) {
			if ev.Bounce == nil || ev.Bounce.BounceType != "Permanent" || ev.Bounce.BounceSubType != "General" {
				t.Fatalf("bounce = %+v", ev.Bounce)
			}
			if len(ev.Bounce.BouncedRecipients) != 2 || ev.Bounce.BouncedRecipients[1].EmailAddress != "b@example.com" ||
				ev.Bounce.BouncedRecipients[0].Action != "failed" || ev.Bounce.BouncedRecipients[0].Status != "5.1.1" {
				t.Errorf("bouncedRecipients = %+v", ev.Bounce.BouncedRecipients)
			}
			if !ev.Bounce.Timestamp.Equal(at) || ev.Bounce.FeedbackID == "" {
				t.Errorf("timestamp %v feedbackId %q", ev.Bounce.Timestamp, ev.Bounce.FeedbackID)
			}
		}},
		{"Bounce", "Transient", func(t *testing.T, ev sesEventForTest) {
			if ev.Bounce == nil || ev.Bounce.BounceType != "Transient" || !strings.HasPrefix(ev.Bounce.BouncedRecipients[0].Status, "4.") {
				t.Fatalf("bounce = %+v", ev.Bounce)
			}
		}},
		{"Complaint", "", func(t *testing.T, ev sesEventForTest) {
			if ev.Complaint == nil || ev.Complaint.ComplaintFeedbackType != "abuse" || len(ev.Complaint.ComplainedRecipients) != 2 ||
				ev.Complaint.ComplainedRecipients[0].EmailAddress != "a@example.com" || ev.Bounce != nil {
				t.Fatalf("complaint = %+v, bounce = %+v", ev.Complaint, ev.Bounce)
			}
		}},
		{"Delivery", "", func(t *testing.T, ev sesEventForTest) {
			if ev.Delivery == nil || !slices.Equal(ev.Delivery.Recipients, rcpts) {
				t.Fatalf("delivery = %+v", ev.Delivery)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.kind+tt.bounceType, func(t *testing.T) {
			t.Parallel()
			body := sandbox.SESEvent(tt.kind, tt.bounceType, rcpts, "0100-msg-000000", at)
			if again := sandbox.SESEvent(tt.kind, tt.bounceType, rcpts, "0100-msg-000000", at); !bytes.Equal(body, again) {
				t.Errorf("SESEvent is not deterministic")
			}
			env, ev := decodeSESEnvelope(t, body)
			if env.Type != "Notification" || env.TopicArn != sandbox.SESFeedbackTopicARN || env.SignatureVersion != "1" ||
				env.Signature == "" || env.SigningCertURL == "" || env.UnsubscribeURL == "" || env.MessageID == "" || env.Timestamp.IsZero() {
				t.Errorf("envelope = %+v", env)
			}
			if ev.EventType != tt.kind || ev.Mail.MessageID != "0100-msg-000000" || !slices.Equal(ev.Mail.Destination, rcpts) ||
				ev.Mail.HeadersTruncated == nil || *ev.Mail.HeadersTruncated {
				t.Errorf("event = %+v", ev)
			}
			tt.check(t, ev)
		})
	}
}

func TestSESFeedbackEnvelopeCarriesTags(t *testing.T) {
	t.Parallel()
	f := sandbox.SESFeedback{
		Kind: "Bounce", BounceType: "Permanent", Recipients: []string{"x+bounce@example.com"}, MessageID: "m1",
		At: time.Unix(1700000000, 0), Source: "Herald <no-reply@example.com>", ConfigurationSet: "herald",
		Tags: map[string][]string{"notification_id": {"n_1"}},
	}
	body := f.Envelope()
	if bytes.Contains(body, []byte(`\u003c`)) {
		t.Errorf("envelope escapes HTML: %s", body)
	}
	_, ev := decodeSESEnvelope(t, body)
	if got := ev.Mail.Tags["notification_id"]; !slices.Equal(got, []string{"n_1"}) {
		t.Errorf("mail.tags.notification_id = %v", got)
	}
	if got := ev.Mail.Tags["ses:configuration-set"]; !slices.Equal(got, []string{"herald"}) {
		t.Errorf("mail.tags.ses:configuration-set = %v", got)
	}
	if ev.Mail.Source != "Herald <no-reply@example.com>" {
		t.Errorf("mail.source = %q", ev.Mail.Source)
	}
}

// The SDK path is tested end to end in internal/ses; these check what the SDK never sends.
func TestSESFakeRefusals(t *testing.T) {
	t.Parallel()
	srv, err := sandbox.Start(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	// Its own client, whose idle connections close before the sandbox does (cleanups run last
	// first): Shutdown would otherwise wait for a connection dialed but never used.
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)

	good := `{"FromEmailAddress":"a@example.com","Destination":{"ToAddresses":["b@example.com"]},` +
		`"Content":{"Simple":{"Subject":{"Data":"s"},"Body":{"Text":{"Data":"t"}}}}}`
	tests := []struct {
		name, auth, body string
		status           int
		errorType        string
	}{
		{"unsigned", "", good, 403, "MissingAuthenticationTokenException"},
		{"not JSON", "AWS4-HMAC-SHA256 Credential=x", "{", 400, "BadRequestException"},
		{"raw content", "AWS4-HMAC-SHA256 Credential=x", `{"FromEmailAddress":"a@example.com","Destination":{"ToAddresses":["b@example.com"]},"Content":{"Raw":{"Data":"eA=="}}}`, 400, "BadRequestException"},
		{"no destination", "AWS4-HMAC-SHA256 Credential=x", `{"FromEmailAddress":"a@example.com","Content":{"Simple":{"Subject":{"Data":"s"},"Body":{"Text":{"Data":"t"}}}}}`, 400, "BadRequestException"},
		{"accepted", "AWS4-HMAC-SHA256 Credential=x", good, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest("POST", srv.URL()+"/v2/email/outbound-emails", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.status || resp.Header.Get("X-Amzn-ErrorType") != tt.errorType {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), tt.status, tt.errorType)
			}
		})
	}
}
