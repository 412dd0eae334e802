package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"herald/internal/config"
	"herald/internal/notify"
)

// HeraldProps is what one environment's stack is built from.
type HeraldProps struct {
	awscdk.StackProps
	Env *Environment
	// Functions are the Lambda functions to deploy, one per directory under functions/.
	Functions []string
	// AssetDir holds <name>/bootstrap for every function (absolute path; `make build-lambda`).
	AssetDir string
	// StagingDir is a scratch directory (absolute) where the effective herald.yaml is written
	// for the config layer.
	StagingDir string
}

// configPath is where every function finds the effective herald.yaml (a layer's files land
// under /opt).
const configPath = "/opt/herald/herald.yaml"

// herald builds one environment's stack; its fields are what later parts need from earlier ones.
type herald struct {
	stack    awscdk.Stack
	props    *HeraldProps
	env      string
	cfg      *config.Config
	settings Settings

	tables       map[string]awsdynamodb.Table
	tableOrder   []string
	queues       []*stageQueue // consumer queues, in a stable order
	queueByName  map[string]*stageQueue
	schedulerDLQ awssqs.Queue
	eventsDLQ    awssqs.Queue // operator events a rule could not deliver to its target (events.go)
	// senders are the function roles granted sqs:SendMessage on a queue, by logical name: the
	// ingest queues' policies admit them (isolateIngestQueues).
	senders map[string][]awsiam.Role

	functions map[string]awslambda.Function
	// mappings are the event source mappings, by the logical queue they consume.
	mappings      map[string]awslambda.EventSourceMapping
	roles         map[string]awsiam.Role
	functionOrder []string
	configLayer   awslambda.LayerVersion

	scheduleGroup awsscheduler.ScheduleGroup
	schedulerRole awsiam.Role
	feedbackTopic awssns.Topic
	alarmTopic    awssns.Topic
	eventBus      awsevents.EventBus
	campaign      awsstepfunctions.StateMachine
	listsBucket   awss3.Bucket // audience list uploads (audience.go), when functions/audience exists
	exportsBucket awss3.Bucket // export files (exports.go), when functions/export exists
	apiURL        *string
	api           awsapigatewayv2.HttpApi
	wsAPI         awsapigatewayv2.CfnApi // the live inbox stream (stream.go), when functions/stream exists
}

// stageQueue is a queue a function consumes, with its DLQ.
type stageQueue struct {
	logical  string // notify's name: ingest-orders, send-realtime, cleanup…
	kind     string // ingest, realtime, bulk, cleanup, bounce (alarm thresholds)
	consumer string // the function that consumes it
	batch    int
	maxConc  int
	window   time.Duration // MaximumBatchingWindow; 0 for none
	queue    awssqs.Queue
	dlq      awssqs.Queue
}

// NewHeraldStack defines one environment of Herald.
func NewHeraldStack(scope constructs.Construct, id string, p *HeraldProps) (awscdk.Stack, error) {
	if p.Env == nil {
		return nil, fmt.Errorf("stack %s: no environment", id)
	}
	for _, name := range p.Functions {
		bootstrap := filepath.Join(p.AssetDir, name, "bootstrap")
		if _, err := os.Stat(bootstrap); err != nil {
			return nil, fmt.Errorf("function %s: no %s: run `make build-lambda` (or point -c lambdaAssets=<dir> at prebuilt bootstraps)", name, bootstrap)
		}
	}
	stack := awscdk.NewStack(scope, jsii.String(id), &p.StackProps)
	h := &herald{
		stack:       stack,
		props:       p,
		env:         p.Env.Name,
		cfg:         p.Env.Config,
		settings:    p.Env.Settings,
		tables:      map[string]awsdynamodb.Table{},
		queueByName: map[string]*stageQueue{},
		senders:     map[string][]awsiam.Role{},
		functions:   map[string]awslambda.Function{},
		roles:       map[string]awsiam.Role{},
	}
	awscdk.Tags_Of(stack).Add(jsii.String("app"), jsii.String("herald"), nil)
	awscdk.Tags_Of(stack).Add(jsii.String("herald:env"), jsii.String(h.env), nil)

	h.addTables()
	h.addQueues()
	h.addAudienceQueue()
	h.addExportQueue()
	h.addScheduler()
	h.addSES()
	h.addEventBus()
	h.addStreamAPI()
	if err := h.addFunctions(); err != nil {
		return nil, err
	}
	h.isolateIngestQueues()
	h.addAPI()
	h.addStreamRoutes()
	h.addCampaign()
	h.addAudience()
	h.addExports()
	h.addMonitoring()
	h.addEventAlerts()
	h.addOutputs()
	h.addNagSuppressions()
	return stack, nil
}

