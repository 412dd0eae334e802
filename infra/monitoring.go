package main

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awschatbot"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/jsii-runtime-go"

	"herald/internal/notify"
)

// Custom metrics the runtime publishes (EMF or PutMetricData): namespace Herald, metrics Sent and
// Failed, dimensions Env and Provider (fcm, apns, webpush, ses, twilio, alimtalk). The dashboard
// finds them with SEARCH, so a new provider shows up without a deploy.
const (
	metricNamespace = "Herald"
	metricSent      = "Sent"
	metricFailed    = "Failed"
	// metricFellBack is the AlimTalk deliveries handed to an SMS/LMS fallback (Provider alimtalk).
	metricFellBack = "FellBack"
	// metricVerdictsPending is the AlimTalk sends accepted with Kakao's verdict still to come, and
	// metricVerdictUnknown those whose verdict never came before the deadline (counted sent).
	metricVerdictsPending = "VerdictsPending"
	metricVerdictUnknown  = "VerdictUnknown"
	// metricStoreWrites is the DynamoDB items each stage wrote (dimensions Env, Queue): divided by
	// Sent it is the writes per recipient the bulk lane keeps near 0.01.
	metricStoreWrites = "StoreWrites"
	// metricProviderAuthFailed is the deliveries a provider refused for Herald's credentials,
	// account or balance (pipeline.MetricProviderAuthFailed; dimensions Env, Provider).
	metricProviderAuthFailed = "ProviderAuthFailed"
)

// runbook points an alarm at its entry in the runbook (docs/operating.md).
func runbook(entry string) string {
	return "Runbook: docs/operating.md → Alarms and runbook → " + entry + "."
}

func (h *herald) addMonitoring() {
	h.alarmTopic = h.newTopic("AlarmTopic", "alarms", "cloudwatch.amazonaws.com", nil)
	for _, e := range h.settings.Alarms.Emails {
		h.alarmTopic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(e), nil))
	}
	if sl := h.settings.Alarms.Slack; sl != nil {
		awschatbot.NewSlackChannelConfiguration(h.stack, jsii.String("AlarmSlack"), &awschatbot.SlackChannelConfigurationProps{
			SlackChannelConfigurationName: jsii.String(h.name("alarms")),
			SlackWorkspaceId:              jsii.String(sl.WorkspaceID),
			SlackChannelId:                jsii.String(sl.ChannelID),
			NotificationTopics:            &[]awssns.ITopic{h.alarmTopic},
			LoggingLevel:                  awschatbot.LoggingLevel_ERROR,
		})
	}
	h.addAlarms()
	h.addDashboard()
}

func (h *herald) alarm(id string, props *awscloudwatch.AlarmProps) awscloudwatch.Alarm {
	if props.TreatMissingData == "" {
		props.TreatMissingData = awscloudwatch.TreatMissingData_NOT_BREACHING
	}
	if props.ComparisonOperator == "" {
		props.ComparisonOperator = awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD
	}
	a := awscloudwatch.NewAlarm(h.stack, jsii.String(id), props)
	action := awscloudwatchactions.NewSnsAction(h.alarmTopic)
	a.AddAlarmAction(action)
	a.AddOkAction(action)
	return a
}

