package campaign_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"herald/internal/campaign"
	"herald/internal/notify"
	"herald/internal/pipeline"
)

// fcm accepts everything and counts each token it was handed.
type fcm struct {
	mu   sync.Mutex
	seen map[string]int
}

func (f *fcm) Provider() notify.Provider { return notify.ProviderFCM }
func (f *fcm) MaxBatch() int             { return 500 }
func (f *fcm) Send(_ context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]notify.SendResult, len(msgs))
	for i, m := range msgs {
		f.seen[m.Address]++
		out[i] = notify.SendResult{DeliveryID: m.DeliveryID, ProviderMessageID: "m-" + m.DeliveryID}
	}
	return out, nil
}

// drain feeds every recorded message to its stage until the queues are empty.
func drain(t *testing.T, q *producer, p *pipeline.Pipeline) {
	t.Helper()
	handlers := map[string]pipeline.Handler{}
	for _, l := range notify.Lanes {
		handlers[notify.LaneQueue(notify.StagePrepare, l)] = p.Prepare()
		handlers[notify.LaneQueue(notify.StageSend, l)] = p.Send()
		handlers[notify.LaneQueue(notify.StageRecord, l)] = p.Record()
	}
	for round := 0; ; round++ {
		if round > 1000 {
			t.Fatal("queues never drained")
		}
		q.mu.Lock()
		var (
			queue string
			msgs  []notify.OutMessage
		)
		for name, ms := range q.msgs {
			if len(ms) > 0 && handlers[name] != nil {
				queue, msgs = name, ms
				q.msgs[name] = nil
				break
			}
		}
		q.mu.Unlock()
		if queue == "" {
			return
		}
		in := make([]notify.Message, len(msgs))
		for i, m := range msgs {
			in[i] = notify.Message{ID: fmt.Sprintf("%s-%d-%d", queue, round, i), Body: m.Body, ReceiveCount: 1}
		}
		if f := handlers[queue](t.Context(), in); len(f) != 0 {
			t.Fatalf("%s failed: %v", queue, f[0].Err)
		}
	}
}

// TestCampaignThroughStages runs an app_devices campaign through the real prepare, send and
// record stages: one delivery per device, users with two devices reached on both, no early
// finish while pages are still coming, a final status once Finish has run.
func TestCampaignThroughStages(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	sender := &fcm{seen: map[string]int{}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := pipeline.New(pipeline.Deps{Store: e.store, Queue: e.queue, Senders: []notify.Sender{sender}, Clock: e.clock, Logger: log},
		pipeline.Config{ChunkSize: chunkSize})
	steps := campaign.New(campaign.Deps{Campaigns: e.store, Audience: e.store, Notifications: e.store,
		Dispatcher: p, Clock: e.clock, Logger: log}, campaign.Config{PageSize: 200})

	consent := noon.AddDate(-1, 0, 0)
	tokens := 0
	for i := range 450 {
		u := fmt.Sprintf("u%05d", i)
		devices := 1 + i%3/2 // every third user has two devices
		for d := range devices {
			tokens++
			if err := e.store.PutDevice(ctx, notify.Device{UserID: u, Platform: notify.PlatformFCM, App: "shop",
				Token: fmt.Sprintf("tok-%s-%d-aaaaaaaa", u, d), Environment: "production", UpdatedAt: noon}); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.store.PutPreferences(ctx, notify.Preferences{UserID: u, MarketingConsent: &consent, UpdatedAt: noon}); err != nil {
			t.Fatal(err)
		}
	}
	c := &notify.Campaign{
		ID: "c_stages", Service: "marketing",
		Notification: notify.Notification{Category: notify.CategoryMarketing,
			Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Title: "Sale", Body: "Now"}},
		Audience:   notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceAppDevices, App: "shop"}}},
		QuietHours: notify.DefaultQuietHours(), State: notify.CampaignRunning, CreatedAt: noon,
	}
	if _, _, err := e.store.CreateCampaign(ctx, c); err != nil {
		t.Fatal(err)
	}

	// One page, fully sent: the notification must not be finalized yet.
	if _, err := steps.Step(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	drain(t, e.queue, p)
	n, err := e.store.GetNotification(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != notify.StatusDispatching {
		t.Fatalf("after the first page: notification %s, want DISPATCHING", n.Status)
	}

	r := campaign.NewRunner(steps, time.Millisecond)
	for range 50 {
		ready, err := r.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		drain(t, e.queue, p)
		if ready == 0 {
			break
		}
	}
	if got := e.campaign(t, c.ID); got.State != notify.CampaignCompleted || got.Progress.Sent != tokens {
		t.Fatalf("campaign %s progress %+v, want COMPLETED with %d sent", got.State, got.Progress, tokens)
	}
	n, err = e.store.GetNotification(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != notify.StatusSent {
		t.Fatalf("notification %s, want SENT", n.Status)
	}
	if len(sender.seen) != tokens {
		t.Fatalf("sender saw %d tokens, want %d", len(sender.seen), tokens)
	}
	for tok, k := range sender.seen {
		if k != 1 {
			t.Fatalf("token %s sent %d times", tok, k)
		}
	}
}
