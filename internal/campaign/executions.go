package campaign

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"herald/internal/notify"
)

// Executions are a campaign's runs where something outside the process drives the steps: Step
// Functions executions in AWS (internal/sfn), one chain per campaign. Generation k of campaign
// id is the execution named ExecutionName(id, k). A run ends when CheckWindow says stop (the
// campaign ended, or an operator paused it) or hands over to generation k+1 after
// MachineConfig.MaxIterations loop passes (continue-as-new: Step Functions keeps at most 25,000
// history events per execution); a resume after a stop starts the next generation too. So
// generation k+1 having been started means generation k is superseded: its next CheckWindow stops
// it, and at most one run of a campaign goes on fetching pages.
//
// The local runtime needs none: its Runner polls the store.
type Executions interface {
	// Start starts generation gen of campaign id. It is idempotent: if that generation was
	// started before — still running or ended — it returns nil and starts nothing.
	Start(ctx context.Context, id string, gen int) error
	// Started reports whether generation gen of campaign id was started, and whether it is still
	// running.
	Started(ctx context.Context, id string, gen int) (started, running bool, err error)
}

// ExecutionName is the name of generation gen of campaign id's run: "<id>-g<gen>". Campaign ids
// ([0-9a-z_], at most 28 bytes for Herald's own) are valid in execution names, which allow 80.
func ExecutionName(id string, gen int) string { return id + "-g" + strconv.Itoa(gen) }

// LatestExecution returns the newest generation started for campaign id and whether it is still
// running; gen -1 when none was. Generations are started in order from 0, so it probes
// exponentially, then bisects: O(log gen) lookups.
func LatestExecution(ctx context.Context, x Executions, id string) (gen int, running bool, err error) {
	started := func(g int) (bool, bool, error) {
		ok, run, err := x.Started(ctx, id, g)
		if err != nil {
			return false, false, fmt.Errorf("latest execution of %s: %w", id, err)
		}
		return ok, run, nil
	}
	ok, run, err := started(0)
	if err != nil || !ok {
		return -1, false, err
	}
	lo, loRunning := 0, run // lo is started
	hi := 1                 // hi is the first generation not known to be started
	for {
		ok, run, err := started(hi)
		if err != nil {
			return 0, false, err
		}
		if !ok {
			break
		}
		lo, loRunning, hi = hi, run, hi*2
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, run, err := started(mid)
		if err != nil {
			return 0, false, err
		}
		if ok {
			lo, loRunning = mid, run
		} else {
			hi = mid
		}
	}
	return lo, loRunning, nil
}

// Control is what the API needs of campaigns (internal/api.Campaigns) in a runtime whose runs are
// Executions: besides storing and moving campaigns, it starts their runs. A campaign without a
// future send_at starts on create; one with a send_at arms a fire on its service's ingest queue,
// and ingest hands that fire to FireCampaign; a resume starts the next generation.
type Control struct {
	Steps      *Steps
	Executions Executions
	// Scheduler arms the fire of a campaign created with a future send_at (EventBridge Scheduler
	// onto the service's ingest queue). Nil: the run starts at once and CheckWindow waits for
	// send_at inside it.
	Scheduler notify.Scheduler
}

// CreateCampaign stores c and starts its run, or arms its fire. A repeated call (same id) starts
// or arms again, idempotently, so a retry after a failed start is how a caller repairs it.
func (x *Control) CreateCampaign(ctx context.Context, c *notify.Campaign) (stored *notify.Campaign, created bool, err error) {
	stored, created, err = x.Steps.d.Campaigns.CreateCampaign(ctx, c)
	if err != nil {
		return nil, false, err
	}
	if stored.State.Final() || stored.State == notify.CampaignPaused {
		return stored, created, nil // a retry of a campaign an operator already moved
	}
	if stored.SendAt != nil && stored.SendAt.After(x.Steps.d.Clock.Now()) && x.Scheduler != nil {
		if err := x.Scheduler.Schedule(ctx, stored.ID, notify.IngestQueue(stored.Service), *stored.SendAt); err != nil {
			return nil, false, fmt.Errorf("create campaign %s: schedule: %w", stored.ID, err)
		}
		return stored, created, nil
	}
	if err := x.Executions.Start(ctx, stored.ID, 0); err != nil {
		return nil, false, fmt.Errorf("create campaign %s: start: %w", stored.ID, err)
	}
	return stored, created, nil
}

// GetCampaign returns the campaign with its progress. ENOTFOUND.
func (x *Control) GetCampaign(ctx context.Context, id string) (*notify.Campaign, error) {
	return x.Steps.d.Campaigns.GetCampaign(ctx, id)
}

// Reschedule moves a reserved campaign's send_at: the new fire is armed before the store
// changes, so a write that loses to the old fire or a cancel leaves only a fire that finds the
// campaign no longer waiting, while the old fire, armed for the old time, is stale (FireCampaign)
// once the store has the new one. ECONFLICT unless SCHEDULED.
func (x *Control) Reschedule(ctx context.Context, id string, at time.Time) error {
	c, err := x.Steps.d.Campaigns.LoadCampaign(ctx, id)
	if err != nil {
		return fmt.Errorf("reschedule campaign %s: %w", id, err)
	}
	if c.State != notify.CampaignScheduled {
		return notify.Errorf(notify.ECONFLICT, "campaign %s is %s, no longer SCHEDULED; it can't be rescheduled", id, c.State)
	}
	if x.Scheduler != nil {
		if err := x.Scheduler.Schedule(ctx, id, notify.IngestQueue(c.Service), at); err != nil {
			return fmt.Errorf("reschedule campaign %s: schedule: %w", id, err)
		}
	}
	return x.Steps.Reschedule(ctx, id, at)
}

