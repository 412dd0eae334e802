package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	sfn "github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctionstasks"
	"github.com/aws/jsii-runtime-go"

	"herald/internal/notify"
)

// addCampaign defines the campaign state machine (DESIGN §4) when functions/campaign exists:
//
//	CheckWindow → (wait → Wait → CheckWindow | stop → Done | open) → FetchPage →
//	DispatchBatches (Map: one SQS message per batch to prepare-bulk) → SaveCursor →
//	(done → Done | → CheckWindow)
//
// Each Lambda step gets {"step": <name>, "state": <execution state>} and returns the new state;
// CheckWindow sets window (open, wait, stop) and wait_seconds, FetchPage sets batches (message
// bodies for prepare) and SaveCursor sets done. The cursor lives in the notifications table, so
// a restarted execution resumes from it.
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
	checkWindow, fetchPage, saveCursor := step("CheckWindow"), step("FetchPage"), step("SaveCursor")

	dispatch := sfn.NewMap(h.stack, jsii.String("CampaignDispatchBatches"), &sfn.MapProps{
		StateName:      jsii.String("DispatchBatches"),
		ItemsPath:      sfn.JsonPath_StringAt(jsii.String("$.batches")),
		MaxConcurrency: jsii.Number(10),
		ResultPath:     sfn.JsonPath_DISCARD(),
	})
	dispatch.ItemProcessor(awsstepfunctionstasks.NewSqsSendMessage(h.stack, jsii.String("CampaignSendBatch"), &awsstepfunctionstasks.SqsSendMessageProps{
		StateName:   jsii.String("SendBatch"),
		Queue:       h.queueByName[notify.LaneQueue(notify.StagePrepare, notify.LaneBulk)].queue,
		MessageBody: sfn.TaskInput_FromJsonPathAt(jsii.String("$")),
	}), nil)

	done := sfn.NewSucceed(h.stack, jsii.String("CampaignDone"), &sfn.SucceedProps{StateName: jsii.String("Done")})
	wait := sfn.NewWait(h.stack, jsii.String("CampaignWait"), &sfn.WaitProps{
		StateName: jsii.String("WaitForWindow"),
		Time:      sfn.WaitTime_SecondsPath(jsii.String("$.wait_seconds")),
	})
	window := sfn.NewChoice(h.stack, jsii.String("CampaignWindow"), &sfn.ChoiceProps{StateName: jsii.String("Window?")}).
		When(sfn.Condition_StringEquals(jsii.String("$.window"), jsii.String("stop")), done, nil).
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
	if ingest, ok := h.functions["ingest"]; ok {
		h.campaign.GrantStartExecution(h.roles["ingest"])
		ingest.AddEnvironment(jsii.String("HERALD_CAMPAIGN_STATE_MACHINE_ARN"), h.campaign.StateMachineArn(), nil)
	}
}
