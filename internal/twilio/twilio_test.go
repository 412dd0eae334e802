package twilio_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"herald/internal/notify"
	"herald/internal/sandbox"
	"herald/internal/twilio"
)

const (
	testAccount = "AC0123456789abcdef0123456789abcdef"
	testToken   = "0123456789abcdef0123456789abcdef"
)

type fixture struct {
	srv    *sandbox.Server
	sender *twilio.Sender
}

func setup(t *testing.T, edit ...func(*twilio.Config)) fixture {
	t.Helper()
	srv, err := sandbox.Start(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cfg := twilio.Config{AccountSID: testAccount, AuthToken: testToken, From: "+15005550006", BaseURL: srv.URL(), MaxConcurrency: 4}
	for _, e := range edit {
		e(&cfg)
	}
	s, err := twilio.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: idle client connections go before the sandbox closes,
	// which would otherwise wait for a connection dialed but never used.
	t.Cleanup(s.CloseIdleConnections)
	return fixture{srv: srv, sender: s}
}

func sms(id, phone string) notify.OutboundMessage {
	return notify.OutboundMessage{
		DeliveryID: "d_" + id, NotificationID: "n_" + id, Channel: notify.ChannelSMS, Address: phone,
		Content: notify.Content{Title: "Title " + id, Body: "Body " + id},
	}
}

func TestSendRecordsAndAnswersInOrder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	msgs := []notify.OutboundMessage{
		sms("1", "+821012345678"),
		sms("2", "+15005550001"), // invalid number
		sms("3", "+15005550009"), // not a mobile
		sms("4", "+447700900123"),
	}
	msgs[3].Content.Link = "https://example.com/4"
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
	wantBody := map[int]string{0: "Title 1\nBody 1", 3: "Title 4\nBody 4\nhttps://example.com/4"}
	for i, body := range wantBody {
		if res[i].Err != nil || !strings.HasPrefix(res[i].ProviderMessageID, "SM") {
			t.Fatalf("message %d: %+v", i, res[i])
		}
		got := f.srv.Recorder.List("twilio", msgs[i].Address)
		if len(got) != 1 || got[0].Body != body || got[0].MessageID != res[i].ProviderMessageID || got[0].Data["from"] != "+15005550006" {
			t.Errorf("message %d recorded as %+v", i, got)
		}
	}
	for i, code := range map[int]string{1: "21211", 2: "21614"} {
		err := res[i].Err
		if !notify.IsCode(err, notify.EREJECTED) || !strings.Contains(notify.ErrorMessage(err), code) {
			t.Errorf("message %d: %v, want %s with %s in the message", i, err, notify.EREJECTED, code)
		}
		if strings.Contains(err.Error(), msgs[i].Address) {
			t.Errorf("error shows the raw phone: %v", err)
		}
	}
	if got := f.srv.Recorder.Len(); got != 2 {
		t.Errorf("recorded %d, want 2", got)
	}
}

func TestThrottledThenAccepted(t *testing.T) {
	t.Parallel()
	f := setup(t)
	m := []notify.OutboundMessage{sms("t", "+15005554292")} // 429 for two attempts
	for attempt := 1; attempt <= 2; attempt++ {
		res, err := f.sender.Send(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		if !notify.IsCode(res[0].Err, notify.ETHROTTLED) || !strings.Contains(notify.ErrorMessage(res[0].Err), "20429") {
			t.Fatalf("attempt %d: %v, want %s", attempt, res[0].Err, notify.ETHROTTLED)
		}
		if got := notify.RetryAfter(res[0].Err); got.Seconds() != 1 {
			t.Errorf("attempt %d: RetryAfter %v, want 1s", attempt, got)
		}
	}
	res, err := f.sender.Send(t.Context(), m)
	if err != nil || res[0].Err != nil {
		t.Fatalf("attempt 3: %v %v", err, res[0].Err)
	}
	if got := f.srv.Recorder.List("twilio", "+15005554292"); len(got) != 1 {
		t.Errorf("recorded %d, want 1", len(got))
	}
}

func TestWrongCredentialsAreAuthErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]func(*twilio.Config){
		"auth token": func(c *twilio.Config) { c.AuthToken = "invalid0123456789" },
		"api secret": func(c *twilio.Config) {
			c.AuthToken, c.APIKey, c.APISecret = "", "SK0123456789abcdef0123456789abcdef", "invalidsecret"
		},
	}
	for name, edit := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, edit) // the sandbox refuses secrets starting "invalid", as Twilio a wrong one
			res, err := f.sender.Send(t.Context(), []notify.OutboundMessage{sms("w", "+821055556666")})
			if err != nil {
				t.Fatal(err)
			}
			if !notify.IsCode(res[0].Err, notify.EAUTH) || !notify.IsRetryable(res[0].Err) || !strings.Contains(notify.ErrorMessage(res[0].Err), "20003") {
				t.Errorf("got %v, want %s with 20003", res[0].Err, notify.EAUTH)
			}
			if f.srv.Recorder.Len() != 0 {
				t.Errorf("recorded a message sent with wrong credentials")
			}
		})
	}
}

