package alimtalk_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"herald/internal/alimtalk"
	"herald/internal/notify"
	"herald/internal/sandbox"
)

const (
	testKey    = "NCSSANDBOXKEY0001"
	testSecret = "sandbox-secret-0123456789"
	testPfID   = "KA01PF26120100000sandbox"
)

type fixture struct {
	srv    *sandbox.Server
	sender *alimtalk.Sender
}

func setup(t *testing.T, edit ...func(*alimtalk.Config)) fixture {
	t.Helper()
	srv, err := sandbox.Start(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	srv.TrustAlimTalkKey(testKey, testSecret)
	cfg := alimtalk.Config{APIKey: testKey, APISecret: testSecret, From: "0212345678", BaseURL: srv.URL(), MaxConcurrency: 4,
		Apps: map[string]alimtalk.App{"default": {SenderKey: testPfID}, "invalidapp": {SenderKey: "invalid-pf"}}}
	for _, e := range edit {
		e(&cfg)
	}
	s, err := alimtalk.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.CloseIdleConnections) // before the sandbox closes (cleanups run last first)
	return fixture{srv: srv, sender: s}
}

func talk(id, phone, template string) notify.OutboundMessage {
	return notify.OutboundMessage{
		DeliveryID: "d_" + id, NotificationID: "n_" + id, Channel: "alimtalk", Address: phone, App: "default",
		Content: notify.Content{Title: "ignored", Data: map[string]string{
			alimtalk.DataTemplate: template, "#{name}": "김하나", "#{order}": id, "push_only": "x",
		}},
	}
}

func TestSendEveryRule(t *testing.T) {
	t.Parallel()
	f := setup(t)
	bad := talk("10", "01012340010", "ORDER_SHIPPED")
	bad.App = "invalidapp" // its pfId contains "invalid": Solapi does not know the channel
	tests := []struct {
		name     string
		msg      notify.OutboundMessage
		code     string // "" sent
		inMsg    string
		recorded string // the number the sandbox recorded, when sent
	}{
		{"accepted, E.164", talk("1", "+821012345678", "ORDER_SHIPPED"), "", "", "01012345678"},
		{"accepted, dashed", talk("2", "010-2222-3333", "ORDER_SHIPPED"), "", "", "01022223333"},
		{"template mismatch", talk("5", "01012340005", "ORDER_mismatch"), notify.EREJECTED, "1043", ""},
		{"template not registered", talk("6", "01012340006", "unregistered_T"), notify.EREJECTED, "1042", ""},
		{"bad sender key", bad, notify.EREJECTED, "1041", ""},
		{"foreign number: nothing sent", talk("7", "+14155550100", "ORDER_SHIPPED"), notify.EINVALID, notify.ReasonUnsupportedAddress, ""},
		{"landline: nothing sent", talk("8", "02-1234-5678", "ORDER_SHIPPED"), notify.EINVALID, notify.ReasonUnsupportedAddress, ""},
		{"no template: nothing sent", talk("9", "01012340009", ""), notify.EINVALID, alimtalk.DataTemplate, ""},
	}
	unknownApp := talk("11", "01012340011", "ORDER_SHIPPED")
	unknownApp.App = "other"

	msgs := make([]notify.OutboundMessage, 0, len(tests)+1)
	for _, tt := range tests {
		msgs = append(msgs, tt.msg)
	}
	msgs = append(msgs, unknownApp)
	res, err := f.sender.Send(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(msgs) {
		t.Fatalf("%d results for %d messages", len(res), len(msgs))
	}
	for i, tt := range tests {
		r := res[i]
		if r.DeliveryID != tt.msg.DeliveryID {
			t.Errorf("%s: result for %s", tt.name, r.DeliveryID)
		}
		if tt.code == "" {
			if r.Err != nil || !strings.HasPrefix(r.ProviderMessageID, "M4V") || !r.VerdictPending {
				t.Errorf("%s: %+v, want accepted with a Solapi message id, its verdict pending", tt.name, r)
				continue
			}
			got := f.srv.Recorder.List("alimtalk", tt.recorded)
			if len(got) != 1 || got[0].MessageID != r.ProviderMessageID || got[0].App != testPfID ||
				got[0].Data["template_id"] != "ORDER_SHIPPED" || got[0].Data["#{name}"] != "김하나" || got[0].Data["#{order}"] != strings.TrimPrefix(tt.msg.DeliveryID, "d_") ||
				got[0].Data["custom.heraldDeliveryId"] != tt.msg.DeliveryID || got[0].Data["push_only"] != "" {
				t.Errorf("%s: recorded %+v", tt.name, got)
			}
			continue
		}
		if !notify.IsCode(r.Err, tt.code) || !strings.Contains(r.Err.Error(), tt.inMsg) {
			t.Errorf("%s: %v, want %s mentioning %q", tt.name, r.Err, tt.code, tt.inMsg)
		}
		if notify.IsRetryable(r.Err) {
			t.Errorf("%s: %v is retryable", tt.name, r.Err)
		}
		digits := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, tt.msg.Address)
		if strings.Contains(r.Err.Error(), tt.msg.Address) || strings.Contains(r.Err.Error(), "0"+strings.TrimPrefix(digits, "82")) {
			t.Errorf("%s: the error shows the phone: %v", tt.name, r.Err)
		}
	}
	if last := res[len(res)-1]; !notify.IsCode(last.Err, notify.EINVALID) || !strings.Contains(last.Err.Error(), `"other"`) {
		t.Errorf("unknown app: %v", last.Err)
	}
	if got := f.srv.Recorder.Len(); got != 2 {
		t.Errorf("recorded %d, want the 2 accepted", got)
	}
}

