// Package ratelimit is the in-process rate limiter the local runtime shares between all its
// workers: one bucket per key (provider account), so concurrent senders together stay inside a
// provider's quota. The AWS runtime uses a distributed bucket with the same contract and the
// same Rate (ddb.RateLimiter, in DynamoDB); this package imports no SDK, so the local runtime
// links none.
package ratelimit

import (
	"context"
	"strings"
	"sync"
	"time"

	"herald/internal/notify"
)

// Rate is a sustained rate with a burst allowance.
type Rate struct {
	PerSecond float64 // ≤ 0: unlimited
	Burst     int     // units that may go at once after idling; default PerSecond/10, at least 1
}

// Limiter is a set of GCRA token buckets keyed by string. A key uses the Rate of the longest
// configured prefix it starts with ("fcm" covers "fcm:default"); keys matching none are unlimited.
type Limiter struct {
	rates map[string]Rate
	clock notify.Clock

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	interval  time.Duration // per unit
	tolerance time.Duration // burst × interval
	tat       time.Time     // theoretical arrival time of the next unit
}

var _ notify.RateLimiter = (*Limiter)(nil)

// New returns a Limiter; clock nil means the system clock.
func New(rates map[string]Rate, clock notify.Clock) *Limiter {
	if clock == nil {
		clock = notify.SystemClock{}
	}
	return &Limiter{rates: rates, clock: clock, buckets: map[string]*bucket{}}
}

// Wait blocks until n units for key may be used. Reservations are made in call order, so n above
// the burst simply waits longer; a canceled ctx returns its error (the reservation is kept: it was
// a conservative choice, not a leak — the next caller waits a little longer).
func (l *Limiter) Wait(ctx context.Context, key string, n int) error {
	return Sleep(ctx, l.reserve(key, n))
}

func (l *Limiter) reserve(key string, n int) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		r, found := l.rateFor(key)
		if !found || r.PerSecond <= 0 {
			l.buckets[key] = nil
			return 0
		}
		burst := r.Burst
		if burst <= 0 {
			burst = max(1, int(r.PerSecond/10))
		}
		interval := time.Duration(float64(time.Second) / r.PerSecond)
		b = &bucket{interval: interval, tolerance: time.Duration(burst) * interval}
		l.buckets[key] = b
	}
	if b == nil {
		return 0
	}
	now := l.clock.Now()
	tat := b.tat
	if tat.Before(now) {
		tat = now
	}
	newTat := tat.Add(time.Duration(n) * b.interval)
	allowAt := newTat.Add(-b.tolerance)
	b.tat = newTat
	return allowAt.Sub(now)
}

func (l *Limiter) rateFor(key string) (Rate, bool) { return RateFor(l.rates, key) }

// RateFor is the Rate of the longest prefix of key in rates ("fcm" covers "fcm:default"), and
// false when no prefix matches (the key is unlimited). Every limiter picks rates this way.
func RateFor(rates map[string]Rate, key string) (Rate, bool) {
	best, found, bestLen := Rate{}, false, -1
	for prefix, r := range rates {
		if strings.HasPrefix(key, prefix) && len(prefix) > bestLen {
			best, found, bestLen = r, true, len(prefix)
		}
	}
	return best, found
}

// Sleep waits d, or returns ctx's error if it ends first; d ≤ 0 only checks ctx.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
