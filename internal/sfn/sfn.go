// Package sfn runs campaigns as executions of the campaign state machine on AWS Step Functions
// (Standard): campaign.Executions, one execution per generation of a campaign's run, named
// campaign.ExecutionName(id, generation). The local runtime's counterpart is the in-process
// runner in internal/campaign.
package sfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"herald/internal/awserr"
	"herald/internal/campaign"
	"herald/internal/notify"
)

// Executions are the campaign state machine's executions.
type Executions struct {
	client     *awssfn.Client
	machineARN string
}

var _ campaign.Executions = (*Executions)(nil)

// NewExecutions returns the executions of the state machine machineARN
// (arn:aws:states:<region>:<account>:stateMachine:<name>).
func NewExecutions(client *awssfn.Client, machineARN string) (*Executions, error) {
	if !strings.Contains(machineARN, ":stateMachine:") {
		return nil, fmt.Errorf("sfn: %q is not a state machine ARN", machineARN)
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
// ExecutionAlreadyExists — which here means the same thing: that generation exists. Errors carry
// notify codes (ETHROTTLED, EAUTH, EUNAVAILABLE; anything else EINTERNAL, retryable).
func (x *Executions) Start(ctx context.Context, id string, gen int) error {
	name := campaign.ExecutionName(id, gen)
	in, err := json.Marshal(executionInput{CampaignID: id, Generation: gen})
	if err != nil {
		return fmt.Errorf("sfn: start execution %s: %w", name, err)
	}
	_, err = x.client.StartExecution(ctx, &awssfn.StartExecutionInput{
		StateMachineArn: aws.String(x.machineARN), Name: aws.String(name), Input: aws.String(string(in)),
	})
	var exists *types.ExecutionAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return translate(err, "sfn: start execution %s", name)
	}
	return nil
}

// Started looks generation gen of campaign id up. Errors carry notify codes, as Start's.
func (x *Executions) Started(ctx context.Context, id string, gen int) (started, running bool, err error) {
	name := campaign.ExecutionName(id, gen)
	out, err := x.client.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(x.executionARN(name))})
	var missing *types.ExecutionDoesNotExist
	switch {
	case errors.As(err, &missing):
		return false, false, nil
	case err != nil:
		return false, false, translate(err, "sfn: describe execution %s", name)
	}
	return true, out.Status == types.ExecutionStatusRunning, nil
}

// executionARN is arn:…:execution:<state machine name>:<name>.
func (x *Executions) executionARN(name string) string {
	return strings.Replace(x.machineARN, ":stateMachine:", ":execution:", 1) + ":" + name
}

// codes are the Step Functions error codes with a code of their own. Nothing here is permanent
// for a campaign: a bad name or ARN is a deployment bug an operator fixes, so it stays retryable
// (EINTERNAL) rather than failing the campaign.
var codes = map[string]string{
	"ThrottlingException":         notify.ETHROTTLED,
	"ExecutionLimitExceeded":      notify.ETHROTTLED,
	"AccessDeniedException":       notify.EAUTH,
	"UnrecognizedClientException": notify.EAUTH,
	"ExpiredTokenException":       notify.EAUTH,
}

// translate gives a Step Functions error its notify code (awserr, with codes).
func translate(err error, format string, args ...any) error {
	return awserr.Wrap(err, codes, format, args...)
}
