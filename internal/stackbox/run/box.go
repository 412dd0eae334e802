// Package run runs a synthesized Herald CloudFormation template on this machine — "the stack in
// a box" — and proves every AWS call the stack makes against the template's IAM.
//
// The template is the only source of wiring. What is emulated, from its resources:
//
//   - AWS::Lambda::Function: each function's bootstrap (built for the host) under the Lambda
//     Runtime Interface Emulator, with the function's Environment.Variables resolved by cfn,
//     AWS_ENDPOINT_URL_<SERVICE> pointing at the box, Lambda's reserved variables (name, memory,
//     timeout from the template), and credentials that name the function: each function signs
//     with its own access key id, which the box maps back to the function's role ARN. The
//     config layer (/opt/herald/herald.yaml) is the layer asset of the synthesized assembly,
//     copied to a file the function's HERALD_CONFIG_FILE names instead (see Config below).
//   - AWS::Lambda::EventSourceMapping on SQS: pollers that receive as the function's role,
//     with BatchSize, ScalingConfig.MaximumConcurrency and ReportBatchItemFailures (only the
//     succeeded messages are deleted; a failed invocation leaves the batch to its visibility
//     timeout).
//   - AWS::SQS::Queue: queues of the SQS fake (internal/sqs/sqsfake) with the template's names,
//     VisibilityTimeout, DelaySeconds and RedrivePolicy (maxReceiveCount → its DLQ).
//   - AWS::DynamoDB::Table: tables on DynamoDB Local, keys, GSIs, LSIs and TTL as declared.
//   - AWS::ApiGatewayV2::Api/Route/Integration/Authorizer: an HTTP server on 127.0.0.1 that
//     matches the routes, authorizes them (AWS_IAM: the SigV4 caller's access key names its
//     principal; JWT: the token's iss, aud and exp are checked; NONE) and invokes the
//     integration's function with a payload-format-2.0 event.
//   - AWS::StepFunctions::StateMachine: its definition, resolved by cfn and interpreted by
//     internal/stackbox/asl, behind a Step Functions API (StartExecution, DescribeExecution,
//     StopExecution); Lambda tasks invoke the function, sqs:sendMessage and
//     states:startExecution go through the box as the state machine's role.
//   - EventBridge Scheduler (internal/scheduler/schedulerfake): due schedules fire their target
//     (SendMessage to the ingest queue) as the schedule's role, which the scheduler service must
//     be trusted to assume. Herald arms schedules at least a minute out; AdvanceSchedulerClock
//     runs the scheduler's clock ahead so a scenario need not wait for them.
//   - S3 bucket notifications (NotificationConfiguration.QueueConfigurations) and SNS
//     subscriptions to SQS (raw or enveloped), as the S3 and SNS service principals.
//   - Secrets Manager (GetSecretValue) holding made-up values for the secrets herald.yaml names,
//     EventBridge PutEvents (internal/eventbus/eventbusfake), S3 objects (internal/s3/s3fake),
//     SES v2, FCM and Twilio (the sandbox providers of internal/sandbox).
//
// The template is resolved for account AccountID in Region; the SQS fake's own account in its
// ARNs and URLs is translated at its proxy (never inside message bodies). Principals outside
// the stack — the services' producer roles — are added with AddProducer, with an assumed
// identity policy that leaves the decision to the template's resource policies where they name
// producers.
//
// Every call to those services goes through a recording proxy that reads the caller from the
// SigV4 Authorization header, the action from X-Amz-Target or the REST method and path, and the
// resource ARN from the request (TableName, QueueUrl, schedule name, bucket and key, bus name,
// secret id), and evaluates it with internal/stackbox/iam against the caller's role and the
// resource's policies. A denied call is answered AccessDenied, as AWS would.
//
// What is not emulated: Lambda's account concurrency, reserved concurrency, cold-start timing,
// retries of asynchronous invokes, and the batching window; each function runs at most
// Options.MaxInstances environments at a time (the mappings' MaximumConcurrency is capped by
// it). IAM is evaluated as internal/stackbox/iam models it (no SCPs, permission boundaries,
// session policies or KMS grants); SigV4 and JWT signatures are not verified, only who they
// name. APNs is left out of the box's herald.yaml (its TLS sandbox needs a trusted
// certificate in the function); FCM, SES and Twilio point at the sandbox. Log delivery to
// CloudWatch, X-Ray and alarms are not run. The WebSocket API of the live inbox is not served
// (its stream function runs under the emulator in functions/rie_test.go); the publishers still
// look up connections in its table, so those calls are checked too. EventBridge rules are not
// run: operator events are put on the bus and checked, not delivered to the alerts function.
package run

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"herald/internal/eventbus/eventbusfake"
	"herald/internal/s3/s3fake"
	"herald/internal/sandbox"
	"herald/internal/scheduler/schedulerfake"
	"herald/internal/sqs/sqsfake"
	"herald/internal/stackbox/cfn"
	"herald/internal/stackbox/iam"
)

