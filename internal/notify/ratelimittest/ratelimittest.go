// Package ratelimittest is the conformance suite every notify.RateLimiter adapter runs.
package ratelimittest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herald/internal/notify"
)

// Run checks a limiter built by newLimiter with key "k" limited to perSecond units/s and a burst
// of perSecond/10. Assertions are upper bounds on what gets through in a window, which a slow or
// busy machine can only make easier to meet, never flaky.
func Run(t *testing.T, perSecond int, newLimiter func(t *testing.T) notify.RateLimiter) {
	t.Run("ConcurrentWaitersStayUnderRate", func(t *testing.T) {
		t.Parallel()
		l := newLimiter(t)
		window := 1500 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), window)
		defer cancel()
		var passed atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					if l.Wait(ctx, "k", 5) == nil && ctx.Err() == nil {
						passed.Add(5)
					}
				}
			}()
		}
		wg.Wait()
		limit := float64(perSecond)*window.Seconds() + float64(perSecond)/10 + 20 // rate × window + burst + one batch per waiter
		if got := float64(passed.Load()); got > limit {
			t.Fatalf("%v units passed in %v; the limit allows at most %.0f", got, window, limit)
		}
		if passed.Load() == 0 {
			t.Fatal("nothing passed the limiter")
		}
	})
	t.Run("OtherKeysUnaffected", func(t *testing.T) {
		t.Parallel()
		l := newLimiter(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// Exhaust "k" far into the future, then another key must still pass at once.
		go func() { _ = l.Wait(ctx, "k", perSecond*100) }()
		done := make(chan error, 1)
		go func() { done <- l.Wait(ctx, "other", 1) }()
		if err := <-done; err != nil {
			t.Fatalf("Wait on another key: %v", err)
		}
	})
	t.Run("CanceledContextReturns", func(t *testing.T) {
		t.Parallel()
		l := newLimiter(t)
		ctx, cancel := context.WithCancel(context.Background())
		_ = l.Wait(context.Background(), "k", perSecond) // drain well past the burst
		cancel()
		if err := l.Wait(ctx, "k", perSecond); err == nil {
			t.Fatal("Wait with a canceled context and an empty bucket returned nil")
		}
	})
}
