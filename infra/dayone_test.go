package main

// Day one in a fresh account: what would make the first deploy fail, or leave the next one
// blocked, or let an operator alert vanish, or open a side door around a service's isolation.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestNoReservedConcurrencyByDefault: a new account's Lambda quota of 10 leaves nothing to
// reserve, and Lambda refuses the whole deploy for one reservation.
func TestNoReservedConcurrencyByDefault(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		for _, id := range s.ofType("AWS::Lambda::Function") {
			if c, ok := s.props(id)["ReservedConcurrentExecutions"]; ok {
				t.Errorf("%s reserves concurrency %v by default", id, c)
			}
		}
	})
	// Asked for, and with room in the account, it is deployed.
	e := loadEnv(t, "dev")
	e.Settings.LambdaConcurrencyQuota = 1000
	e.Settings.Functions = map[string]FunctionSettings{alertsFunction: {ReservedConcurrency: 1}}
	e.Name = "dayone"
	s := synthEnv(t, e, repoFunctions)
	fn := s.idByProp(t, "AWS::Lambda::Function", "FunctionName", "herald-dayone-alerts")
	if c := s.props(fn)["ReservedConcurrentExecutions"]; c != float64(1) {
		t.Errorf("alerts ReservedConcurrentExecutions %v, want the configured 1", c)
	}
}

// TestReservationsLeaveTheAccountItsMinimum: synth refuses reservations Lambda would refuse.
func TestReservationsLeaveTheAccountItsMinimum(t *testing.T) {
	deployable := strings.NewReplacer("api_keys: [orders-local-key]", "api_key_secret: herald/x/orders",
		"credentials_file: ./fcm.json", "credentials_secret: herald/x/fcm").Replace(baseYAML)
	for overlay, ok := range map[string]bool{
		"stack: {}": true,
		"stack: {functions: {alerts: {reserved_concurrency: 1}}}":                                                                  false, // quota 10: no room at all
		"stack: {lambda_concurrency_quota: 50, functions: {alerts: {reserved_concurrency: 1}}}":                                    false, // 50 < 100: none
		"stack: {lambda_concurrency_quota: 1000, functions: {alerts: {reserved_concurrency: 1}}}":                                  true,
		"stack: {lambda_concurrency_quota: 1000, functions: {send: {reserved_concurrency: 900}}}":                                  true,
		"stack: {lambda_concurrency_quota: 1000, functions: {send: {reserved_concurrency: 850}, api: {reserved_concurrency: 51}}}": false,
		"stack: {functions: {send: {reserved_concurrency: -1}}}":                                                                   false,
	} {
		_, err := Build("dev", []byte(deployable), []byte(overlay), "dev.yaml")
		if (err == nil) != ok {
			t.Errorf("%s: err %v, want accepted %v", overlay, err, ok)
		}
		if err != nil && !ok && !strings.Contains(err.Error(), "stack.") {
			t.Errorf("%s: %v does not name the key", overlay, err)
		}
	}
}

// TestNothingPlainlyRetained: a resource kept on delete must be removed when the stack's first
// create rolls back (RetainExceptOnCreate), or the next deploy fails on "already exists".
func TestNothingPlainlyRetained(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		retained := 0
		for id, r := range s.resources {
			if r["DeletionPolicy"] == "Retain" {
				t.Errorf("%s (%v): DeletionPolicy Retain, want RetainExceptOnCreate", id, r["Type"])
			}
			if r["DeletionPolicy"] == "RetainExceptOnCreate" {
				retained++
			}
		}
		if s.env.Settings.ProtectData && retained == 0 {
			t.Error("protect_data keeps nothing")
		}
		if !s.env.Settings.ProtectData && retained != 0 {
			t.Errorf("%d resources kept without protect_data", retained)
		}
	})
}

