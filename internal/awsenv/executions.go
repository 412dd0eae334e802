package awsenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"herald/internal/awserr"
	"herald/internal/campaign"
	"herald/internal/notify"
	"herald/internal/pipeline"
)

// EnvCampaignStateMachine is the campaign state machine's ARN (infra/campaign.go): the api and
// ingest functions start executions of it, the campaign function looks its own up.
const EnvCampaignStateMachine = "HERALD_CAMPAIGN_STATE_MACHINE_ARN"

// Executions are the campaign state machine's executions (Step Functions Standard), named
// campaign.ExecutionName(id, generation).
type Executions struct {
	client     *sfn.Client
	machineARN string
}

var _ campaign.Executions = (*Executions)(nil)

// NewExecutions returns the executions of the state machine machineARN
// (arn:aws:states:<region>:<account>:stateMachine:<name>).
func NewExecutions(client *sfn.Client, machineARN string) (*Executions, error) {
	if !strings.Contains(machineARN, ":stateMachine:") {
		return nil, fmt.Errorf("%s: %q is not a state machine ARN", EnvCampaignStateMachine, machineARN)
	}
	return &Executions{client: client, machineARN: machineARN}, nil
}

// executionInput is what an execution starts with: the campaign's MachineState, of which only
// the id and the generation matter; the cursor is in the store.
type executionInput struct {
	CampaignID string `json:"campaign_id"`
	Generation int    `json:"generation"`
}

// Start starts generation gen of campaign id. StartExecution is idempotent on Standard for the
// same name and input while the execution runs; for one that ended, or one the state machine
// itself started with a differently written input (continue-as-new), it answers
// ExecutionAlreadyExists — which here means the same thing: that generation exists.
func (x *Executions) Start(ctx context.Context, id string, gen int) error {
	name := campaign.ExecutionName(id, gen)
	in, err := json.Marshal(executionInput{CampaignID: id, Generation: gen})
	if err != nil {
		return fmt.Errorf("start execution %s: %w", name, err)
	}
	_, err = x.client.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(x.machineARN), Name: aws.String(name), Input: aws.String(string(in)),
	})
	var exists *types.ExecutionAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return translateSFN(err, "start execution %s", name)
	}
	return nil
}

// Started looks generation gen of campaign id up.
func (x *Executions) Started(ctx context.Context, id string, gen int) (started, running bool, err error) {
	name := campaign.ExecutionName(id, gen)
	out, err := x.client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(x.executionARN(name))})
	var missing *types.ExecutionDoesNotExist
	switch {
	case errors.As(err, &missing):
		return false, false, nil
	case err != nil:
		return false, false, translateSFN(err, "describe execution %s", name)
	}
	return true, out.Status == types.ExecutionStatusRunning, nil
}

// executionARN is arn:…:execution:<state machine name>:<name>.
func (x *Executions) executionARN(name string) string {
	return strings.Replace(x.machineARN, ":stateMachine:", ":execution:", 1) + ":" + name
}

// sfnCodes are the Step Functions error codes with a code of their own. Nothing here is
// permanent for a campaign: a bad name or ARN is a deployment bug an operator fixes, so it stays
// retryable (EINTERNAL) rather than failing the campaign.
var sfnCodes = map[string]string{
	"ThrottlingException":         notify.ETHROTTLED,
	"ExecutionLimitExceeded":      notify.ETHROTTLED,
	"AccessDeniedException":       notify.EAUTH,
	"UnrecognizedClientException": notify.EAUTH,
	"ExpiredTokenException":       notify.EAUTH,
}

// translateSFN gives a Step Functions error its notify code (awserr, with sfnCodes).
func translateSFN(err error, format string, args ...any) error {
	return awserr.Wrap(err, sfnCodes, format, args...)
}

// CampaignExecutions returns the campaign state machine's executions, or nil (and no error) when
// the function was deployed without one (no functions/campaign).
func (e *Env) CampaignExecutions() (*Executions, error) {
	arn := os.Getenv(EnvCampaignStateMachine)
	if arn == "" {
		return nil, nil
	}
	return NewExecutions(sfn.NewFromConfig(e.AWS), arn)
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

// StartIngest is the ingest function's main, returning like StartSQS: every service's ingest
// queue, where a reserved fire for a campaign starts its execution.
func StartIngest() error {
	e, err := Load(context.Background(), Options{})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var campaigns pipeline.CampaignFirer
	switch c, err := e.CampaignControl(); {
	case err != nil:
		return fmt.Errorf("config: %w", err)
	case c != nil:
		campaigns = c
	}
	lambda.Start(e.SQSHandler(func(queue string) pipeline.Handler {
		return e.Pipeline.IngestWithCampaigns(strings.TrimPrefix(queue, "ingest-"), e.Scheduler, campaigns)
	}))
	return nil
}
