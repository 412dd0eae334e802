package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"herald/internal/config"
	"herald/internal/notify"
)

func TestIngestQueuePerService(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		var want []string
		for _, svc := range s.env.Config.Services {
			name := "herald-" + s.env.Name + "-ingest-" + svc.Name
			want = append(want, name)
			s.template.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
				"QueueName":     name,
				"RedrivePolicy": map[string]any{"maxReceiveCount": 5, "deadLetterTargetArn": assertions.Match_AnyValue()},
			})
			// Its consumer runs at the service's own maximum concurrency.
			q := s.idByProp(t, "AWS::SQS::Queue", "QueueName", name)
			s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
				"EventSourceArn": map[string]any{"Fn::GetAtt": []any{q, "Arn"}},
				"ScalingConfig":  map[string]any{"MaximumConcurrency": svc.MaxConcurrency},
				"BatchSize":      svc.BatchSize,
			})
		}
		var got []string
		for _, id := range s.ofType("AWS::SQS::Queue") {
			n := s.props(id)["QueueName"].(string)
			if strings.Contains(n, "-ingest-") && !strings.HasSuffix(n, "-dlq") {
				got = append(got, n)
			}
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("ingest queues = %v, want one per configured service %v", got, want)
		}
	})
}

func TestStageQueuesAndDLQs(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		names := map[string]string{} // queue name → logical id
		for _, id := range s.ofType("AWS::SQS::Queue") {
			names[s.props(id)["QueueName"].(string)] = id
		}
		prefix := "herald-" + s.env.Name + "-"
		var want []string
		for _, stage := range []string{notify.StagePrepare, notify.StageSend, notify.StageRecord} {
			for _, lane := range notify.Lanes {
				want = append(want, notify.LaneQueue(stage, lane))
			}
		}
		want = append(want, notify.StageCleanup, notify.StageBounce)
		for _, w := range want {
			if _, ok := names[prefix+w]; !ok {
				t.Errorf("no queue %s", prefix+w)
			}
		}
		for name, id := range names {
			p := s.props(id)
			if p["SqsManagedSseEnabled"] != true {
				t.Errorf("%s: SSE is off", name)
			}
			if strings.HasSuffix(name, "-dlq") {
				if num(p["MessageRetentionPeriod"]) != 14*24*3600 {
					t.Errorf("%s: retention %v, want 14 days", name, p["MessageRetentionPeriod"])
				}
				continue
			}
			rp, _ := p["RedrivePolicy"].(map[string]any)
			if rp == nil {
				t.Errorf("%s has no DLQ", name)
				continue
			}
			if num(rp["maxReceiveCount"]) != 5 {
				t.Errorf("%s: maxReceiveCount %v, want 5", name, rp["maxReceiveCount"])
			}
			if dlq := ref(rp["deadLetterTargetArn"]); dlq != names[name+"-dlq"] {
				t.Errorf("%s: DLQ is %s, want %s", name, dlq, name+"-dlq")
			}
		}
	})
}

func TestVisibilityIsSixTimesConsumerTimeout(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		for _, id := range s.ofType("AWS::Lambda::EventSourceMapping") {
			p := s.props(id)
			fn, q := ref(p["FunctionName"]), ref(p["EventSourceArn"])
			timeout, vis := num(s.props(fn)["Timeout"]), num(s.props(q)["VisibilityTimeout"])
			if timeout == 0 || vis < 6*timeout {
				t.Errorf("%s: visibility %vs < 6 × %s's timeout %vs", s.props(q)["QueueName"], vis, fn, timeout)
			}
		}
	})
}

