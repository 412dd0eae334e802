package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"herald/internal/notify"
)

// roleIDs maps each function's role (logical id) to the function.
func (s *synthesis) roleIDs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, fn := range s.functions {
		out[s.idByProp(t, "AWS::IAM::Role", "RoleName", "herald-"+s.env.Name+"-fn-"+fn)] = fn
	}
	return out
}

// grants lists every identity-policy statement of the template with the roles it is attached to.
type grant struct {
	roles     []string // logical ids
	actions   []string
	resources []any
}

func (s *synthesis) grants() []grant {
	var out []grant
	// A role's statements may overflow its inline policy into managed ones (OverflowPolicyN).
	for _, id := range append(s.ofType("AWS::IAM::Policy"), s.ofType("AWS::IAM::ManagedPolicy")...) {
		p := s.props(id)
		var roles []string
		for _, r := range list(p["Roles"]) {
			roles = append(roles, ref(r))
		}
		for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
			st := st.(map[string]any)
			if st["Effect"] != "Allow" {
				continue
			}
			var actions []string
			for _, a := range list(st["Action"]) {
				actions = append(actions, a.(string))
			}
			out = append(out, grant{roles: roles, actions: actions, resources: list(st["Resource"])})
		}
	}
	return out
}

// sends reports whether g grants sqs:SendMessage.
func (g grant) sends() bool {
	return slices.ContainsFunc(g.actions, func(a string) bool { return a == "sqs:SendMessage" || a == "sqs:*" || a == "*" })
}

// TestIngestQueuesAdmitOnlyTheirService: each ingest queue's policy lets its service's
// iam_principals send, and denies sqs:SendMessage to every other principal except the scheduler
// role and the Herald roles granted to send there — so one service cannot send as another,
// and no Herald sender is locked out.
func TestIngestQueuesAdmitOnlyTheirService(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		roles := s.roleIDs(t)
		scheduler := s.idByProp(t, "AWS::IAM::Role", "RoleName", "herald-"+s.env.Name+"-scheduler")
		grants := s.grants()
		for _, svc := range s.env.Config.Services {
			q := s.idByProp(t, "AWS::SQS::Queue", "QueueName", "herald-"+s.env.Name+"-"+notify.IngestQueue(svc.Name))
			var statements []map[string]any
			for _, id := range s.ofType("AWS::SQS::QueuePolicy") {
				if slices.ContainsFunc(list(s.props(id)["Queues"]), func(v any) bool { return ref(v) == q }) {
					for _, st := range list(s.props(id)["PolicyDocument"].(map[string]any)["Statement"]) {
						statements = append(statements, st.(map[string]any))
					}
				}
			}
			var allow, deny map[string]any
			for _, st := range statements {
				if mustJSON(st["Action"]) != `"sqs:SendMessage"` || ref(st["Resource"]) != q {
					continue
				}
				switch st["Effect"] {
				case "Allow":
					allow = st
				case "Deny":
					deny = st
				}
			}
			if allow == nil || deny == nil {
				t.Fatalf("%s: policy %s, want an Allow for the service and a Deny for everyone else", svc.Name, mustJSON(statements))
			}
			allowed := list(allow["Condition"].(map[string]any)["ArnEquals"].(map[string]any)["aws:PrincipalArn"])
			if mustJSON(allowed) != mustJSON(svc.IAMPrincipals) {
				t.Errorf("%s: Allow for %s, want exactly its iam_principals %v", svc.Name, mustJSON(allowed), svc.IAMPrincipals)
			}
			if mustJSON(deny["Principal"]) != `{"AWS":"*"}` {
				t.Errorf("%s: Deny applies to %s, want every principal", svc.Name, mustJSON(deny["Principal"]))
			}
			except := list(deny["Condition"].(map[string]any)["ArnNotEquals"].(map[string]any)["aws:PrincipalArn"])
			exceptRoles := map[string]bool{}
			var exceptARNs []string
			for _, v := range except {
				if a, ok := v.(string); ok {
					exceptARNs = append(exceptARNs, a)
				} else {
					exceptRoles[ref(v)] = true
				}
			}
			slices.Sort(exceptARNs)
			if mustJSON(exceptARNs) != mustJSON(slices.Sorted(slices.Values(svc.IAMPrincipals))) {
				t.Errorf("%s: Deny spares %v, want exactly its iam_principals (and Herald's roles)", svc.Name, exceptARNs)
			}
			if !exceptRoles[scheduler] {
				t.Errorf("%s: the scheduler role may not send (reserved sends would never fire)", svc.Name)
			}
			// Exactly the Herald roles granted to send here are spared: api hands requests over,
			// admin redrives the queue's dead letters.
			var senders []string
			for _, g := range grants {
				if g.sends() && slices.ContainsFunc(g.resources, func(r any) bool { return ref(r) == q }) {
					for _, r := range g.roles {
						if r != scheduler {
							senders = append(senders, roles[r])
						}
					}
				}
			}
			var spared []string
			for r := range exceptRoles {
				if r != scheduler {
					spared = append(spared, roles[r])
				}
			}
			slices.Sort(senders)
			slices.Sort(spared)
			if senders = slices.Compact(senders); !slices.Equal(spared, senders) {
				t.Errorf("%s: Deny spares functions %v, but %v are granted to send there", svc.Name, spared, senders)
			}
			if want := []string{"admin", "api"}; !slices.Equal(spared, want) {
				t.Errorf("%s: functions that may send %v, want %v", svc.Name, spared, want)
			}
		}
	})
}