// The account and region the template is resolved for. The region is the SQS fake's, so queue
// ARNs and URLs need no translation beyond the account.
const (
	Region    = sqsfake.Region
	AccountID = "123456789012"
)

// Options say where the template, the function binaries and the tools are.
type Options struct {
	Template string // the synthesized template (JSON)
	// Assembly is the cloud assembly directory the template was synthesized into: the config
	// layer's asset is read from it. Empty: ConfigFile must be set.
	Assembly string
	// ConfigFile is herald.yaml as the functions get it, when there is no assembly.
	ConfigFile string
	BinDir     string // <name>/bootstrap per function, built for this machine
	RIE        string // aws-lambda-rie
	DynamoDB   string // DynamoDB Local's endpoint
	// ASLValidator is scripts/asl-validate.sh; empty skips the validation of definitions.
	ASLValidator string
	// MaxInstances caps each function's concurrent environments (default 2).
	MaxInstances int
	// Producers are principals outside the stack that the box may sign as (e.g. the services'
	// roles): each gets an access key; their own identity policy is Identity[principal].
	Producers []string
	// ProducerIdentity is the identity policy each producer is assumed to have (nil: see
	// AddProducer).
	ProducerIdentity *iam.Policy
	Log              io.Writer // function and box logs; nil discards
}

// Box is a running stack.
type Box struct {
	Template *cfn.Template
	Resolver *cfn.Resolver
	IAM      *iam.Stack
	Config   map[string]any // the box's herald.yaml, as parsed
	Sandbox  *sandbox.Server
	SQS      *sqsfake.Server
	Sched    *schedulerfake.Server
	Events   *eventbusfake.Fake
	S3       *s3fake.Fake
	States   *States
	API      *API
	Secrets  *Secrets
	// Mappings is the event source mappings' control plane (Enabled, as an operator's pause).
	Mappings Mappings

	Functions map[string]*Function // by function name (herald-dev-api)
	Queues    map[string]Queue     // by queue name
	Tables    []string

	opts       Options
	log        *slog.Logger
	logw       io.Writer
	recorder   *Recorder
	endpoints  map[string]string // AWS_ENDPOINT_URL_<SERVICE> → proxy URL
	credMu     sync.Mutex
	creds      map[string]string // access key id → principal
	akids      map[string]string // principal → access key id
	servers    []*http.Server
	schedAhead atomic.Int64 // how far the scheduler's clock runs ahead (AdvanceSchedulerClock)
	doors      boxDoors     // probes, intruders, injected outages, events delivered by rules (doors.go)
	adminMu    sync.Mutex
	admin      *awssqs.Client // the SQS fake without the proxy: setup and service deliveries
	cancel     context.CancelFunc
	ctx        context.Context
	wg         sync.WaitGroup
	dir        string
	closeOnce  sync.Once
}

// Queue is an AWS::SQS::Queue of the template.
type Queue struct {
	LogicalID, Name, URL, ARN string
	VisibilityTimeout         int
}

// Start builds and starts the box. Close stops everything it started.
func Start(ctx context.Context, o Options) (_ *Box, err error) {
	if o.MaxInstances <= 0 {
		o.MaxInstances = 2
	}
	raw, err := os.ReadFile(o.Template)
	if err != nil {
		return nil, err
	}
	t, err := cfn.Parse(raw)
	if err != nil {
		return nil, err
	}
	r, err := cfn.NewResolver(t, cfn.Env{Region: Region, AccountID: AccountID, StackName: stackName(t)})
	if err != nil {
		return nil, err
	}
	stack, err := iam.FromTemplate(t, r)
	if err != nil {
		return nil, err
	}
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	dir, err := os.MkdirTemp("", "stackbox-")
	if err != nil {
		return nil, err
	}
	b := &Box{Template: t, Resolver: r, IAM: stack, opts: o, logw: logw, log: slog.New(slog.NewTextHandler(logw, nil)),
		Functions: map[string]*Function{}, Queues: map[string]Queue{}, endpoints: map[string]string{},
		creds: map[string]string{}, akids: map[string]string{}, dir: dir}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.recorder = newRecorder(stack)
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	for _, p := range o.Producers {
		b.AddProducer(p)
	}
	if err := b.checkTrust(); err != nil {
		return nil, err
	}
	if b.Sandbox, err = sandbox.Start(sandbox.Options{Logger: b.log, OnBounce: b.onBounce}); err != nil {
		return nil, err
	}
	if err := b.startServices(); err != nil {
		return nil, err
	}
	if err := b.createQueues(ctx); err != nil {
		return nil, err
	}
	if err := b.createTables(ctx); err != nil {
		return nil, err
	}
	if err := b.writeConfig(); err != nil {
		return nil, err
	}
	if err := b.startFunctions(ctx); err != nil {
		return nil, err
	}
	if err := b.startStateMachines(ctx); err != nil {
		return nil, err
	}
	if err := b.startAPI(); err != nil {
		return nil, err
	}
	if err := b.startMappings(); err != nil {
		return nil, err
	}
	b.startScheduler()
	return b, nil
}