func TestOneFunctionPerDirectory(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		s.template.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(float64(len(repoFunctions))))
		for _, name := range repoFunctions {
			s.template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
				"FunctionName": "herald-" + s.env.Name + "-" + name,
				"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
					"HERALD_CONFIG_FILE": configPath, "HERALD_ENV": s.env.Name, "HERALD_TABLE_PREFIX": "herald-" + s.env.Name + "-",
					"HERALD_QUEUE_URL_PREFIX": assertions.Match_AnyValue(),
				})},
			})
		}
		// Every function, not just ours: CDK helper functions would be counted here too.
		for _, id := range s.ofType("AWS::Lambda::Function") {
			p := s.props(id)
			if a := mustJSON(p["Architectures"]); a != `["arm64"]` {
				t.Errorf("%s: architectures %s, want arm64", id, a)
			}
			if p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" {
				t.Errorf("%s: runtime %v handler %v, want provided.al2023 bootstrap", id, p["Runtime"], p["Handler"])
			}
			lc, _ := p["LoggingConfig"].(map[string]any)
			if lc["LogFormat"] != "JSON" || ref(lc["LogGroup"]) == "" {
				t.Errorf("%s: logging %v, want JSON to its own log group", id, lc)
			}
			if mustJSON(p["TracingConfig"]) != `{"Mode":"Active"}` {
				t.Errorf("%s: tracing %v, want Active", id, p["TracingConfig"])
			}
			if rp := s.resources[ref(p["Role"])]; rp["Type"] != "AWS::IAM::Role" || rp["Properties"].(map[string]any)["ManagedPolicyArns"] != nil {
				t.Errorf("%s: want its own role without managed policies", id)
			}
		}
		// Each function has its own role: no two share one.
		roles := map[string]string{}
		for _, id := range s.ofType("AWS::Lambda::Function") {
			r := ref(s.props(id)["Role"])
			if other, ok := roles[r]; ok {
				t.Errorf("%s and %s share role %s", id, other, r)
			}
			roles[r] = id
		}
	})
}

// TestEnvironmentMatchesAWSEnv reads internal/awsenv's Env* constants (the variables a function
// reads at start-up) from source — importing it would link every provider SDK into this module —
// and checks the stack sets exactly those, where each is needed.
func TestEnvironmentMatchesAWSEnv(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "internal", "awsenv", "*.go"))
	var decls []ast.Decl
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Skipf("internal/awsenv not readable (%v): the contract cannot be checked", err)
		}
		decls = append(decls, f.Decls...)
	}
	if len(decls) == 0 {
		t.Skip("internal/awsenv not found: the contract cannot be checked")
	}
	known := map[string]bool{"HERALD_ENV": true} // ours: the Env dimension of custom metrics
	for _, d := range decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && strings.HasPrefix(n.Name, "Env") {
					known[strings.Trim(lit.Value, `"`)] = true
				}
			}
		}
	}
	s := synth(t, "dev")
	for _, id := range s.ofType("AWS::Lambda::Function") {
		p := s.props(id)
		vars := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		for k := range vars {
			if !known[k] {
				t.Errorf("%s sets %s, which internal/awsenv does not read", p["FunctionName"], k)
			}
		}
		for _, k := range []string{"HERALD_CONFIG_FILE", "HERALD_TABLE_PREFIX", "HERALD_QUEUE_URL_PREFIX"} {
			if !known[k] {
				t.Errorf("internal/awsenv no longer reads %s", k)
			}
		}
	}
	need := map[string][]string{
		"herald-dev-ingest": {"HERALD_SCHEDULE_GROUP", "HERALD_SCHEDULER_ROLE_ARN", "HERALD_SCHEDULER_DLQ_ARN", "HERALD_QUEUE_ARN_PREFIX"},
		"herald-dev-send":   {"HERALD_RATELIMIT_TABLE"},
	}
	for fn, keys := range need {
		vars := s.props(s.idByProp(t, "AWS::Lambda::Function", "FunctionName", fn))["Environment"].(map[string]any)["Variables"].(map[string]any)
		for _, k := range keys {
			if _, ok := vars[k]; !ok {
				t.Errorf("%s: %s is not set", fn, k)
			}
		}
	}
}

func TestEventSourceMappingsReportItemFailures(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		ids := s.ofType("AWS::Lambda::EventSourceMapping")
		// Ingest queues, 3 stages × 2 lanes, cleanup and bounce, audience lists' queue and the
		// export queue.
		want := len(s.env.Config.Services) + 6 + 2
		if slices.Contains(s.functions, audienceFunction) {
			want++
		}
		if slices.Contains(s.functions, exportFunction) {
			want++
		}
		if len(ids) != want {
			t.Errorf("%d event source mappings, want %d", len(ids), want)
		}
		for _, id := range ids {
			p := s.props(id)
			if mustJSON(p["FunctionResponseTypes"]) != `["ReportBatchItemFailures"]` {
				t.Errorf("%s: FunctionResponseTypes %v", id, p["FunctionResponseTypes"])
			}
			sc, _ := p["ScalingConfig"].(map[string]any)
			if c := num(sc["MaximumConcurrency"]); c < 2 || c > 1000 {
				t.Errorf("%s: MaximumConcurrency %v outside Lambda's 2–1000", id, sc["MaximumConcurrency"])
			}
		}
	})
}