// TestEveryEventTargetHasADLQ: an EventBridge target without a DLQ drops an event it cannot
// deliver after its retries, silently; each rule's permanent failures page.
func TestEveryEventTargetHasADLQ(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		dlq := s.idByProp(t, "AWS::SQS::Queue", "QueueName", "herald-"+s.env.Name+"-events-dlq")
		rules := s.ofType("AWS::Events::Rule")
		if len(rules) == 0 {
			t.Fatal("no rules")
		}
		for _, id := range rules {
			p := s.props(id)
			for _, tg := range list(p["Targets"]) {
				tg := tg.(map[string]any)
				dl, _ := tg["DeadLetterConfig"].(map[string]any)
				if dl == nil || ref(dl["Arn"]) != dlq {
					t.Errorf("rule %s target %v: DeadLetterConfig %v, want events-dlq", id, tg["Id"], tg["DeadLetterConfig"])
				}
				if rp, _ := tg["RetryPolicy"].(map[string]any); rp == nil || num(rp["MaximumRetryAttempts"]) < 1 {
					t.Errorf("rule %s target %v: RetryPolicy %v", id, tg["Id"], tg["RetryPolicy"])
				}
			}
			name := p["Name"].(string)
			for _, metric := range []string{"FailedInvocations", "InvocationsFailedToBeSentToDlq"} {
				found := false
				for _, a := range s.ofType("AWS::CloudWatch::Alarm") {
					ap := s.props(a)
					if ap["MetricName"] == metric && ap["Namespace"] == "AWS/Events" && strings.Contains(mustJSON(ap["Dimensions"]), `"`+name+`"`) {
						found = true
					}
				}
				if !found {
					t.Errorf("no %s alarm for rule %s", metric, name)
				}
			}
		}
		for _, topic := range []string{"alarms", "ses-feedback"} {
			found := false
			for _, a := range s.ofType("AWS::CloudWatch::Alarm") {
				ap := s.props(a)
				if ap["MetricName"] == "NumberOfNotificationsFailed" && strings.Contains(mustJSON(ap["Dimensions"]), "TopicName") &&
					strings.Contains(mustJSON(ap["AlarmName"]), topic) {
					found = true
				}
			}
			if !found {
				t.Errorf("no SNS delivery failure alarm for the %s topic", topic)
			}
		}
	})
}

// policyDenies reports whether a statement of a resource policy denies principal the action
// (a literal principal ARN, matched against ArnNotLike/ArnNotEquals lists of literal ARNs,
// Fn::GetAtt role references named by their logical ids, and patterns with *).
func policyDenies(s *synthesis, doc map[string]any, action, principal string) (bool, string) {
	for _, st := range list(doc["Statement"]) {
		st := st.(map[string]any)
		if st["Effect"] != "Deny" || mustJSON(st["Principal"]) != `{"AWS":"*"}` && st["Principal"] != "*" {
			continue
		}
		matches := func(v any) bool {
			for _, a := range list(v) {
				if a == "*" || strings.EqualFold(a.(string)+"", action) || strings.HasSuffix(a.(string), ":*") && strings.HasPrefix(action, strings.TrimSuffix(a.(string), "*")) {
					return true
				}
			}
			return false
		}
		if st["Action"] != nil && !matches(st["Action"]) || st["NotAction"] != nil && matches(st["NotAction"]) {
			continue
		}
		cond, _ := st["Condition"].(map[string]any)
		excluded := false
		for op, kv := range cond {
			for key, vals := range kv.(map[string]any) {
				if key != "aws:PrincipalArn" || (op != "ArnNotLike" && op != "ArnNotEquals") {
					excluded = true // another condition (aws:SecureTransport): not a deny of this caller's call
					continue
				}
				for _, v := range list(vals) {
					if str, ok := v.(string); ok && globLike(str, principal) {
						excluded = true
					}
				}
			}
		}
		if !excluded {
			return true, fmt.Sprint(st["Sid"])
		}
	}
	return false, ""
}

func globLike(pattern, s string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == s
	}
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

