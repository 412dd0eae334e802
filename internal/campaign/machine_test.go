package campaign_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/campaign"
	"herald/internal/notify"
	"herald/internal/pipeline"
)

// executions is an in-memory campaign.Executions: execution name → running.
type executions struct {
	mu        sync.Mutex
	running   map[string]bool
	starts    []string // every Start call, repeated ones included
	failStart error    // the next Start fails with it
}

func newExecutions() *executions { return &executions{running: map[string]bool{}} }

func (x *executions) Start(_ context.Context, id string, gen int) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.failStart; err != nil {
		x.failStart = nil
		return err
	}
	name := campaign.ExecutionName(id, gen)
	x.starts = append(x.starts, name)
	if _, ok := x.running[name]; !ok {
		x.running[name] = true
	}
	return nil
}

func (x *executions) Started(_ context.Context, id string, gen int) (started, running bool, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	running, started = x.running[campaign.ExecutionName(id, gen)]
	return started, running, nil
}

func (x *executions) end(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.running[name] = false
}

func (x *executions) started() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.starts)
}

// schedules records the fires armed.
type schedules struct {
	mu    sync.Mutex
	fires []string
}

func (s *schedules) Schedule(_ context.Context, id, queue string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fires = append(s.fires, fmt.Sprintf("%s→%s@%s", id, queue, at.UTC().Format(time.RFC3339)))
	return nil
}
func (s *schedules) Unschedule(context.Context, string) error { return nil }

// machine returns the state machine's steps over e's store, with prepare bodies as the pipeline
// writes them.
func (e *env) machine(cfg campaign.MachineConfig) *campaign.Machine {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := pipeline.New(pipeline.Deps{Store: e.store, Queue: e.queue, Clock: e.clock, Logger: log},
		pipeline.Config{ChunkSize: chunkSize})
	steps := campaign.New(campaign.Deps{Campaigns: e.store, Audience: e.store, Notifications: e.store,
		Dispatcher: p, Clock: e.clock, Logger: log}, campaign.Config{PageSize: 250})
	return campaign.NewMachine(steps, p.PrepareBodies, cfg)
}

