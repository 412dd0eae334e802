package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/mail"
	"strings"
	"time"
)

// The SES fake speaks SES v2 SendEmail (restJson1, as aws-sdk-go-v2/service/sesv2 sends it) and
// publishes bounces and complaints the way a configuration-set event destination → SNS topic →
// SQS queue (raw message delivery off) would put them on the queue.

const (
	// SESFeedbackTopicARN is the SNS topic the sandbox's SES feedback claims to come from.
	SESFeedbackTopicARN = "arn:aws:sns:us-east-1:000000000000:herald-sandbox-ses-feedback"
	sesAccountID        = "000000000000"
	sesFeedbackDelay    = 5 * time.Millisecond
	// sesEventSubject is the SNS Subject SES event publishing sets.
	sesEventSubject = "Amazon SES Email Event Notification"
)

// sesSendEmailRequest is the part of a SendEmail body the fake reads. encoding/json matches the
// SDK's field names.
type sesSendEmailRequest struct {
	FromEmailAddress string
	Destination      struct {
		ToAddresses  []string
		CcAddresses  []string
		BccAddresses []string
	}
	Content struct {
		Simple *struct {
			Subject sesContent
			Body    struct {
				Text *sesContent
				Html *sesContent
			}
			Headers []struct{ Name, Value string }
		}
		Raw      json.RawMessage
		Template json.RawMessage
	}
	ConfigurationSetName string
	EmailTags            []struct{ Name, Value string }
}

type sesContent struct {
	Data    string
	Charset string
}

func (s *Server) sesRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v2/email/outbound-emails", s.handleSESSendEmail)
}

func (s *Server) handleSESSendEmail(w http.ResponseWriter, req *http.Request) {
	if s.refused("ses", w) {
		return
	}
	// The SDK always signs; an unsigned request means the caller has no credentials, which real
	// SES refuses too.
	if !strings.HasPrefix(req.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		sesError(w, http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token")
		return
	}
	var in sesSendEmailRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 10<<20)).Decode(&in); err != nil {
		sesError(w, http.StatusBadRequest, "BadRequestException", "Could not parse request body: "+err.Error())
		return
	}
	if _, err := mail.ParseAddress(in.FromEmailAddress); err != nil {
		sesError(w, http.StatusBadRequest, "BadRequestException", "Missing or invalid FromEmailAddress")
		return
	}
	recipients := append(append(append([]string(nil), in.Destination.ToAddresses...), in.Destination.CcAddresses...), in.Destination.BccAddresses...)
	if len(recipients) == 0 {
		sesError(w, http.StatusBadRequest, "BadRequestException", "Missing required field Destination")
		return
	}
	if in.Content.Simple == nil {
		// Herald only sends Simple content; say so rather than record something half-understood.
		sesError(w, http.StatusBadRequest, "BadRequestException", "The sandbox accepts only Simple content")
		return
	}
	simple := in.Content.Simple
	if simple.Subject.Data == "" || (simple.Body.Text == nil && simple.Body.Html == nil) {
		sesError(w, http.StatusBadRequest, "BadRequestException", "Simple content needs a Subject and a Text or Html body")
		return
	}
	headers := map[string]string{}
	for _, h := range simple.Headers {
		headers[h.Name] = h.Value
	}
	// RFC 8058: a one-click POST needs an https URI in List-Unsubscribe to post to.
	if post, ok := headers["List-Unsubscribe-Post"]; ok {
		if post != "List-Unsubscribe=One-Click" || !strings.Contains(headers["List-Unsubscribe"], "<https://") && !strings.Contains(headers["List-Unsubscribe"], "<http://") {
			sesError(w, http.StatusBadRequest, "BadRequestException", "List-Unsubscribe-Post needs the value List-Unsubscribe=One-Click and an http(s) URI in List-Unsubscribe")
			return
		}
	}
	addrs := make([]string, len(recipients))
	for i, r := range recipients {
		a, err := mail.ParseAddress(r)
		if err != nil {
			sesError(w, http.StatusBadRequest, "BadRequestException", "Illegal address")
			return
		}
		addrs[i] = a.Address
	}
	for _, a := range addrs {
		switch kind, fail := s.failNow(a); {
		case fail && kind == "throttle":
			w.Header().Set("Retry-After", "1")
			sesError(w, http.StatusTooManyRequests, "TooManyRequestsException", "Maximum sending rate exceeded.")
			return
		case fail:
			sesError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "Service is unavailable. Please try again later.")
			return
		}
	}

	now := time.Now().UTC()
	id := sesMessageID(now)
	var text, html string
	if simple.Body.Text != nil {
		text = simple.Body.Text.Data
	}
	if simple.Body.Html != nil {
		html = simple.Body.Html.Data
	}
	data := map[string]string{"from": in.FromEmailAddress}
	if in.ConfigurationSetName != "" {
		data["configuration_set"] = in.ConfigurationSetName
	}
	if html != "" {
		data["html"] = html
	}
	tags := map[string][]string{}
	for name, v := range headers {
		data["header:"+name] = v
	}
	for _, t := range in.EmailTags {
		data["tag:"+t.Name] = t.Value
		tags[t.Name] = []string{t.Value}
	}
	for _, a := range addrs {
		d := Delivery{Provider: "ses", Address: a, Title: simple.Subject.Data, Body: text, Data: data, MessageID: id, At: now}
		if err := s.Recorder.Add(d); err != nil {
			s.log.Error("ses record", "err", err)
			sesError(w, http.StatusInternalServerError, "InternalFailure", "The sandbox could not record the message.")
			return
		}
	}

	s.sesPublishFeedback(SESFeedback{
		Recipients:       addrs,
		MessageID:        id,
		SentAt:           now,
		Source:           in.FromEmailAddress,
		Subject:          simple.Subject.Data,
		ConfigurationSet: in.ConfigurationSetName,
		Tags:             tags,
	})

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-RequestId", newUUID())
	_ = json.NewEncoder(w).Encode(map[string]string{"MessageId": id})
}

