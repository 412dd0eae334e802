package costbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/guregu/dynamo/v2"

	"herald/internal/awsenv"
	"herald/internal/awsenv/provider"
	"herald/internal/config"
	"herald/internal/ddb"
	"herald/internal/eventbus/eventbusfake"
	"herald/internal/notify"
	"herald/internal/sandbox"
	"herald/internal/scheduler/schedulerfake"
	"herald/internal/sqs/sqsfake"
)

// The world's names: one service, its principal (the SigV4 caller API Gateway verified), and the
// prefixes of its queues and schedules.
const (
	service      = "demo"
	principal    = "arn:aws:iam::000000000000:role/demo-service"
	queuePrefix  = "herald-bench-"
	scheduleGrp  = "herald-bench"
	eventBus     = "herald-bench-events"
	campaignApp  = "promo"   // the campaign's devices: app_devices of this FCM app
	transactApp  = "default" // the single sends' users' devices
	region       = "us-east-1"
	fakeAccount  = sqsfake.Account
	schedulerArn = "arn:aws:iam::000000000000:role/herald-bench-scheduler"
)

// world is the AWS runtime on this machine: DynamoDB Local tables, the SQS, EventBridge and
// Scheduler fakes, the sandbox providers (FCM over real HTTP), and one awsenv.Env built from the
// environment a function gets, every AWS client of it metered.
type world struct {
	meter   *Meter
	cfg     *config.Config
	env     *awsenv.Env
	sandbox *sandbox.Server

	sqs      *awssqs.Client // metered: producers, the event source mappings, the state machine
	sqsAdmin *awssqs.Client // not metered: setup and queue depths
	urlBase  string

	closers []func()
	restore []func()
}

// newWorld starts the fakes, creates the queues and tables, and loads the environment.
func newWorld(ctx context.Context, dynamoEndpoint string, m *Meter) (*world, error) {
	w := &world{meter: m}
	ok := false
	defer func() {
		if !ok {
			w.close()
		}
	}()
	fake := sqsfake.New()
	sqsSrv := httptest.NewServer(fake)
	bus := eventbusfake.New()
	busSrv := httptest.NewServer(bus)
	sched := schedulerfake.New(schedulerfake.Options{Groups: []string{scheduleGrp}})
	w.closers = append(w.closers, func() { fake.Close(); sqsSrv.Close() }, busSrv.Close, sched.Close)
	sb, err := sandbox.Start(sandbox.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	w.sandbox = sb
	w.closers = append(w.closers, func() { sb.Close() })

	yaml := fmt.Sprintf(`
env: bench
services:
  - name: %s
    iam_principals: [%q]
    admin: true
providers:
  fcm: {apps: {%s: {project_id: herald-bench, endpoint: %q}, %s: {project_id: herald-bench-promo, endpoint: %q}}}
  ses: {from: noreply@example.com, endpoint: %q}
  twilio: {account_sid: AC00000000000000000000000000000000, auth_token: sandboxtoken0000, from: "+15005550006", base_url: %q}
contacts: {encryption_key: aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=}
`, service, principal, transactApp, sb.URL()+"/v1", campaignApp, sb.URL()+"/v1", sb.URL(), sb.URL())
	if w.cfg, err = config.Parse([]byte(yaml)); err != nil {
		return nil, err
	}
	tables := fmt.Sprintf("herald-bench-%d-", time.Now().UnixNano())
	w.urlBase = sqsSrv.URL + "/" + fakeAccount + "/" + queuePrefix
	arnBase := "arn:aws:sqs:" + region + ":" + fakeAccount + ":" + queuePrefix
	w.setenv(map[string]string{
		awsenv.EnvConfig: yaml, awsenv.EnvTablePrefix: tables,
		awsenv.EnvQueueURLPrefix: w.urlBase, awsenv.EnvQueueARNPrefix: arnBase,
		awsenv.EnvEventBus: eventBus, awsenv.EnvRateLimitTable: tables + "ratelimit",
		awsenv.EnvScheduleGroup: scheduleGrp, awsenv.EnvSchedulerRole: schedulerArn, awsenv.EnvSchedulerDLQ: arnBase + "scheduler-dlq",
		"AWS_ENDPOINT_URL_DYNAMODB": dynamoEndpoint, "AWS_ENDPOINT_URL_SQS": sqsSrv.URL,
		"AWS_ENDPOINT_URL_EVENTBRIDGE": busSrv.URL, "AWS_ENDPOINT_URL_SCHEDULER": sched.URL,
		"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_SESSION_TOKEN": "", "AWS_REGION": region,
		"AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
	})

	awsCfg := aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", "")}
	w.sqsAdmin = awssqs.NewFromConfig(awsCfg, func(o *awssqs.Options) { o.BaseEndpoint = aws.String(sqsSrv.URL) })
	w.sqs = awssqs.NewFromConfig(awsCfg, func(o *awssqs.Options) {
		o.BaseEndpoint = aws.String(sqsSrv.URL)
		o.APIOptions = append(o.APIOptions, m.APIOption)
	})
	if err := w.createQueues(ctx); err != nil {
		return nil, err
	}
	client := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(dynamoEndpoint)
		o.DisableValidateResponseChecksum = true
	})
	if err := ddb.CreateTables(ctx, dynamo.NewFromIface(client), ddb.TablesWithPrefix(tables)); err != nil {
		return nil, fmt.Errorf("DynamoDB Local at %s: %w", dynamoEndpoint, err)
	}
	if err := ddb.CreateRateLimitTable(ctx, client, tables+"ratelimit"); err != nil {
		return nil, err
	}
	w.closers = append(w.closers, func() { dropTables(client, tables) })

	w.env, err = awsenv.Load(ctx, awsenv.Options{Senders: provider.Senders, API: true,
		APIOptions: []func(*middleware.Stack) error{m.APIOption}, Output: m.Logs()})
	if err != nil {
		return nil, err
	}
	ok = true
	return w, nil
}

