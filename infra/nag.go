package main

import (
	"github.com/aws/jsii-runtime-go"
	cdknag "github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Every cdk-nag AwsSolutions finding left in the stack is suppressed here, next to why it is
// acceptable; anything new fails `make synth` and TestNagAwsSolutions. Suppressions name the exact
// resource pattern (appliesTo), so a new wildcard elsewhere in the same policy is still reported.

const (
	reasonXRay = "X-Ray's PutTraceSegments and PutTelemetryRecords do not support resource-level permissions; " +
		"AWS documents Resource \"*\" for them (added by Lambda active tracing)."
	reasonSchedules = "Reserved sends create one schedule per notification, named at run time; access is confined " +
		"to this environment's schedule group (schedule/herald-<env>/*)."
	reasonStatesDelivery = "Step Functions log delivery (logs:*LogDelivery, PutResourcePolicy, DescribeLogGroups) and " +
		"X-Ray tracing are granted on Resource \"*\" because those actions have no resource-level permissions."
	reasonStatesInvoke = "CDK's LambdaInvoke grants the campaign function and its versions (<arn>:*); the state " +
		"machine can invoke only that one function."
	reasonExecutions = "Campaign executions are named at run time (<campaign id>-g<generation>); the grant is " +
		"states:DescribeExecution only, on executions of this environment's campaign state machine."
	reasonListsRead = "The audience function reads any uploaded list: objects are named by the uploading service " +
		"at run time (lists/<service>/<list id>); the grant is s3:GetObject(Version) under lists/ of this environment's bucket only."
	reasonListsAccessLogs = "The lists bucket holds transient uploads that expire after 7 days; every import is logged " +
		"by the audience function (key, service, counts), and uploads are made by the services' own IAM roles (CloudTrail)."
	reasonExportObjects = "Export files are named by their job at run time (exports/<job id>.<format>); the export " +
		"function may only write (PutObject, multipart abort) and the admin function only read (GetObject, for the " +
		"presigned download links) objects under exports/ of this environment's bucket."
	reasonExportsAccessLogs = "The exports bucket holds report files that expire after 7 days; asking for one and every " +
		"download link handed out are in Herald's audit log (export.create, export.download)."
	reasonEventsDLQ = "This queue is itself a dead-letter queue: the DeadLetterConfig of every EventBridge rule target " +
		"delivering operator events (alarm topic, alerts function); it has no DLQ of its own, and its depth alarms like every DLQ's."
	reasonSchedulerDLQ = "This queue is itself a dead-letter queue: EventBridge Scheduler's DeadLetterConfig for " +
		"reserved sends (set per schedule at run time, so no RedrivePolicy in the template references it)."
)

func regex(re string) interface{} { return &cdknag.RegexAppliesTo{Regex: jsii.String(re)} }

func (h *herald) addNagSuppressions() {
	for _, name := range h.functionOrder {
		s := []*cdknag.NagPackSuppression{{
			Id:        jsii.String("AwsSolutions-IAM5"),
			Reason:    jsii.String(reasonXRay),
			AppliesTo: &[]interface{}{"Resource::*"},
		}}
		// ingest arms reserved sends; api re-arms and disarms them, and arms campaigns' send_at;
		// admin re-arms them all after the schedule group was replaced.
		if name == "ingest" || name == "api" || name == adminFunction {
			s = append(s, &cdknag.NagPackSuppression{
				Id:        jsii.String("AwsSolutions-IAM5"),
				Reason:    jsii.String(reasonSchedules),
				AppliesTo: &[]interface{}{"Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/herald-" + h.env + "/*"},
			})
		}
		cdknag.NagSuppressions_AddResourceSuppressions(h.roles[name], &s, jsii.Bool(true))
	}
	// Stack-wide, but only for these exact resources: a role whose statements do not fit its
	// inline policy (ingest's, which also sends express notifications) overflows into a managed
	// policy CDK creates at synthesis, after the per-role suppressions above are attached.
	cdknag.NagSuppressions_AddStackSuppressions(h.stack, &[]*cdknag.NagPackSuppression{{
		Id:        jsii.String("AwsSolutions-IAM5"),
		Reason:    jsii.String(reasonSchedules),
		AppliesTo: &[]interface{}{"Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/herald-" + h.env + "/*"},
	}}, jsii.Bool(true))
	if h.campaign != nil {
		// Stack-wide, but only for this exact resource: the api role's statements overflow into a
		// managed policy CDK creates at synthesis, after per-role suppressions are attached. Who
		// holds states: grants at all is pinned by TestCampaignStateMachine.
		cdknag.NagSuppressions_AddStackSuppressions(h.stack, &[]*cdknag.NagPackSuppression{{
			Id:        jsii.String("AwsSolutions-IAM5"),
			Reason:    jsii.String(reasonExecutions),
			AppliesTo: &[]interface{}{"Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:" + h.name("campaign") + ":*"},
		}}, jsii.Bool(true))
	}
	if h.campaign != nil {
		cdknag.NagSuppressions_AddResourceSuppressions(h.campaign.Role(), &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(reasonStatesDelivery),
			AppliesTo: &[]interface{}{"Resource::*"},
		}, {
			Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(reasonStatesInvoke),
			AppliesTo: &[]interface{}{regex(`/^Resource::<FnCampaign[0-9A-F]{8}\.Arn>:\*$/`)},
		}}, jsii.Bool(true))
	}
	if h.listsBucket != nil {
		cdknag.NagSuppressions_AddResourceSuppressions(h.roles[audienceFunction], &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(reasonListsRead),
			AppliesTo: &[]interface{}{regex(`/^Resource::arn:<AWS::Partition>:s3:::herald-[a-z0-9-]+-lists-<AWS::AccountId>-<AWS::Region>\/lists\/\*$/`)},
		}}, jsii.Bool(true))
		cdknag.NagSuppressions_AddResourceSuppressions(h.listsBucket, &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-S1"), Reason: jsii.String(reasonListsAccessLogs),
		}}, jsii.Bool(true))
	}
	if h.exportsBucket != nil {
		exportObjects := regex(`/^Resource::arn:<AWS::Partition>:s3:::herald-[a-z0-9-]+-exports-<AWS::AccountId>-<AWS::Region>\/exports\/\*$/`)
		for _, fn := range []string{exportFunction, adminFunction} {
			if role, ok := h.roles[fn]; ok {
				cdknag.NagSuppressions_AddResourceSuppressions(role, &[]*cdknag.NagPackSuppression{{
					Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(reasonExportObjects), AppliesTo: &[]interface{}{exportObjects},
				}}, jsii.Bool(true))
			}
		}
		cdknag.NagSuppressions_AddResourceSuppressions(h.exportsBucket, &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-S1"), Reason: jsii.String(reasonExportsAccessLogs),
		}}, jsii.Bool(true))
	}
	cdknag.NagSuppressions_AddResourceSuppressions(h.schedulerDLQ, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SQS3"), Reason: jsii.String(reasonSchedulerDLQ),
	}}, jsii.Bool(true))
	cdknag.NagSuppressions_AddResourceSuppressions(h.eventsDLQ, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SQS3"), Reason: jsii.String(reasonEventsDLQ),
	}}, jsii.Bool(true))
}