func TestTables(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		for _, name := range []string{"inbox-items", "deliveries", "ratelimit"} {
			s.template.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
				"TableName":               "herald-" + s.env.Name + "-" + name,
				"TimeToLiveSpecification": map[string]any{"AttributeName": assertions.Match_AnyValue(), "Enabled": true},
			})
		}
		names, specs := tableSpecs("herald-" + s.env.Name + "-")
		s.template.ResourceCountIs(jsii.String("AWS::DynamoDB::Table"), jsii.Number(float64(len(names))))
		for _, n := range names {
			spec := specs[n]
			keys := []any{map[string]any{"AttributeName": spec.PartitionKey.Name, "KeyType": "HASH"}}
			if spec.SortKey != nil {
				keys = append(keys, map[string]any{"AttributeName": spec.SortKey.Name, "KeyType": "RANGE"})
			}
			props := map[string]any{"TableName": spec.Name, "KeySchema": keys}
			if spec.TTLAttribute != "" {
				props["TimeToLiveSpecification"] = map[string]any{"AttributeName": spec.TTLAttribute, "Enabled": true}
			}
			s.template.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), props)
		}
		protect := s.env.Name == "prod"
		deletion := map[bool]string{true: "RetainExceptOnCreate", false: "Delete"}[protect]
		replace := map[bool]string{true: "Retain", false: "Delete"}[protect]
		for _, id := range s.ofType("AWS::DynamoDB::Table") {
			r, p := s.resources[id], s.props(id)
			if r["DeletionPolicy"] != deletion || r["UpdateReplacePolicy"] != replace {
				t.Errorf("%s: DeletionPolicy %v UpdateReplacePolicy %v, want %s and %s", id, r["DeletionPolicy"], r["UpdateReplacePolicy"], deletion, replace)
			}
			if p["DeletionProtectionEnabled"] != protect {
				t.Errorf("%s: DeletionProtectionEnabled %v, want %v", id, p["DeletionProtectionEnabled"], protect)
			}
			if mustJSON(p["PointInTimeRecoverySpecification"]) != `{"PointInTimeRecoveryEnabled":true}` {
				t.Errorf("%s: no point-in-time recovery", id)
			}
			if mustJSON(p["SSESpecification"]) != `{"SSEEnabled":true}` || p["BillingMode"] != "PAY_PER_REQUEST" {
				t.Errorf("%s: SSE %v billing %v", id, p["SSESpecification"], p["BillingMode"])
			}
		}
	})
}

func TestSchedulerRoleOnlySendsToIngestQueues(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		role := ""
		for _, id := range s.ofType("AWS::IAM::Role") {
			if strings.Contains(mustJSON(s.props(id)["AssumeRolePolicyDocument"]), "scheduler.amazonaws.com") {
				if role != "" {
					t.Fatalf("two roles for EventBridge Scheduler: %s, %s", role, id)
				}
				role = id
			}
		}
		if role == "" {
			t.Fatal("no role EventBridge Scheduler can assume")
		}
		if p := s.props(role); p["ManagedPolicyArns"] != nil || p["Policies"] != nil {
			t.Errorf("scheduler role has managed or inline policies: %v", p)
		}
		allowed := map[string]bool{s.idByProp(t, "AWS::SQS::Queue", "QueueName", "herald-"+s.env.Name+"-scheduler-dlq"): true}
		ingest := map[string]bool{}
		for _, svc := range s.env.Config.Services {
			q := s.idByProp(t, "AWS::SQS::Queue", "QueueName", "herald-"+s.env.Name+"-ingest-"+svc.Name)
			allowed[q], ingest[q] = true, true
		}
		seen := map[string]bool{}
		for _, id := range s.ofType("AWS::IAM::Policy") {
			p := s.props(id)
			if !slices.ContainsFunc(list(p["Roles"]), func(r any) bool { return ref(r) == role }) {
				continue
			}
			for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				if a := mustJSON(list(st["Action"])); a != `["sqs:SendMessage"]` || st["Effect"] != "Allow" {
					t.Errorf("scheduler role statement %s %s: want only Allow sqs:SendMessage", st["Effect"], a)
				}
				for _, r := range list(st["Resource"]) {
					if !allowed[ref(r)] {
						t.Errorf("scheduler role may send to %s: only ingest queues and the scheduler DLQ", mustJSON(r))
					}
					seen[ref(r)] = true
				}
			}
		}
		for q := range ingest {
			if !seen[q] {
				t.Errorf("scheduler role cannot send to ingest queue %s", q)
			}
		}
		s.template.HasResourceProperties(jsii.String("AWS::Scheduler::ScheduleGroup"), map[string]any{"Name": "herald-" + s.env.Name})
	})
}