func (h *herald) addAlarms() {
	minute, five := awscdk.Duration_Minutes(jsii.Number(1)), awscdk.Duration_Minutes(jsii.Number(5))
	fifteen := awscdk.Duration_Minutes(jsii.Number(15))

	names, dlqs := h.dlqs()
	for _, n := range names {
		h.alarm("Alarm"+pascal(n), &awscloudwatch.AlarmProps{
			AlarmName: jsii.String(h.name("dlq-" + strings.TrimSuffix(n, "-dlq"))),
			AlarmDescription: jsii.String(fmt.Sprintf("Messages in %s: they failed %s and wait for a fix and a redrive. %s",
				h.name(n), dlqSource(n), runbook("DLQ depth"))),
			Metric:            dlqs[n].MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum")}),
			Threshold:         jsii.Number(1),
			EvaluationPeriods: jsii.Number(1),
		})
	}

	// A topic whose deliveries fail (an SQS subscription's queue policy, a Chatbot channel, an
	// email endpoint) loses what it carries: SES feedback, or the alarms themselves.
	for _, t := range []struct {
		id, logical string
		topic       awssns.Topic
	}{{"SesFeedback", "ses-feedback", h.feedbackTopic}, {"AlarmTopic", "alarms", h.alarmTopic}} {
		h.alarm("Alarm"+t.id+"DeliveryFailed", &awscloudwatch.AlarmProps{
			AlarmName: jsii.String(h.name("sns-" + t.logical + "-failed")),
			AlarmDescription: jsii.String(fmt.Sprintf("SNS could not deliver messages of %s to a subscription. %s",
				h.name(t.logical), runbook("SNS delivery failed"))),
			Metric:            t.topic.MetricNumberOfNotificationsFailed(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}),
			Threshold:         jsii.Number(1),
			EvaluationPeriods: jsii.Number(1),
		})
	}

	for _, q := range h.queues {
		limit := h.settings.Alarms.OldestMessageAge[q.kind].D()
		h.alarm("Alarm"+pascal(q.logical)+"Age", &awscloudwatch.AlarmProps{
			AlarmName: jsii.String(h.name("age-" + q.logical)),
			AlarmDescription: jsii.String(fmt.Sprintf("The oldest message in %s has waited %s or more: %s is not keeping up or not running. %s",
				h.name(q.logical), limit, q.consumer, runbook("Oldest message age"))),
			Metric:            q.queue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum")}),
			Threshold:         jsii.Number(limit.Seconds()),
			EvaluationPeriods: jsii.Number(5),
			DatapointsToAlarm: jsii.Number(3),
		})
	}

	for _, name := range h.functionOrder {
		fn := h.functions[name]
		rate := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String("IF(invocations > 0, 100 * errors / invocations, 0)"),
			UsingMetrics: &map[string]awscloudwatch.IMetric{
				"errors":      fn.MetricErrors(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}),
				"invocations": fn.MetricInvocations(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}),
			},
			Label:  jsii.String(name + " error %"),
			Period: five,
		})
		h.alarm("Alarm"+pascal(name)+"Errors", &awscloudwatch.AlarmProps{
			AlarmName: jsii.String(h.name("errors-" + name)),
			AlarmDescription: jsii.String(fmt.Sprintf("%.0f %% or more of %s's invocations failed (crash, timeout or out of memory) over 5 minutes. %s",
				h.settings.Alarms.LambdaErrorRatePercent, h.functionName(name), runbook("Lambda error rate"))),
			Metric:            rate,
			Threshold:         jsii.Number(h.settings.Alarms.LambdaErrorRatePercent),
			EvaluationPeriods: jsii.Number(1),
		})
	}

	if h.campaign != nil {
		// An execution that ends failed (a step failing after its retries, a continue-as-new
		// that could not start) leaves its campaign without a run.
		h.alarm("AlarmCampaignExecutionsFailed", &awscloudwatch.AlarmProps{
			AlarmName: jsii.String(h.name("campaign-executions-failed")),
			AlarmDescription: jsii.String(fmt.Sprintf("A run of %s failed, timed out or was aborted: its campaign may be left without a run. %s",
				h.name("campaign"), runbook("Campaign execution failed"))),
			Metric: awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
				Expression: jsii.String("failed + timedout + aborted"),
				UsingMetrics: &map[string]awscloudwatch.IMetric{
					"failed":   h.campaign.MetricFailed(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}),
					"timedout": h.campaign.MetricTimedOut(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}),
					"aborted":  h.campaign.MetricAborted(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}),
				},
				Label:  jsii.String("campaign executions failed"),
				Period: five,
			}),
			Threshold:         jsii.Number(1),
			EvaluationPeriods: jsii.Number(1),
		})
	}

	ses := func(id, metric, alarmName, entry, what, reviewAt string, percent float64) {
		h.alarm(id, &awscloudwatch.AlarmProps{
			AlarmName: jsii.String(h.name(alarmName)),
			AlarmDescription: jsii.String(fmt.Sprintf("SES %s (account-wide) is %g %% or more; SES reviews the account at %s. %s",
				what, percent, reviewAt, runbook(entry))),
			Metric: awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String("AWS/SES"), MetricName: jsii.String(metric),
				Period: awscdk.Duration_Minutes(jsii.Number(15)), Statistic: jsii.String("Maximum"),
			}),
			Threshold:         jsii.Number(percent / 100), // SES publishes a fraction
			EvaluationPeriods: jsii.Number(1),
		})
	}
	// One failure-rate alarm per provider of the one list (notify.Providers).
	for _, prov := range notify.Providers {
		h.alarm(providerAlarmID(prov), &awscloudwatch.AlarmProps{
			AlarmName: jsii.String(h.name("provider-failures-" + string(prov))),
			AlarmDescription: jsii.String(fmt.Sprintf("%g %% or more of the %s sends over 15 minutes failed (at least %d attempted). %s",
				h.settings.Alarms.ProviderFailureRatePercent, prov, h.settings.Alarms.ProviderFailureMinSends, runbook("Provider failure rate"))),
			Metric: awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
				Expression: jsii.String(fmt.Sprintf("IF(sent + failed >= %d, 100 * failed / (sent + failed), 0)", h.settings.Alarms.ProviderFailureMinSends)),
				UsingMetrics: &map[string]awscloudwatch.IMetric{
					"sent":   h.providerMetric(prov, metricSent, fifteen),
					"failed": h.providerMetric(prov, metricFailed, fifteen),
				},
				Label:  jsii.String(string(prov) + " failure %"),
				Period: fifteen,
			}),
			Threshold:         jsii.Number(h.settings.Alarms.ProviderFailureRatePercent),
			EvaluationPeriods: jsii.Number(1),
		})
		// A refused credential, account or balance fails every delivery through the provider
		// at once (pipeline.providerAuthFailed): one refusal pages.
		h.alarm("AlarmProvider"+pascal(string(prov))+"Auth", &awscloudwatch.AlarmProps{
			AlarmName: jsii.String(h.name("provider-auth-" + string(prov))),
			AlarmDescription: jsii.String(fmt.Sprintf("%s refused Herald's credentials, account or balance: its deliveries fail until an operator fixes them. %s",
				prov, runbook("Provider refuses credentials"))),
			Metric:            h.providerMetric(prov, metricProviderAuthFailed, five),
			Threshold:         jsii.Number(1),
			EvaluationPeriods: jsii.Number(1),
		})
	}

	ses("AlarmSesBounceRate", "Reputation.BounceRate", "ses-bounce-rate", "SES bounce rate", "bounce rate", "5 %", h.settings.Alarms.SESBounceRatePercent)
	ses("AlarmSesComplaintRate", "Reputation.ComplaintRate", "ses-complaint-rate", "SES complaint rate", "complaint rate", "0.1 %", h.settings.Alarms.SESComplaintRatePercent)
}

