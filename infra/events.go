package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"herald/internal/notify"
)

// Operator events (internal/notify/events.go, published by internal/eventbus): the functions
// whose wiring says events put them on the environment's own bus herald-<env>-events, with
// source "herald" and the event's title as detail-type. A bus per environment keeps dev's events
// out of prod's alerts without a filter on every rule.

// alertedEvents are the detail-types the alert rule sends to the alarm topic; campaign_finished
// is there for whoever subscribes on the bus, not for on-call.
var alertedEvents = []string{notify.EventCampaignFailed, notify.EventLargeSendStarted}

func (h *herald) addEventBus() {
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
		State: jsii.String("ENABLED"),
		Targets: []any{&awsevents.CfnRule_TargetProperty{
			Id:  jsii.String("AlarmTopic"),
			Arn: h.alarmTopic.TopicArn(),
		}},
	})
	events := awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), nil)
	h.alarmTopic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OperatorEventAlertsMayPublish"),
		Principals: &[]awsiam.IPrincipal{events},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  &[]*string{h.alarmTopic.TopicArn()},
		Conditions: &map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": rule.AttrArn()}},
	}))
	h.alarmTopic.MasterKey().AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("EventBridgeMayEncrypt"),
		Principals: &[]awsiam.IPrincipal{events},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"), // in a key policy "*" is the key itself
		Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": h.stack.Account()}},
	}), nil)
}