// Physical names: everything is herald-<env>-<logical name>, as the runtime expects.

func queueName(env, logical string) string { return "herald-" + env + "-" + logical }

func (h *herald) name(logical string) string { return "herald-" + h.env + "-" + logical }

// pascal turns "ingest-orders" into "IngestOrders" for construct ids.
func pascal(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r == '-' || r == '_' || r == '/' || r == '.' {
			up = true
			continue
		}
		if up && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		up = false
		b.WriteRune(r)
	}
	return b.String()
}

func seconds(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

// addQueues creates every consumer queue with its DLQ. Visibility is the configured one, raised to
// 6× the consumer's timeout where that is longer (Lambda's rule for SQS event sources).
func (h *herald) addQueues() {
	ingestTimeout := h.settings.Function("ingest").Timeout.D()
	for _, s := range h.cfg.Services {
		h.addQueue(&stageQueue{
			logical: notify.IngestQueue(s.Name), kind: "ingest", consumer: "ingest",
			batch: s.BatchSize, maxConc: s.MaxConcurrency, window: s.BatchingWindow.D(),
		}, 6*ingestTimeout, config.DefaultConsumer.MaxReceiveCount)
	}
	for _, stage := range []string{notify.StagePrepare, notify.StageSend, notify.StageRecord} {
		for _, lane := range notify.Lanes {
			l := h.cfg.Lanes[string(lane)]
			c := map[string]config.Consumer{notify.StagePrepare: l.Prepare, notify.StageSend: l.Send, notify.StageRecord: l.Record}[stage]
			h.addQueue(&stageQueue{
				logical: notify.LaneQueue(stage, lane), kind: string(lane), consumer: stage,
				batch: c.BatchSize, maxConc: c.MaxConcurrency,
			}, h.visibility(stage, c), c.MaxReceiveCount)
		}
	}
	for _, stage := range []string{notify.StageCleanup, notify.StageBounce} {
		c := h.cfg.Stages[stage]
		h.addQueue(&stageQueue{
			logical: stage, kind: stage, consumer: stage, batch: c.BatchSize, maxConc: c.MaxConcurrency,
		}, h.visibility(stage, c), c.MaxReceiveCount)
	}
}

func (h *herald) visibility(consumer string, c config.Consumer) time.Duration {
	v := c.VisibilityTimeout.D()
	if min := 6 * h.settings.Function(consumer).Timeout.D(); v < min {
		v = min
	}
	return v
}

func (h *herald) addQueue(q *stageQueue, visibility time.Duration, maxReceive int) {
	id := pascal(q.logical)
	q.dlq = h.newDLQ(id+"Dlq", notify.DLQName(q.logical))
	q.queue = awssqs.NewQueue(h.stack, jsii.String(id+"Queue"), &awssqs.QueueProps{
		QueueName:         jsii.String(h.name(q.logical)),
		VisibilityTimeout: seconds(visibility),
		RetentionPeriod:   awscdk.Duration_Days(jsii.Number(4)),
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: q.dlq, MaxReceiveCount: jsii.Number(float64(maxReceive))},
	})
	h.queues = append(h.queues, q)
	h.queueByName[q.logical] = q
}

// newDLQ is a dead-letter queue: 14 days (SQS's longest) to look at and redrive what failed.
func (h *herald) newDLQ(id, logical string) awssqs.Queue {
	return awssqs.NewQueue(h.stack, jsii.String(id), &awssqs.QueueProps{
		QueueName:       jsii.String(h.name(logical)),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
	})
}

