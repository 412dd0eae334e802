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

// CampaignMachine returns the campaign steps on the DynamoDB store and the pipeline.
func (e *Env) CampaignMachine() *campaign.Machine {
	steps := campaign.New(campaign.Deps{Campaigns: e.Store, Audience: e.Store, Notifications: e.Store,
		Dispatcher: e.Pipeline, Logger: e.Log}, campaign.Config{})
	return campaign.NewMachine(steps, e.Pipeline.PrepareBodies)
}

// CampaignHandler is the campaign function's handler: one state machine step per invocation,
// returning the new execution state. An error fails the task (Step Functions retries it); the
// steps re-read the campaign from the store, so a retry resumes from the saved cursor.
func (e *Env) CampaignHandler() func(context.Context, CampaignEvent) (campaign.MachineState, error) {
	m := e.CampaignMachine()
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
	lambda.Start(e.CampaignHandler())
	return nil
}