// providerAlarmID is the construct id of a provider's failure-rate alarm.
func providerAlarmID(prov notify.Provider) string {
	return "AlarmProvider" + pascal(string(prov)) + "Failures"
}

// providerMetric is one of a provider's send counters (Sent, Failed, FellBack) in this
// environment, summed over period.
func (h *herald) providerMetric(prov notify.Provider, metric string, period awscdk.Duration) awscloudwatch.IMetric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String(metricNamespace), MetricName: jsii.String(metric),
		DimensionsMap: &map[string]*string{"Env": jsii.String(h.env), "Provider": jsii.String(string(prov))},
		Period:        period, Statistic: jsii.String("Sum"), Label: jsii.String(string(prov) + " " + strings.ToLower(metric)),
	})
}

// dlqSource says where a DLQ's messages come from.
func dlqSource(dlq string) string {
	switch dlq {
	case "scheduler-dlq":
		return "to be delivered by EventBridge Scheduler to an ingest queue (reserved sends that never fired)"
	case "events-dlq":
		return "to be delivered by an EventBridge rule to its target (operator alerts that never reached on-call or Slack)"
	}
	return "in " + strings.TrimSuffix(dlq, "-dlq") + " 5 times or were malformed"
}

// providerRow is the dashboard's row of one graph per provider of the one list
// (notify.Providers): its sends and failures, and for AlimTalk the SMS/LMS fallbacks and the
// verdicts still awaited or never come.
func providerRow(h *herald, period awscdk.Duration, graph func(string, float64, []awscloudwatch.IMetric) awscloudwatch.IWidget) []awscloudwatch.IWidget {
	width := float64(24 / len(notify.Providers))
	row := make([]awscloudwatch.IWidget, 0, len(notify.Providers))
	for _, prov := range notify.Providers {
		ms := []awscloudwatch.IMetric{h.providerMetric(prov, metricSent, period), h.providerMetric(prov, metricFailed, period)}
		if prov == notify.ProviderAlimTalk {
			ms = append(ms, h.providerMetric(prov, metricFellBack, period), h.providerMetric(prov, metricVerdictsPending, period),
				h.providerMetric(prov, metricVerdictUnknown, period))
		}
		row = append(row, graph(providerGraphTitle(prov), width, ms))
	}
	return row
}

