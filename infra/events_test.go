package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestOperatorEvents: the environment's event bus; only the functions that emit (ingest, and
// campaign when it exists) may put events, on that bus alone, and are told its name; the alert
// rule sends failed campaigns and large sends to the alarm topic, which trusts that rule only.
func TestOperatorEvents(t *testing.T) {
	check := func(t *testing.T, s *synthesis) {
		bus := s.idByProp(t, "AWS::Events::EventBus", "Name", "herald-"+s.env.Name+"-events")
		emitters := map[string]bool{"ingest": true, "campaign": true}

		// Who may put events: exactly the emitters, and only on the bus.
		putters := map[string]bool{}
		for _, id := range s.ofType("AWS::IAM::Policy") {
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
		for _, dt := range []string{"Campaign Failed", "Large Send Started"} {
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
		key := ref(s.props(topic)["KmsMasterKeyId"])
		if !strings.Contains(mustJSON(s.props(key)["KeyPolicy"]), "events.amazonaws.com") {
			t.Error("the alarm topic's key does not let EventBridge encrypt")
		}
	}
	environments(t, check)
}
