package notify

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Helpers every provider adapter uses when it turns a provider's answer into an *Error.

// CodeForStatus is the code of an HTTP status a provider answered with, when nothing more
// specific is known: 429 ETHROTTLED, 401/403 EAUTH, 5xx EUNAVAILABLE, other 4xx EREJECTED, and
// "" for anything else.
func CodeForStatus(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return ETHROTTLED
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return EAUTH
	case status >= 500:
		return EUNAVAILABLE
	case status >= 400:
		return EREJECTED
	}
	return ""
}

// ParseRetryAfter reads a Retry-After header value, in seconds or as an HTTP date; 0 when absent,
// malformed or already past.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Redact returns err with every old string of the old, new pairs in its text replaced by new —
// an SDK error naming a token, email or phone — while errors.Is/As still reach err. Pairs with an
// empty old string are ignored; err comes back unchanged when nothing in it matches.
func Redact(err error, oldnew ...string) error {
	if err == nil {
		return nil
	}
	var pairs []string
	for i := 0; i+1 < len(oldnew); i += 2 {
		if oldnew[i] != "" {
			pairs = append(pairs, oldnew[i], oldnew[i+1])
		}
	}
	if len(pairs) == 0 {
		return err
	}
	text := strings.NewReplacer(pairs...).Replace(err.Error())
	if text == err.Error() {
		return err
	}
	return &redacted{err: err, text: text}
}

type redacted struct {
	err  error
	text string
}

func (r *redacted) Error() string { return r.text }
func (r *redacted) Unwrap() error { return r.err }

// NoResponse reports whether err means a request got no HTTP response: a connection failure
// (net/http's, or an AWS SDK's request-send error, which says so with ConnectionError), a
// timeout or a cancellation.
func NoResponse(err error) bool {
	var urlErr *url.Error
	var netErr net.Error
	var connErr interface{ ConnectionError() bool }
	return errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		(errors.As(err, &connErr) && connErr.ConnectionError()) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// Failure says in a few words what went wrong with a provider call that has no message of the
// provider's own: "HTTP 503", "timed out", "canceled", "no response" or "unexpected error".
func Failure(err error, status int) string {
	switch {
	case status != 0:
		return "HTTP " + strconv.Itoa(status)
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case NoResponse(err):
		return "no response"
	}
	return "unexpected error"
}
