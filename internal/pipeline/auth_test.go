package pipeline_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
)

// refusingSender is a provider that refuses Herald's credentials for every message, as each
// provider's error table reports a refused key, an empty balance or a blocked account (EAUTH).
type refusingSender struct {
	prov  notify.Provider
	mu    sync.Mutex
	calls int
}

func (s *refusingSender) Provider() notify.Provider { return s.prov }
func (s *refusingSender) MaxBatch() int             { return 500 }
func (s *refusingSender) Send(_ context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	out := make([]notify.SendResult, len(msgs))
	for i, m := range msgs {
		out[i] = notify.SendResult{DeliveryID: m.DeliveryID, Err: notify.Errorf(notify.EAUTH, "%s: credentials refused", s.prov)}
	}
	return out, nil
}

type countingMetrics struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *countingMetrics) Add(_ context.Context, name string, v int, dims map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n[name+":"+dims["Provider"]] += v
}

// TestProviderAuthFailsAtOnceWithAnAlert: a refused credential, account or balance fails its
// deliveries at once (reason provider_auth, one provider call, no retry queued) and tells
// operators — one provider_auth_failed a minute per provider, however many sends it refuses
// meanwhile — on every provider.
func TestProviderAuthFailsAtOnceWithAnAlert(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prov     notify.Provider
		platform notify.Platform
	}{{notify.ProviderFCM, notify.PlatformFCM}, {notify.ProviderAPNs, notify.PlatformAPNs}} {
		t.Run(string(tc.prov), func(t *testing.T) {
			_, st := openStore(t)
			clock := &stepClock{now: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)}
			ev, metrics := &sink{}, &countingMetrics{n: map[string]int{}}
			sender := &refusingSender{prov: tc.prov}
			p := pipeline.New(pipeline.Deps{Store: st, Queue: discardQueue{}, Senders: []notify.Sender{sender}, Clock: clock,
				Events: ev, Metrics: metrics, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, pipeline.Config{})
			ctx := t.Context()
			if err := st.PutDevice(ctx, notify.Device{UserID: "u1", Token: "tok-1", App: "default", Platform: tc.platform,
				Environment: "production", UpdatedAt: clock.Now()}); err != nil {
				t.Fatal(err)
			}
			ingest := p.Ingest("shop", nil)
			send := func(key string) *notify.Notification {
				body, _ := json.Marshal(map[string]any{"idempotency_key": key, "category": "transactional", "channels": []string{"push"},
					"recipients": []map[string]any{{"user_id": "u1"}}, "content": map[string]any{"title": "Your code", "body": "123456"}})
				if f := ingest(ctx, []notify.Message{{ID: "m-" + key, Body: body}}); len(f) != 0 {
					t.Fatalf("ingest %s: %v", key, f[0].Err)
				}
				n, err := st.GetNotification(ctx, notify.NotificationIDFor("shop", key, clock.Now()))
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			for i, key := range []string{"a", "b", "c"} {
				n := send(key)
				if n.Status != notify.StatusFailed || n.Stats.FailedByReason[notify.ReasonProviderAuth] != 1 {
					t.Fatalf("%s: status %s, failed by reason %v; want FAILED provider_auth", key, n.Status, n.Stats.FailedByReason)
				}
				if sender.calls != i+1 {
					t.Fatalf("%d provider calls after %d sends: a refused credential was retried", sender.calls, i+1)
				}
				clock.Add(20 * time.Second)
			}
			// a, b and c came within a minute: one alert. A minute after the first, the next
			// refusal alerts again.
			if len(ev.evs) != 1 {
				t.Fatalf("events %+v, want one provider_auth_failed", ev.evs)
			}
			e := ev.evs[0]
			if e.Type != notify.EventProviderAuthFailed || e.Detail["provider"] != string(tc.prov) || e.Detail["code"] != notify.EAUTH ||
				e.Recipients != 1 || e.Service != "shop" {
				t.Fatalf("event %+v", e)
			}
			send("d")
			if len(ev.evs) != 2 {
				t.Fatalf("%d events after a minute, want a second alert", len(ev.evs))
			}
			if got := metrics.n[pipeline.MetricProviderAuthFailed+":"+string(tc.prov)]; got != 4 {
				t.Fatalf("%s counted %d, want 4", pipeline.MetricProviderAuthFailed, got)
			}
		})
	}
}