func TestSESBounceChain(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		set := s.env.Config.Providers.SES.ConfigurationSet
		s.template.HasResourceProperties(jsii.String("AWS::SES::ConfigurationSet"), map[string]any{"Name": set})
		dests := s.ofType("AWS::SES::ConfigurationSetEventDestination")
		if len(dests) != 1 {
			t.Fatalf("%d SES event destinations, want 1", len(dests))
		}
		ed := s.props(dests[0])["EventDestination"].(map[string]any)
		if got := mustJSON(ed["MatchingEventTypes"]); got != `["bounce","complaint"]` {
			t.Errorf("SES events %s, want bounce and complaint", got)
		}
		topic := ref(ed["SnsDestination"].(map[string]any)["TopicARN"])
		if s.resources[topic]["Type"] != "AWS::SNS::Topic" {
			t.Fatalf("SES publishes to %q, not a topic", topic)
		}
		bounce := s.idByProp(t, "AWS::SQS::Queue", "QueueName", "herald-"+s.env.Name+"-bounce")
		s.template.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), map[string]any{
			"Protocol": "sqs",
			"TopicArn": map[string]any{"Ref": topic},
			"Endpoint": map[string]any{"Fn::GetAtt": []any{bounce, "Arn"}},
		})
		fn := s.idByProp(t, "AWS::Lambda::Function", "FunctionName", "herald-"+s.env.Name+"-bounce")
		s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
			"EventSourceArn": map[string]any{"Fn::GetAtt": []any{bounce, "Arn"}},
			"FunctionName":   map[string]any{"Ref": fn},
		})
		// The topic is encrypted with a key SES may use, and SES may publish to it.
		key := ref(s.props(topic)["KmsMasterKeyId"])
		if !strings.Contains(mustJSON(s.props(key)["KeyPolicy"]), "ses.amazonaws.com") {
			t.Error("the feedback topic's key does not let SES encrypt")
		}
		s.template.HasResourceProperties(jsii.String("AWS::SNS::TopicPolicy"), map[string]any{
			"Topics": []any{map[string]any{"Ref": topic}},
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
				assertions.Match_ObjectLike(&map[string]any{"Action": "sns:Publish", "Principal": map[string]any{"Service": "ses.amazonaws.com"}}),
			})},
		})
	})
}

func TestDashboardAndAlarms(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		s.template.ResourceCountIs(jsii.String("AWS::CloudWatch::Dashboard"), jsii.Number(1))
		body := mustJSON(s.props(s.ofType("AWS::CloudWatch::Dashboard")[0])["DashboardBody"])
		for _, want := range []string{"Ingest rate per service", "DLQ depth", "Age of oldest message", `{Herald,Env,Provider}`, "Lambda errors", "Lambda throttles", "Lambda duration"} {
			if !strings.Contains(body, want) {
				t.Errorf("dashboard has no %q", want)
			}
		}
		topic := s.idByProp(t, "AWS::SNS::Topic", "TopicName", "herald-"+s.env.Name+"-alarms")
		alarmed := map[string]bool{}
		for _, id := range s.ofType("AWS::CloudWatch::Alarm") {
			p := s.props(id)
			if !slices.ContainsFunc(list(p["AlarmActions"]), func(a any) bool { return ref(a) == topic }) {
				t.Errorf("alarm %v does not notify the alarm topic", p["AlarmName"])
			}
			if !strings.Contains(mustJSON(p["AlarmDescription"]), "Runbook") {
				t.Errorf("alarm %v has no runbook pointer", p["AlarmName"])
			}
			if p["MetricName"] == "ApproximateNumberOfMessagesVisible" {
				for _, d := range list(p["Dimensions"]) {
					alarmed[ref(d.(map[string]any)["Value"])] = true
				}
				if num(p["Threshold"]) != 1 {
					t.Errorf("DLQ alarm %v threshold %v, want 1", p["AlarmName"], p["Threshold"])
				}
			}
		}
		for _, id := range s.ofType("AWS::SQS::Queue") {
			if n := s.props(id)["QueueName"].(string); strings.HasSuffix(n, "-dlq") && !alarmed[id] {
				t.Errorf("no depth alarm on DLQ %s", n)
			}
		}
		for metric, threshold := range map[string]float64{"Reputation.BounceRate": 0.04, "Reputation.ComplaintRate": 0.0008} {
			s.template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
				"Namespace": "AWS/SES", "MetricName": metric, "Threshold": threshold,
				"ComparisonOperator": "GreaterThanOrEqualToThreshold",
			})
		}
		for _, name := range repoFunctions {
			s.template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
				"AlarmName": "herald-" + s.env.Name + "-errors-" + name,
				"Metrics":   assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{"Expression": assertions.Match_StringLikeRegexp(jsii.String("errors / invocations"))})}),
			})
		}
		// Every non-DLQ queue has an oldest-message-age alarm.
		for _, id := range s.ofType("AWS::SQS::Queue") {
			n := s.props(id)["QueueName"].(string)
			if strings.HasSuffix(n, "-dlq") {
				continue
			}
			s.template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
				"MetricName": "ApproximateAgeOfOldestMessage",
				"Dimensions": []any{map[string]any{"Name": "QueueName", "Value": map[string]any{"Fn::GetAtt": []any{id, "QueueName"}}}},
			})
		}
	})
}