// setenv sets the function environment on this process (awsenv.Load reads it) until close.
func (w *world) setenv(vars map[string]string) {
	for k, v := range vars {
		old, had := os.LookupEnv(k)
		w.restore = append(w.restore, func() {
			if had {
				os.Setenv(k, old)
			} else {
				os.Unsetenv(k)
			}
		})
		if v == "" {
			os.Unsetenv(k)
		} else {
			os.Setenv(k, v)
		}
	}
}

func (w *world) close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
	for _, r := range w.restore {
		r()
	}
}

func (w *world) queueURL(q string) string { return w.urlBase + q }

func (w *world) queueARN(q string) string {
	return "arn:aws:sqs:" + region + ":" + fakeAccount + ":" + queuePrefix + q
}

// createQueues creates every queue the configuration names, each with its DLQ (5 receives).
func (w *world) createQueues(ctx context.Context) error {
	for _, q := range append(w.cfg.QueueNames(), notify.QueueExport, "scheduler") {
		dlq, err := w.sqsAdmin.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(queuePrefix + notify.DLQName(q))})
		if err != nil {
			return err
		}
		attrs, err := w.sqsAdmin.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return err
		}
		policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"5"}`, attrs.Attributes["QueueArn"])
		if _, err := w.sqsAdmin.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(queuePrefix + q),
			Attributes: map[string]string{"RedrivePolicy": policy, "VisibilityTimeout": "60"}}); err != nil {
			return err
		}
	}
	return nil
}

// pending is how many messages the queues hold: visible, in flight and delayed.
func (w *world) pending(ctx context.Context, queues []string) (int, error) {
	n := 0
	for _, q := range queues {
		out, err := w.sqsAdmin.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(w.queueURL(q)),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
		if err != nil {
			return 0, err
		}
		for _, v := range out.Attributes {
			var k int
			fmt.Sscan(v, &k)
			n += k
		}
	}
	return n, nil
}

// deadLetters is how many messages the queues' DLQs hold.
func (w *world) deadLetters(ctx context.Context, queues []string) (int, error) {
	var dlqs []string
	for _, q := range queues {
		dlqs = append(dlqs, notify.DLQName(q))
	}
	return w.pending(ctx, dlqs)
}

// dropTables deletes the run's tables (DynamoDB Local may serve other runs too).
func dropTables(client *dynamodb.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pages := dynamodb.NewListTablesPaginator(client, &dynamodb.ListTablesInput{})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return
		}
		for _, t := range out.TableNames {
			if strings.HasPrefix(t, prefix) {
				_, _ = client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(t)})
			}
		}
	}
}
