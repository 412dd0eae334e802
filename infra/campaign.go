package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	sfn "github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctionstasks"
	"github.com/aws/jsii-runtime-go"

	"herald/internal/campaign"
	"herald/internal/notify"
)

// addCampaign defines the campaign state machine (docs/design.md §4) when functions/campaign
// exists:
//
//	CheckWindow → (wait → Wait → CheckWindow | stop → Done |
//	continue → ContinueAsNew → Done | open) → FetchPage →
//	DispatchBatches (Map: one SQS message per batch to prepare-bulk, retried) → SaveCursor →
//	(done → Done | → CheckWindow); DispatchBatches failing after its retries → Fail → Failed
//
// Each Lambda step gets {"step": <name>, "state": <execution state>} and returns the new state;
// CheckWindow sets window (open, wait, stop, continue) and wait_seconds, FetchPage sets batches
// (message bodies for prepare) and SaveCursor sets done. The cursor lives in the notifications
// table, so a restarted execution resumes from it.
//
// Who starts executions (internal/campaign.Executions): the api function when a campaign without
// a future send_at is created, or resumed; ingest when a campaign's reserved fire arrives; and
// the state machine itself, which after campaign.MachineConfig.MaxIterations loop passes starts
// generation+1 of the campaign's run (execution <campaign id>-g<k>) and ends — continue-as-new,
// under the 25,000-event history limit. It names itself by ARN constructed from its name (a Ref
// would make the state machine depend on itself), and so does the campaign function, which
// reads its own executions to stop a run a resume superseded.
func (h *herald) addCampaign() {
	fn, ok := h.functions["campaign"]
	if !ok {
		return
	}
	step := func(name string) awsstepfunctionstasks.LambdaInvoke {
		return awsstepfunctionstasks.NewLambdaInvoke(h.stack, jsii.String("Campaign"+name), &awsstepfunctionstasks.LambdaInvokeProps{
			StateName:      jsii.String(name),
			LambdaFunction: fn,
			Payload: sfn.TaskInput_FromObject(&map[string]interface{}{
				"step": name, "state": sfn.JsonPath_EntirePayload(),
			}),
			PayloadResponseOnly:      jsii.Bool(true),
			RetryOnServiceExceptions: jsii.Bool(true),
		})
	}
	retry := func(t awsstepfunctionstasks.LambdaInvoke) awsstepfunctionstasks.LambdaInvoke {
		// A step's error is retryable (throttling, a conflict) unless it failed the campaign, and
		// then the retried step finds it FAILED and stops: retry, or the run would end mid-way.
		t.AddRetry(&sfn.RetryProps{Errors: jsii.Strings(*sfn.Errors_TASKS_FAILED()), Interval: awscdk.Duration_Seconds(jsii.Number(2)),
			BackoffRate: jsii.Number(2), MaxAttempts: jsii.Number(6), JitterStrategy: sfn.JitterType_FULL})
		return t
	}
	checkWindow, fetchPage, saveCursor := retry(step(campaign.StepCheckWindow)), retry(step(campaign.StepFetchPage)), retry(step(campaign.StepSaveCursor))

	dispatch := sfn.NewMap(h.stack, jsii.String("CampaignDispatchBatches"), &sfn.MapProps{
		StateName:      jsii.String("DispatchBatches"),
		ItemsPath:      sfn.JsonPath_StringAt(jsii.String("$.batches")),
		MaxConcurrency: jsii.Number(10),
		ResultPath:     sfn.JsonPath_DISCARD(),
	})
	sendBatch := awsstepfunctionstasks.NewSqsSendMessage(h.stack, jsii.String("CampaignSendBatch"), &awsstepfunctionstasks.SqsSendMessageProps{
		StateName:   jsii.String("SendBatch"),
		Queue:       h.queueByName[notify.LaneQueue(notify.StagePrepare, notify.LaneBulk)].queue,
		MessageBody: sfn.TaskInput_FromJsonPathAt(jsii.String("$")),
	})
	// SQS throttling or a brief outage: back off and send again (prepare is idempotent per
	// chunk, so a batch sent twice is harmless) — for up to about a minute and a half.
	sendBatch.AddRetry(&sfn.RetryProps{Errors: jsii.Strings(*sfn.Errors_TASKS_FAILED()), Interval: awscdk.Duration_Seconds(jsii.Number(1)),
		BackoffRate: jsii.Number(2), MaxAttempts: jsii.Number(7), MaxDelay: awscdk.Duration_Seconds(jsii.Number(30)), JitterStrategy: sfn.JitterType_FULL})
	dispatch.ItemProcessor(sendBatch, nil)
	// A batch that still cannot be sent fails the campaign through the Fail step (FAILED, with
	// the error, and campaign_failed emitted) instead of leaving it RUNNING with no run; the
	// execution then fails too, which the executions-failed alarm reports.
	failStep := retry(step(campaign.StepFail))
	failStep.Next(sfn.NewFail(h.stack, jsii.String("CampaignFailed"), &sfn.FailProps{
		StateName: jsii.String("Failed"),
		Error:     jsii.String("CampaignDispatchFailed"),
		Cause:     jsii.String("DispatchBatches failed after its retries; the campaign is FAILED"),
	}))
	dispatch.AddCatch(failStep, &sfn.CatchProps{Errors: jsii.Strings(*sfn.Errors_ALL()), ResultPath: jsii.String("$.error")})

	done := sfn.NewSucceed(h.stack, jsii.String("CampaignDone"), &sfn.SucceedProps{StateName: jsii.String("Done")})
	wait := sfn.NewWait(h.stack, jsii.String("CampaignWait"), &sfn.WaitProps{
		StateName: jsii.String("WaitForWindow"),
		Time:      sfn.WaitTime_SecondsPath(jsii.String("$.wait_seconds")),
	})
	// Continue-as-new: generation+1 of this campaign, named by CheckWindow, with only the id and
	// the generation as input. ExecutionAlreadyExists means a resume started that generation
	// already: this execution is superseded and simply ends.
	self := sfn.StateMachine_FromStateMachineName(h.stack, jsii.String("CampaignSelf"), jsii.String(h.name("campaign")))
	continueAsNew := awsstepfunctionstasks.NewStepFunctionsStartExecution(h.stack, jsii.String("CampaignContinueAsNew"), &awsstepfunctionstasks.StepFunctionsStartExecutionProps{
		StateName:    jsii.String("ContinueAsNew"),
		StateMachine: self,
		Name:         sfn.JsonPath_StringAt(jsii.String("$.next_execution")),
		Input: sfn.TaskInput_FromObject(&map[string]interface{}{
			"campaign_id": sfn.JsonPath_StringAt(jsii.String("$.campaign_id")),
			"generation":  sfn.JsonPath_MathAdd(sfn.JsonPath_NumberAt(jsii.String("$.generation")), jsii.Number(1)),
		}),
		AssociateWithParent: jsii.Bool(true),
		IntegrationPattern:  sfn.IntegrationPattern_REQUEST_RESPONSE,
		ResultPath:          sfn.JsonPath_DISCARD(),
	})
	continueAsNew.AddRetry(&sfn.RetryProps{Errors: jsii.Strings(*sfn.Errors_TASKS_FAILED()), Interval: awscdk.Duration_Seconds(jsii.Number(2)),
		BackoffRate: jsii.Number(2), MaxAttempts: jsii.Number(3), JitterStrategy: sfn.JitterType_FULL})
	continueAsNew.AddCatch(done, &sfn.CatchProps{Errors: jsii.Strings("StepFunctions.ExecutionAlreadyExistsException"), ResultPath: sfn.JsonPath_DISCARD()})
	window := sfn.NewChoice(h.stack, jsii.String("CampaignWindow"), &sfn.ChoiceProps{StateName: jsii.String("Window?")}).
		When(sfn.Condition_StringEquals(jsii.String("$.window"), jsii.String("stop")), done, nil).
		When(sfn.Condition_StringEquals(jsii.String("$.window"), jsii.String("continue")), continueAsNew.Next(done), nil).
		When(sfn.Condition_StringEquals(jsii.String("$.window"), jsii.String("wait")), wait.Next(checkWindow), nil).
		Otherwise(fetchPage.Next(dispatch).Next(saveCursor).Next(
			sfn.NewChoice(h.stack, jsii.String("CampaignMore"), &sfn.ChoiceProps{StateName: jsii.String("More?")}).
				When(sfn.Condition_BooleanEquals(jsii.String("$.done"), jsii.Bool(true)), done, nil).
				Otherwise(checkWindow)))
	definition := checkWindow.Next(window)

	logs := h.newLogGroup("CampaignLogs", "/aws/vendedlogs/states/"+h.name("campaign"))
	h.campaign = sfn.NewStateMachine(h.stack, jsii.String("Campaign"), &sfn.StateMachineProps{
		StateMachineName: jsii.String(h.name("campaign")),
		StateMachineType: sfn.StateMachineType_STANDARD,
		DefinitionBody:   sfn.DefinitionBody_FromChainable(definition),
		TracingEnabled:   jsii.Bool(true),
		Timeout:          awscdk.Duration_Days(jsii.Number(30)),
		// ALL events, without payloads: states carry recipient ids.
		Logs: &sfn.LogOptions{Destination: logs, Level: sfn.LogLevel_ALL, IncludeExecutionData: jsii.Bool(false)},
	})
	// The campaign function looks up its own state machine's executions (is a newer generation
	// there?) — by constructed ARN: the state machine already depends on the function.
	fn.AddEnvironment(jsii.String(envCampaignStateMachine), self.StateMachineArn(), nil)
	h.roles["campaign"].AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("ReadOwnExecutions"),
		Actions:   jsii.Strings("states:DescribeExecution"),
		Resources: jsii.Strings(*h.campaignExecutionsArn()),
	}))
	// ingest starts a campaign on its reserved fire; api on create and resume, and looks up the
	// latest generation to resume after.
	if ingest, ok := h.functions["ingest"]; ok {
		h.campaign.GrantStartExecution(h.roles["ingest"])
		ingest.AddEnvironment(jsii.String(envCampaignStateMachine), h.campaign.StateMachineArn(), nil)
	}
	if api, ok := h.functions["api"]; ok {
		role := h.roles["api"]
		h.campaign.GrantStartExecution(role)
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("ReadCampaignExecutions"),
			Actions:   jsii.Strings("states:DescribeExecution"),
			Resources: jsii.Strings(*h.campaignExecutionsArn()),
		}))
		api.AddEnvironment(jsii.String(envCampaignStateMachine), h.campaign.StateMachineArn(), nil)
	}
	// admin re-arms reserved campaigns' fires (POST /v1/admin/schedules/rearm)...
	if admin, ok := h.functions[adminFunction]; ok {
		// ...and its console's operators pause, resume and cancel campaigns as api does.
		role := h.roles[adminFunction]
		h.campaign.GrantStartExecution(role)
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("ReadCampaignExecutions"),
			Actions:   jsii.Strings("states:DescribeExecution"),
			Resources: jsii.Strings(*h.campaignExecutionsArn()),
		}))
		admin.AddEnvironment(jsii.String(envCampaignStateMachine), h.campaign.StateMachineArn(), nil)
	}
}

// envCampaignStateMachine is internal/awsenv.EnvCampaignStateMachine.
const envCampaignStateMachine = "HERALD_CAMPAIGN_STATE_MACHINE_ARN"

// campaignExecutionsArn is every execution of the campaign state machine, built from its name.
func (h *herald) campaignExecutionsArn() *string {
	return h.stack.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("states"), Resource: jsii.String("execution"),
		ResourceName: jsii.String(h.name("campaign") + ":*"), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}