// TestIngestQueuesRefuseNonSendActions: an ingest queue is the service's door in, not a
// queue anyone in the account may drain, purge or re-police; only Herald's consumer (ingest),
// the admin function and the deployment roles are left out of the deny.
func TestIngestQueuesRefuseNonSendActions(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		for _, svc := range s.env.Config.Services {
			q := s.idByProp(t, "AWS::SQS::Queue", "QueueName", "herald-"+s.env.Name+"-ingest-"+svc.Name)
			var doc map[string]any
			for _, id := range s.ofType("AWS::SQS::QueuePolicy") {
				if slices.ContainsFunc(list(s.props(id)["Queues"]), func(v any) bool { return ref(v) == q }) {
					doc = s.props(id)["PolicyDocument"].(map[string]any)
				}
			}
			if doc == nil {
				t.Fatalf("ingest-%s has no queue policy", svc.Name)
			}
			intruders := append([]string{"arn:aws:iam::123456789012:role/intruder"}, s.env.Config.Services[0].IAMPrincipals...)
			for _, who := range intruders {
				for _, action := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:PurgeQueue", "sqs:SetQueueAttributes", "sqs:ChangeMessageVisibility", "sqs:AddPermission"} {
					if denied, why := policyDenies(s, doc, action, who); !denied {
						t.Errorf("ingest-%s: %s may %s (%s)", svc.Name, who, action, why)
					}
				}
			}
			// Every principal left out of the non-send deny is Herald's consumer, its admin,
			// or a deployment role.
			for _, st := range list(doc["Statement"]) {
				st := st.(map[string]any)
				if st["Sid"] != "OnlyHeraldConsumes" {
					continue
				}
				for _, v := range list(st["Condition"].(map[string]any)["ArnNotLike"].(map[string]any)["aws:PrincipalArn"]) {
					j := mustJSON(v)
					if !strings.Contains(j, "FnIngestRole") && !strings.Contains(j, "FnAdminRole") && !strings.Contains(j, "cfn-exec-role") {
						t.Errorf("ingest-%s: %s may consume the queue", svc.Name, j)
					}
				}
			}
		}
	})
}

// TestSchedulerRoleTrustsOnlyItsGroup: a schedule in another group, created by anyone who may
// pass the role, cannot assume it.
func TestSchedulerRoleTrustsOnlyItsGroup(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		role := s.idByProp(t, "AWS::IAM::Role", "RoleName", "herald-"+s.env.Name+"-scheduler")
		trust := mustJSON(s.props(role)["AssumeRolePolicyDocument"])
		if !strings.Contains(trust, `"ArnEquals":{"aws:SourceArn":`) || !strings.Contains(trust, ":schedule-group/herald-"+s.env.Name+`"`) {
			t.Errorf("scheduler trust %s, want aws:SourceArn of schedule-group/herald-%s", trust, s.env.Name)
		}
	})
}

// TestListsPrefixesBelongToTheirService: each service's prefix is writable only by its
// principals, and nothing may be written outside a service's prefix.
func TestListsPrefixesBelongToTheirService(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		var doc map[string]any
		for _, id := range s.ofType("AWS::S3::BucketPolicy") {
			if strings.Contains(mustJSON(s.props(id)["Bucket"]), "ListsBucket") {
				doc = s.props(id)["PolicyDocument"].(map[string]any)
			}
		}
		if doc == nil {
			t.Fatal("the lists bucket has no policy")
		}
		j := mustJSON(doc)
		for _, svc := range s.env.Config.Services {
			if !strings.Contains(j, `"OnlyServiceUploads`+pascal(svc.Name)+`"`) {
				t.Errorf("no deny for other principals on lists/%s/", svc.Name)
			}
			for _, other := range s.env.Config.Services {
				if other.Name == svc.Name {
					continue
				}
				for _, p := range other.IAMPrincipals {
					if slices.Contains(svc.IAMPrincipals, p) {
						continue
					}
					// other's principal on svc's prefix: the deny names svc's principals only.
					for _, st := range list(doc["Statement"]) {
						st := st.(map[string]any)
						if st["Sid"] != "OnlyServiceUploads"+pascal(svc.Name) {
							continue
						}
						if strings.Contains(mustJSON(st["Condition"]), p) {
							t.Errorf("%s's principal %s is left out of lists/%s/'s deny", other.Name, p, svc.Name)
						}
					}
				}
			}
		}
		if !strings.Contains(j, `"UploadsOnlyUnderAService"`) {
			t.Error("no deny for uploads outside a service's prefix")
		}
	})
}