// Pause stops the campaign: its run ends at its next CheckWindow. ECONFLICT unless running.
func (x *Control) Pause(ctx context.Context, id string) error { return x.Steps.Pause(ctx, id) }

// Cancel ends the campaign: its run ends at its next CheckWindow, and a fire still armed finds it
// canceled and does nothing. ECONFLICT if it already ended.
func (x *Control) Cancel(ctx context.Context, id string) error { return x.Steps.Cancel(ctx, id) }

// Resume moves a paused campaign back to running and starts the next generation of its run: the
// run that was paused has ended at CheckWindow, or — paused and resumed while it waited — is
// superseded by the new one at its next CheckWindow. ECONFLICT unless PAUSED; but a campaign
// left running without a live run (a resume whose start failed) gets one before the ECONFLICT is
// returned, so retrying a failed resume repairs it.
func (x *Control) Resume(ctx context.Context, id string) error {
	rerr := x.Steps.Resume(ctx, id)
	if rerr != nil && !notify.IsCode(rerr, notify.ECONFLICT) {
		return rerr
	}
	gen, running, err := LatestExecution(ctx, x.Executions, id)
	if err != nil {
		return fmt.Errorf("resume %s: %w", id, err)
	}
	if rerr != nil {
		c, err := x.Steps.d.Campaigns.LoadCampaign(ctx, id)
		if err != nil {
			return fmt.Errorf("resume %s: %w", id, err)
		}
		if running || c.State.Final() || c.State == notify.CampaignPaused || c.State == notify.CampaignScheduled {
			return rerr
		}
	}
	if err := x.Executions.Start(ctx, id, gen+1); err != nil {
		return fmt.Errorf("resume %s: start: %w", id, err)
	}
	return rerr
}

// FireCampaign handles a reserved send's fire for campaign id (internal/pipeline's
// IngestWithCampaigns), arriving on service's ingest queue: a campaign still waiting to run gets
// its first run. It reports campaign=false when id is not a campaign, so ingest treats the fire
// as a notification's; a campaign of another service is EFORBIDDEN. A fire armed for a send_at
// the campaign no longer has (a PATCH re-armed it) is stale and does nothing; one armed for the
// stored send_at starts the campaign even before or long after it (an operator moved the
// schedule in the console): the campaign moves to RUNNING with send_at set to the fire's time in
// one write, so CheckWindow does not wait for the old time. A fire for a paused or ended
// campaign does nothing; a repeated fire starts nothing new (generation 0 already exists).
func (x *Control) FireCampaign(ctx context.Context, service string, f notify.FireMessage) (campaign bool, err error) {
	c, err := x.Steps.d.Campaigns.LoadCampaign(ctx, f.Fire)
	if notify.IsCode(err, notify.ENOTFOUND) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("fire campaign %s: %w", f.Fire, err)
	}
	if c.Service != service {
		return true, notify.Errorf(notify.EFORBIDDEN, "fire for campaign %s arrived on the ingest queue of %s, but it is another service's", c.ID, service)
	}
	log := x.Steps.d.Logger
	now := x.Steps.d.Clock.Now()
	if c.State == notify.CampaignScheduled {
		var armedFor time.Time
		if f.At != nil {
			armedFor = *f.At
		}
		v := notify.JudgeFire(armedFor, c.SendAt, now)
		if v.Stale {
			log.InfoContext(ctx, "stale campaign fire ignored", "campaign_id", c.ID, "armed_for", armedFor, "send_at", c.SendAt)
			return true, nil
		}
		if v.SendAt != nil {
			err := x.Steps.d.Campaigns.SetCampaignState(ctx, c.ID, notify.CampaignTransition{
				To: notify.CampaignRunning, SendAt: v.SendAt, At: now}, notify.CampaignScheduled)
			if err != nil && !notify.IsCode(err, notify.ECONFLICT) {
				return true, fmt.Errorf("fire campaign %s: %w", c.ID, err)
			}
			if err != nil { // canceled, paused or started meanwhile: decide on what it is now
				if c, err = x.Steps.d.Campaigns.LoadCampaign(ctx, c.ID); err != nil {
					return true, fmt.Errorf("fire campaign %s: %w", f.Fire, err)
				}
			} else {
				log.InfoContext(ctx, "campaign fire came off its send_at; send_at follows", "campaign_id", c.ID,
					"send_at_was", c.SendAt, "send_at", *v.SendAt)
			}
		}
	}
	if c.State.Final() || c.State == notify.CampaignPaused {
		log.InfoContext(ctx, "campaign fire ignored", "campaign_id", c.ID, "state", c.State)
		return true, nil
	}
	if err := x.Executions.Start(ctx, c.ID, 0); err != nil {
		return true, fmt.Errorf("fire campaign %s: start: %w", c.ID, err)
	}
	log.InfoContext(ctx, "campaign started by its fire", "campaign_id", c.ID, "send_at", c.SendAt)
	return true, nil
}