func TestThrottledThenAccepted(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for name, m := range map[string]notify.OutboundMessage{
		"by phone":    talk("p", "010-5555-4292", "ORDER_SHIPPED"),
		"by template": talk("t", "010-1234-0042", "ORDER_throttle2"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for attempt := 1; attempt <= 2; attempt++ {
				res, err := f.sender.Send(t.Context(), []notify.OutboundMessage{m})
				if err != nil {
					t.Fatal(err)
				}
				if !notify.IsCode(res[0].Err, notify.ETHROTTLED) || notify.RetryAfter(res[0].Err).Seconds() != 1 {
					t.Fatalf("attempt %d: %v (retry after %v), want %s after 1s", attempt, res[0].Err, notify.RetryAfter(res[0].Err), notify.ETHROTTLED)
				}
			}
			res, err := f.sender.Send(t.Context(), []notify.OutboundMessage{m})
			if err != nil || res[0].Err != nil {
				t.Fatalf("attempt 3: %v %v", err, res[0].Err)
			}
		})
	}
}

func TestUnavailableThenAccepted(t *testing.T) {
	t.Parallel()
	f := setup(t)
	m := []notify.OutboundMessage{talk("u", "+82 10-5555-5031", "ORDER_SHIPPED")}
	res, err := f.sender.Send(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	if !notify.IsCode(res[0].Err, notify.EUNAVAILABLE) || !notify.IsRetryable(res[0].Err) {
		t.Fatalf("attempt 1: %v, want %s", res[0].Err, notify.EUNAVAILABLE)
	}
	if res, _ = f.sender.Send(t.Context(), m); res[0].Err != nil {
		t.Fatalf("attempt 2: %v", res[0].Err)
	}
}

func TestWrongCredentialsAreAuthErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]func(*alimtalk.Config){
		"unknown key":  func(c *alimtalk.Config) { c.APIKey = "NCSUNKNOWN" },
		"wrong secret": func(c *alimtalk.Config) { c.APISecret = "not-the-secret" },
	}
	for name, edit := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, edit)
			res, err := f.sender.Send(t.Context(), []notify.OutboundMessage{talk("w", "01012345678", "ORDER_SHIPPED")})
			if err != nil {
				t.Fatal(err)
			}
			if !notify.IsCode(res[0].Err, notify.EAUTH) || !notify.IsRetryable(res[0].Err) {
				t.Errorf("got %v, want %s", res[0].Err, notify.EAUTH)
			}
			if f.srv.Recorder.Len() != 0 {
				t.Error("recorded a message sent with wrong credentials")
			}
		})
	}
}

func TestConnectionRefusedIsUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s, err := alimtalk.New(alimtalk.Config{APIKey: testKey, APISecret: testSecret, From: "0212345678", BaseURL: "http://" + addr,
		Apps: map[string]alimtalk.App{"default": {SenderKey: testPfID}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Send(t.Context(), []notify.OutboundMessage{talk("c", "+821011112222", "ORDER_SHIPPED")})
	if err != nil {
		t.Fatal(err)
	}
	if !notify.IsCode(res[0].Err, notify.EUNAVAILABLE) || strings.Contains(res[0].Err.Error(), "1011112222") {
		t.Errorf("got %v, want %s without the phone", res[0].Err, notify.EUNAVAILABLE)
	}
}

func TestSendLimits(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if f.sender.MaxBatch() != alimtalk.MaxBatch || f.sender.Provider() != notify.ProviderAlimTalk {
		t.Errorf("MaxBatch %d, Provider %s", f.sender.MaxBatch(), f.sender.Provider())
	}
	if _, err := f.sender.Send(t.Context(), make([]notify.OutboundMessage, alimtalk.MaxBatch+1)); !notify.IsCode(err, notify.ETOOLARGE) {
		t.Errorf("over MaxBatch: %v, want %s", err, notify.ETOOLARGE)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.sender.Send(ctx, []notify.OutboundMessage{talk("z", "01012345678", "ORDER_SHIPPED")}); !notify.IsCode(err, notify.EUNAVAILABLE) {
		t.Errorf("canceled: %v, want %s", err, notify.EUNAVAILABLE)
	}
	if f.srv.Recorder.Len() != 0 {
		t.Error("something was sent")
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	ok := alimtalk.Config{APIKey: testKey, APISecret: testSecret, From: "0212345678", Apps: map[string]alimtalk.App{"default": {SenderKey: testPfID}}}
	tests := []struct {
		name string
		edit func(*alimtalk.Config)
		want []string
	}{
		{"no key", func(c *alimtalk.Config) { c.APIKey = "" }, []string{"APIKey"}},
		{"no secret", func(c *alimtalk.Config) { c.APISecret = "" }, []string{"APISecret"}},
		{"no app", func(c *alimtalk.Config) { c.Apps = nil }, []string{"app"}},
		{"no sender number", func(c *alimtalk.Config) { c.From = "" }, []string{"From", "required"}},
		{"a sender number not in digits", func(c *alimtalk.Config) { c.From = "02-1234-5678" }, []string{"From", "digits"}},
		{"app without pfId", func(c *alimtalk.Config) { c.Apps = map[string]alimtalk.App{"x": {}} }, []string{`app "x"`, "SenderKey"}},
		{"everything", func(c *alimtalk.Config) {
			c.From, c.BaseURL, c.MaxConcurrency, c.Timeout = "+1 415", "localhost:1", -1, -1
		}, []string{"From", "BaseURL", "MaxConcurrency", "Timeout"}},
	}
	for _, tt := range tests {
		c := ok
		tt.edit(&c)
		_, err := alimtalk.New(c)
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not mention %q", tt.name, err, w)
			}
		}
	}
}

// Kakao's verdict comes after the send: an accepted AlimTalk's result is VerdictPending, and
// Verdicts reads the message list — one request for all — until each has its final status:
// delivered, or unreachable (3104, 3107) late, classified as the immediate answers are.
func TestLateVerdicts(t *testing.T) {
	t.Parallel()
	f := setup(t)
	msgs := []notify.OutboundMessage{
		talk("ok", "+821012345678", "ORDER_SHIPPED"),
		talk("late-ok", "010-5555-0010", "ORDER_SHIPPED"),
		talk("late-3104", "+821055550011", "ORDER_SHIPPED"),
		talk("late-3107", "01055550012", "ORDER_SHIPPED"),
	}
	res, err := f.sender.Send(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	qs := make([]notify.VerdictQuery, len(res))
	for i, r := range res {
		if r.Err != nil || !r.VerdictPending || !strings.HasPrefix(r.ProviderMessageID, "M4V") {
			t.Fatalf("%s: %+v, want accepted, verdict pending", msgs[i].DeliveryID, r)
		}
		qs[i] = notify.VerdictQuery{DeliveryID: r.DeliveryID, ProviderMessageID: r.ProviderMessageID, Address: msgs[i].Address}
	}
	qs = append(qs, notify.VerdictQuery{DeliveryID: "d_unknown", ProviderMessageID: "M4V20261201000000NOTSENTBYHERALD", Address: "01012349999"})

	type want struct {
		pending bool
		code    string
	}
	check := func(round string, wants []want) {
		t.Helper()
		got, err := f.sender.Verdicts(t.Context(), qs)
		if err != nil {
			t.Fatalf("%s: %v", round, err)
		}
		if len(got) != len(qs) {
			t.Fatalf("%s: %d results for %d queries", round, len(got), len(qs))
		}
		for i, w := range wants {
			r := got[i]
			if r.DeliveryID != qs[i].DeliveryID || r.ProviderMessageID != qs[i].ProviderMessageID ||
				r.VerdictPending != w.pending || notify.ErrorCode(r.Err) != w.code {
				t.Errorf("%s: %s: %+v, want pending %v code %q", round, qs[i].DeliveryID, r, w.pending, w.code)
			}
			if r.Err != nil && (strings.Contains(r.Err.Error(), "5555001") || strings.Contains(r.Err.Error(), qs[i].Address)) {
				t.Errorf("%s: %s: the error shows the phone: %v", round, qs[i].DeliveryID, r.Err)
			}
		}
	}
	check("first report", []want{{false, ""}, {true, ""}, {true, ""}, {true, ""}, {true, ""}})
	check("second report", []want{{false, ""}, {false, ""}, {false, notify.EUNREACHABLE}, {false, notify.EUNREACHABLE}, {true, ""}})

	if _, err := f.sender.Verdicts(t.Context(), make([]notify.VerdictQuery, alimtalk.MaxListBatch+1)); !notify.IsCode(err, notify.ETOOLARGE) {
		t.Errorf("too many queries: %v, want ETOOLARGE", err)
	}
	// The late numbers were accepted: they are listed with the sandbox's deliveries.
	if got := f.srv.Recorder.List("alimtalk", "01055550011"); len(got) != 1 || got[0].Data["late_verdict"] != "3104" {
		t.Errorf("late 3104 recorded %+v", got)
	}
}

// A list request Solapi refuses is an error of the whole call, classified like a send's.
func TestVerdictsRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *alimtalk.Config) { c.APISecret = "wrong-secret-0123456789" })
	_, err := f.sender.Verdicts(t.Context(), []notify.VerdictQuery{{DeliveryID: "d_1", ProviderMessageID: "M4V1", Address: "01012345678"}})
	if !notify.IsCode(err, notify.EAUTH) || !notify.IsRetryable(err) {
		t.Fatalf("wrong secret: %v, want a retryable EAUTH", err)
	}
}

