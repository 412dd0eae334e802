package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestOperatorEvents: the environment's event bus; only the functions that emit (ingest, the
// campaign steps, and every SQS consumer — it dead-letters) may put events, on that bus alone,
// and are told its name; the alert rule sends failed campaigns and large sends to the alarm
// topic, which trusts that rule only.
func TestOperatorEvents(t *testing.T) {
	check := func(t *testing.T, s *synthesis) {
		bus := s.idByProp(t, "AWS::Events::EventBus", "Name", "herald-"+s.env.Name+"-events")
		emitters := map[string]bool{"ingest": true, "campaign": true, "prepare": true, "send": true, "record": true,
			"cleanup": true, "bounce": true, "audience": true}

		// Who may put events: exactly the emitters, and only on the bus.
		putters := map[string]bool{}
		// A role's statements may overflow from its inline policy into a managed one.
		for _, id := range append(s.ofType("AWS::IAM::Policy"), s.ofType("AWS::IAM::ManagedPolicy")...) {
			p := s.props(id)
			for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				if !slices.ContainsFunc(list(st["Action"]), func(a any) bool { return strings.HasPrefix(a.(string), "events:") }) {
					continue
				}
				if mustJSON(st["Action"]) != `"events:PutEvents"` {
					t.Errorf("%s: events actions %v, want events:PutEvents only", id, st["Action"])
				}
				if rs := list(st["Resource"]); len(rs) != 1 || ref(rs[0]) != bus {
					t.Errorf("%s: events:PutEvents on %v, want the operator bus only", id, st["Resource"])
				}
				for _, r := range list(p["Roles"]) {
					putters[s.props(ref(r))["RoleName"].(string)] = true
				}
			}
		}
		for _, fn := range s.functions {
			role := "herald-" + s.env.Name + "-fn-" + fn
			if putters[role] != emitters[fn] {
				t.Errorf("%s may put events: %v, want %v", role, putters[role], emitters[fn])
			}
			vars := s.props(s.idByProp(t, "AWS::Lambda::Function", "FunctionName", "herald-"+s.env.Name+"-"+fn))["Environment"].(map[string]any)["Variables"].(map[string]any)
			v, ok := vars["HERALD_EVENT_BUS"]
			if ok != emitters[fn] || ok && ref(v) != bus {
				t.Errorf("%s: HERALD_EVENT_BUS = %v, want the operator bus only on emitters", fn, v)
			}
		}

		// The alert rule: on the bus, herald's failed campaigns and large sends, to the alarm topic.
		topic := s.idByProp(t, "AWS::SNS::Topic", "TopicName", "herald-"+s.env.Name+"-alarms")
		rule := s.idByProp(t, "AWS::Events::Rule", "Name", "herald-"+s.env.Name+"-operator-alerts")
		p := s.props(rule)
		if ref(p["EventBusName"]) != bus {
			t.Errorf("alert rule on %v, want the operator bus", p["EventBusName"])
		}
		pattern := p["EventPattern"].(map[string]any)
		if mustJSON(pattern["source"]) != `["herald"]` {
			t.Errorf("alert rule source %v, want herald", pattern["source"])
		}
		for _, dt := range []string{"Campaign Failed", "Large Send Started", "Provider Auth Failed"} {
			if !slices.Contains(list(pattern["detail-type"]), any(dt)) {
				t.Errorf("alert rule detail-types %v lack %q", pattern["detail-type"], dt)
			}
		}
		if targets := list(p["Targets"]); len(targets) != 1 || ref(targets[0].(map[string]any)["Arn"]) != topic {
			t.Errorf("alert rule targets %v, want the alarm topic", p["Targets"])
		}
		s.template.HasResourceProperties(jsii.String("AWS::SNS::TopicPolicy"), map[string]any{
			"Topics": []any{map[string]any{"Ref": topic}},
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
				assertions.Match_ObjectLike(&map[string]any{
					"Action": "sns:Publish", "Principal": map[string]any{"Service": "events.amazonaws.com"},
					"Condition": map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": map[string]any{"Fn::GetAtt": []any{rule, "Arn"}}}},
				}),
			})},
		})
		// The key lets EventBridge and CloudWatch encrypt for this topic only, by the encryption
		// context SNS sends, never by aws:SourceAccount or aws:SourceArn (unsupported there for
		// EventBridge: every event would be dropped).
		key := ref(s.props(topic)["KmsMasterKeyId"])
		for _, st := range list(s.props(key)["KeyPolicy"].(map[string]any)["Statement"]) {
			st := st.(map[string]any)
			svc, _ := st["Principal"].(map[string]any)["Service"].(string)
			if svc == "" {
				continue
			}
			cond := mustJSON(st["Condition"])
			if strings.Contains(cond, "aws:Source") || !strings.Contains(cond, "kms:EncryptionContext:aws:sns:topicArn") ||
				!strings.Contains(cond, ":herald-"+s.env.Name+"-alarms") {
				t.Errorf("alarm key statement for %s has condition %s, want the topic's encryption context only", svc, cond)
			}
		}
		if !strings.Contains(mustJSON(s.props(key)["KeyPolicy"]), "events.amazonaws.com") {
			t.Error("the alarm topic's key does not let EventBridge encrypt")
		}
	}
	environments(t, check)
}

