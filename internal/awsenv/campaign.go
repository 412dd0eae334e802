package awsenv

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"herald/internal/campaign"
	"herald/internal/notify"
	"herald/internal/sfn"
)

// EnvCampaignStateMachine is the campaign state machine's ARN (infra/campaign.go): the api and
// ingest functions start executions of it, the campaign function looks its own up.
const EnvCampaignStateMachine = "HERALD_CAMPAIGN_STATE_MACHINE_ARN"

// CampaignExecutions returns the campaign state machine's executions, or nil (and no error) when
// the function was deployed without one (no functions/campaign).
func (e *Env) CampaignExecutions() (*sfn.Executions, error) {
	arn := os.Getenv(EnvCampaignStateMachine)
	if arn == "" {
		return nil, nil
	}
	x, err := sfn.NewExecutions(awssfn.NewFromConfig(e.AWS), arn)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvCampaignStateMachine, err)
	}
	return x, nil
}

// CampaignControl returns the campaigns as the API serves them in AWS — created and moved in the
// store, their runs started as executions, a future send_at armed as a fire on the service's
// ingest queue — or nil when there is no campaign state machine (the routes answer 501).
func (e *Env) CampaignControl() (*campaign.Control, error) {
	x, err := e.CampaignExecutions()
	if x == nil || err != nil {
		return nil, err
	}
	return &campaign.Control{Steps: e.campaignSteps(), Executions: x, Scheduler: e.Scheduler}, nil
}

// CampaignControlWith is the campaigns as CampaignControl serves them, their runs started on x
// instead of the state machine's executions (herald bench cost runs the state machine in
// process).
func (e *Env) CampaignControlWith(x campaign.Executions) *campaign.Control {
	return &campaign.Control{Steps: e.campaignSteps(), Executions: x, Scheduler: e.Scheduler}
}

// CampaignEvent is what the campaign state machine's Lambda tasks send (infra/campaign.go).
type CampaignEvent struct {
	Step  string                `json:"step"`
	State campaign.MachineState `json:"state"`
}

func (e *Env) campaignSteps() *campaign.Steps {
	return campaign.New(campaign.Deps{Campaigns: e.Store, Audience: e.Store, Notifications: e.Store,
		Dispatcher: e.Pipeline, Broadcasts: e.Store, Logger: e.Log, Events: e.Events, InboxEvents: e.InboxEvents},
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