// Close stops the pollers, the functions and the servers, and removes the box's files.
func (b *Box) Close() {
	b.closeOnce.Do(func() {
		b.cancel()
		done := make(chan struct{})
		go func() { b.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			b.log.Error("stackbox: pollers did not stop within 30s")
		}
		for _, f := range b.Functions {
			f.stop()
		}
		for _, s := range b.servers {
			_ = s.Close()
		}
		if b.SQS != nil {
			b.SQS.Close()
		}
		if b.Sched != nil {
			b.Sched.Close()
		}
		if b.Sandbox != nil {
			_ = b.Sandbox.Close()
		}
		_ = os.RemoveAll(b.dir)
	})
}

func stackName(t *cfn.Template) string {
	// The functions are named <stack>-<name>; the stack name is what precedes the name.
	for _, id := range t.LogicalIDs("AWS::Lambda::Function") {
		if n, ok := t.Resources[id].Properties["FunctionName"].(string); ok {
			if i := strings.LastIndexByte(n, '-'); i > 0 {
				return n[:i]
			}
		}
	}
	return "herald"
}

// credential returns the access key id the box gives a principal, making one up the first time.
func (b *Box) credential(principal string) string {
	b.credMu.Lock()
	defer b.credMu.Unlock()
	if k, ok := b.akids[principal]; ok {
		return k
	}
	k := fmt.Sprintf("AKIASTACKBOX%08d", len(b.akids)+1)
	b.akids[principal], b.creds[k] = k, principal
	return k
}

// principalOf returns the principal an access key id was given to ("" for none).
func (b *Box) principalOf(akid string) string {
	b.credMu.Lock()
	defer b.credMu.Unlock()
	return b.creds[akid]
}

// Credentials returns the access key id to sign as principal (a producer or a role of the
// stack); the secret is ignored by the box.
func (b *Box) Credentials(principal string) (akid, secret string) {
	return b.credential(principal), "stackbox-secret"
}

// checkTrust proves each role may be assumed by the service that uses it.
func (b *Box) checkTrust() error {
	var errs []error
	assume := func(roleARN, service, who string, ctx map[string]string) {
		if d := b.IAM.AssumeRole(roleARN, service, ctx); !d.Allowed {
			errs = append(errs, fmt.Errorf("%s cannot assume %s: %s", who, roleARN, d.Reason))
		} else {
			b.recorder.countTrust()
		}
	}
	for _, id := range b.Template.LogicalIDs("AWS::Lambda::Function") {
		role, err := b.Resolver.ResolveString(b.Template.Resources[id].Properties["Role"])
		if err != nil {
			return fmt.Errorf("function %s: Role: %w", id, err)
		}
		assume(role, "lambda.amazonaws.com", id, nil)
	}
	for _, id := range b.Template.LogicalIDs("AWS::StepFunctions::StateMachine") {
		role, err := b.Resolver.ResolveString(b.Template.Resources[id].Properties["RoleArn"])
		if err != nil {
			return fmt.Errorf("state machine %s: RoleArn: %w", id, err)
		}
		assume(role, "states.amazonaws.com", id, map[string]string{
			"aws:SourceArn": b.Resolver.Resources[id].Ref, "aws:SourceAccount": AccountID})
	}
	return errors.Join(errs...)
}

