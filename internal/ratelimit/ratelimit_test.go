package ratelimit

import (
	"testing"

	"herald/internal/notify"
	"herald/internal/notify/ratelimittest"
)

func TestLimiterConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.Run(t, 200, func(t *testing.T) notify.RateLimiter {
		return New(map[string]Rate{"k": {PerSecond: 200, Burst: 20}}, nil)
	})
}

func TestLongestPrefixAndUnlimited(t *testing.T) {
	t.Parallel()
	l := New(map[string]Rate{"fcm": {PerSecond: 1}, "fcm:vip": {PerSecond: 1000}}, nil)
	if r, _ := l.rateFor("fcm:vip"); r.PerSecond != 1000 {
		t.Fatalf("fcm:vip rate = %v, want the longer prefix's 1000", r.PerSecond)
	}
	if r, _ := l.rateFor("fcm:default"); r.PerSecond != 1 {
		t.Fatalf("fcm:default rate = %v, want 1", r.PerSecond)
	}
	for range 1000 {
		if d := l.reserve("ses:x", 100); d != 0 {
			t.Fatalf("unconfigured key waited %v", d)
		}
	}
}