func TestAPI(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		routes := map[string]string{}
		for _, id := range s.ofType("AWS::ApiGatewayV2::Route") {
			p := s.props(id)
			if strings.HasPrefix(p["RouteKey"].(string), "$") {
				continue // the WebSocket API's (TestStreamAPI)
			}
			routes[p["RouteKey"].(string)] = p["AuthorizationType"].(string)
		}
		want := map[string]string{
			"ANY /v1/{proxy+}":                    "AWS_IAM",
			"ANY /v1/users/{user}/inbox":          "JWT",
			"ANY /v1/users/{user}/inbox/{proxy+}": "JWT",
			"GET /healthz":                        "NONE",
			// Marketing email's one-click unsubscribe: the signed token is the credential.
			"GET /u/{token}":  "NONE",
			"POST /u/{token}": "NONE",
		}
		if slices.Contains(s.functions, adminFunction) {
			want["ANY /v1/admin/{proxy+}"] = "AWS_IAM" // to the admin function (TestOnlyAdminTouchesDeadLetters)
			if s.env.Settings.API.Console {
				// The console's data routes need the operator's JWT; its page holds no data.
				want["ANY /console/api/{proxy+}"] = "JWT"
				want["GET /console"] = "NONE"
				want["GET /console/{proxy+}"] = "NONE"
			}
		}
		if mustJSON(routes) != mustJSON(want) {
			t.Errorf("routes %v, want %v", routes, want)
		}
		jwt := s.env.Settings.API.JWT
		s.template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Authorizer"), map[string]any{
			"AuthorizerType":   "JWT",
			"JwtConfiguration": map[string]any{"Issuer": jwt.Issuer, "Audience": jwt.Audience},
		})
		stage := s.props(s.ofType("AWS::ApiGatewayV2::Stage")[0])
		format := stage["AccessLogSettings"].(map[string]any)["Format"].(string)
		if !strings.Contains(format, "$context.routeKey") || strings.Contains(format, "$context.path") || strings.Contains(format, "$context.resourcePath") {
			t.Errorf("access log format must use $context.routeKey and never the raw path: %s", format)
		}
		if rs := stage["DefaultRouteSettings"].(map[string]any); num(rs["ThrottlingRateLimit"]) != s.env.Settings.API.RateLimit ||
			num(rs["ThrottlingBurstLimit"]) != float64(s.env.Settings.API.BurstLimit) {
			t.Errorf("throttling %v, want rate %v burst %v", rs, s.env.Settings.API.RateLimit, s.env.Settings.API.BurstLimit)
		}
	})
}

// requiresStar are actions AWS only grants on Resource "*" (no resource-level permissions).
var requiresStar = regexp.MustCompile(`^(xray:(PutTraceSegments|PutTelemetryRecords|GetSamplingRules|GetSamplingTargets)|` +
	`logs:(CreateLogDelivery|GetLogDelivery|UpdateLogDelivery|DeleteLogDelivery|ListLogDeliveries|PutResourcePolicy|DescribeResourcePolicies|DescribeLogGroups))$`)

