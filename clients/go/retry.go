package herald

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Retry is how calls are retried: 429, 5xx, throttling and network failures, at most
// MaxAttempts tries in all, waiting a full-jitter exponential backoff from Base to Max, and at
// least what Retry-After asked for.
type Retry struct {
	MaxAttempts int           // default 5
	Base        time.Duration // default 100ms
	Max         time.Duration // default 5s
}

func (r Retry) withDefaults() Retry {
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 5
	}
	if r.Base <= 0 {
		r.Base = 100 * time.Millisecond
	}
	if r.Max <= 0 {
		r.Max = 5 * time.Second
	}
	return r
}

// wait is the pause before try attempt+1 (attempt counts from 1).
func (r Retry) wait(attempt int, retryAfter time.Duration) time.Duration {
	ceil := r.Base << min(attempt-1, 20)
	if ceil > r.Max || ceil <= 0 {
		ceil = r.Max
	}
	d := time.Duration(rand.Int64N(int64(ceil) + 1))
	return max(d, retryAfter)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryable reports whether an HTTP status is worth another try.
func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusInternalServerError ||
		status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
