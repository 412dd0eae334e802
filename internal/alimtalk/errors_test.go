package alimtalk

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
)

func TestStatusCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code, want string
		retryable  bool
	}{
		{"2000", "", false},
		{"3000", "", false},
		{"4000", "", false},
		{"3104", notify.EUNREACHABLE, false}, // not a KakaoTalk user
		{"3107", notify.EUNREACHABLE, false}, // blocked AlimTalk / inactive
		{"3102", notify.EUNREACHABLE, false},
		{"3103", notify.EREJECTED, false}, // template mismatch
		{"1043", notify.EREJECTED, false},
		{"3105", notify.EREJECTED, false}, // template not registered
		{"1041", notify.EREJECTED, false}, // bad sender key
		{"3101", notify.EREJECTED, false},
		{"1011", notify.EREJECTED, false}, // format (variables)
		{"1031", notify.ETOOLARGE, false},
		{"3010", notify.EREJECTED, false},
		{"3032", notify.EDEADADDRESS, false},
		{"1061", notify.ESUPPRESSED, false},
		{"1030", notify.EAUTH, true}, // balance
		{"2063", notify.EAUTH, true},
		{"1024", notify.EUNAVAILABLE, true},
		{"3043", notify.EUNAVAILABLE, true},
		{"3053", notify.ETHROTTLED, true},
		{"1099", notify.EREJECTED, false}, // unlisted: by family
		{"3999", notify.EREJECTED, false},
		// Unknown: the message may have gone out, so never resent.
		{"5000", notify.EUNKNOWNSTATUS, false},
		{"TEST1000", notify.EUNKNOWNSTATUS, false}, // Solapi's own sample answer
		{"", notify.EUNKNOWNSTATUS, false},
	}
	for _, tt := range tests {
		got := statusCode(tt.code)
		if got != tt.want {
			t.Errorf("statusCode(%q) = %q, want %q", tt.code, got, tt.want)
		}
		if got != "" && notify.IsRetryable(&notify.Error{Code: got}) != tt.retryable {
			t.Errorf("statusCode(%q) = %s: retryable %v, want %v", tt.code, got, !tt.retryable, tt.retryable)
		}
	}
	for code, c := range statusCodes {
		if len(code) != 4 {
			t.Errorf("status code %q is not four digits", code)
		}
		if c != "" && notify.ErrorCode(&notify.Error{Code: c}) != c {
			t.Errorf("%s maps to %q", code, c)
		}
	}
}