func TestNoWildcardPermissions(t *testing.T) {
	check := func(t *testing.T, s *synthesis) {
		walk := func(where string, doc any, keyPolicy bool) {
			for _, st := range list(doc.(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				if st["Effect"] != "Allow" {
					continue
				}
				actions := list(st["Action"])
				resources := list(st["Resource"])
				for _, a := range actions {
					a := a.(string)
					if a == "*" || strings.HasSuffix(a, ":*") {
						// Only KMS's default key policy gives the account root kms:* on its own key.
						if keyPolicy && a == "kms:*" && strings.Contains(mustJSON(st["Principal"]), ":root") {
							continue
						}
						t.Errorf("%s: wildcard action %s", where, a)
					}
				}
				if keyPolicy || !slices.Contains(resources, any("*")) {
					continue // in a key policy "*" means the key itself
				}
				for _, a := range actions {
					if !requiresStar.MatchString(a.(string)) {
						t.Errorf("%s: %s on Resource \"*\" (AWS doesn't require it)", where, a)
					}
				}
			}
		}
		for id, r := range s.resources {
			p, _ := r["Properties"].(map[string]any)
			switch r["Type"] {
			case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy":
				walk(id, p["PolicyDocument"], false)
			case "AWS::IAM::Role":
				for _, pol := range list(p["Policies"]) {
					walk(id, pol.(map[string]any)["PolicyDocument"], false)
				}
			case "AWS::KMS::Key":
				walk(id, p["KeyPolicy"], true)
			}
		}
	}
	environments(t, check)
}

func TestNagAwsSolutions(t *testing.T) {
	check := func(t *testing.T, s *synthesis) {
		errs := assertions.Annotations_FromStack(s.stack).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
		for _, m := range *errs {
			t.Errorf("%s: %v", *m.Id, m.Entry.Data)
		}
		// Every suppression carries a reason someone can check.
		n := 0
		for id, r := range s.resources {
			md, _ := r["Metadata"].(map[string]any)
			nag, _ := md["cdk_nag"].(map[string]any)
			for _, rule := range list(nag["rules_to_suppress"]) {
				n++
				if reason, _ := rule.(map[string]any)["reason"].(string); len(reason) < 40 {
					t.Errorf("%s: suppression %v has no real justification", id, rule)
				}
			}
		}
		t.Logf("%d unsuppressed AwsSolutions errors, %d suppressions", len(*errs), n)
	}
	environments(t, check)
}

func TestCampaignStateMachine(t *testing.T) {
	t.Run("absent", func(t *testing.T) {
		synthWith(t, "dev", without(repoFunctions, "campaign")).template.ResourceCountIs(jsii.String("AWS::StepFunctions::StateMachine"), jsii.Number(0))
	})
	t.Run("present", func(t *testing.T) {
		s := synthWith(t, "dev", append(slices.Clone(repoFunctions), "digest"))
		s.template.HasResourceProperties(jsii.String("AWS::StepFunctions::StateMachine"), map[string]any{
			"StateMachineName":     "herald-dev-campaign",
			"StateMachineType":     "STANDARD",
			"TracingConfiguration": map[string]any{"Enabled": true},
			"LoggingConfiguration": assertions.Match_ObjectLike(&map[string]any{"Level": "ALL", "IncludeExecutionData": false}),
		})
		// A failed run leaves its campaign without one: that alarms, with a runbook entry.
		alarm := s.props(s.idByProp(t, "AWS::CloudWatch::Alarm", "AlarmName", "herald-dev-campaign-executions-failed"))
		if d := mustJSON(alarm["AlarmDescription"]); !strings.Contains(d, "Campaign execution failed") || len(list(alarm["AlarmActions"])) == 0 {
			t.Errorf("campaign executions alarm: description %s, actions %v", d, alarm["AlarmActions"])
		}
		def := mustJSON(s.props(s.ofType("AWS::StepFunctions::StateMachine")[0])["DefinitionString"])
		order := []string{"CheckWindow", "FetchPage", "DispatchBatches", "SaveCursor"}
		for _, state := range order {
			if !strings.Contains(def, `\"`+state+`\"`) {
				t.Errorf("definition has no state %s", state)
			}
		}
		if !strings.Contains(def, `\"Type\":\"Map\"`) {
			t.Error("DispatchBatches is not a Map")
		}
		s.template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"FunctionName": "herald-dev-ingest",
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
				"HERALD_CAMPAIGN_STATE_MACHINE_ARN": assertions.Match_AnyValue(),
			})},
		})
		// Continue-as-new: CheckWindow's "continue" starts generation+1 of this state machine,
		// named by the step, with only the campaign id and the next generation; a name taken by
		// a resume's start (ExecutionAlreadyExists) just ends this execution.
		for _, want := range []string{
			`\"Variable\":\"$.window\",\"StringEquals\":\"continue\",\"Next\":\"ContinueAsNew\"`,
			`\"ContinueAsNew\":{\"Next\":\"Done\"`,
			`\"Resource\":\"arn:`, `:states:::states:startExecution\"`,
			`\"Name.$\":\"$.next_execution\"`,
			`\"campaign_id.$\":\"$.campaign_id\"`,
			`\"generation.$\":\"States.MathAdd($.generation, 1)\"`,
			`\"ErrorEquals\":[\"StepFunctions.ExecutionAlreadyExistsException\"]`,
			`\"StateMachineArn\":\"arn:`, `:stateMachine:herald-dev-campaign\"`,
		} {
			if !strings.Contains(def, want) {
				t.Errorf("definition has no %s:\n%s", want, def)
			}
		}
		// Lambda steps retry function errors: a retryable step error must not end the run.
		if n := strings.Count(def, `\"ErrorEquals\":[\"States.TaskFailed\"]`); n < 4 {
			t.Errorf("%d States.TaskFailed retriers, want one per Lambda step and on ContinueAsNew", n)
		}

		// Who may do what with executions: the state machine starts only itself; the campaign
		// function reads its executions; api starts and reads; ingest starts; nobody else.
		sm := s.ofType("AWS::StepFunctions::StateMachine")[0]
		smRole := ref(s.props(sm)["RoleArn"])
		roleOf := map[string]string{smRole: "state machine"}
		for _, fn := range []string{"api", "admin", "ingest", "campaign", "prepare", "send", "record", "cleanup", "bounce"} {
			roleOf[s.idByProp(t, "AWS::IAM::Role", "RoleName", "herald-dev-fn-"+fn)] = fn
		}
		got := map[string][]string{}
		// A role's statements may overflow its inline policy into managed ones (OverflowPolicyN).
		for _, id := range append(s.ofType("AWS::IAM::Policy"), s.ofType("AWS::IAM::ManagedPolicy")...) {
			p := s.props(id)
			for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				for _, a := range list(st["Action"]) {
					if !strings.HasPrefix(a.(string), "states:") {
						continue
					}
					for _, r := range list(p["Roles"]) {
						who := roleOf[ref(r)]
						if who == "" {
							who = ref(r)
						}
						res := mustJSON(st["Resource"])
						switch {
						case ref(st["Resource"]) == sm:
							res = "machine"
						case strings.Contains(res, `:execution:herald-dev-campaign:*`):
							res = "executions"
						case strings.Contains(res, `:stateMachine:herald-dev-campaign`):
							res = "machine by name"
						}
						got[who] = append(got[who], a.(string)+" "+res)
					}
				}
			}
		}
		want := map[string][]string{
			"state machine": {"states:StartExecution machine by name"},
			"campaign":      {"states:DescribeExecution executions"},
			"api":           {"states:StartExecution machine", "states:DescribeExecution executions"},
			"admin":         {"states:StartExecution machine", "states:DescribeExecution executions"}, // the console's campaign actions
			"ingest":        {"states:StartExecution machine"},
		}
		for who := range got {
			slices.Sort(got[who])
		}
		for who := range want {
			slices.Sort(want[who])
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("states: grants %v, want %v", got, want)
		}
		for _, fn := range []string{"api", "ingest", "campaign"} {
			s.template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
				"FunctionName": "herald-dev-" + fn,
				"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
					"HERALD_CAMPAIGN_STATE_MACHINE_ARN": assertions.Match_AnyValue(),
				})},
			})
		}
		// api arms a campaign's reserved send like ingest arms a notification's.
		s.template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"FunctionName": "herald-dev-api",
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
				"HERALD_SCHEDULE_GROUP": "herald-dev", "HERALD_SCHEDULER_ROLE_ARN": assertions.Match_AnyValue(),
				"HERALD_SCHEDULER_DLQ_ARN": assertions.Match_AnyValue(), "HERALD_QUEUE_ARN_PREFIX": assertions.Match_AnyValue(),
			})},
		})

		// A function infra/ knows nothing about is deployed with logs only, and says so.
		s.template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{"FunctionName": "herald-dev-digest"})
		warnings := assertions.Annotations_FromStack(s.stack).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("functions/digest")))
		if len(*warnings) != 1 {
			t.Errorf("%d warnings about functions/digest, want 1", len(*warnings))
		}
	})
}

