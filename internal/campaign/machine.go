package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"herald/internal/notify"
)

// The Step Functions state machine (infra/campaign.go) runs a campaign as
//
//	CheckWindow → (wait → Wait wait_seconds → CheckWindow | stop → Done |
//	continue → StartExecution next_execution → Done | open) → FetchPage →
//	DispatchBatches (Map: one SQS message per entry of batches to prepare-bulk) → SaveCursor →
//	(done → Done | → CheckWindow)
//	DispatchBatches failing after its retries → Fail → the execution fails
//
// with each Lambda step receiving {"step": <name>, "state": MachineState} and returning the new
// MachineState. The order commit-then-dispatch (see the package doc) is kept: FetchPage commits
// the page (Steps.FetchPage + Steps.SaveCursor, appending the recipients and moving the cursor
// in one store write) and returns the prepare message bodies of every chunk committed but not
// yet enqueued; the Map sends them; SaveCursor records ChunksEnqueued, or finishes the campaign
// once every source is done and dispatched. Every step reads the campaign from the store, so a
// retried step (Lambda retries, a redriven execution) resumes from the saved cursor: a lost
// FetchPage answer re-emits the same chunks (prepare is idempotent per chunk), a lost SaveCursor
// answer finds the chunks already recorded.
//
// An execution is one generation of the campaign's run (see Executions): it is started with
// {"campaign_id", "generation"} and counts its loop passes in MachineState.Iterations. Step
// Functions keeps at most 25,000 history events per execution, so after MaxIterations passes
// CheckWindow answers continue: the state machine starts generation+1 (named next_execution,
// input {"campaign_id", "generation": generation+1}) and ends — continue-as-new, carrying nothing
// else, since the cursor is in the store. CheckWindow also stops an execution whose next
// generation exists (a resume started it), so one run goes on.

// Machine step names, as the state machine sends them.
const (
	StepCheckWindow = "CheckWindow"
	StepFetchPage   = "FetchPage"
	StepSaveCursor  = "SaveCursor"
	// StepFail fails the campaign with the error a state's Catch put in MachineState.Error: a
	// dispatch that still fails after its retries would otherwise end the execution and leave
	// the campaign RUNNING with no run.
	StepFail = "Fail"
)

// Window values of MachineState.
const (
	WindowOpen = "open"
	WindowWait = "wait"
	WindowStop = "stop"
	// WindowContinue ends this execution by starting generation+1 (continue-as-new).
	WindowContinue = "continue"
)

// MachineState is a campaign execution's state, passed from step to step. It holds no
// recipients: the batches only point into the notification's committed recipient list.
type MachineState struct {
	CampaignID  string `json:"campaign_id"`
	Window      string `json:"window,omitempty"`       // CheckWindow's verdict: open, wait, stop, continue
	WaitSeconds int    `json:"wait_seconds,omitempty"` // for wait: how long the Wait state sleeps
	// Batches are the prepare-bulk message bodies FetchPage emitted (the Map sends each).
	Batches []json.RawMessage `json:"batches"`
	// Enqueued is the chunk count the batches bring ChunksEnqueued to, recorded by SaveCursor.
	Enqueued int  `json:"enqueued,omitempty"`
	Done     bool `json:"done"` // SaveCursor: the campaign finished (or ended): stop the loop
	// NotBefore keeps the campaign to its MaxRate: CheckWindow waits until then.
	NotBefore time.Time `json:"not_before,omitzero"`
	// Generation is this execution's place in the campaign's run, ExecutionName(id, generation);
	// a run starts at 0. Always present: the state machine adds 1 to it to continue.
	Generation int `json:"generation"`
	// Iterations counts this execution's loop passes (CheckWindow calls).
	Iterations int `json:"iterations"`
	// NextExecution names generation+1 when Window is continue.
	NextExecution string `json:"next_execution,omitempty"`
	// Error is what a Catch caught (Step Functions' {"Error", "Cause"}), for the Fail step.
	Error *StepError `json:"error,omitempty"`
}

// StepError is a state's failure as a Step Functions Catch passes it on.
type StepError struct {
	Error string `json:"Error"`
	Cause string `json:"Cause,omitempty"`
}

// historyBudget is how many of Step Functions' 25,000 history events per execution a campaign
// execution plans to use; the rest is headroom for retried tasks and a page re-emitted after a
// crash.
const historyBudget = 20_000

// MachineConfig tunes the state machine's steps. Zero fields take defaults.
type MachineConfig struct {
	// Executions lets CheckWindow stop an execution a newer generation superseded. Nil: no check
	// (a single run, as in tests).
	Executions Executions
	// MaxIterations is how many loop passes one execution makes before it continues as new.
	// Default: what fits historyBudget when every pass dispatches a full page — about 23 events
	// for the three tasks and two choices, plus 8 per batch in the Map (190 passes for 5,000-member
	// pages of 500-recipient chunks).
	MaxIterations int
}