// sesPublishFeedback schedules one SNS envelope per feedback kind the message's recipients
// trigger, as SES does (one bounce notification may name several recipients).
func (s *Server) sesPublishFeedback(base SESFeedback) {
	if s.opts.OnBounce == nil {
		return
	}
	byKind := map[string][]string{}
	var order []string
	for _, a := range base.Recipients {
		fb := sesFeedback(a)
		if fb == "" {
			continue
		}
		if _, ok := byKind[fb]; !ok {
			order = append(order, fb)
		}
		byKind[fb] = append(byKind[fb], a)
	}
	for _, fb := range order {
		f := base
		f.Kind, f.BounceType, _ = strings.Cut(fb, "/")
		f.Recipients = byKind[fb]
		f.At = base.SentAt.Add(sesFeedbackDelay)
		env := f.Envelope()
		s.later(sesFeedbackDelay, func() { s.opts.OnBounce(env) })
	}
}

func sesError(w http.ResponseWriter, status int, errorType, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", errorType)
	w.Header().Set("X-Amzn-RequestId", newUUID())
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": message})
}

// sesMessageID looks like an SES message id: "0100" + time + a random UUID + "-000000".
func sesMessageID(now time.Time) string {
	return fmt.Sprintf("0100%012x-%s-000000", now.UnixMilli(), newUUID())
}