// providerGraphTitle is the title of a provider's dashboard graph.
func providerGraphTitle(prov notify.Provider) string { return "Provider " + string(prov) + " (5 min)" }

func (h *herald) addDashboard() {
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	five := awscdk.Duration_Minutes(jsii.Number(5))
	graph := func(title string, width float64, metrics []awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Width: jsii.Number(width), Height: jsii.Number(6), Left: &metrics,
		})
	}
	var ingest, depth, age, dlq []awscloudwatch.IMetric
	for _, q := range h.queues {
		opts := func(stat string) *awscloudwatch.MetricOptions {
			return &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String(stat), Label: jsii.String(q.logical)}
		}
		if q.kind == "ingest" {
			ingest = append(ingest, q.queue.MetricNumberOfMessagesSent(&awscloudwatch.MetricOptions{
				Period: minute, Statistic: jsii.String("Sum"), Label: jsii.String(strings.TrimPrefix(q.logical, "ingest-")),
			}))
		}
		depth = append(depth, q.queue.MetricApproximateNumberOfMessagesVisible(opts("Maximum")))
		age = append(age, q.queue.MetricApproximateAgeOfOldestMessage(opts("Maximum")))
	}
	names, dlqs := h.dlqs()
	for _, n := range names {
		dlq = append(dlq, dlqs[n].MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(n),
		}))
	}
	searchBy := func(dim, metric string) awscloudwatch.IMetric {
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,Env,%s} Env="%s" MetricName="%s"', 'Sum', 300)`,
				metricNamespace, dim, h.env, metric)),
			UsingMetrics: &map[string]awscloudwatch.IMetric{},
			Label:        jsii.String(" "),
			Period:       five,
		})
	}
	search := func(metric string) awscloudwatch.IMetric { return searchBy("Provider", metric) }
	var errs, throttles, duration []awscloudwatch.IMetric
	for _, name := range h.functionOrder {
		fn := h.functions[name]
		o := func(stat string) *awscloudwatch.MetricOptions {
			return &awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String(stat), Label: jsii.String(name)}
		}
		errs = append(errs, fn.MetricErrors(o("Sum")))
		throttles = append(throttles, fn.MetricThrottles(o("Sum")))
		duration = append(duration, fn.MetricDuration(o("p99")))
	}

	rows := [][]awscloudwatch.IWidget{
		{awscloudwatch.NewTextWidget(&awscloudwatch.TextWidgetProps{
			Markdown: jsii.String(fmt.Sprintf("# Herald %s\nQueues, dead letters, provider sends and functions. Every alarm is described in the runbook (docs/operating.md, Alarms and runbook); DLQs are redriven with `POST /v1/admin/queues/<queue>/redrive` (the admin function; ingest DLQs only this way, their queues admit no operator) or `StartMessageMoveTask` (SQS console: *Start DLQ redrive*).", h.env)),
			Width:    jsii.Number(24), Height: jsii.Number(2),
		})},
		{graph("Ingest rate per service (messages/min)", 12, ingest), graph("DLQ depth", 12, dlq)},
		{graph("Queue depth (visible messages)", 12, depth), graph("Age of oldest message (s)", 12, age)},
		{graph("Sent per provider (5 min)", 12, []awscloudwatch.IMetric{search(metricSent)}),
			graph("Failed per provider (5 min)", 12, []awscloudwatch.IMetric{search(metricFailed)})},
		providerRow(h, five, graph),
		{graph("DynamoDB items written per stage queue (5 min)", 24, []awscloudwatch.IMetric{searchBy("Queue", metricStoreWrites)})},
	}
	if len(h.functionOrder) > 0 {
		rows = append(rows, []awscloudwatch.IWidget{
			graph("Lambda errors", 8, errs), graph("Lambda throttles", 8, throttles), graph("Lambda duration p99 (ms)", 8, duration),
		})
	}
	if h.api != nil {
		o := &awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}
		rows = append(rows, []awscloudwatch.IWidget{
			graph("API requests and errors", 12, []awscloudwatch.IMetric{h.api.MetricCount(o), h.api.MetricClientError(o), h.api.MetricServerError(o)}),
			graph("API latency p99 (ms)", 12, []awscloudwatch.IMetric{h.api.MetricLatency(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("p99")})}),
		})
	}
	if h.wsAPI != nil {
		ws := func(metric string) awscloudwatch.IMetric {
			return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String("AWS/ApiGateway"), MetricName: jsii.String(metric), Period: five, Statistic: jsii.String("Sum"),
				DimensionsMap: &map[string]*string{"ApiId": h.wsAPI.Ref(), "Stage": jsii.String(streamStage)},
			})
		}
		rows = append(rows, []awscloudwatch.IWidget{
			graph("Live inbox stream: connects and messages (5 min)", 12, []awscloudwatch.IMetric{ws("ConnectCount"), ws("MessageCount")}),
			graph("Live inbox stream: errors (5 min)", 12, []awscloudwatch.IMetric{ws("ClientError"), ws("ExecutionError"), ws("IntegrationError")}),
		})
	}
	if h.campaign != nil {
		o := &awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}
		rows = append(rows, []awscloudwatch.IWidget{
			graph("Campaign executions (5 min)", 24, []awscloudwatch.IMetric{
				h.campaign.MetricStarted(o), h.campaign.MetricSucceeded(o), h.campaign.MetricFailed(o),
				h.campaign.MetricTimedOut(o), h.campaign.MetricAborted(o),
			}),
		})
	}
	sesMetric := func(name string) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("AWS/SES"), MetricName: jsii.String(name), Period: awscdk.Duration_Hours(jsii.Number(1)),
			Statistic: jsii.String("Maximum"),
		})
	}
	rows = append(rows, []awscloudwatch.IWidget{
		graph("SES reputation (fraction; alarms at "+fmt.Sprintf("%g %% / %g %%", h.settings.Alarms.SESBounceRatePercent, h.settings.Alarms.SESComplaintRatePercent)+")", 12,
			[]awscloudwatch.IMetric{sesMetric("Reputation.BounceRate"), sesMetric("Reputation.ComplaintRate")}),
		graph("Reserved sends (EventBridge Scheduler)", 12, []awscloudwatch.IMetric{
			h.scheduleGroup.MetricAttempts(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}),
			h.scheduleGroup.MetricTargetErrors(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}),
			h.scheduleGroup.MetricSentToDLQ(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}),
		}),
	})

	widgets := make([]*[]awscloudwatch.IWidget, len(rows))
	for i := range rows {
		widgets[i] = &rows[i]
	}
	awscloudwatch.NewDashboard(h.stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName:   jsii.String(h.name("overview")),
		DefaultInterval: awscdk.Duration_Hours(jsii.Number(3)),
		Widgets:         &widgets,
	})
}