// execute plays one execution the way infra/campaign.go's definition does — the Map's sends
// go to the producer — and returns its last state. Input is what StartExecution passed.
func (e *env) execute(t *testing.T, m *campaign.Machine, input string) campaign.MachineState {
	t.Helper()
	var st campaign.MachineState
	if err := json.Unmarshal([]byte(input), &st); err != nil {
		t.Fatal(err)
	}
	step := func(name string) {
		t.Helper()
		// Each task's payload and result cross JSON, as in Step Functions.
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var in campaign.MachineState
		if err := json.Unmarshal(b, &in); err != nil {
			t.Fatal(err)
		}
		if st, err = m.Run(t.Context(), name, in); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for range 1000 {
		step(campaign.StepCheckWindow)
		switch st.Window {
		case campaign.WindowStop, campaign.WindowContinue:
			return st
		case campaign.WindowWait:
			e.clock.Set(e.clock.Now().Add(time.Duration(st.WaitSeconds) * time.Second))
			continue
		}
		step(campaign.StepFetchPage)
		for _, b := range st.Batches {
			if err := e.queue.Send(t.Context(), notify.LaneQueue(notify.StagePrepare, notify.LaneBulk), notify.OutMessage{Body: b}); err != nil {
				t.Fatal(err)
			}
		}
		step(campaign.StepSaveCursor)
		if st.Done {
			return st
		}
	}
	t.Fatal("execution never ended")
	return st
}

// continueInput is the StartExecution input the definition builds on continue:
// {"campaign_id": $.campaign_id, "generation": States.MathAdd($.generation, 1)}, named
// $.next_execution.
func continueInput(t *testing.T, st campaign.MachineState) (name, input string) {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	gen, ok := raw["generation"].(float64)
	if !ok {
		t.Fatalf("state %s has no numeric generation for States.MathAdd", b)
	}
	name, _ = raw["next_execution"].(string)
	in, _ := json.Marshal(map[string]any{"campaign_id": raw["campaign_id"], "generation": gen + 1})
	return name, string(in)
}

func TestMachineContinuesAsNewAfterMaxIterations(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.listCampaign(t, "c_long", 1234, nil) // pages of 200: 7 pages, 13 chunks
	m := e.machine(campaign.MachineConfig{MaxIterations: 3})

	name, input := "c_long-g0", `{"campaign_id":"c_long"}`
	var names []string
	for gen := 0; ; gen++ {
		if gen > 10 {
			t.Fatal("too many generations")
		}
		if want := campaign.ExecutionName("c_long", gen); name != want {
			t.Fatalf("generation %d is named %q, want %q", gen, name, want)
		}
		names = append(names, name)
		st := e.execute(t, m, input)
		if st.Generation != gen {
			t.Fatalf("execution %s ran as generation %d", name, st.Generation)
		}
		if st.Window != campaign.WindowContinue {
			if !st.Done {
				t.Fatalf("execution %s ended with window %q, done %v", name, st.Window, st.Done)
			}
			break
		}
		// Continue-as-new after 3 passes: the 4th CheckWindow asks for it, fetching nothing.
		if st.Iterations != 4 || len(st.Batches) != 0 {
			t.Fatalf("continue after %d iterations with %d batches, want the 4th and none", st.Iterations, len(st.Batches))
		}
		name, input = continueInput(t, st)
	}
	if want := []string{"c_long-g0", "c_long-g1", "c_long-g2"}; !slices.Equal(names, want) {
		t.Fatalf("executions %v, want %v", names, want)
	}
	c := e.campaign(t, "c_long")
	if c.State != notify.CampaignCompleted {
		t.Fatalf("campaign %s, want COMPLETED", c.State)
	}
	e.wantEveryChunkOnce(t, "c_long", 1234, 13)
}

func TestMachineDefaultMaxIterationsFitsTheHistoryLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.listCampaign(t, "c_default", 10, nil)
	m := e.machine(campaign.MachineConfig{})
	st := campaign.MachineState{CampaignID: "c_default", Iterations: 1_000_000}
	st, err := m.Run(t.Context(), campaign.StepCheckWindow, st)
	if err != nil {
		t.Fatal(err)
	}
	if st.Window != campaign.WindowContinue || st.NextExecution != "c_default-g1" {
		t.Fatalf("window %q next %q, want continue as c_default-g1", st.Window, st.NextExecution)
	}
	// Below the default (pages of 2 chunks here: ~39 events a pass) it keeps going.
	st, err = m.Run(t.Context(), campaign.StepCheckWindow, campaign.MachineState{CampaignID: "c_default", Iterations: 400})
	if err != nil {
		t.Fatal(err)
	}
	if st.Window != campaign.WindowOpen {
		t.Fatalf("window %q at 400 passes, want open", st.Window)
	}
}

func TestMachineWaitsBeforeItContinues(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.listCampaign(t, "c_rate", 1000, func(c *notify.Campaign) { c.MaxRate = 100 })
	m := e.machine(campaign.MachineConfig{MaxIterations: 1})
	st := campaign.MachineState{CampaignID: "c_rate", NotBefore: e.clock.Now().Add(time.Minute), Iterations: 5}
	st, err := m.Run(t.Context(), campaign.StepCheckWindow, st)
	if err != nil {
		t.Fatal(err)
	}
	if st.Window != campaign.WindowWait || st.NextExecution != "" {
		t.Fatalf("window %q next %q, want the MaxRate wait served in this execution first", st.Window, st.NextExecution)
	}
}