// TestOnlyAdminTouchesDeadLetters: the api role sends to the ingest queues and nowhere else; the
// admin function alone may receive, delete and move dead letters (redrive), and the operator
// routes reach it, not api.
func TestOnlyAdminTouchesDeadLetters(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		roles := s.roleIDs(t)
		ingest := map[string]bool{} // and cleanup: an erasure's completion (api.EnqueueErasure)
		dlqs := map[string]bool{}
		for _, id := range s.ofType("AWS::SQS::Queue") {
			n := s.props(id)["QueueName"].(string)
			if strings.HasSuffix(n, "-dlq") {
				dlqs[id] = true
			} else if strings.HasPrefix(n, "herald-"+s.env.Name+"-ingest-") || n == "herald-"+s.env.Name+"-cleanup" {
				ingest[id] = true
			}
		}
		redrive := map[string]bool{}
		for _, g := range s.grants() {
			for _, r := range g.roles {
				switch fn := roles[r]; {
				case fn == "api" && g.sends():
					for _, res := range g.resources {
						if !ingest[ref(res)] {
							t.Errorf("api may sqs:SendMessage to %s, which is neither an ingest queue nor cleanup", mustJSON(res))
						}
					}
				case slices.Contains(g.actions, "sqs:StartMessageMoveTask"):
					redrive[fn] = true
					for _, res := range g.resources {
						if !dlqs[ref(res)] {
							t.Errorf("%s may start message moves from %s, which is not a DLQ", fn, mustJSON(res))
						}
					}
				}
			}
		}
		if len(redrive) != 1 || !redrive["admin"] {
			t.Errorf("functions that may redrive: %v, want admin only", redrive)
		}
		admin := s.idByProp(t, "AWS::Lambda::Function", "FunctionName", "herald-"+s.env.Name+"-admin")
		for _, id := range s.ofType("AWS::ApiGatewayV2::Route") {
			p := s.props(id)
			if p["RouteKey"] != "ANY /v1/admin/{proxy+}" {
				continue
			}
			integ, _ := flatten(s.props(ref(p["Target"].(map[string]any)["Fn::Join"].([]any)[1].([]any)[1]))["IntegrationUri"])
			if p["AuthorizationType"] != "AWS_IAM" || integ != "<ref:"+admin+">" {
				t.Errorf("operator route: auth %v, integration %s, want AWS_IAM to the admin function", p["AuthorizationType"], integ)
			}
			return
		}
		t.Error("no route ANY /v1/admin/{proxy+}")
	})
}

// TestSESFeedbackOnlyFromTheConfigurationSet: SES may publish to the feedback topic only for
// Herald's configuration set, in this account.
func TestSESFeedbackOnlyFromTheConfigurationSet(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		topic := s.idByProp(t, "AWS::SNS::Topic", "TopicName", "herald-"+s.env.Name+"-ses-feedback")
		set := s.env.Config.Providers.SES
		// The region is the SES region or the stack's (the SesRegion rule makes them one), the
		// name literal or a Ref to the configuration set (CDK's event destination adds its own
		// statement, conditioned the same way).
		setID := s.ofType("AWS::SES::ConfigurationSet")[0]
		want := regexp.MustCompile(`^arn:aws-iso-b:ses:(` + regexp.QuoteMeta(set.Region) + `|xx-xxxxxxxxx-1):123456789012:configuration-set/(` +
			regexp.QuoteMeta(set.ConfigurationSet) + `|<ref:` + setID + `>)$`)
		n := 0
		for _, id := range s.ofType("AWS::SNS::TopicPolicy") {
			if ref(list(s.props(id)["Topics"])[0]) != topic {
				continue
			}
			for _, st := range list(s.props(id)["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				if !strings.Contains(mustJSON(st["Principal"]), "ses.amazonaws.com") {
					continue
				}
				n++
				eq, _ := st["Condition"].(map[string]any)["StringEquals"].(map[string]any)
				arn, _ := flatten(eq["AWS:SourceArn"])
				account, _ := flatten(eq["AWS:SourceAccount"])
				if !want.MatchString(arn) || account != "123456789012" {
					t.Errorf("SES statement %s: want SourceArn %s and SourceAccount", mustJSON(st), want)
				}
			}
		}
		if n == 0 {
			t.Error("no SES statement on the feedback topic")
		}
	})
}