// uuidString formats b as a version-4 UUID; the fake derives some ids instead of drawing them.
func uuidString(b [16]byte) string {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// SESFeedback describes one SES event — a bounce, complaint or delivery — for Envelope to
// render. Only Kind, Recipients, MessageID and At are needed; the rest default.
type SESFeedback struct {
	Kind             string              // "Bounce", "Complaint" or "Delivery"
	BounceType       string              // Bounce only: "Permanent" (default), "Transient" or "Undetermined"
	Recipients       []string            // the recipients the event is about
	MessageID        string              // the SES message id SendEmail returned
	At               time.Time           // when the feedback happened
	SentAt           time.Time           // mail.timestamp; default At
	Source           string              // FromEmailAddress; default "sender@example.com"
	Subject          string              // commonHeaders.subject
	ConfigurationSet string              // the configuration set the event was published through
	Tags             map[string][]string // the message's EmailTags, as mail.tags carries them
}

// SESEvent returns what arrives on an SQS queue subscribed (raw delivery off) to the SNS topic a
// configuration set publishes kind ("Bounce", "Complaint", "Delivery") events to, for the given
// recipients of messageID. bounceType ("Permanent", "Transient") matters for bounces only. The
// output depends only on the arguments, so fixtures built with it are stable.
func SESEvent(kind, bounceType string, recipients []string, messageID string, at time.Time) []byte {
	return SESFeedback{Kind: kind, BounceType: bounceType, Recipients: recipients, MessageID: messageID, At: at}.Envelope()
}

// SNS envelope and SES event shapes, in the field order AWS writes them.
type (
	snsEnvelope struct {
		Type             string
		MessageId        string
		TopicArn         string
		Subject          string
		Message          string
		Timestamp        string
		SignatureVersion string
		Signature        string
		SigningCertURL   string
		UnsubscribeURL   string
	}
	sesEvent struct {
		EventType string        `json:"eventType"`
		Bounce    *sesBounce    `json:"bounce,omitempty"`
		Complaint *sesComplaint `json:"complaint,omitempty"`
		Delivery  *sesDelivery  `json:"delivery,omitempty"`
		Mail      sesMail       `json:"mail"`
	}
	sesBounce struct {
		BounceType        string                `json:"bounceType"`
		BounceSubType     string                `json:"bounceSubType"`
		BouncedRecipients []sesBouncedRecipient `json:"bouncedRecipients"`
		Timestamp         string                `json:"timestamp"`
		FeedbackID        string                `json:"feedbackId"`
		ReportingMTA      string                `json:"reportingMTA"`
	}
	sesBouncedRecipient struct {
		EmailAddress   string `json:"emailAddress"`
		Action         string `json:"action"`
		Status         string `json:"status"`
		DiagnosticCode string `json:"diagnosticCode"`
	}
	sesComplaint struct {
		ComplainedRecipients  []sesAddress `json:"complainedRecipients"`
		Timestamp             string       `json:"timestamp"`
		FeedbackID            string       `json:"feedbackId"`
		UserAgent             string       `json:"userAgent"`
		ComplaintFeedbackType string       `json:"complaintFeedbackType"`
		ArrivalDate           string       `json:"arrivalDate"`
	}
	sesAddress struct {
		EmailAddress string `json:"emailAddress"`
	}
	sesDelivery struct {
		Timestamp            string   `json:"timestamp"`
		ProcessingTimeMillis int64    `json:"processingTimeMillis"`
		Recipients           []string `json:"recipients"`
		SMTPResponse         string   `json:"smtpResponse"`
		ReportingMTA         string   `json:"reportingMTA"`
	}
	sesMail struct {
		Timestamp        string              `json:"timestamp"`
		Source           string              `json:"source"`
		SourceArn        string              `json:"sourceArn"`
		SendingAccountID string              `json:"sendingAccountId"`
		MessageID        string              `json:"messageId"`
		Destination      []string            `json:"destination"`
		HeadersTruncated bool                `json:"headersTruncated"`
		Headers          []sesHeader         `json:"headers"`
		CommonHeaders    sesCommonHeaders    `json:"commonHeaders"`
		Tags             map[string][]string `json:"tags"`
	}
	sesHeader struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	sesCommonHeaders struct {
		From      []string `json:"from"`
		To        []string `json:"to"`
		MessageID string   `json:"messageId"`
		Subject   string   `json:"subject,omitempty"`
	}
)

// Envelope renders f as the SNS notification JSON an SQS queue receives. Ids, the signature and
// URLs are derived from f, so equal inputs give equal bytes.
func (f SESFeedback) Envelope() []byte {
	if f.SentAt.IsZero() {
		f.SentAt = f.At
	}
	if f.Source == "" {
		f.Source = "sender@example.com"
	}
	seed := sha256.New()
	fmt.Fprintf(seed, "%s\x00%s\x00%s\x00%s\x00%d", f.Kind, f.BounceType, strings.Join(f.Recipients, ","), f.MessageID, f.At.UnixNano())
	h := seed.Sum(nil)
	derive := func(label string) [16]byte {
		x := sha256.Sum256(append([]byte(label), h...))
		return [16]byte(x[:16])
	}
	ts := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	recipients := append([]string{}, f.Recipients...)

	feedbackID := fmt.Sprintf("0100%012x-%s-000000", f.At.UnixMilli(), uuidString(derive("feedback")))
	ev := sesEvent{EventType: f.Kind, Mail: f.mail(recipients, ts)}
	switch f.Kind {
	case "Bounce":
		b := &sesBounce{
			BounceType:    f.BounceType,
			BounceSubType: "General",
			Timestamp:     ts(f.At),
			FeedbackID:    feedbackID,
			ReportingMTA:  "dsn; a8-70.smtp-out.amazonses.com",
		}
		if b.BounceType == "" {
			b.BounceType = "Permanent"
		}
		status, diag := "5.1.1", "smtp; 550 5.1.1 user unknown"
		if b.BounceType == "Transient" {
			status, diag = "4.4.7", "smtp; 421 4.4.7 Message expired: mailbox temporarily unavailable"
		}
		for _, r := range recipients {
			b.BouncedRecipients = append(b.BouncedRecipients, sesBouncedRecipient{EmailAddress: r, Action: "failed", Status: status, DiagnosticCode: diag})
		}
		ev.Bounce = b
	case "Complaint":
		c := &sesComplaint{
			Timestamp:             ts(f.At),
			FeedbackID:            feedbackID,
			UserAgent:             "Amazon SES Mailbox Simulator",
			ComplaintFeedbackType: "abuse",
			ArrivalDate:           ts(f.At),
		}
		for _, r := range recipients {
			c.ComplainedRecipients = append(c.ComplainedRecipients, sesAddress{EmailAddress: r})
		}
		ev.Complaint = c
	case "Delivery":
		ev.Delivery = &sesDelivery{
			Timestamp:            ts(f.At),
			ProcessingTimeMillis: f.At.Sub(f.SentAt).Milliseconds(),
			Recipients:           recipients,
			SMTPResponse:         "250 2.6.0 Message received",
			ReportingMTA:         "a8-70.smtp-out.amazonses.com",
		}
	}

	subUUID := uuidString(derive("subscription"))
	env := snsEnvelope{
		Type:             "Notification",
		MessageId:        uuidString(derive("sns")),
		TopicArn:         SESFeedbackTopicARN,
		Subject:          sesEventSubject,
		Message:          string(marshalNoEscape(ev)),
		Timestamp:        ts(f.At.Add(time.Millisecond)),
		SignatureVersion: "1",
		Signature:        fakeSignature(h),
		SigningCertURL:   "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-" + hex.EncodeToString(h[:16]) + ".pem",
		UnsubscribeURL:   "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=" + SESFeedbackTopicARN + ":" + subUUID,
	}
	return marshalNoEscape(env)
}

func (f SESFeedback) mail(recipients []string, ts func(time.Time) string) sesMail {
	domain := f.Source
	if a, err := mail.ParseAddress(f.Source); err == nil {
		domain = a.Address
	}
	if _, d, ok := strings.Cut(domain, "@"); ok {
		domain = d
	}
	tags := map[string][]string{
		"ses:source-ip":       {"127.0.0.1"},
		"ses:from-domain":     {domain},
		"ses:caller-identity": {"herald-sandbox"},
	}
	if f.ConfigurationSet != "" {
		tags["ses:configuration-set"] = []string{f.ConfigurationSet}
	}
	for k, v := range f.Tags {
		tags[k] = append([]string(nil), v...)
	}
	m := sesMail{
		Timestamp:        ts(f.SentAt),
		Source:           f.Source,
		SourceArn:        "arn:aws:ses:us-east-1:" + sesAccountID + ":identity/" + domain,
		SendingAccountID: sesAccountID,
		MessageID:        f.MessageID,
		Destination:      recipients,
		Headers: []sesHeader{
			{Name: "From", Value: f.Source},
			{Name: "To", Value: strings.Join(recipients, ", ")},
			{Name: "Subject", Value: f.Subject},
			{Name: "MIME-Version", Value: "1.0"},
			{Name: "Content-Type", Value: "multipart/alternative"},
		},
		CommonHeaders: sesCommonHeaders{From: []string{f.Source}, To: recipients, MessageID: f.MessageID, Subject: f.Subject},
		Tags:          tags,
	}
	return m
}

// fakeSignature is 256 bytes (an RSA-2048 signature's size) derived from seed, base64-encoded.
// Nobody can verify it; Herald does not verify SQS-delivered envelopes.
func fakeSignature(seed []byte) string {
	sig := make([]byte, 0, 256)
	for i := uint32(0); len(sig) < 256; i++ {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], i)
		x := sha256.Sum256(append(n[:], seed...))
		sig = append(sig, x[:]...)
	}
	return base64.StdEncoding.EncodeToString(sig[:256])
}

// marshalNoEscape marshals v without HTML escaping, as AWS writes "<" and ">" in sources like
// "Name <a@example.com>".
func marshalNoEscape(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("sandbox: marshal %T: %v", v, err)) // only fixed struct types reach here
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
