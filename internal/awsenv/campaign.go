package awsenv

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/lambda"

	"herald/internal/campaign"
	"herald/internal/notify"
)

// CampaignEvent is what the campaign state machine's Lambda tasks send (infra/campaign.go).
type CampaignEvent struct {
	Step  string                `json:"step"`
	State campaign.MachineState `json:"state"`
}

func (e *Env) campaignSteps() *campaign.Steps {
	return campaign.New(campaign.Deps{Campaigns: e.Store, Audience: e.Store, Notifications: e.Store,
		Dispatcher: e.Pipeline, Broadcasts: e.Store, Logger: e.Log, Events: e.Events},
		campaign.Config{InboxTTL: e.Config.Inbox.TTL.D()})
}

// CampaignMachine returns the campaign steps on the DynamoDB store and the pipeline; with x,
// CheckWindow stops an execution a newer generation superseded.
func (e *Env) CampaignMachine(x campaign.Executions) *campaign.Machine {
	return campaign.NewMachine(e.campaignSteps(), e.Pipeline.PrepareBodies, campaign.MachineConfig{Executions: x})
}

// CampaignHandler is the campaign function's handler: one state machine step per invocation,
// returning the new execution state. An error fails the task (Step Functions retries it); the
// steps re-read the campaign from the store, so a retry resumes from the saved cursor. x are the
// state machine's own executions (nil: no superseded check).
func (e *Env) CampaignHandler(x campaign.Executions) func(context.Context, CampaignEvent) (campaign.MachineState, error) {
	m := e.CampaignMachine(x)
	return func(ctx context.Context, ev CampaignEvent) (campaign.MachineState, error) {
		st, err := m.Run(ctx, ev.Step, ev.State)
		if err != nil {
			e.Log.ErrorContext(ctx, "campaign step failed", "step", ev.Step, "campaign_id", ev.State.CampaignID,
				"code", notify.ErrorCode(err), "error", err)
			return st, err
		}
		return st, nil
	}
}

// StartCampaign is the campaign function's main, returning like StartSQS: only when the
// environment is wrong, before lambda.Start.
func StartCampaign() error {
	e, err := Load(context.Background(), Options{})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var x campaign.Executions
	switch ex, err := e.CampaignExecutions(); {
	case err != nil:
		return fmt.Errorf("config: %w", err)
	case ex != nil:
		x = ex
	}
	lambda.Start(e.CampaignHandler(x))
	return nil
}