// TestScheduleGroupKeptWhereDataIs: deleting the group deletes every reserved send armed in it.
func TestScheduleGroupKeptWhereDataIs(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		g := s.ofType("AWS::Scheduler::ScheduleGroup")
		if len(g) != 1 {
			t.Fatalf("%d schedule groups", len(g))
		}
		want := "Delete"
		if s.env.Settings.ProtectData {
			want = "RetainExceptOnCreate"
		}
		if got := s.resources[g[0]]["DeletionPolicy"]; got != want {
			t.Errorf("schedule group DeletionPolicy %v, want %s (protect_data %v)", got, want, s.env.Settings.ProtectData)
		}
		for _, id := range s.ofType("AWS::DynamoDB::Table") {
			if s.resources[id]["DeletionPolicy"] != s.resources[g[0]]["DeletionPolicy"] {
				t.Errorf("table %s DeletionPolicy %v, schedule group %v: want the same", id, s.resources[id]["DeletionPolicy"], s.resources[g[0]]["DeletionPolicy"])
			}
		}
	})
}

// TestCampaignDispatchRetriesAndFailsCleanly: SendBatch retries with backoff; a dispatch that
// still fails goes to the Fail step (the campaign becomes FAILED) and the execution fails; the
// dashboard shows the state machine's executions.
func TestCampaignDispatchRetriesAndFailsCleanly(t *testing.T) {
	s := synth(t, "dev")
	def, ok := flatten(s.props(s.ofType("AWS::StepFunctions::StateMachine")[0])["DefinitionString"])
	if !ok {
		t.Fatal("definition is not a string")
	}
	type retrier struct {
		ErrorEquals []string
		MaxAttempts int
		BackoffRate float64
		Interval    int `json:"IntervalSeconds"`
	}
	type catcher struct {
		ErrorEquals []string
		Next        string
		ResultPath  string
	}
	type state struct {
		Type          string
		Next          string
		Retry         []retrier
		Catch         []catcher
		Parameters    map[string]any
		ItemProcessor struct{ States map[string]state }
	}
	var doc struct{ States map[string]state }
	if err := json.Unmarshal([]byte(def), &doc); err != nil {
		t.Fatalf("definition: %v\n%s", err, def)
	}
	dispatch := doc.States["DispatchBatches"]
	send := dispatch.ItemProcessor.States["SendBatch"]
	if len(send.Retry) == 0 {
		t.Fatalf("SendBatch has no Retry: %+v", send)
	}
	r := send.Retry[0]
	if !slices.Contains(r.ErrorEquals, "States.TaskFailed") || r.MaxAttempts < 3 || r.BackoffRate <= 1 || r.Interval < 1 {
		t.Errorf("SendBatch retry %+v: want task failures retried with backoff", r)
	}
	if len(dispatch.Catch) != 1 || !slices.Contains(dispatch.Catch[0].ErrorEquals, "States.ALL") || dispatch.Catch[0].ResultPath != "$.error" {
		t.Fatalf("DispatchBatches catch %+v: want States.ALL with the error at $.error", dispatch.Catch)
	}
	fail := doc.States[dispatch.Catch[0].Next]
	payload := fail.Parameters // the Lambda payload itself (PayloadResponseOnly)
	if fail.Type != "Task" || payload["step"] != "Fail" || payload["state.$"] != "$" || len(fail.Retry) == 0 {
		t.Errorf("the catch goes to %s = %+v, want the campaign function's Fail step with the state, retried", dispatch.Catch[0].Next, fail)
	}
	if end := doc.States[fail.Next]; end.Type != "Fail" {
		t.Errorf("after the Fail step comes %s (%s), want a Fail state", fail.Next, end.Type)
	}

	body, _ := flatten(s.props(s.ofType("AWS::CloudWatch::Dashboard")[0])["DashboardBody"])
	if !strings.Contains(body, "Campaign executions") {
		t.Error("dashboard has no campaign executions widget")
	}
	sm := s.ofType("AWS::StepFunctions::StateMachine")[0]
	for _, m := range []string{"ExecutionsStarted", "ExecutionsSucceeded", "ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted"} {
		if !regexp.MustCompile(`"AWS/States","` + m + `","StateMachineArn","<ref:` + sm + `>"`).MatchString(body) {
			t.Errorf("dashboard does not graph %s of the campaign state machine", m)
		}
	}
}