func TestMissingBootstrapSaysHowToBuild(t *testing.T) {
	functionsDir, assetDir := layout(t, []string{"api"})
	_ = functionsDir
	_, err := NewHeraldStack(nil, "x", &HeraldProps{Env: loadEnv(t, "dev"), Functions: []string{"api", "send"}, AssetDir: assetDir, StagingDir: scratch})
	if err == nil || !strings.Contains(err.Error(), "make build-lambda") || !strings.Contains(err.Error(), "send") {
		t.Errorf("err = %v, want it to name send and `make build-lambda`", err)
	}
}

func ExampleDiscoverFunctions() {
	names, _ := DiscoverFunctions("no/such/dir")
	fmt.Println(len(names))
	// Output: 0
}

// TestConsoleRoutes: where the console is on (dev), its page and data routes go to the admin
// function like /v1/admin/…, the data routes through the JWT authorizer of the configured issuer,
// and the admin function knows the admin group it checks the token for again.
func TestConsoleRoutes(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		if !s.env.Settings.API.Console || !slices.Contains(s.functions, adminFunction) {
			t.Skip("the console is off in this environment")
		}
		byKey := map[string]map[string]any{}
		for _, id := range s.ofType("AWS::ApiGatewayV2::Route") {
			p := s.props(id)
			byKey[p["RouteKey"].(string)] = p
		}
		admin := mustJSON(byKey["ANY /v1/admin/{proxy+}"]["Target"])
		for _, key := range []string{"ANY /console/api/{proxy+}", "GET /console", "GET /console/{proxy+}"} {
			if got := mustJSON(byKey[key]["Target"]); got != admin {
				t.Errorf("%s goes to %s, want the admin function's integration %s", key, got, admin)
			}
		}
		data := byKey["ANY /console/api/{proxy+}"]
		authz, _ := data["AuthorizerId"].(map[string]any)["Ref"].(string)
		jwt := s.env.Settings.API.JWT
		if a := s.props(authz); a["AuthorizerType"] != "JWT" || mustJSON(a["JwtConfiguration"]) != mustJSON(map[string]any{"Issuer": jwt.Issuer, "Audience": jwt.Audience}) {
			t.Errorf("the console's data routes are authorized by %v, want the JWT authorizer of %s", a, jwt.Issuer)
		}
		vars := s.props(s.idByProp(t, "AWS::Lambda::Function", "FunctionName", "herald-"+s.env.Name+"-"+adminFunction))["Environment"].(map[string]any)["Variables"].(map[string]any)
		if vars["HERALD_CONSOLE_ADMIN_GROUP"] != jwt.AdminGroup {
			t.Errorf("admin function HERALD_CONSOLE_ADMIN_GROUP = %v, want %q", vars["HERALD_CONSOLE_ADMIN_GROUP"], jwt.AdminGroup)
		}
	})
}

