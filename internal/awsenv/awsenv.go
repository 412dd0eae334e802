// Package awsenv builds Herald's AWS runtime from a Lambda function's environment: herald.yaml,
// table and queue names, secrets from Secrets Manager, and the DynamoDB (ddb), SQS (sqs),
// EventBridge Scheduler (scheduler), EventBridge (eventbus), Step Functions (sfn), S3 (s3) and
// provider adapters, each in its own package: this one only wires them, and holds the Lambda
// handlers over them. Every functions/<name>/main.go
// calls Load, then hands one of the handlers here to lambda.Start. Configuration errors surface
// from Load, before lambda.Start; handlers never exit the process.
package awsenv

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	"github.com/guregu/dynamo/v2"

	"herald/internal/api"
	"herald/internal/config"
	"herald/internal/ddb"
	"herald/internal/eventbus"
	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/ratelimit"
	"herald/internal/scheduler"
	"herald/internal/seal"
	"herald/internal/sqs"
)

// Environment variables a Herald function reads. The CDK app sets them.
const (
	EnvConfig         = "HERALD_CONFIG"           // herald.yaml's content (secrets are names only)
	EnvConfigFile     = "HERALD_CONFIG_FILE"      // or a path to it; default herald.yaml beside the binary
	EnvTablePrefix    = "HERALD_TABLE_PREFIX"     // e.g. herald-prod- (tables <prefix>notifications, …)
	EnvQueueURLPrefix = "HERALD_QUEUE_URL_PREFIX" // e.g. https://sqs.us-east-1.amazonaws.com/123456789012/herald-prod-
	EnvQueueARNPrefix = "HERALD_QUEUE_ARN_PREFIX" // e.g. arn:aws:sqs:us-east-1:123456789012:herald-prod-
	EnvRateLimitTable = "HERALD_RATELIMIT_TABLE"  // the shared token-bucket table
	EnvScheduleGroup  = "HERALD_SCHEDULE_GROUP"   // EventBridge Scheduler group
	EnvSchedulerRole  = "HERALD_SCHEDULER_ROLE_ARN"
	EnvSchedulerDLQ   = "HERALD_SCHEDULER_DLQ_ARN"
	EnvEventBus       = "HERALD_EVENT_BUS" // EventBridge bus for operator events; default "default"
	// The console's sign-in on the admin function: a JWT holding this group (cognito:groups or
	// groups claim) or this scope (scope or scp claim) is an operator's. Neither set: no token is.
	EnvConsoleAdminGroup = "HERALD_CONSOLE_ADMIN_GROUP"
	EnvConsoleAdminScope = "HERALD_CONSOLE_ADMIN_SCOPE"
)

// Env is a function's wired runtime.
type Env struct {
	Config    *config.Config
	AWS       aws.Config
	Store     *ddb.Store
	Queue     *sqs.Queue
	Scheduler notify.Scheduler // nil when no schedule group is configured
	Pipeline  *pipeline.Pipeline
	Log       *slog.Logger
	Events    notify.Events     // operator events: a log line, and PutEvents on the HERALD_EVENT_BUS bus
	Keys      map[string]string // API key → service
	Metrics   notify.Metrics    // CloudWatch, through the embedded metric format on stdout
	// Writes counts the DynamoDB items this function writes; each SQS batch reports its share
	// as the StoreWrites metric (dimension Queue), which makes writes per recipient measurable.
	Writes *ddb.WriteCounter
	// DB is the one DynamoDB client every store of the function goes through (so Writes counts
	// them all).
	DB *dynamo.DB

	// InboxEvents publishes to the live inbox stream's connections (EnvConnectionsTable and
	// EnvWebSocketEndpoint set); nil: no stream.
	InboxEvents notify.InboxEvents

	// CursorKey signs the API's paging cursors; derived from the contact encryption key, so every
	// API instance agrees.
	CursorKey []byte
	// UnsubscribeKey signs and checks one-click unsubscribe links (notify.UnsubscribeKeyFrom of
	// the contact encryption key).
	UnsubscribeKey []byte

	queuePrefix string
}

// SenderBuilder makes the provider senders (internal/awsenv/provider.Senders). Only the send and
// ingest functions (ingest sends express notifications) pass one, so the others do not link the
// provider SDKs.
type SenderBuilder func(ctx context.Context, sm *secretsmanager.Client, cfg *config.Config, awsCfg aws.Config) ([]notify.Sender, error)

// Options choose what Load builds.
type Options struct {
	Senders SenderBuilder // nil: no senders
	API     bool          // read the services' API keys (only the api function may read those secrets)
	// APIOptions are added to every AWS client Load makes (herald bench cost meters the
	// requests with one); nil in the functions.
	APIOptions []func(*middleware.Stack) error
	// Output is where the logs and the embedded-format metrics go; nil: stdout, which Lambda
	// sends to CloudWatch Logs.
	Output io.Writer
}

