package campaign_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"herald/internal/campaign"
	"herald/internal/notify"
	"herald/internal/pipeline"
)

// recorder is an operator event sink; with fail set, Emit records and then refuses.
type recorder struct {
	mu   sync.Mutex
	evs  []notify.Event
	fail bool
}

func (r *recorder) Emit(_ context.Context, e notify.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, e)
	if r.fail {
		return errors.New("bus unavailable")
	}
	return nil
}

// of returns the events of campaign id, in order.
func (r *recorder) of(id string) []notify.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []notify.Event
	for _, e := range r.evs {
		if e.CampaignID == id {
			out = append(out, e)
		}
	}
	return out
}

func (e *env) stepsWithEvents(ev notify.Events) (*campaign.Steps, *pipeline.Pipeline) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := pipeline.New(pipeline.Deps{Store: e.store, Queue: e.queue, Clock: e.clock, Logger: log}, pipeline.Config{ChunkSize: chunkSize})
	return campaign.New(campaign.Deps{Campaigns: e.store, Audience: e.store, Notifications: e.store,
		Dispatcher: p, Clock: e.clock, Logger: log, Events: ev}, campaign.Config{PageSize: 400}), p
}

// TestEventsOfACompletedCampaign: large_send_started once the dispatched members reach 1,000,
// then campaign_finished with every member and chunk — and a sink that refuses every event
// changes nothing about the run.
func TestEventsOfACompletedCampaign(t *testing.T) {
	t.Parallel()
	for _, refuse := range []bool{false, true} {
		e := setup(t)
		rec := &recorder{fail: refuse}
		steps, _ := e.stepsWithEvents(rec)
		e.listCampaign(t, "c_ev", 1550, nil)
		runUntilIdle(t, campaign.NewRunner(steps, time.Millisecond), 50)
		if c := e.campaign(t, "c_ev"); c.State != notify.CampaignCompleted || c.Cursor.Members != 1550 {
			t.Fatalf("refuse=%v: state %s members %d, want COMPLETED with 1550", refuse, c.State, c.Cursor.Members)
		}
		e.wantEveryChunkOnce(t, "c_ev", 1550, 16)
		evs := rec.of("c_ev")
		if len(evs) != 2 {
			t.Fatalf("refuse=%v: events %+v, want large_send_started and campaign_finished", refuse, evs)
		}
		large, done := evs[0], evs[1]
		// Pages of 400: the third page brings the dispatched members to 1,200.
		if large.Type != notify.EventLargeSendStarted || large.Recipients != 1200 || large.Service != "marketing" ||
			large.Detail["category"] != notify.CategoryMarketing || !large.Time.Equal(noon) {
			t.Fatalf("refuse=%v: first event %+v, want large_send_started at 1200 members", refuse, large)
		}
		if done.Type != notify.EventCampaignFinished || done.Recipients != 1550 || done.Detail["chunks"] != 16 || done.Service != "marketing" {
			t.Fatalf("refuse=%v: last event %+v, want campaign_finished with 1550 recipients in 16 chunks", refuse, done)
		}
	}
}

// TestSmallCampaignIsNotALargeSend: below 1,000 members only campaign_finished is emitted.
func TestSmallCampaignIsNotALargeSend(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rec := &recorder{}
	steps, _ := e.stepsWithEvents(rec)
	e.listCampaign(t, "c_small", 999, nil)
	runUntilIdle(t, campaign.NewRunner(steps, time.Millisecond), 50)
	evs := rec.of("c_small")
	if len(evs) != 1 || evs[0].Type != notify.EventCampaignFinished || evs[0].Recipients != 999 {
		t.Fatalf("events %+v, want only campaign_finished with 999 recipients", evs)
	}
}

// refusing is a dispatcher whose prepare messages are always refused as too large: a permanent
// failure of DispatchBatches.
type refusing struct{ campaign.Dispatcher }

func (refusing) EnqueuePrepare(context.Context, *notify.Notification, int, int, func(int) time.Duration) error {
	return notify.Errorf(notify.ETOOLARGE, "prepare message over the queue's limit")
}

// TestEventsOfAFailedCampaign: a permanent failure in the local runner and in the state
// machine's steps fails the campaign and emits campaign_failed once, with its code and reason;
// a retryable one emits nothing.
func TestEventsOfAFailedCampaign(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rec := &recorder{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := pipeline.New(pipeline.Deps{Store: e.store, Queue: e.queue, Clock: e.clock, Logger: log}, pipeline.Config{ChunkSize: chunkSize})
	steps := campaign.New(campaign.Deps{Campaigns: e.store, Audience: e.store, Notifications: e.store,
		Dispatcher: refusing{p}, Clock: e.clock, Logger: log, Events: rec}, campaign.Config{PageSize: 400})

	e.listCampaign(t, "c_fail_runner", 10, nil)
	r := campaign.NewRunner(steps, time.Millisecond)
	runUntilIdle(t, r, 5)
	runUntilIdle(t, r, 5) // a FAILED campaign is not stepped again

	e.listCampaign(t, "c_fail_machine", 10, nil)
	tooLarge := func(*notify.Notification, int, int) ([]json.RawMessage, error) {
		return nil, notify.Errorf(notify.ETOOLARGE, "prepare message over the queue's limit")
	}
	m := campaign.NewMachine(steps, tooLarge, campaign.MachineConfig{})
	st, err := m.Run(t.Context(), campaign.StepCheckWindow, campaign.MachineState{CampaignID: "c_fail_machine"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Run(t.Context(), campaign.StepFetchPage, st); !notify.IsCode(err, notify.ETOOLARGE) {
		t.Fatalf("FetchPage = %v, want ETOOLARGE", err)
	}
	// The step retried (Step Functions) finds the campaign ended: no error, nothing to send.
	if st, err := m.Run(t.Context(), campaign.StepFetchPage, st); err != nil || len(st.Batches) != 0 {
		t.Fatalf("FetchPage retried = %d batches, %v; want none and no error", len(st.Batches), err)
	}

	for _, id := range []string{"c_fail_runner", "c_fail_machine"} {
		c := e.campaign(t, id)
		if c.State != notify.CampaignFailed {
			t.Fatalf("%s: state %s, want FAILED", id, c.State)
		}
		evs := rec.of(id)
		if len(evs) != 1 || evs[0].Type != notify.EventCampaignFailed || evs[0].Service != "marketing" || evs[0].Recipients != 10 ||
			evs[0].Detail["code"] != notify.ETOOLARGE || evs[0].Detail["error"] != c.Error || c.Error == "" {
			t.Fatalf("%s: events %+v, want one campaign_failed for 10 members with code too_large and the campaign's error %q", id, evs, c.Error)
		}
	}

	// Retryable: the campaign stays as it was and nothing is emitted.
	e.listCampaign(t, "c_retry", 10, nil)
	c := e.campaign(t, "c_retry")
	if steps.Fail(t.Context(), c, notify.Errorf(notify.EUNAVAILABLE, "store busy")) {
		t.Fatal("Fail on a retryable error reported the campaign failed")
	}
	if got := e.campaign(t, "c_retry"); got.State != notify.CampaignRunning || len(rec.of("c_retry")) != 0 {
		t.Fatalf("after a retryable error: state %s events %+v, want RUNNING and none", got.State, rec.of("c_retry"))
	}
}
