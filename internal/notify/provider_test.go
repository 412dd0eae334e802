package notify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"testing"
	"time"
)

func TestCodeForStatus(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]string{429: ETHROTTLED, 401: EAUTH, 403: EAUTH, 500: EUNAVAILABLE, 503: EUNAVAILABLE, 400: EREJECTED, 404: EREJECTED, 200: "", 0: ""} {
		if got := CodeForStatus(status); got != want {
			t.Errorf("CodeForStatus(%d) = %q, want %q", status, got, want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"": 0, "0": 0, "-3": 0, " 7 ": 7 * time.Second, "soon": 0,
		"Mon, 30 Nov 2026 09:00:30 GMT": 30 * time.Second, "Mon, 30 Nov 2026 08:59:00 GMT": 0,
	} {
		if got := ParseRetryAfter(in, now); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	base := &fs.PathError{Op: "post", Path: "/3/device/tok-secret-123", Err: fs.ErrNotExist}
	err := Redact(base, "tok-secret-123", "tok-…123", "", "ignored")
	if got := err.Error(); got != "post /3/device/tok-…123: file does not exist" {
		t.Fatalf("Redact text = %q", got)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("Redact must keep the cause reachable")
	}
	if Redact(base, "absent", "x") != error(base) {
		t.Fatal("an error with nothing to mask comes back unchanged")
	}
	if Redact(nil, "a", "b") != nil {
		t.Fatal("Redact(nil) != nil")
	}
}

type sendErr struct{ error }

func (sendErr) ConnectionError() bool { return true }

func TestFailure(t *testing.T) {
	t.Parallel()
	refused := &url.Error{Op: "Post", URL: "https://x", Err: errors.New("connection refused")}
	for _, c := range []struct {
		err    error
		status int
		want   string
		noResp bool
	}{
		{errors.New("boom"), 503, "HTTP 503", false},
		{fmt.Errorf("send: %w", context.DeadlineExceeded), 0, "timed out", true},
		{context.Canceled, 0, "canceled", true},
		{fmt.Errorf("op: %w", refused), 0, "no response", true},
		{sendErr{errors.New("connection refused")}, 0, "no response", true},
		{errors.New("boom"), 0, "unexpected error", false},
	} {
		if got := Failure(c.err, c.status); got != c.want {
			t.Errorf("Failure(%v, %d) = %q, want %q", c.err, c.status, got, c.want)
		}
		if got := NoResponse(c.err); got != c.noResp {
			t.Errorf("NoResponse(%v) = %v, want %v", c.err, got, c.noResp)
		}
	}
}
