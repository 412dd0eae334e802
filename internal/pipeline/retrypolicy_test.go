package pipeline_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
)

// downSender is a provider that is down: every message is retryable, and it notes when each
// attempt came.
type downSender struct {
	prov  notify.Provider
	clock *stepClock
	mu    sync.Mutex
	at    []time.Time
}

func (s *downSender) Provider() notify.Provider { return s.prov }
func (s *downSender) MaxBatch() int             { return 500 }
func (s *downSender) Send(_ context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	s.mu.Lock()
	s.at = append(s.at, s.clock.Now())
	s.mu.Unlock()
	out := make([]notify.SendResult, len(msgs))
	for i, m := range msgs {
		out[i] = notify.SendResult{DeliveryID: m.DeliveryID, Err: notify.Errorf(notify.EUNAVAILABLE, "down")}
	}
	return out, nil
}

// TestProviderRetryPolicy: a provider with its own policy (AlimTalk's default: 3 retries at 1m,
// 5m and 15m) is retried that many times at those delays, then FAILED retries_exhausted — not
// the global eight with exponential backoff.
func TestProviderRetryPolicy(t *testing.T) {
	t.Parallel()
	down := &downSender{prov: notify.ProviderFCM}
	policy := notify.RetryPolicy{MaxAttempts: 4, Delays: []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute}}
	b := newBulkHarnessWith(t, []notify.Sender{down}, pipeline.Config{ProviderRetry: map[notify.Provider]notify.RetryPolicy{notify.ProviderFCM: policy}})
	down.clock = b.clock
	if err := b.st.PutDevice(t.Context(), notify.Device{UserID: "u1", Token: "tok-1", App: "default",
		Platform: notify.PlatformFCM, Environment: "production", UpdatedAt: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if fails := b.ingest(t, b.p.Ingest("shop", nil), singleSend(t, "k", "push")); len(fails) != 0 {
		t.Fatal(fails[0].Err)
	}
	send := b.p.Send()
	for range 400 { // 30 s steps: 200 minutes at most
		msgs, err := b.q.Receive(t.Context(), "send-realtime", 10, time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			if st, _ := b.q.Stats(t.Context(), "send-realtime"); st.Delayed == 0 {
				break
			}
			b.clock.Add(30 * time.Second)
			continue
		}
		for _, f := range send(t.Context(), msgs) {
			t.Fatalf("send failed: %v", f.Err)
		}
		for _, m := range msgs {
			_ = b.q.Delete(t.Context(), "send-realtime", m.ReceiptHandle)
		}
	}
	if len(down.at) != 4 {
		t.Fatalf("%d attempts, want 4 (the first and 3 retries)", len(down.at))
	}
	for i, want := range policy.Delays {
		if gap := down.at[i+1].Sub(down.at[i]); gap < want || gap > want+time.Minute {
			t.Errorf("retry %d came %s after the attempt before, want %s", i+1, gap, want)
		}
	}
	ds, _, _ := b.st.ListDeliveries(t.Context(), notify.NotificationIDFor("shop", "k", down.at[0]), "", 10)
	if len(ds) != 1 || ds[0].Status != notify.DeliveryFailed || ds[0].Reason != notify.ReasonRetriesExhausted || ds[0].Attempts != 4 {
		t.Fatalf("deliveries %+v, want one FAILED retries_exhausted after 4 attempts", ds)
	}
}

func TestRetryPolicyDelay(t *testing.T) {
	rp := notify.RetryPolicy{MaxAttempts: 4, Delays: []time.Duration{time.Minute, 5 * time.Minute}}
	for _, c := range []struct {
		attempt    int
		retryAfter time.Duration
		want       time.Duration
	}{{1, 0, time.Minute}, {2, 0, 5 * time.Minute}, {3, 0, 5 * time.Minute}, {0, 0, time.Minute}, {1, 2 * time.Minute, 2 * time.Minute}} {
		if got := rp.Delay(c.attempt, c.retryAfter); got != c.want {
			t.Errorf("Delay(%d, %s) = %s, want %s", c.attempt, c.retryAfter, got, c.want)
		}
	}
}