// PrepareBodiesFunc returns the prepare message bodies for chunks [from, to) of n.
type PrepareBodiesFunc func(n *notify.Notification, from, to int) ([]json.RawMessage, error)

// Machine runs the state machine's Lambda steps over Steps.
type Machine struct {
	steps         *Steps
	bodies        PrepareBodiesFunc
	executions    Executions
	maxIterations int
}

// NewMachine returns the state machine's steps; bodies encodes prepare messages as the prepare
// stage reads them.
func NewMachine(steps *Steps, bodies PrepareBodiesFunc, cfg MachineConfig) *Machine {
	if cfg.MaxIterations <= 0 {
		batches := (steps.pageSize + steps.chunk - 1) / steps.chunk
		cfg.MaxIterations = max(1, historyBudget/(23+8*batches))
	}
	return &Machine{steps: steps, bodies: bodies, executions: cfg.Executions, maxIterations: cfg.MaxIterations}
}

// Run runs one step on st and returns the new state. EINVALID for an unknown step or a state
// without a campaign id.
//
// A step that fails permanently would fail again however often it is retried, so it fails the
// campaign, as the local Runner does (Steps.Fail: FAILED, and campaign_failed emitted); the
// error is still returned, so the task shows it, and a retried step then finds the campaign
// ended and stops.
func (m *Machine) Run(ctx context.Context, step string, st MachineState) (MachineState, error) {
	if st.CampaignID == "" {
		return st, notify.Errorf(notify.EINVALID, "campaign step %s: state has no campaign_id", step)
	}
	var err error
	switch step {
	case StepCheckWindow:
		st, err = m.checkWindow(ctx, st)
	case StepFetchPage:
		st, err = m.fetchPage(ctx, st)
	case StepSaveCursor:
		st, err = m.saveCursor(ctx, st)
	case StepFail:
		st, err = m.fail(ctx, st)
	default:
		return st, notify.Errorf(notify.EINVALID, "unknown campaign step %q (CheckWindow, FetchPage, SaveCursor, Fail)", step)
	}
	if err != nil && !notify.IsRetryable(err) && !notify.IsCode(err, notify.ECONFLICT) && ctx.Err() == nil {
		if c, gerr := m.steps.d.Campaigns.LoadCampaign(ctx, st.CampaignID); gerr == nil {
			m.steps.Fail(ctx, c, err)
		}
	}
	return st, err
}

func waitSeconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }

func (m *Machine) checkWindow(ctx context.Context, st MachineState) (MachineState, error) {
	st.Batches, st.Enqueued, st.Done, st.WaitSeconds, st.NextExecution = []json.RawMessage{}, 0, false, 0, ""
	st.Iterations++
	if m.executions != nil {
		newer, _, err := m.executions.Started(ctx, st.CampaignID, st.Generation+1)
		if err != nil {
			return st, fmt.Errorf("check window %s: %w", st.CampaignID, err)
		}
		if newer {
			m.steps.d.Logger.InfoContext(ctx, "campaign execution superseded", "campaign_id", st.CampaignID,
				"generation", st.Generation)
			st.Window = WindowStop
			return st, nil
		}
	}
	w, err := m.steps.CheckWindow(ctx, st.CampaignID)
	if err != nil {
		return st, err
	}
	now := m.steps.d.Clock.Now()
	switch w.Action {
	case ActionStop:
		st.Window = WindowStop
	case ActionWait:
		st.Window, st.WaitSeconds = WindowWait, waitSeconds(w.Until.Sub(now))
	default:
		st.Window = WindowOpen
		if now.Before(st.NotBefore) {
			st.Window, st.WaitSeconds = WindowWait, waitSeconds(st.NotBefore.Sub(now))
		}
	}
	// Continue only when open: a wait (NotBefore, quiet hours) is served here first, so the next
	// generation needs nothing but the campaign id.
	if st.Window == WindowOpen && st.Iterations > m.maxIterations {
		st.Window, st.WaitSeconds = WindowContinue, 0
		st.NextExecution = ExecutionName(st.CampaignID, st.Generation+1)
		m.steps.d.Logger.InfoContext(ctx, "campaign execution continues as new", "campaign_id", st.CampaignID,
			"generation", st.Generation, "next", st.NextExecution)
	}
	return st, nil
}