func TestClassifyHTTP(t *testing.T) {
	t.Parallel()
	const phone = "+821055550001"
	tests := []struct {
		name       string
		err        error
		status     int
		body       apiError
		retryAfter time.Duration
		code       string
		inMessage  string
	}{
		{"bad key", nil, 403, apiError{"InvalidAPIKey", "유효한 API Key가 아닙니다"}, 0, notify.EAUTH, "InvalidAPIKey"},
		{"bad signature", nil, 403, apiError{"SignatureDoesNotMatch", "x"}, 0, notify.EAUTH, "SignatureDoesNotMatch"},
		{"clock skew", nil, 403, apiError{"RequestTimeTooSkewed", "x"}, 0, notify.EAUTH, "RequestTimeTooSkewed"},
		{"malformed", nil, 400, apiError{"ValidationError", "\"messages\" is required"}, 0, notify.EREJECTED, "ValidationError"},
		{"throttled", nil, 429, apiError{"TooManyRequests", "slow down"}, 2 * time.Second, notify.ETHROTTLED, "TooManyRequests"},
		{"throttled, no body", nil, 429, apiError{}, time.Second, notify.ETHROTTLED, "HTTP 429"},
		{"server error", nil, 500, apiError{"InternalError", "x"}, 0, notify.EUNAVAILABLE, "InternalError"},
		{"gateway", nil, 502, apiError{}, 0, notify.EUNAVAILABLE, "HTTP 502"},
		{"unavailable with Retry-After", nil, 503, apiError{}, 3 * time.Second, notify.EUNAVAILABLE, "HTTP 503"},
		{"not found", nil, 404, apiError{"NotFound", "x"}, 0, notify.EREJECTED, "NotFound"},
		{"refused", &url.Error{Op: "Post", URL: "https://api.solapi.com", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, 0, apiError{}, 0, notify.EUNAVAILABLE, "no response"},
		{"timeout", &url.Error{Op: "Post", URL: "https://api.solapi.com", Err: context.DeadlineExceeded}, 0, apiError{}, 0, notify.EUNAVAILABLE, "timed out"},
		{"anything else", errors.New("boom"), 0, apiError{}, 0, notify.EINTERNAL, "unexpected error"},
	}
	for _, tt := range tests {
		e := classifyHTTP(tt.err, tt.status, tt.body, tt.retryAfter, "d_1", phone)
		if e.Code != tt.code || e.RetryAfter != tt.retryAfter {
			t.Errorf("%s: %s (retry after %v), want %s (%v)", tt.name, e.Code, e.RetryAfter, tt.code, tt.retryAfter)
		}
		if !strings.Contains(e.Message, tt.inMessage) || !strings.Contains(e.Message, "d_1") {
			t.Errorf("%s: message %q lacks %q or the delivery id", tt.name, e.Message, tt.inMessage)
		}
	}
}

func TestClassifyStatusMasksThePhone(t *testing.T) {
	t.Parallel()
	e := classifyStatus("3104", "카카오톡 미사용자 01055550001", "d_1", "+821055550001")
	if e.Code != notify.EUNREACHABLE || !strings.Contains(e.Message, "3104") {
		t.Errorf("got %v", e)
	}
	for _, raw := range []string{"+821055550001", "01055550001"} {
		if strings.Contains(e.Error(), raw) {
			t.Errorf("raw phone %s in %q", raw, e.Error())
		}
	}
}

func TestSignature(t *testing.T) {
	t.Parallel()
	// HMAC-SHA256 of "2019-07-01T00:41:48Z" + "jqsba2jxjnrjor" keyed by "sandbox-secret",
	// computed independently.
	const want = "207582c451d09fef26eecf693567c0c4e41d5e9dc59aab45b943a9883ede5b03"
	if got := Signature("sandbox-secret", "2019-07-01T00:41:48Z", "jqsba2jxjnrjor"); got != want {
		t.Errorf("Signature = %s, want %s", got, want)
	}
	at := time.Date(2026, 12, 1, 9, 30, 0, 123, time.FixedZone("KST", 9*3600))
	h1, err := Authorization("NCSKEY", "sandbox-secret", at)
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := Authorization("NCSKEY", "sandbox-secret", at)
	if h1 == h2 {
		t.Error("two headers share a salt: Solapi refuses a signature used twice")
	}
	var key, date, salt, sig string
	if n, err := fmtSscan(h1, &key, &date, &salt, &sig); err != nil || n != 4 {
		t.Fatalf("header %q: %v", h1, err)
	}
	if key != "NCSKEY" || date != "2026-12-01T00:30:00Z" || len(salt) < 12 || len(salt) > 64 || sig != Signature("sandbox-secret", date, salt) {
		t.Errorf("header %q", h1)
	}
}

// fmtSscan parses "HMAC-SHA256 apiKey=K, date=D, salt=S, signature=G".
func fmtSscan(h string, key, date, salt, sig *string) (int, error) {
	rest, ok := strings.CutPrefix(h, "HMAC-SHA256 ")
	if !ok {
		return 0, errors.New("no HMAC-SHA256 method")
	}
	n := 0
	for _, part := range strings.Split(rest, ", ") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "apiKey":
			*key = v
		case "date":
			*date = v
		case "salt":
			*salt = v
		case "signature":
			*sig = v
		default:
			return n, errors.New("unknown part " + k)
		}
		n++
	}
	return n, nil
}