func TestMachineStopsWhenSuperseded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.listCampaign(t, "c_sup", 500, nil)
	x := newExecutions()
	m := e.machine(campaign.MachineConfig{Executions: x})
	ctx := t.Context()
	if err := x.Start(ctx, "c_sup", 0); err != nil {
		t.Fatal(err)
	}
	st, err := m.Run(ctx, campaign.StepCheckWindow, campaign.MachineState{CampaignID: "c_sup"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Window != campaign.WindowOpen {
		t.Fatalf("generation 0 alone: window %q, want open", st.Window)
	}
	// A resume started generation 1 while generation 0 waited: 0 stops, 1 goes on.
	if err := x.Start(ctx, "c_sup", 1); err != nil {
		t.Fatal(err)
	}
	if st, err = m.Run(ctx, campaign.StepCheckWindow, st); err != nil {
		t.Fatal(err)
	}
	if st.Window != campaign.WindowStop {
		t.Fatalf("superseded generation 0: window %q, want stop", st.Window)
	}
	st, err = m.Run(ctx, campaign.StepCheckWindow, campaign.MachineState{CampaignID: "c_sup", Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	if st.Window != campaign.WindowOpen {
		t.Fatalf("generation 1: window %q, want open", st.Window)
	}
}

func TestLatestExecution(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 2, 3, 5, 8, 13, 64, 100} {
		x := newExecutions()
		for g := range n {
			if err := x.Start(t.Context(), "c", g); err != nil {
				t.Fatal(err)
			}
			x.end(campaign.ExecutionName("c", g))
		}
		if n > 0 {
			x.running[campaign.ExecutionName("c", n-1)] = true
		}
		gen, running, err := campaign.LatestExecution(t.Context(), x, "c")
		if err != nil {
			t.Fatal(err)
		}
		if gen != n-1 || running != (n > 0) {
			t.Errorf("%d generations: latest %d running %v, want %d %v", n, gen, running, n-1, n > 0)
		}
	}
}

func (e *env) control() (*campaign.Control, *executions, *schedules) {
	x, s := newExecutions(), &schedules{}
	return &campaign.Control{Steps: e.steps, Executions: x, Scheduler: s}, x, s
}

func TestControlStartsOnCreate(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctl, x, s := e.control()
	ctx := t.Context()
	c := &notify.Campaign{ID: "c_now", Service: "marketing", State: notify.CampaignRunning,
		Notification: notify.Notification{Category: notify.CategoryTransactional, Channels: []notify.Channel{notify.ChannelPush},
			Content: notify.Content{Body: "hi"}},
		Audience: notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceUserList, ListID: "l"}}}}
	for range 2 { // a retried create starts the same execution, which Start makes a no-op
		if _, _, err := ctl.CreateCampaign(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if got := x.started(); !slices.Equal(got, []string{"c_now-g0", "c_now-g0"}) || len(x.running) != 1 {
		t.Fatalf("starts %v (%d executions), want c_now-g0 twice, one execution", got, len(x.running))
	}
	if len(s.fires) != 0 {
		t.Fatalf("fires %v, want none", s.fires)
	}

	// With a future send_at: a fire on the service's ingest queue, no execution yet.
	at := e.clock.Now().Add(time.Hour)
	later := *c
	later.ID, later.SendAt, later.State = "c_later", &at, notify.CampaignScheduled
	if _, _, err := ctl.CreateCampaign(ctx, &later); err != nil {
		t.Fatal(err)
	}
	if want := "c_later→ingest-marketing@" + at.UTC().Format(time.RFC3339); !slices.Equal(s.fires, []string{want}) {
		t.Fatalf("fires %v, want %s", s.fires, want)
	}
	if started, _, _ := x.Started(ctx, "c_later", 0); started {
		t.Fatal("a campaign with a future send_at started before its fire")
	}

	// A stale fire (armed for another send_at) starts nothing.
	stale := at.Add(-time.Minute)
	if ok, err := ctl.FireCampaign(ctx, "marketing", notify.FireMessage{Fire: "c_later", At: &stale}); err != nil || !ok {
		t.Fatalf("stale fire = %v, %v", ok, err)
	}
	if started, _, _ := x.Started(ctx, "c_later", 0); started {
		t.Fatal("a stale fire started c_later")
	}
	// The fire: ingest hands it over, and generation 0 starts — once, however often it comes.
	e.clock.Set(at)
	for range 2 {
		isCampaign, err := ctl.FireCampaign(ctx, "marketing", notify.FireMessage{Fire: "c_later", At: &at})
		if err != nil || !isCampaign {
			t.Fatalf("FireCampaign = %v, %v; want a campaign", isCampaign, err)
		}
	}
	if started, running, _ := x.Started(ctx, "c_later", 0); !started || !running {
		t.Fatal("the fire did not start c_later-g0")
	}
	// Another service's ingest queue may not fire it, and a notification's fire is not a campaign's.
	if ok, err := ctl.FireCampaign(ctx, "orders", notify.FireMessage{Fire: "c_later", At: &at}); !ok || !notify.IsCode(err, notify.EFORBIDDEN) {
		t.Fatalf("fire from another service = %v, %v; want EFORBIDDEN", ok, err)
	}
	if ok, err := ctl.FireCampaign(ctx, "marketing", notify.FireMessage{Fire: "n_not_a_campaign"}); err != nil || ok {
		t.Fatalf("fire for a notification = %v, %v; want not a campaign", ok, err)
	}
	if n := len(x.started()); n != 4 {
		t.Fatalf("%d starts, want 4 (two creates, two fires): %v", n, x.started())
	}
}

func TestControlResumeStartsTheNextGeneration(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctl, x, _ := e.control()
	ctx := t.Context()
	e.listCampaign(t, "c_pause", 500, nil)
	if err := x.Start(ctx, "c_pause", 0); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Pause(ctx, "c_pause"); err != nil {
		t.Fatal(err)
	}
	x.end("c_pause-g0") // CheckWindow said stop

	if err := ctl.Resume(ctx, "c_pause"); err != nil {
		t.Fatal(err)
	}
	if started, running, _ := x.Started(ctx, "c_pause", 1); !started || !running {
		t.Fatalf("resume did not start c_pause-g1: %v", x.started())
	}
	// A retried resume finds the campaign running with a live run: ECONFLICT, nothing started.
	if err := ctl.Resume(ctx, "c_pause"); !notify.IsCode(err, notify.ECONFLICT) {
		t.Fatalf("second resume = %v, want ECONFLICT", err)
	}
	if n := len(x.started()); n != 2 {
		t.Fatalf("starts %v, want g0 and g1 only", x.started())
	}

	// A resume whose start failed leaves the campaign RUNNING with no run; the retry repairs it.
	if err := ctl.Pause(ctx, "c_pause"); err != nil {
		t.Fatal(err)
	}
	x.end("c_pause-g1")
	x.failStart = notify.Errorf(notify.EUNAVAILABLE, "step functions is down")
	if err := ctl.Resume(ctx, "c_pause"); err == nil || !notify.IsCode(err, notify.EUNAVAILABLE) {
		t.Fatalf("resume with a failing start = %v, want EUNAVAILABLE", err)
	}
	if c := e.campaign(t, "c_pause"); c.State != notify.CampaignRunning {
		t.Fatalf("campaign %s after the failed start, want RUNNING", c.State)
	}
	err := ctl.Resume(ctx, "c_pause")
	if !notify.IsCode(err, notify.ECONFLICT) {
		t.Fatalf("retried resume = %v, want ECONFLICT (already running)", err)
	}
	if started, running, _ := x.Started(ctx, "c_pause", 2); !started || !running {
		t.Fatalf("retried resume did not start c_pause-g2: %v", x.started())
	}

	// Paused and resumed while generation 2 still waits: generation 3 starts and supersedes it.
	if err := ctl.Pause(ctx, "c_pause"); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Resume(ctx, "c_pause"); err != nil {
		t.Fatal(err)
	}
	if started, _, _ := x.Started(ctx, "c_pause", 3); !started {
		t.Fatalf("resume over a live run did not start c_pause-g3: %v", x.started())
	}
	if err := ctl.Cancel(ctx, "c_pause"); err != nil {
		t.Fatal(err)
	}
	if ok, err := ctl.FireCampaign(ctx, "marketing", notify.FireMessage{Fire: "c_pause"}); err != nil || !ok {
		t.Fatalf("fire for a canceled campaign = %v, %v", ok, err)
	}
	if n := len(x.started()); n != 4 {
		t.Fatalf("a fire for a canceled campaign started something: %v", x.started())
	}
}

// PATCH /v1/campaigns/{id} in AWS: the fire is re-armed for the new time, the store moves, and
// the fire armed for the old time starts nothing.
func TestControlReschedule(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctl, x, s := e.control()
	ctx := t.Context()
	first := e.clock.Now().Add(time.Hour).UTC()
	c := &notify.Campaign{ID: "c_moved", Service: "marketing", State: notify.CampaignScheduled, SendAt: &first,
		Notification: notify.Notification{Category: notify.CategoryTransactional, Channels: []notify.Channel{notify.ChannelPush},
			Content: notify.Content{Body: "hi"}},
		Audience: notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceUserList, ListID: "l"}}}}
	if _, _, err := ctl.CreateCampaign(ctx, c); err != nil {
		t.Fatal(err)
	}
	later := first.Add(3 * time.Hour)
	if err := ctl.Reschedule(ctx, c.ID, later); err != nil {
		t.Fatal(err)
	}
	want := []string{"c_moved→ingest-marketing@" + first.Format(time.RFC3339), "c_moved→ingest-marketing@" + later.Format(time.RFC3339)}
	if !slices.Equal(s.fires, want) {
		t.Fatalf("fires %v, want %v", s.fires, want)
	}
	got, err := e.store.GetCampaign(ctx, c.ID)
	if err != nil || got.SendAt == nil || !got.SendAt.Equal(later) || got.State != notify.CampaignScheduled {
		t.Fatalf("stored %+v, %v; want SCHEDULED at %v", got, err, later)
	}
	// The old fire arrives at the old time: stale, nothing starts.
	e.clock.Set(first)
	if ok, err := ctl.FireCampaign(ctx, "marketing", notify.FireMessage{Fire: c.ID, At: &first}); err != nil || !ok {
		t.Fatalf("old fire = %v, %v", ok, err)
	}
	if started, _, _ := x.Started(ctx, c.ID, 0); started {
		t.Fatal("the fire armed for the old send_at started the campaign")
	}
	e.clock.Set(later)
	if _, err := ctl.FireCampaign(ctx, "marketing", notify.FireMessage{Fire: c.ID, At: &later}); err != nil {
		t.Fatal(err)
	}
	if started, _, _ := x.Started(ctx, c.ID, 0); !started {
		t.Fatal("the fire armed for the new send_at did not start the campaign")
	}
	// A canceled campaign can't be moved, and no fire is armed for it.
	if err := ctl.Cancel(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Reschedule(ctx, c.ID, later.Add(time.Hour)); !notify.IsCode(err, notify.ECONFLICT) {
		t.Fatalf("reschedule after cancel = %v, want ECONFLICT", err)
	}
	if len(s.fires) != 2 {
		t.Fatalf("fires %v: a refused reschedule armed one", s.fires)
	}
}