// TestIngestBatchingWindow: a service's batching_window is its ingest mapping's
// MaximumBatchingWindowInSeconds; a service without one hands batches over at once.
func TestIngestBatchingWindow(t *testing.T) {
	e := loadEnv(t, "dev")
	if len(e.Config.Services) < 2 {
		t.Fatalf("dev has %d services; the test needs two", len(e.Config.Services))
	}
	e.Name = "devwindow"
	e.Config.Services[0].BatchingWindow, e.Config.Services[1].BatchingWindow = config.Duration(2*time.Second), 0
	s := synthEnv(t, e, repoFunctions)
	found := 0
	for i, svc := range e.Config.Services[:2] {
		q := s.idByProp(t, "AWS::SQS::Queue", "QueueName", "herald-devwindow-ingest-"+svc.Name)
		for _, id := range s.ofType("AWS::Lambda::EventSourceMapping") {
			p := s.props(id)
			if ref(p["EventSourceArn"]) != q {
				continue
			}
			found++
			w, set := p["MaximumBatchingWindowInSeconds"]
			if i == 0 && num(w) != 2 || i == 1 && set {
				t.Errorf("%s: MaximumBatchingWindowInSeconds %v (set %v)", svc.Name, w, set)
			}
		}
	}
	if found != 2 {
		t.Fatalf("%d ingest mappings found, want 2", found)
	}
}
