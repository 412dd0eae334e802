package campaign

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"herald/internal/notify"
)

// Runner drives campaigns in the local runtime: every poll it gives each active campaign whose
// time has come one Step. All state lives in the store — the cursor, the state, PausedUntil,
// SendAt — so a runner started after a crash carries on from the saved cursors; the only thing
// kept in memory is when a rate-limited campaign may take its next page.
type Runner struct {
	steps     *Steps
	campaigns notify.CampaignStore
	clock     notify.Clock
	log       *slog.Logger
	poll      time.Duration

	mu       sync.Mutex
	notUntil map[string]time.Time // MaxRate waits of RUNNING campaigns

	// Yield, when set, runs before each step: the local runtime uses it to let real-time work in
	// flight finish first, since a step's page writes share the store's one writer with it.
	Yield func(context.Context)
}

// NewRunner returns a runner over steps polling every poll (default 250ms).
func NewRunner(steps *Steps, poll time.Duration) *Runner {
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	return &Runner{steps: steps, campaigns: steps.d.Campaigns, clock: steps.d.Clock, log: steps.d.Logger,
		poll: poll, notUntil: map[string]time.Time{}}
}

// active are the states a runner looks at; PAUSED waits for Resume, final states are done.
var active = []notify.CampaignState{notify.CampaignScheduled, notify.CampaignRunning, notify.CampaignPausedQuietHours}

// RunOnce gives every active campaign that is due one step and returns how many stepped and
// still have pages ready right now. A failing campaign is logged and, when the failure is
// permanent, marked FAILED with campaign_failed emitted (Steps.Fail); the others go on.
func (r *Runner) RunOnce(ctx context.Context) (ready int, err error) {
	cs, err := r.campaigns.ListCampaigns(ctx, active...)
	if err != nil {
		return 0, err
	}
	now := r.clock.Now()
	for _, c := range cs {
		if ctx.Err() != nil {
			return ready, ctx.Err()
		}
		if !r.due(c, now) {
			continue
		}
		if r.Yield != nil {
			r.Yield(ctx)
		}
		w, err := r.steps.Step(ctx, c.ID)
		if err != nil {
			r.fail(ctx, c, err)
			continue
		}
		r.mu.Lock()
		delete(r.notUntil, c.ID)
		if w.Action == ActionWait && w.State == notify.CampaignRunning {
			r.notUntil[c.ID] = w.Until
		}
		r.mu.Unlock()
		if w.Action == ActionRun {
			ready++
		}
	}
	return ready, nil
}

// due reports whether c should take a step at now. SendAt and PausedUntil are read from the
// store each time, so a reschedule or a restart is honoured without any wake-up bookkeeping.
func (r *Runner) due(c *notify.Campaign, now time.Time) bool {
	switch c.State {
	case notify.CampaignScheduled:
		return c.SendAt == nil || !now.Before(*c.SendAt)
	case notify.CampaignPausedQuietHours:
		return c.PausedUntil == nil || !now.Before(*c.PausedUntil)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.notUntil[c.ID]
	return !ok || !now.Before(until)
}

func (r *Runner) fail(ctx context.Context, c *notify.Campaign, err error) {
	if ctx.Err() != nil {
		return
	}
	switch {
	case r.steps.Fail(ctx, c, err):
		r.log.ErrorContext(ctx, "campaign step failed", "campaign_id", c.ID, "code", notify.ErrorCode(err), "error", err)
	case notify.IsRetryable(err) || notify.IsCode(err, notify.ECONFLICT):
		r.log.WarnContext(ctx, "campaign step failed; will retry", "campaign_id", c.ID, "error", err)
	default:
		r.log.WarnContext(ctx, "campaign step failed after the campaign ended", "campaign_id", c.ID, "error", err)
	}
}

// Run steps campaigns until ctx ends: right away again while some campaign has a page ready,
// otherwise after the poll interval.
func (r *Runner) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ready, err := r.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.ErrorContext(ctx, "campaign runner", "error", err)
		}
		if ready > 0 {
			t.Reset(0)
		} else {
			t.Reset(r.poll)
		}
	}
}