// TestLostAnswerIsLookedUpNotResent: Solapi accepted a message and its answer was lost. The
// next attempt finds it in the message list by its delivery id and sends nothing; a message
// Solapi has no record of is sent; and when the list cannot be read, nothing is sent blind.
func TestLostAnswerIsLookedUpNotResent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	since := time.Now()
	send := func(m notify.OutboundMessage, attempt int) notify.SendResult {
		t.Helper()
		m.Attempt, m.Since = attempt, since
		res, err := f.sender.Send(ctx, []notify.OutboundMessage{m})
		if err != nil || len(res) != 1 {
			t.Fatalf("send: %v %v", res, err)
		}
		return res[0]
	}
	sent := func(phone string) []sandbox.Delivery { return f.srv.Recorder.List("alimtalk", phone) }

	lost := talk("lost", "01012340020", "ORDER_lost1")
	if r := send(lost, 1); !notify.IsCode(r.Err, notify.EUNAVAILABLE) {
		t.Fatalf("the lost answer = %+v, want a retryable EUNAVAILABLE", r)
	}
	if n := len(sent("01012340020")); n != 1 {
		t.Fatalf("%d messages accepted before the answer was lost, want 1", n)
	}
	// Other messages to the same number, more than a page of them, so the look-up pages.
	for i := range alimtalk.MaxFindPage + 20 {
		if r := send(talk(fmt.Sprintf("other%03d", i), "01012340020", "ORDER_SHIPPED"), 1); r.Err != nil {
			t.Fatalf("other message %d: %v", i, r.Err)
		}
	}
	r := send(lost, 2)
	if r.Err != nil || r.ProviderMessageID != sent("01012340020")[0].MessageID {
		t.Fatalf("the retry = %+v, want the accepted message %s found", r, sent("01012340020")[0].MessageID)
	}
	if n := len(sent("01012340020")); n != alimtalk.MaxFindPage+21 {
		t.Fatalf("%d messages to the number after the retry, want %d: the lost one was sent again", n, alimtalk.MaxFindPage+21)
	}

	// Solapi has no record: the retry sends it.
	fresh := talk("fresh", "01012340021", "ORDER_SHIPPED")
	if r := send(fresh, 2); r.Err != nil || len(sent("01012340021")) != 1 {
		t.Fatalf("a retry Solapi has no record of = %+v, %d sent; want it sent once", r, len(sent("01012340021")))
	}

	// The list cannot be read: the outcome stays unknown, nothing is sent, and the error is retried.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"errorCode":"ServiceUnavailable","errorMessage":"down"}`))
			return
		}
		httputil.NewSingleHostReverseProxy(mustURL(t, f.srv.URL())).ServeHTTP(w, req)
	}))
	defer front.Close()
	g := setup(t, func(c *alimtalk.Config) { c.BaseURL = front.URL })
	blind := talk("blind", "01012340022", "ORDER_SHIPPED")
	blind.Attempt, blind.Since = 2, since
	res, err := g.sender.Send(ctx, []notify.OutboundMessage{blind})
	if err != nil || !notify.IsCode(res[0].Err, notify.EUNAVAILABLE) {
		t.Fatalf("a retry whose look-up failed = %+v %v, want EUNAVAILABLE", res, err)
	}
	if n := len(g.srv.Recorder.List("alimtalk", "")); n != 0 {
		t.Fatalf("%d messages sent while the look-up failed, want none", n)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
