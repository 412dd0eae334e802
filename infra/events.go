package main

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"herald/internal/notify"
)

// Operator events (internal/notify/events.go, published by internal/eventbus): the functions
// whose wiring says events put them on the environment's own bus herald-<env>-events, with
// source "herald" and the event's title as detail-type. A bus per environment keeps dev's events
// out of prod's alerts without a filter on every rule.

// alertedEvents are the detail-types the alert rule sends to the alarm topic; campaign_finished
// is there for whoever subscribes on the bus, not for on-call.
var alertedEvents = []string{notify.EventCampaignFailed, notify.EventLargeSendStarted, notify.EventProviderAuthFailed}

func (h *herald) addEventBus() {
	// Every rule target dead-letters here what it could not deliver after its retries.
	h.eventsDLQ = h.newDLQ("EventsDlq", "events-dlq")
	h.eventBus = awsevents.NewEventBus(h.stack, jsii.String("OperatorEvents"), &awsevents.EventBusProps{
		EventBusName: jsii.String(h.name("events")),
		Description:  jsii.String("Herald " + h.env + " operator events: large sends starting, campaigns finishing or failing"),
	})
	awscdk.NewCfnOutput(h.stack, jsii.String("EventBusName"), &awscdk.CfnOutputProps{
		Value:       h.eventBus.EventBusName(),
		Description: jsii.String("EventBridge bus of operator events (source herald); add rules here to subscribe"),
	})
}

// addEventAlerts routes the alerted detail-types to the alarm topic, so on-call hears of them
// where alarms already arrive (email, Slack). The event is delivered as it is: AWS Chatbot
// renders EventBridge events itself. The topic and its key trust EventBridge for this rule only.
func (h *herald) addEventAlerts() {
	var detailTypes []*string
	for _, t := range alertedEvents {
		detailTypes = append(detailTypes, jsii.String(notify.EventTitle(t)))
	}
	rule := awsevents.NewCfnRule(h.stack, jsii.String("OperatorEventAlerts"), &awsevents.CfnRuleProps{
		Name:         jsii.String(h.name("operator-alerts")),
		Description:  jsii.String("Herald operator events on-call should see: failed campaigns and large sends starting"),
		EventBusName: h.eventBus.EventBusName(),
		EventPattern: map[string]any{
			"source":      []*string{jsii.String(notify.EventSource)},
			"detail-type": detailTypes,
		},
		State:   jsii.String("ENABLED"),
		Targets: []any{h.ruleTarget("AlarmTopic", h.alarmTopic.TopicArn())},
	})
	h.watchRule("OperatorAlerts", rule)
	events := awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), nil)
	h.alarmTopic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OperatorEventAlertsMayPublish"),
		Principals: &[]awsiam.IPrincipal{events},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  &[]*string{h.alarmTopic.TopicArn()},
		Conditions: &map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": rule.AttrArn()}},
	}))
	h.topicKeyGrant(h.alarmTopic.MasterKey(), "alarms", "events.amazonaws.com")
	h.addSlackAlerts()
}

// ruleTarget is an EventBridge rule's target with the retries and the dead-letter queue every
// target has: an operator alert older than an hour is history, not an alert, and one that
// cannot be delivered waits in events-dlq, whose depth pages like every DLQ's.
func (h *herald) ruleTarget(id string, arn *string) *awsevents.CfnRule_TargetProperty {
	return &awsevents.CfnRule_TargetProperty{
		Id:               jsii.String(id),
		Arn:              arn,
		DeadLetterConfig: &awsevents.CfnRule_DeadLetterConfigProperty{Arn: h.eventsDLQ.QueueArn()},
		RetryPolicy:      &awsevents.CfnRule_RetryPolicyProperty{MaximumEventAgeInSeconds: jsii.Number(3600), MaximumRetryAttempts: jsii.Number(20)},
	}
}

