package pipeline

import (
	"context"
	"testing"

	"herald/internal/notify"
)

type selfLimitedSender struct {
	got notify.RateLimiter
}

func (s *selfLimitedSender) Provider() notify.Provider           { return notify.ProviderWebPush }
func (s *selfLimitedSender) MaxBatch() int                       { return 1 }
func (s *selfLimitedSender) SetRateLimiter(l notify.RateLimiter) { s.got = l }
func (s *selfLimitedSender) Send(context.Context, []notify.OutboundMessage) ([]notify.SendResult, error) {
	return nil, nil
}

type noLimit struct{}

func (noLimit) Wait(context.Context, string, int) error { return nil }

// A sender that paces itself (Web Push, per push service origin) gets the pipeline's limiter.
func TestSelfLimitingSenderGetsTheLimiter(t *testing.T) {
	s := &selfLimitedSender{}
	lim := noLimit{}
	New(Deps{Senders: []notify.Sender{s}, Limiter: lim}, Config{})
	if s.got != lim {
		t.Fatalf("the sender got %v, want the pipeline's limiter", s.got)
	}
	s2 := &selfLimitedSender{}
	New(Deps{Senders: []notify.Sender{s2}}, Config{})
	if s2.got != nil {
		t.Fatal("a nil limiter was handed out")
	}
}