// dlqs lists every dead-letter queue by logical name, in a stable order.
func (h *herald) dlqs() ([]string, map[string]awssqs.Queue) {
	var names []string
	m := map[string]awssqs.Queue{}
	for _, q := range h.queues {
		n := notify.DLQName(q.logical)
		names = append(names, n)
		m[n] = q.dlq
	}
	names = append(names, "scheduler-dlq")
	m["scheduler-dlq"] = h.schedulerDLQ
	names = append(names, "events-dlq")
	m["events-dlq"] = h.eventsDLQ
	return names, m
}

// addScheduler creates the schedule group reserved sends live in, the role schedules assume —
// which may do one thing: put a message on an ingest queue (or on the scheduler DLQ when a fire
// runs out of retries) — and that DLQ.
func (h *herald) addScheduler() {
	h.schedulerDLQ = h.newDLQ("SchedulerDlq", "scheduler-dlq")
	// Deleting the group deletes every reserved send armed in it: the armed sends are data too,
	// so the group is kept wherever the tables are (protect_data).
	h.scheduleGroup = awsscheduler.NewScheduleGroup(h.stack, jsii.String("ScheduleGroup"), &awsscheduler.ScheduleGroupProps{
		ScheduleGroupName: jsii.String("herald-" + h.env),
		RemovalPolicy:     h.removal(),
	})
	h.schedulerRole = awsiam.NewRole(h.stack, jsii.String("SchedulerRole"), &awsiam.RoleProps{
		RoleName:    jsii.String(h.name("scheduler")),
		Description: jsii.String("Assumed by Herald's reserved-send schedules: may only send to the ingest queues and the scheduler DLQ"),
		// Only schedules of this environment's group may use the role: EventBridge Scheduler
		// names the schedule group as aws:SourceArn when it assumes a schedule's role, so a
		// schedule that anyone else creates in another group — even passing this role — cannot
		// put messages on the ingest queues.
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]interface{}{
				"StringEquals": map[string]interface{}{"aws:SourceAccount": h.stack.Account()},
				"ArnEquals":    map[string]interface{}{"aws:SourceArn": h.scheduleGroupArn()},
			},
		}),
	})
	var arns []*string
	for _, q := range h.queues {
		if q.kind == "ingest" {
			arns = append(arns, q.queue.QueueArn())
		}
	}
	arns = append(arns, h.schedulerDLQ.QueueArn())
	h.schedulerRole.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("FireReservedSends"),
		Actions:   jsii.Strings("sqs:SendMessage"),
		Resources: &arns,
	}))
}

// scheduleGroupArn is the ARN of this environment's schedule group.
func (h *herald) scheduleGroupArn() string {
	return fmt.Sprintf("arn:%s:scheduler:%s:%s:schedule-group/herald-%s", *h.stack.Partition(), *h.stack.Region(), *h.stack.Account(), h.env)
}

// deployRoles are the principals that deploy the stack (stack.deploy_roles; by default the CDK
// bootstrap's CloudFormation execution role), which the queue and bucket policies' denies
// leave out: CloudFormation must still update and delete what those policies guard.
func (h *herald) deployRoles() []*string {
	var out []*string
	for _, r := range h.settings.DeployRoles {
		out = append(out, jsii.String(r))
	}
	if len(out) == 0 {
		out = append(out, jsii.String(fmt.Sprintf("arn:%s:iam::%s:role/cdk-*-cfn-exec-role-%s-%s",
			*h.stack.Partition(), *h.stack.Account(), *h.stack.Account(), *h.stack.Region())))
	}
	return out
}