// listen starts an HTTP server on 127.0.0.1 and returns its URL.
func (b *Box) listen(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	b.servers = append(b.servers, s)
	go func() { _ = s.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

func randomKey() string {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return base64.StdEncoding.EncodeToString(k)
}

// props returns a resource's properties resolved.
func (b *Box) props(id string) (map[string]any, error) {
	v, err := b.Resolver.Resolve(b.Template.Resources[id].Properties)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	m, _ := v.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

func str(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case float64:
		return fmt.Sprint(int64(s))
	case json.Number:
		return s.String()
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func num(v any, def int) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case string:
		var i int
		if _, err := fmt.Sscan(n, &i); err == nil {
			return i
		}
	}
	return def
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// configFromAssembly finds the config layer's herald.yaml in the assembly: the layer's S3Key
// names its asset directory.
func configFromAssembly(t *cfn.Template, assembly string) (string, error) {
	for _, id := range t.LogicalIDs("AWS::Lambda::LayerVersion") {
		c, _ := t.Resources[id].Properties["Content"].(map[string]any)
		key, _ := c["S3Key"].(string)
		p := filepath.Join(assembly, "asset."+strings.TrimSuffix(key, ".zip"), "herald", "herald.yaml")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no config layer with herald/herald.yaml in %s", assembly)
}

// AddProducer lets the box sign as a principal outside the stack (a service's role) and
// returns its access key id. Its own identity policy is ProducerIdentity, by default
// execute-api:Invoke and s3:PutObject on everything, and sqs:SendMessage on everything too
// unless a queue policy of the template names producers: then the queue policies alone decide
// which queue a producer may send to (a forged send to another service's queue is refused).
func (b *Box) AddProducer(principal string) string {
	actions := `"execute-api:Invoke","s3:PutObject"`
	if !b.queuePoliciesNameProducers() {
		actions += `,"sqs:SendMessage"`
	}
	producer := iam.MustParsePolicy("producer-identity", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":[`+actions+`],"Resource":"*"}]}`)
	if b.opts.ProducerIdentity != nil {
		producer = *b.opts.ProducerIdentity
	}
	b.recorder.mu.Lock()
	b.recorder.identity[principal] = []iam.Policy{producer}
	b.recorder.mu.Unlock()
	return b.credential(principal)
}

// QueuePolicyProducers returns the principals a queue's policy allows to send to it: the
// per-service grants of newer templates, named as the Principal (a role or user ARN) or, for a
// Principal that is an account, by an aws:PrincipalArn condition. Templates that leave
// producers to their own account's identity policies name none.
func (b *Box) QueuePolicyProducers(queueARN string) []string {
	var out []string
	for _, p := range b.IAM.ResourcePolicies(queueARN) {
		for _, s := range p.Statements {
			if s.Effect != "Allow" || s.Principal == nil || s.Principal.All {
				continue
			}
			if !slices.ContainsFunc(s.Action, func(a string) bool { return a == "sqs:SendMessage" || a == "sqs:*" }) {
				continue
			}
			var byCondition []string
			for _, c := range s.Conditions {
				if strings.EqualFold(c.Key, "aws:PrincipalArn") && !strings.HasPrefix(c.Operator, "ForAnyValue") {
					for _, v := range c.Values {
						if !strings.ContainsAny(v, "*?") {
							byCondition = append(byCondition, v)
						}
					}
				}
			}
			if len(byCondition) > 0 {
				out = append(out, byCondition...)
				continue
			}
			for _, a := range s.Principal.AWS {
				if strings.Contains(a, ":role/") || strings.Contains(a, ":user/") {
					out = append(out, a)
				}
			}
		}
	}
	return out
}

// queuePoliciesNameProducers reports whether any queue policy of the template names producers.
func (b *Box) queuePoliciesNameProducers() bool {
	for _, id := range b.Template.LogicalIDs("AWS::SQS::Queue") {
		if len(b.QueuePolicyProducers(b.Resolver.Resources[id].Attrs["Arn"])) > 0 {
			return true
		}
	}
	return false
}

// ServicePrincipals returns a service's iam_principals in the box's herald.yaml.
func (b *Box) ServicePrincipals(service string) []string {
	svcs, _ := b.Config["services"].([]any)
	for _, raw := range svcs {
		s, _ := raw.(map[string]any)
		if str(s["name"]) != service {
			continue
		}
		var out []string
		ps, _ := s["iam_principals"].([]any)
		for _, p := range ps {
			out = append(out, str(p))
		}
		return out
	}
	return nil
}

// Queue returns the template's queue named <stack>-<short> (e.g. "ingest-orders").
func (b *Box) Queue(short string) Queue {
	return b.Queues[stackName(b.Template)+"-"+short]
}

// Getenv returns a variable of the function's environment.
func (f *Function) Getenv(k string) string {
	for _, kv := range f.Env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return ""
}