// TestAuditLogAppendOnlyByIAM: every role that may write the notifications table is denied
// any change to an AUDIT# item; the audit writers (api, admin) keep their PutItem only.
func TestAuditLogAppendOnlyByIAM(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		for _, fn := range s.functions {
			w, ok := functionWiring[fn]
			if !ok {
				continue
			}
			if !w.tables["notifications"].writes() && !slices.Contains(auditWriters, fn) {
				continue
			}
			role := s.idByProp(t, "AWS::IAM::Role", "RoleName", "herald-"+s.env.Name+"-fn-"+fn)
			var deny map[string]any
			for _, id := range append(s.ofType("AWS::IAM::Policy"), s.ofType("AWS::IAM::ManagedPolicy")...) {
				pp := s.props(id)
				if !slices.ContainsFunc(list(pp["Roles"]), func(r any) bool { return ref(r) == role }) {
					continue
				}
				for _, st := range list(pp["PolicyDocument"].(map[string]any)["Statement"]) {
					if st.(map[string]any)["Sid"] == "AuditLogIsAppendOnly" {
						deny = st.(map[string]any)
					}
				}
			}
			if deny == nil || deny["Effect"] != "Deny" {
				t.Errorf("%s: no AuditLogIsAppendOnly deny", fn)
				continue
			}
			actions := list(deny["Action"])
			for _, a := range []string{"dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"} {
				if !slices.Contains(actions, any(a)) {
					t.Errorf("%s: audit deny lacks %s", fn, a)
				}
			}
			if put := slices.Contains(actions, any("dynamodb:PutItem")); put == slices.Contains(auditWriters, fn) {
				t.Errorf("%s: audit deny has PutItem %v", fn, put)
			}
			if c := mustJSON(deny["Condition"]); c != `{"ForAnyValue:StringLike":{"dynamodb:LeadingKeys":["AUDIT#*"]}}` {
				t.Errorf("%s: audit deny condition %s", fn, c)
			}
		}
	})
}

// TestOpenRoutesAreThrottled: /healthz, the unsubscribe links, the console's page and the stream's $connect need no
// credentials; each has its own cap.
func TestOpenRoutesAreThrottled(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		want := s.env.Settings.API.OpenRoutes
		for _, id := range s.ofType("AWS::ApiGatewayV2::Stage") {
			p := s.props(id)
			rs, _ := p["RouteSettings"].(map[string]any)
			keys := []string{"GET /healthz", "GET /u/{token}", "POST /u/{token}"}
			if p["StageName"] == streamStage {
				keys = []string{"$connect"}
			} else if s.env.Settings.API.Console {
				keys = append(keys, "GET /console", "GET /console/{proxy+}")
			}
			for _, k := range keys {
				r, _ := rs[k].(map[string]any)
				if r == nil || num(r["ThrottlingRateLimit"]) != want.RateLimit || num(r["ThrottlingBurstLimit"]) != float64(want.BurstLimit) {
					t.Errorf("stage %v route %s: %v, want rate %v burst %v", p["StageName"], k, r, want.RateLimit, want.BurstLimit)
				}
			}
		}
		// Every route without an authorizer is capped.
		for _, id := range s.ofType("AWS::ApiGatewayV2::Route") {
			p := s.props(id)
			if p["AuthorizationType"] != "NONE" {
				continue
			}
			key := p["RouteKey"].(string)
			if key == "$disconnect" || key == "$default" {
				continue // only a connection $connect admitted reaches these
			}
			capped := false
			for _, st := range s.ofType("AWS::ApiGatewayV2::Stage") {
				if rs, _ := s.props(st)["RouteSettings"].(map[string]any); rs[key] != nil {
					capped = true
				}
			}
			if !capped {
				t.Errorf("open route %s has no throttle", key)
			}
		}
	})
}