// TestSlackAlerts: the rule on the operator bus delivers the posted detail-types to the alerts
// function (campaign_finished only where asked), with a DLQ that trusts the rule only; the
// function runs one instance at a time and may read the webhook secret and nothing else.
func TestSlackAlerts(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		env := s.env.Name
		bus := s.idByProp(t, "AWS::Events::EventBus", "Name", "herald-"+env+"-events")
		fn := s.idByProp(t, "AWS::Lambda::Function", "FunctionName", "herald-"+env+"-alerts")
		dlq := s.idByProp(t, "AWS::SQS::Queue", "QueueName", "herald-"+env+"-events-dlq")
		rule := s.idByProp(t, "AWS::Events::Rule", "Name", "herald-"+env+"-slack-alerts")
		p := s.props(rule)
		if ref(p["EventBusName"]) != bus {
			t.Errorf("slack rule on %v, want the operator bus", p["EventBusName"])
		}
		want := `["Message Dead Lettered","Large Send Started","Campaign Failed","Provider Auth Failed"]`
		if env == "dev" { // env/dev.yaml asks for campaign_finished
			want = `["Message Dead Lettered","Large Send Started","Campaign Failed","Provider Auth Failed","Campaign Finished"]`
		}
		pattern := p["EventPattern"].(map[string]any)
		if got := mustJSON(pattern["detail-type"]); got != want || mustJSON(pattern["source"]) != `["herald"]` {
			t.Errorf("slack rule pattern %v, want source herald and %s", pattern, want)
		}
		targets := list(p["Targets"])
		if len(targets) != 1 {
			t.Fatalf("slack rule targets %v", targets)
		}
		tg := targets[0].(map[string]any)
		if !strings.Contains(mustJSON(tg["Arn"]), fn) || !strings.Contains(mustJSON(tg["DeadLetterConfig"]), dlq) {
			t.Errorf("slack rule target %v, want the alerts function with the alerts DLQ", tg)
		}
		s.template.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), map[string]any{
			"Action": "lambda:InvokeFunction", "Principal": "events.amazonaws.com",
			"SourceArn": map[string]any{"Fn::GetAtt": []any{rule, "Arn"}},
		})
		s.template.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), map[string]any{
			"Queues": []any{map[string]any{"Ref": dlq}},
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
				assertions.Match_ObjectLike(&map[string]any{
					"Action": "sqs:SendMessage", "Principal": map[string]any{"Service": "events.amazonaws.com"},
					"Condition": map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": map[string]any{"Fn::GetAtt": []any{rule, "Arn"}}}},
				}),
			})},
		})
		// The role: logs and the one secret.
		role := s.idByProp(t, "AWS::IAM::Role", "RoleName", "herald-"+env+"-fn-alerts")
		var actions []string
		// A role's statements may overflow from its inline policy into a managed one.
		for _, id := range append(s.ofType("AWS::IAM::Policy"), s.ofType("AWS::IAM::ManagedPolicy")...) {
			pp := s.props(id)
			if !slices.ContainsFunc(list(pp["Roles"]), func(r any) bool { return ref(r) == role }) {
				continue
			}
			for _, st := range list(pp["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				for _, a := range list(st["Action"]) {
					actions = append(actions, a.(string))
				}
				if slices.Contains(list(st["Action"]), any("secretsmanager:GetSecretValue")) &&
					!strings.Contains(mustJSON(st["Resource"]), "herald/"+env+"/slack-webhook") {
					t.Errorf("alerts reads secrets %v, want the webhook only", st["Resource"])
				}
			}
		}
		for _, a := range actions {
			if !strings.HasPrefix(a, "logs:") && !strings.HasPrefix(a, "secretsmanager:") && !strings.HasPrefix(a, "xray:") {
				t.Errorf("alerts role may %s", a)
			}
		}
	})
}
