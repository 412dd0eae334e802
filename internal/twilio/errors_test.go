package twilio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twilio/twilio-go/client"

	"herald/internal/notify"
)

func TestClassifyError(t *testing.T) {
	t.Parallel()
	const phone = "+15005550001"
	rest := func(status, code int, msg string) error {
		return &client.TwilioRestError{Status: status, Code: code, Message: msg, MoreInfo: fmt.Sprintf("https://www.twilio.com/docs/errors/%d", code)}
	}
	tests := []struct {
		name       string
		err        error
		status     int
		retryAfter time.Duration
		code       string
		inMessage  string
	}{
		{"invalid number", rest(400, 21211, "The 'To' number "+phone+" is not a valid phone number."), 400, 0, notify.EREJECTED, "21211"},
		{"not mobile", rest(400, 21614, "'To' number is not a valid mobile number"), 400, 0, notify.EREJECTED, "21614"},
		{"unroutable", rest(400, 21612, "The 'To' phone number is not currently reachable"), 400, 0, notify.EREJECTED, "21612"},
		{"geo permission", rest(400, 21408, "Permission to send an SMS has not been enabled"), 400, 0, notify.EREJECTED, "21408"},
		{"unsubscribed", rest(400, 21610, "Attempt to send to unsubscribed recipient"), 400, 0, notify.ESUPPRESSED, "21610"},
		{"too many requests", rest(429, 20429, "Too Many Requests"), 429, time.Second, notify.ETHROTTLED, "20429"},
		{"429 other code", rest(429, 0, "slow down"), 429, 0, notify.ETHROTTLED, "slow down"},
		{"authenticate", rest(401, 20003, "Authenticate"), 401, 0, notify.EAUTH, "20003"},
		{"SDK credential check", rest(400, 21224, "Invalid Password. Illegal chars"), 0, 0, notify.EAUTH, "21224"},
		{"account unknown", rest(404, 20404, "The requested resource was not found"), 404, 0, notify.EAUTH, "20404"},
		{"body too long", rest(400, 21617, "The concatenated message body exceeds the 1600 character limit."), 400, 0, notify.EREJECTED, "21617"},
		{"server error", rest(500, 20500, "An internal server error has occurred"), 500, 0, notify.EUNAVAILABLE, "20500"},
		{"503 without a body Twilio wrote", errors.New("error decoding the response for an HTTP error code: 503: invalid character '<'"), 503, 0, notify.EUNAVAILABLE, "HTTP 503"},
		{"status only in the body", rest(503, 0, "Service Unavailable"), 0, 0, notify.EUNAVAILABLE, "Service Unavailable"},
		{"connection refused", &url.Error{Op: "Post", URL: "https://api.twilio.com", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, 0, 0, notify.EUNAVAILABLE, "no response"},
		{"timeout", &url.Error{Op: "Post", URL: "https://api.twilio.com", Err: context.DeadlineExceeded}, 0, 0, notify.EUNAVAILABLE, "timed out"},
		{"created but unreadable", errors.New("unexpected EOF"), 201, 0, notify.EINTERNAL, "HTTP 201"},
		{"anything else", errors.New("boom"), 0, 0, notify.EINTERNAL, "unexpected error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := classifyError(tt.err, tt.status, tt.retryAfter, "d_1", phone)
			if e.Code != tt.code {
				t.Errorf("code %s, want %s (%v)", e.Code, tt.code, e)
			}
			if e.RetryAfter != tt.retryAfter {
				t.Errorf("RetryAfter %v, want %v", e.RetryAfter, tt.retryAfter)
			}
			if !strings.Contains(e.Message, tt.inMessage) || !strings.Contains(e.Message, "d_1") {
				t.Errorf("message %q lacks %q or the delivery id", e.Message, tt.inMessage)
			}
			for _, s := range []string{e.Message, e.Error()} {
				if strings.Contains(s, phone) {
					t.Errorf("raw phone in %q", s)
				}
			}
			var tre *client.TwilioRestError
			if errors.As(tt.err, &tre) && !errors.As(e, &tre) {
				t.Errorf("the Twilio error is not in the chain")
			}
		})
	}
}

func TestRewriteTransport(t *testing.T) {
	t.Parallel()
	base, _ := url.Parse("http://127.0.0.1:9999/prefix/")
	var seen []string
	rt := &rewriteTransport{base: base, next: roundTripFunc(func(r *url.URL, host string) { seen = append(seen, r.String()+" host="+host) })}
	for _, u := range []string{
		"https://api.twilio.com/2010-04-01/Accounts/AC1/Messages.json",
		"https://api.sydney.au1.twilio.com/2010-04-01/Accounts/AC1/Messages.json",
		"https://example.com/other",
	} {
		req, _ := newRequest(u)
		if _, err := rt.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if req.URL.String() != u {
			t.Errorf("the caller's request was modified: %s", req.URL)
		}
	}
	want := []string{
		"http://127.0.0.1:9999/prefix/2010-04-01/Accounts/AC1/Messages.json host=",
		"http://127.0.0.1:9999/prefix/2010-04-01/Accounts/AC1/Messages.json host=",
		"https://example.com/other host=example.com",
	}
	for i := range want {
		if i >= len(seen) || seen[i] != want[i] {
			t.Errorf("request %d went to %q, want %q", i, seen, want[i])
		}
	}
}

// roundTripFunc reports where each request would go and answers 200.
type roundTripFunc func(u *url.URL, host string)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) {
	f(r.URL, r.Host)
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

func newRequest(u string) (*http.Request, error) { return http.NewRequest(http.MethodPost, u, nil) }