// TestMachineFailStepFailsTheCampaign: when DispatchBatches still fails after its retries, the
// state machine's Catch hands the error to the Fail step, which fails the campaign (rather than
// leave it RUNNING with no run); a campaign that ended meanwhile stays as it is.
func TestMachineFailStepFailsTheCampaign(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.listCampaign(t, "c_sqs", 300, nil)
	m := e.machine(campaign.MachineConfig{})
	st, err := m.Run(t.Context(), campaign.StepCheckWindow, campaign.MachineState{CampaignID: "c_sqs"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err = m.Run(t.Context(), campaign.StepFetchPage, st); err != nil || len(st.Batches) == 0 {
		t.Fatalf("fetch page: %v, %d batches", err, len(st.Batches))
	}
	// What the Catch passes on (ResultPath $.error), through JSON as in Step Functions.
	b, _ := json.Marshal(st)
	var in map[string]any
	_ = json.Unmarshal(b, &in)
	in["error"] = map[string]any{"Error": "SQS.SqsException", "Cause": "Rate exceeded (Service: Sqs, Status Code: 400)"}
	b, _ = json.Marshal(in)
	var caught campaign.MachineState
	if err := json.Unmarshal(b, &caught); err != nil {
		t.Fatal(err)
	}
	out, err := m.Run(t.Context(), campaign.StepFail, caught)
	if err != nil {
		t.Fatalf("fail step: %v", err)
	}
	if !out.Done || len(out.Batches) != 0 {
		t.Errorf("fail step state: done %v, %d batches", out.Done, len(out.Batches))
	}
	c := e.campaign(t, "c_sqs")
	if c.State != notify.CampaignFailed || !strings.Contains(c.Error, "SQS.SqsException") || !strings.Contains(c.Error, "Rate exceeded") {
		t.Fatalf("campaign %s error %q, want FAILED naming the caught error", c.State, c.Error)
	}

	// A canceled campaign is not turned into a failed one.
	e.listCampaign(t, "c_gone", 10, func(c *notify.Campaign) { c.State = notify.CampaignCanceled })
	if _, err := m.Run(t.Context(), campaign.StepFail, campaign.MachineState{CampaignID: "c_gone",
		Error: &campaign.StepError{Error: "States.TaskFailed"}}); err != nil {
		t.Fatal(err)
	}
	if c := e.campaign(t, "c_gone"); c.State != notify.CampaignCanceled {
		t.Fatalf("canceled campaign is now %s", c.State)
	}
}