// Load reads the environment and builds the adapters. Every problem is reported at once.
func Load(ctx context.Context, o Options) (*Env, error) {
	stdout := o.Output
	if stdout == nil {
		stdout = os.Stdout
	}
	log := notify.NewJSONLogger(stdout, nil)
	slog.SetDefault(log)
	cfg, err := loadConfig()
	if err != nil {
		return nil, err
	}
	var missing []error
	need := func(k string) string {
		v := os.Getenv(k)
		if v == "" {
			missing = append(missing, fmt.Errorf("environment variable %s is not set", k))
		}
		return v
	}
	tablePrefix, urlPrefix := need(EnvTablePrefix), need(EnvQueueURLPrefix)
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	awsCfg.APIOptions = append(awsCfg.APIOptions, o.APIOptions...)
	e := &Env{Config: cfg, AWS: awsCfg, Log: log, queuePrefix: queueNameOf(urlPrefix), Writes: &ddb.WriteCounter{}}

	sm := secretsmanager.NewFromConfig(awsCfg)
	cipher, contactsKey, err := contactsCipher(ctx, sm, cfg)
	if err != nil {
		return nil, err
	}
	e.CursorKey = api.CursorKeyFrom(contactsKey)
	e.UnsubscribeKey = notify.UnsubscribeKeyFrom(contactsKey)
	e.DB = dynamo.New(awsCfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }, e.Writes.Option)
	if e.Store, err = ddb.New(e.DB, ddb.TablesWithPrefix(tablePrefix), cipher, notify.SystemClock{}); err != nil {
		return nil, err
	}
	if os.Getenv(EnvRecipientIndex) == "1" {
		e.Store.KeepRecipientIndex()
	}
	sqsClient := awssqs.NewFromConfig(awsCfg)
	e.Queue = sqs.New(sqsClient, queueURLs(cfg, urlPrefix))
	if g := os.Getenv(EnvScheduleGroup); g != "" {
		arns := map[string]string{}
		for _, s := range cfg.Services {
			arns[notify.IngestQueue(s.Name)] = os.Getenv(EnvQueueARNPrefix) + notify.IngestQueue(s.Name)
		}
		e.Scheduler, err = scheduler.New(awsscheduler.NewFromConfig(awsCfg), scheduler.Config{
			GroupName: g, RoleARN: os.Getenv(EnvSchedulerRole), QueueARNs: arns, DLQARN: os.Getenv(EnvSchedulerDLQ),
		})
		if err != nil {
			return nil, err
		}
	}
	if o.API {
		if e.Keys, err = apiKeys(ctx, sm, cfg); err != nil {
			return nil, err
		}
	}
	var senders []notify.Sender
	var limiter notify.RateLimiter
	if o.Senders != nil {
		if senders, err = o.Senders(ctx, sm, cfg, awsCfg); err != nil {
			return nil, err
		}
		if t := os.Getenv(EnvRateLimitTable); t != "" {
			p := cfg.Providers
			limiter = ddb.NewRateLimiter(dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }), t,
				map[string]ratelimit.Rate{
					string(notify.ProviderFCM): {PerSecond: p.FCM.RatePerSecond}, string(notify.ProviderAPNs): {PerSecond: p.APNs.RatePerSecond},
					string(notify.ProviderSES): {PerSecond: p.SES.RatePerSecond}, string(notify.ProviderTwilio): {PerSecond: p.Twilio.RatePerSecond},
					string(notify.ProviderAlimTalk): {PerSecond: p.AlimTalk.RatePerSecond},
					notify.WebPushOriginRateKey:     {PerSecond: p.WebPush.RatePerSecond}, // each push service origin on its own
				}, notify.SystemClock{})
		}
	}
	metrics := &emf{w: stdout, env: cfg.Env, now: time.Now}
	e.Metrics = metrics
	bus, err := eventbus.New(eventbridge.NewFromConfig(awsCfg), os.Getenv(EnvEventBus), metrics)
	if err != nil {
		return nil, err
	}
	e.Events = notify.TeeEvents(notify.LogEvents{Logger: log}, bus)
	if pub, _ := e.inboxEvents(); pub != nil {
		e.InboxEvents = pub
	}
	e.Pipeline = pipeline.New(pipeline.Deps{Store: e.Store, Queue: e.Queue, Senders: senders, Limiter: limiter, Logger: log,
		Metrics: metrics, Events: e.Events, InboxEvents: e.InboxEvents},
		pipeline.Config{
			MaxAttempts: cfg.Retry.MaxAttempts, RetryBase: cfg.Retry.Base.D(), RetryMax: cfg.Retry.Max.D(), ProviderRetry: cfg.ProviderRetries(),
			SendLease: cfg.Lanes["realtime"].Send.VisibilityTimeout.D(), InboxTTL: cfg.Inbox.TTL.D(),
			QuietHours: cfg.QuietHoursPolicy(), AdPrefix: cfg.Marketing.AdPrefix, Unsubscribe: e.unsubscribeURL(),
			OptOutSMS:        cfg.Marketing.OptOutSMS,
			AlimTalkFallback: cfg.Providers.AlimTalk.FallbackSMS(), ExpressMaxRecipients: cfg.ExpressMaxRecipients(),
			VerdictCheck:    cfg.Providers.AlimTalk.VerdictCheck.D(),
			VerdictDeadline: cfg.Providers.AlimTalk.VerdictDeadline.D(),
		})
	return e, nil
}