// fetchPage commits the next page unless committed chunks are still to be enqueued, then
// emits the bodies of every committed, unenqueued chunk.
func (m *Machine) fetchPage(ctx context.Context, st MachineState) (MachineState, error) {
	s := m.steps
	st.Batches, st.Enqueued = []json.RawMessage{}, 0
	for range 3 {
		c, err := s.d.Campaigns.LoadCampaign(ctx, st.CampaignID)
		if err != nil {
			return st, fmt.Errorf("fetch page %s: %w", st.CampaignID, err)
		}
		if c.State.Final() {
			return st, nil
		}
		from := c.Cursor.ChunksEnqueued
		if from >= s.chunks(c.Cursor.Members) && !c.Cursor.Exhausted() {
			p, err := s.FetchPage(ctx, c)
			if err != nil {
				return st, err
			}
			if err := s.SaveCursor(ctx, c.ID, p); err != nil {
				if notify.IsCode(err, notify.ECONFLICT) && !errors.Is(err, context.Canceled) {
					continue // moved by someone else: read again
				}
				return st, err
			}
			c.Cursor = p.Next
		}
		to := s.chunks(c.Cursor.Members)
		if from >= to {
			return st, nil
		}
		n, err := s.d.Notifications.GetNotification(ctx, c.ID)
		if err != nil {
			return st, fmt.Errorf("fetch page %s: %w", c.ID, err)
		}
		if err := s.d.Notifications.SetChunksTotal(ctx, c.ID, to); err != nil {
			return st, fmt.Errorf("fetch page %s: %w", c.ID, err)
		}
		if st.Batches, err = m.bodies(n, from, to); err != nil {
			return st, fmt.Errorf("fetch page %s: %w", c.ID, err)
		}
		st.Enqueued = to
		if from*s.chunk < LargeSend && c.Cursor.Members >= LargeSend {
			s.emit(ctx, s.largeSend(c))
		}
		if c.MaxRate > 0 {
			per := time.Duration(float64(s.chunk) / float64(c.MaxRate) * float64(time.Second))
			st.NotBefore = s.d.Clock.Now().Add(time.Duration(to-from) * per)
		}
		return st, nil
	}
	return st, fmt.Errorf("fetch page %s: %w", st.CampaignID, notify.Errorf(notify.ECONFLICT, "cursor keeps moving"))
}

// saveCursor records the chunks the Map sent, and finishes the campaign when its audience is
// exhausted and every chunk is enqueued.
func (m *Machine) saveCursor(ctx context.Context, st MachineState) (MachineState, error) {
	s := m.steps
	for range 3 {
		c, err := s.d.Campaigns.LoadCampaign(ctx, st.CampaignID)
		if err != nil {
			return st, fmt.Errorf("save cursor %s: %w", st.CampaignID, err)
		}
		if c.State.Final() {
			st.Batches, st.Done = []json.RawMessage{}, true
			return st, nil
		}
		if st.Enqueued > c.Cursor.ChunksEnqueued {
			next := c.Cursor.Clone()
			next.ChunksEnqueued = min(st.Enqueued, s.chunks(next.Members))
			if err := s.d.Campaigns.SaveCursor(ctx, c.ID, c.Cursor, next, nil); err != nil {
				if notify.IsCode(err, notify.ECONFLICT) {
					continue
				}
				return st, fmt.Errorf("save cursor %s: %w", c.ID, err)
			}
			c.Cursor = next
		}
		st.Batches, st.Enqueued = []json.RawMessage{}, 0
		if c.Cursor.Exhausted() && c.Cursor.ChunksEnqueued >= s.chunks(c.Cursor.Members) {
			if err := s.Finish(ctx, c.ID); err != nil {
				if notify.IsCode(err, notify.ECONFLICT) {
					return st, nil // paused or canceled meanwhile: CheckWindow decides
				}
				return st, err
			}
			st.Done = true
		}
		return st, nil
	}
	return st, fmt.Errorf("save cursor %s: %w", st.CampaignID, notify.Errorf(notify.ECONFLICT, "cursor keeps moving"))
}

// maxCause bounds the caught cause kept in the campaign's error and event.
const maxCause = 300

// fail marks the campaign FAILED (and emits campaign_failed) with the caught error: the state
// machine's retries are spent, so for the campaign it is final. A campaign already ended
// (canceled, completed) is left as it is.
func (m *Machine) fail(ctx context.Context, st MachineState) (MachineState, error) {
	c, err := m.steps.d.Campaigns.LoadCampaign(ctx, st.CampaignID)
	if err != nil {
		return st, fmt.Errorf("fail %s: %w", st.CampaignID, err)
	}
	what := "a state of the campaign's execution failed"
	if e := st.Error; e != nil && e.Error != "" {
		what = e.Error
		if cause := e.Cause; cause != "" {
			if r := []rune(cause); len(r) > maxCause {
				cause = string(r[:maxCause]) + "…"
			}
			what += ": " + cause
		}
	}
	m.steps.markFailed(ctx, c, notify.Errorf(notify.EUNAVAILABLE, "dispatching the campaign's batches failed after retries (%s)", what))
	st.Batches, st.Done = []json.RawMessage{}, true
	return st, nil
}