// isolateIngestQueues gives each service's ingest queue a policy that admits only that service
// and Herald: the service's iam_principals may send (also from another account), and every other
// principal is denied sqs:SendMessage — whatever its own IAM policies say — except the scheduler
// role (reserved sends fire there) and the function roles granted to send (api hands requests
// over; admin redrives the queue's dead letters, which SQS does with the caller's rights).
// Principals are matched by aws:PrincipalArn (a role session's ARN is its role's), in conditions
// rather than Principal elements, so a role created after the stack is still matched.
func (h *herald) isolateIngestQueues() {
	for _, s := range h.cfg.Services {
		q := h.queueByName[notify.IngestQueue(s.Name)]
		services := make([]*string, 0, len(s.IAMPrincipals))
		for _, p := range s.IAMPrincipals {
			services = append(services, jsii.String(p))
		}
		allowed := append(append([]*string{}, services...), h.schedulerRole.RoleArn())
		for _, r := range h.senders[q.logical] {
			allowed = append(allowed, r.RoleArn())
		}
		if len(services) > 0 {
			q.queue.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:        jsii.String("ServiceMaySend"),
				Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
				Actions:    jsii.Strings("sqs:SendMessage"),
				Resources:  &[]*string{q.queue.QueueArn()},
				Conditions: &map[string]any{"ArnEquals": map[string]any{"aws:PrincipalArn": services}},
			}))
		}
		q.queue.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("OnlyServiceAndHeraldSend"),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			Actions:    jsii.Strings("sqs:SendMessage"),
			Resources:  &[]*string{q.queue.QueueArn()},
			Conditions: &map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": allowed}},
		}))
		// Everything but sending — receiving, deleting, purging, and rewriting this very policy
		// with SetQueueAttributes — belongs to Herald's roles that consume or inspect the queue
		// (ingest; admin for depths) and to whoever deploys the stack: any other principal in
		// the account is refused, whatever sqs:* its own policies grant.
		consumers := append([]*string{}, h.deployRoles()...)
		for _, name := range []string{q.consumer, adminFunction} {
			if r, ok := h.roles[name]; ok {
				consumers = append(consumers, r.RoleArn())
			}
		}
		q.queue.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("OnlyHeraldConsumes"),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			NotActions: jsii.Strings("sqs:SendMessage"),
			Resources:  &[]*string{q.queue.QueueArn()},
			Conditions: &map[string]any{"ArnNotLike": map[string]any{"aws:PrincipalArn": consumers}},
		}))
	}
}

func (h *herald) addOutputs() {
	out := func(id, value, desc string) {
		awscdk.NewCfnOutput(h.stack, jsii.String(id), &awscdk.CfnOutputProps{Value: jsii.String(value), Description: jsii.String(desc)})
	}
	if h.apiURL != nil {
		awscdk.NewCfnOutput(h.stack, jsii.String("ApiUrl"), &awscdk.CfnOutputProps{Value: h.apiURL, Description: jsii.String("HTTP API base URL")})
	}
	awscdk.NewCfnOutput(h.stack, jsii.String("AlarmTopicArn"), &awscdk.CfnOutputProps{
		Value: h.alarmTopic.TopicArn(), Description: jsii.String("SNS topic every alarm notifies; subscribe on-call here"),
	})
	out("DashboardName", h.name("overview"), "CloudWatch dashboard")
	out("ScheduleGroupName", "herald-"+h.env, "EventBridge Scheduler group of reserved sends")
	for _, q := range h.queues {
		if q.kind == "ingest" {
			awscdk.NewCfnOutput(h.stack, jsii.String(pascal(q.logical)+"QueueUrl"), &awscdk.CfnOutputProps{
				Value: q.queue.QueueUrl(), Description: jsii.String("Ingest queue of service " + strings.TrimPrefix(q.logical, "ingest-")),
			})
		}
	}
}

var retentionDays = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
	7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS,
	365: awslogs.RetentionDays_ONE_YEAR, 731: awslogs.RetentionDays_TWO_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS,
	3653: awslogs.RetentionDays_TEN_YEARS,
}

// removal is what CloudFormation does with a resource that holds data (a table, a bucket, a log
// group, a topic's key, the schedule group) when it leaves the stack. Where data is protected it is
// kept on update and delete but removed when the stack's first create rolls back
// (RetainExceptOnCreate): a plain Retain would leave the named resources of a failed first deploy
// behind, and every later deploy would fail on "already exists" (README, First deploy).
func (h *herald) removal() awscdk.RemovalPolicy {
	if h.settings.ProtectData {
		return awscdk.RemovalPolicy_RETAIN_ON_UPDATE_OR_DELETE
	}
	return awscdk.RemovalPolicy_DESTROY
}

// newLogGroup is a log group with the environment's retention, kept on delete where data is protected.
func (h *herald) newLogGroup(id, name string) awslogs.LogGroup {
	return awslogs.NewLogGroup(h.stack, jsii.String(id), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String(name),
		Retention:     retentionDays[h.settings.LogRetentionDays],
		RemovalPolicy: h.removal(),
	})
}