// nameLimits are AWS's limits on the physical names the stack sets, by resource type and property.
var nameLimits = map[string]map[string]int{
	"AWS::SQS::Queue":                         {"QueueName": 80},
	"AWS::DynamoDB::Table":                    {"TableName": 255},
	"AWS::Lambda::Function":                   {"FunctionName": 64},
	"AWS::Lambda::LayerVersion":               {"LayerName": 140},
	"AWS::IAM::Role":                          {"RoleName": 64},
	"AWS::IAM::Policy":                        {"PolicyName": 128},
	"AWS::IAM::ManagedPolicy":                 {"ManagedPolicyName": 128},
	"AWS::Scheduler::ScheduleGroup":           {"Name": 64},
	"AWS::StepFunctions::StateMachine":        {"StateMachineName": 80},
	"AWS::Logs::LogGroup":                     {"LogGroupName": 512},
	"AWS::SNS::Topic":                         {"TopicName": 256},
	"AWS::Events::EventBus":                   {"Name": 256},
	"AWS::Events::Rule":                       {"Name": 64},
	"AWS::CloudWatch::Dashboard":              {"DashboardName": 255},
	"AWS::CloudWatch::Alarm":                  {"AlarmName": 255},
	"AWS::S3::Bucket":                         {"BucketName": 63},
	"AWS::KMS::Alias":                         {"AliasName": 256},
	"AWS::ApiGatewayV2::Api":                  {"Name": 128},
	"AWS::ApiGatewayV2::Authorizer":           {"Name": 128},
	"AWS::SES::ConfigurationSet":              {"Name": 64},
	"AWS::Chatbot::SlackChannelConfiguration": {"ConfigurationName": 128},
}

// notNames are top-level properties named like names that name nothing the stack creates.
var notNames = map[string]bool{"MetricName": true, "StageName": true, "ConfigurationSetName": true, "EventBusName": true}

// TestNamesWithinLimits synthesizes an environment whose name is as long as internal/config
// allows (40 characters) and checks every physical name against its service's limit, with the
// longest account and region. A name property of a resource type the table does not know fails
// the test, so a new kind of resource needs its limit written down.
func TestNamesWithinLimits(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "herald.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	overlay, err := os.ReadFile(filepath.Join("env", "dev.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	name := "e" + strings.Repeat("0123456789", 4)[:39]
	e, err := Build(name, base, overlay, "env/dev.yaml")
	if err != nil {
		t.Fatalf("a 40-character env name is refused: %v", err)
	}
	e.Settings.ProtectData = true // names do not depend on it; cover the prod-like branch
	s := synthEnv(t, e, repoFunctions)
	checked := 0
	for id, r := range s.resources {
		typ := r["Type"].(string)
		p, _ := r["Properties"].(map[string]any)
		for k, v := range p {
			if !strings.HasSuffix(k, "Name") || notNames[k] {
				continue
			}
			if m, ok := v.(map[string]any); ok && (m["Ref"] != nil || m["Fn::GetAtt"] != nil) {
				continue // names another resource, by reference
			}
			n, ok := flatten(v)
			if !ok {
				t.Errorf("%s (%s).%s: unreadable name %s", id, typ, k, mustJSON(v))
				continue
			}
			limit, known := nameLimits[typ][k]
			if !known {
				t.Errorf("%s (%s).%s = %q: no limit known for it; add it to nameLimits", id, typ, k, n)
				continue
			}
			checked++
			if len(n) > limit {
				t.Errorf("%s (%s).%s = %q is %d characters; the limit is %d", id, typ, k, n, len(n), limit)
			}
		}
	}
	t.Logf("%d names checked", checked)
	if checked < 50 {
		t.Errorf("only %d names checked", checked)
	}
	// The long env name is really in them (shortened only where the stack alone knows the name).
	s.idByProp(t, "AWS::SQS::Queue", "QueueName", "herald-"+name+"-ingest-marketing-dlq")
	s.idByProp(t, "AWS::Scheduler::ScheduleGroup", "Name", "herald-"+name)
}