func TestAPIKeyAndMessagingService(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *twilio.Config) {
		c.AuthToken = ""
		c.APIKey, c.APISecret = "SK0123456789abcdef0123456789abcdef", "apisecret"
		c.From, c.MessagingServiceSID = "", "MG0123456789abcdef0123456789abcdef"
	})
	res, err := f.sender.Send(t.Context(), []notify.OutboundMessage{sms("k", "+821098765432")})
	if err != nil || res[0].Err != nil {
		t.Fatalf("send: %v %v", err, res[0].Err)
	}
	got := f.srv.Recorder.List("twilio", "+821098765432")
	if len(got) != 1 || got[0].Data["messaging_service_sid"] != "MG0123456789abcdef0123456789abcdef" || got[0].Data["from"] != "" {
		t.Errorf("recorded %+v", got)
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
	s, err := twilio.New(twilio.Config{AccountSID: testAccount, AuthToken: testToken, From: "+15005550006", BaseURL: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Send(t.Context(), []notify.OutboundMessage{sms("c", "+821011112222")})
	if err != nil {
		t.Fatal(err)
	}
	if !notify.IsCode(res[0].Err, notify.EUNAVAILABLE) {
		t.Errorf("got %v, want %s", res[0].Err, notify.EUNAVAILABLE)
	}
	if strings.Contains(res[0].Err.Error(), "+821011112222") {
		t.Errorf("error shows the raw phone: %v", res[0].Err)
	}
}

func TestSendLimits(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if got := f.sender.MaxBatch(); got != 50 {
		t.Errorf("MaxBatch %d", got)
	}
	if got := f.sender.Provider(); got != notify.ProviderTwilio {
		t.Errorf("Provider %s", got)
	}
	if _, err := f.sender.Send(t.Context(), make([]notify.OutboundMessage, 51)); !notify.IsCode(err, notify.ETOOLARGE) {
		t.Errorf("51 messages: %v, want %s", err, notify.ETOOLARGE)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.sender.Send(ctx, []notify.OutboundMessage{sms("z", "+821033334444")}); !notify.IsCode(err, notify.EUNAVAILABLE) {
		t.Errorf("canceled: %v, want %s", err, notify.EUNAVAILABLE)
	}
	if f.srv.Recorder.Len() != 0 {
		t.Errorf("something was sent")
	}
}

func TestFullBatch(t *testing.T) {
	t.Parallel()
	f := setup(t)
	msgs := make([]notify.OutboundMessage, twilio.MaxBatch)
	for i := range msgs {
		msgs[i] = sms(string(rune('a'+i%26))+strings.Repeat("x", i/26), "+8210555500"+string(rune('0'+i/10))+string(rune('0'+i%10)))
	}
	res, err := f.sender.Send(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.DeliveryID != msgs[i].DeliveryID {
			t.Fatalf("result %d: %+v", i, r)
		}
		if got := f.srv.Recorder.List("twilio", msgs[i].Address); len(got) != 1 || got[0].MessageID != r.ProviderMessageID {
			t.Fatalf("message %d recorded as %+v, answered %s", i, got, r.ProviderMessageID)
		}
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	ok := twilio.Config{AccountSID: testAccount, AuthToken: testToken, From: "+15005550006"}
	tests := []struct {
		name string
		edit func(*twilio.Config)
		want []string
	}{
		{"no account", func(c *twilio.Config) { c.AccountSID = "" }, []string{"AccountSID"}},
		{"no credentials", func(c *twilio.Config) { c.AuthToken = "" }, []string{"AuthToken"}},
		{"token the SDK refuses", func(c *twilio.Config) { c.AuthToken = "sandbox-token" }, []string{"letters and digits"}},
		{"key without secret", func(c *twilio.Config) { c.AuthToken, c.APIKey = "", "SKabc" }, []string{"APISecret"}},
		{"token and key", func(c *twilio.Config) { c.APIKey, c.APISecret = "SKabc", "s" }, []string{"not both"}},
		{"no sender", func(c *twilio.Config) { c.From = "" }, []string{"From or MessagingServiceSID"}},
		{"everything", func(c *twilio.Config) {
			c.MessagingServiceSID, c.BaseURL, c.MaxConcurrency, c.Timeout = "XX1", "localhost:1", -1, -1
		}, []string{"MessagingServiceSID", "BaseURL", "MaxConcurrency", "Timeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := ok
			tt.edit(&c)
			_, err := twilio.New(c)
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