func loadConfig() (*config.Config, error) {
	if y := os.Getenv(EnvConfig); y != "" {
		return config.Parse([]byte(y))
	}
	path := os.Getenv(EnvConfigFile)
	if path == "" {
		path = "herald.yaml"
	}
	return config.Load(path)
}

// queueURLs maps every logical queue name, and its DLQ's, to its URL.
func queueURLs(cfg *config.Config, prefix string) map[string]string {
	out := map[string]string{}
	for _, n := range cfg.QueueNames() {
		out[n] = prefix + n
		out[notify.DLQName(n)] = prefix + notify.DLQName(n)
	}
	// The export queue is fed by the admin function and drained by the export function.
	out[notify.QueueExport] = prefix + notify.QueueExport
	out[notify.DLQName(notify.QueueExport)] = prefix + notify.DLQName(notify.QueueExport)
	return out
}

// queueNameOf returns the queue-name prefix in a queue URL prefix ("…/123/herald-prod-" → "herald-prod-").
func queueNameOf(urlPrefix string) string {
	return urlPrefix[strings.LastIndexByte(urlPrefix, '/')+1:]
}

// OwnQueue reports whether an event source ARN names one of this environment's queues: its
// name has the environment's prefix (herald-prod-…).
func (e *Env) OwnQueue(arn string) bool {
	name := arn[strings.LastIndexByte(arn, ':')+1:]
	return e.queuePrefix != "" && strings.HasPrefix(name, e.queuePrefix) && len(name) > len(e.queuePrefix)
}

// LogicalQueue turns an event source ARN (arn:aws:sqs:…:herald-prod-send-bulk) into the
// logical queue name ("send-bulk").
func (e *Env) LogicalQueue(arn string) string {
	name := arn[strings.LastIndexByte(arn, ':')+1:]
	return strings.TrimPrefix(name, e.queuePrefix)
}

// Secret reads a Secrets Manager secret as a string.
func Secret(ctx context.Context, sm *secretsmanager.Client, name string) (string, error) {
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", name, err)
	}
	if out.SecretString != nil {
		return *out.SecretString, nil
	}
	return string(out.SecretBinary), nil
}

// contactsCipher returns the contact cipher and the key it was made from.
func contactsCipher(ctx context.Context, sm *secretsmanager.Client, cfg *config.Config) (*seal.Box, string, error) {
	key := cfg.Contacts.EncryptionKey
	if key == "" {
		var err error
		if key, err = Secret(ctx, sm, cfg.Contacts.EncryptionKeySecret); err != nil {
			return nil, "", fmt.Errorf("contacts.encryption_key_secret: %w", err)
		}
	}
	key = strings.TrimSpace(key)
	if _, err := base64.StdEncoding.DecodeString(key); err != nil {
		return nil, "", fmt.Errorf("contacts encryption key: not base64")
	}
	box, err := seal.FromBase64(key)
	return box, key, err
}

// apiKeys collects each service's keys: inline api_keys plus the comma- or newline-separated
// keys in its api_key_secret.
func apiKeys(ctx context.Context, sm *secretsmanager.Client, cfg *config.Config) (map[string]string, error) {
	keys := cfg.Keys()
	for _, s := range cfg.Services {
		if s.APIKeySecret == "" {
			continue
		}
		v, err := Secret(ctx, sm, s.APIKeySecret)
		if err != nil {
			return nil, fmt.Errorf("services %s api_key_secret: %w", s.Name, err)
		}
		for _, k := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '\n' || r == ' ' }) {
			keys[k] = s.Name
		}
	}
	return keys, nil
}

// unsubscribeURL builds marketing email's one-click unsubscribe links, under
// marketing.unsubscribe_base_url or else the API's endpoint (EnvPublicURL, which the stack gives
// the functions that send); nil, and no links, where neither is known.
func (e *Env) unsubscribeURL() func(notify.Unsubscribe) string {
	base := strings.TrimRight(cmp.Or(e.Config.Marketing.UnsubscribeBaseURL, os.Getenv(EnvPublicURL)), "/")
	if base == "" {
		return nil
	}
	key := e.UnsubscribeKey
	return func(u notify.Unsubscribe) string {
		return base + notify.UnsubscribePath(notify.UnsubscribeToken(key, u))
	}
}