// watchRule lets rule dead-letter into events-dlq and alarms when its deliveries fail for good
// (FailedInvocations) or cannot even be dead-lettered (InvocationsFailedToBeSentToDlq). A rule
// on a custom bus reports both with the dimensions EventBusName and RuleName.
func (h *herald) watchRule(id string, rule awsevents.CfnRule) {
	h.eventsDLQ.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String(id + "RuleMayDeadLetter"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), nil)},
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  &[]*string{h.eventsDLQ.QueueArn()},
		Conditions: &map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": rule.AttrArn()}},
	}))
	five := awscdk.Duration_Minutes(jsii.Number(5))
	for _, m := range []struct{ metric, what string }{
		{"FailedInvocations", "failed for good (permissions, a key policy, a missing target)"},
		{"InvocationsFailedToBeSentToDlq", "could not even be put on " + h.name("events-dlq")},
	} {
		h.alarm("Alarm"+id+m.metric, &awscloudwatch.AlarmProps{
			AlarmName: jsii.String(h.name("events-" + strings.ToLower(id) + "-" + kebab(m.metric))),
			AlarmDescription: jsii.String(fmt.Sprintf("Deliveries of the EventBridge rule %s %s: operator events are being lost. %s",
				*rule.Name(), m.what, runbook("Event delivery failed"))),
			Metric: awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String("AWS/Events"), MetricName: jsii.String(m.metric),
				DimensionsMap: &map[string]*string{"EventBusName": h.eventBus.EventBusName(), "RuleName": rule.Name()},
				Period:        five, Statistic: jsii.String("Sum"),
			}),
			Threshold:         jsii.Number(1),
			EvaluationPeriods: jsii.Number(1),
		})
	}
}

// kebab turns "FailedInvocations" into "failed-invocations".
func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// slackEvents are the detail-types posted to Slack (internal/slack decides the same):
// campaign_finished only when alerts.slack.campaign_finished asks for it.
func (h *herald) slackEvents() []*string {
	types := []string{notify.EventMessageDeadLettered, notify.EventLargeSendStarted, notify.EventCampaignFailed, notify.EventProviderAuthFailed}
	if h.cfg.Alerts.Slack.CampaignFinished {
		types = append(types, notify.EventCampaignFinished)
	}
	var out []*string
	for _, t := range types {
		out = append(out, jsii.String(notify.EventTitle(t)))
	}
	return out
}

// addSlackAlerts delivers the posted detail-types to the alerts function, which posts them to
// Slack (internal/awsenv/alerts.go). A function, not an EventBridge API destination: an
// incoming webhook's secret is the path of its URL, and an API destination's endpoint is a
// plain URL in the template — only a Connection's header, query or OAuth credentials come from
// Secrets Manager. The function reads the URL from alerts.slack.webhook_url_secret, renders
// the post with the same builder as the local runtime, and folds bursts in memory, per
// instance (stack.functions.alerts.reserved_concurrency: 1 makes that one instance). Events the
// rule cannot deliver after its retries go to events-dlq, whose depth alarms like every DLQ's.
//
// What is posted from AWS: message_dead_lettered from the stages' settle path (a permanent
// failure), large_send_started, campaign_failed (and campaign_finished when asked). What is
// not: a message SQS moves to a DLQ itself after maxReceiveCount — no Herald code runs at that
// moment — which the DLQ depth alarm reports instead.
func (h *herald) addSlackAlerts() {
	fn, ok := h.functions[alertsFunction]
	if !ok {
		return
	}
	rule := awsevents.NewCfnRule(h.stack, jsii.String("SlackAlerts"), &awsevents.CfnRuleProps{
		Name:         jsii.String(h.name("slack-alerts")),
		Description:  jsii.String("Herald operator events posted to Slack by the alerts function"),
		EventBusName: h.eventBus.EventBusName(),
		EventPattern: map[string]any{
			"source":      []*string{jsii.String(notify.EventSource)},
			"detail-type": h.slackEvents(),
		},
		State:   jsii.String("ENABLED"),
		Targets: []any{h.ruleTarget("AlertsFunction", fn.FunctionArn())},
	})
	h.watchRule("SlackAlerts", rule)
	awslambda.NewCfnPermission(h.stack, jsii.String("SlackAlertsMayInvoke"), &awslambda.CfnPermissionProps{
		Action:       jsii.String("lambda:InvokeFunction"),
		FunctionName: fn.FunctionArn(),
		Principal:    jsii.String("events.amazonaws.com"),
		SourceArn:    rule.AttrArn(),
	})
}
