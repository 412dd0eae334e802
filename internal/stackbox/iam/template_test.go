package iam_test

import (
	"os"
	"strings"
	"testing"

	"herald/internal/stackbox/cfn"
	"herald/internal/stackbox/iam"
)

// The synthesized dev template (internal/stackbox/testdata, a copy of
// infra/cdk.out/herald-dev.template.json), resolved in a made-up account.
const (
	devAcct   = "123456789012"
	devPrefix = "arn:aws:sqs:eu-west-1:123456789012:herald-dev-"
	ddbPrefix = "arn:aws:dynamodb:eu-west-1:123456789012:table/herald-dev-"
)

func role(name string) string { return "arn:aws:iam::123456789012:role/herald-dev-" + name }

func devStack(t *testing.T) (*iam.Stack, *cfn.Resolver) {
	t.Helper()
	b, err := os.ReadFile("../testdata/herald-dev.template.json")
	if err != nil {
		t.Fatal(err)
	}
	tp, err := cfn.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cfn.NewResolver(tp, cfn.Env{Region: "eu-west-1", AccountID: devAcct, StackName: "herald-dev"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := iam.FromTemplate(tp, r)
	if err != nil {
		t.Fatal(err)
	}
	return s, r
}

func TestDevTemplatePolicies(t *testing.T) {
	s, r := devStack(t)
	if n := len(s.Roles); n != 15 {
		t.Fatalf("%d roles: %v", n, s.RoleARNs())
	}
	fnArn := func(id string) string {
		arn := r.Resources[id].Attrs["Arn"]
		if arn == "" {
			t.Fatalf("no function %s in the template", id)
		}
		return arn
	}
	campaignMachine := "arn:aws:states:eu-west-1:123456789012:stateMachine:herald-dev-campaign"
	apiSource := "arn:aws:execute-api:eu-west-1:123456789012:" + r.Resources["ApiF70053CD"].Ref
	cases := []struct {
		name    string
		req     iam.Request
		allowed bool
		reason  string
	}{
		{"send updates deliveries", iam.Request{Principal: role("fn-send"), Action: "dynamodb:UpdateItem", Resource: ddbPrefix + "deliveries"}, true, "FnSendRoleDefaultPolicy"},
		{"send may not query a deliveries index it never reads", iam.Request{Principal: role("fn-send"), Action: "dynamodb:Query", Resource: ddbPrefix + "deliveries/index/by_notification"}, false, "implicit deny"},
		{"api lists a notification's deliveries by the index", iam.Request{Principal: role("fn-api"), Action: "dynamodb:Query", Resource: ddbPrefix + "deliveries/index/by_notification"}, true, "TableDeliveriesIndexByNotification"},
		{"api may not scan the deliveries", iam.Request{Principal: role("fn-api"), Action: "dynamodb:Scan", Resource: ddbPrefix + "deliveries"}, false, "implicit deny"},
		{"send as its Lambda session", iam.Request{Principal: "arn:aws:sts::123456789012:assumed-role/herald-dev-fn-send/herald-dev-send", Action: "dynamodb:UpdateItem", Resource: ddbPrefix + "deliveries"}, true, ""},
		{"send may not write users", iam.Request{Principal: role("fn-send"), Action: "dynamodb:PutItem", Resource: ddbPrefix + "users"}, false, "implicit deny"},
		{"send may not enqueue to ingest", iam.Request{Principal: role("fn-send"), Action: "sqs:SendMessage", Resource: devPrefix + "ingest-orders"}, false, "OnlyServiceAndHeraldSend"},
		{"send requeues to its lane", iam.Request{Principal: role("fn-send"), Action: "sqs:SendMessage", Resource: devPrefix + "send-realtime"}, true, ""},
		{"send over plain HTTP is denied by the queue policy", iam.Request{Principal: role("fn-send"), Action: "sqs:SendMessage", Resource: devPrefix + "send-realtime",
			Context: map[string]string{"aws:SecureTransport": "false"}}, false, "explicit deny in SendRealtimeQueuePolicy"},
		{"send reads its provider secret", iam.Request{Principal: role("fn-send"), Action: "secretsmanager:GetSecretValue",
			Resource: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:herald/dev/fcm-default-AbC123"}, true, ""},
		{"send writes its logs", iam.Request{Principal: role("fn-send"), Action: "logs:PutLogEvents",
			Resource: "arn:aws:logs:eu-west-1:123456789012:log-group:/aws/lambda/herald-dev-send:log-stream:x"}, true, ""},
		{"an unlisted role may not send to an ingest queue", iam.Request{Principal: "arn:aws:iam::123456789012:role/some-other-app", Action: "sqs:SendMessage", Resource: devPrefix + "ingest-orders"}, false, "OnlyServiceAndHeraldSend"},
		{"the scheduler role fires reserved sends into ingest", iam.Request{Principal: role("scheduler"), Action: "sqs:SendMessage", Resource: devPrefix + "ingest-marketing"}, true, "FireReservedSends"},
		{"the scheduler role may not feed prepare", iam.Request{Principal: role("scheduler"), Action: "sqs:SendMessage", Resource: devPrefix + "prepare-bulk"}, false, ""},
		{"ingest starts campaigns", iam.Request{Principal: role("fn-ingest"), Action: "states:StartExecution", Resource: campaignMachine}, true, ""},
		{"api reads campaign executions", iam.Request{Principal: role("fn-api"), Action: "states:DescribeExecution",
			Resource: "arn:aws:states:eu-west-1:123456789012:execution:herald-dev-campaign:c1-g0"}, true, "ReadCampaignExecutions"},
		{"the state machine invokes the campaign function", iam.Request{Principal: s.Roles["CampaignRole4680252C"], Action: "lambda:InvokeFunction", Resource: fnArn("FnCampaignB4A49CD5")}, true, ""},
		{"the state machine dispatches to prepare-bulk", iam.Request{Principal: s.Roles["CampaignRole4680252C"], Action: "sqs:SendMessage", Resource: devPrefix + "prepare-bulk"}, true, ""},
		{"the state machine continues as new", iam.Request{Principal: s.Roles["CampaignRole4680252C"], Action: "states:StartExecution", Resource: campaignMachine}, true, ""},
		{"the state machine may not invoke send", iam.Request{Principal: s.Roles["CampaignRole4680252C"], Action: "lambda:InvokeFunction", Resource: fnArn("FnSend527C6DC2")}, false, ""},
		{"API Gateway invokes the api function for its routes", iam.Request{Principal: "apigateway.amazonaws.com", Action: "lambda:InvokeFunction", Resource: fnArn("FnApi6FF11E4C"),
			Context: map[string]string{"aws:SourceArn": apiSource + "/$default/POST/v1/{proxy+}"}}, true, "ApiANYv1proxyApiIntegrationPermission"},
		{"API Gateway of another API may not", iam.Request{Principal: "apigateway.amazonaws.com", Action: "lambda:InvokeFunction", Resource: fnArn("FnApi6FF11E4C"),
			Context: map[string]string{"aws:SourceArn": "arn:aws:execute-api:eu-west-1:123456789012:otherapi/$default/POST/v1/{proxy+}"}}, false, ""},
		{"SES publishes feedback for the configuration set", iam.Request{Principal: "ses.amazonaws.com", Action: "sns:Publish", Resource: r.Resources["SesFeedbackTopicFBAAA249"].Ref,
			Context: map[string]string{"aws:SourceAccount": devAcct, "aws:SourceArn": "arn:aws:ses:eu-west-1:123456789012:configuration-set/herald-dev"}}, true, "SesFeedbackTopicPolicy"},
		{"SES may not publish for another configuration set", iam.Request{Principal: "ses.amazonaws.com", Action: "sns:Publish", Resource: r.Resources["SesFeedbackTopicFBAAA249"].Ref,
			Context: map[string]string{"aws:SourceAccount": devAcct, "aws:SourceArn": "arn:aws:ses:eu-west-1:123456789012:configuration-set/other"}}, false, ""},
		{"SES of another account may not", iam.Request{Principal: "ses.amazonaws.com", Action: "sns:Publish", Resource: r.Resources["SesFeedbackTopicFBAAA249"].Ref,
			Context: map[string]string{"aws:SourceAccount": "999999999999"}}, false, ""},
		{"the lists bucket refuses plain HTTP", iam.Request{Principal: role("fn-audience"), Action: "s3:GetObject", Resource: r.Resources["ListsBucketE9CCB366"].Attrs["Arn"] + "/lists/a.csv",
			Context: map[string]string{"aws:SecureTransport": "false"}}, false, "explicit deny in ListsBucketPolicy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := s.Evaluate(c.req)
			if d.Allowed != c.allowed || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("allowed=%v %q; want %v with %q", d.Allowed, d.Reason, c.allowed, c.reason)
			}
		})
	}
}

func TestDevTemplateTrust(t *testing.T) {
	s, _ := devStack(t)
	if d := s.AssumeRole(role("fn-send"), "lambda.amazonaws.com", nil); !d.Allowed {
		t.Fatal(d.Reason)
	}
	if d := s.AssumeRole(role("fn-send"), "states.amazonaws.com", nil); d.Allowed {
		t.Fatal(d.Reason)
	}
	group := "arn:aws:scheduler:eu-west-1:" + devAcct + ":schedule-group/herald-dev"
	if d := s.AssumeRole(role("scheduler"), "scheduler.amazonaws.com", map[string]string{"aws:SourceAccount": devAcct, "aws:SourceArn": group}); !d.Allowed {
		t.Fatal(d.Reason)
	}
	if d := s.AssumeRole(role("scheduler"), "scheduler.amazonaws.com", map[string]string{"aws:SourceAccount": "999999999999", "aws:SourceArn": group}); d.Allowed {
		t.Fatal("the scheduler role is assumable for another account's schedules")
	}
	if d := s.AssumeRole(role("scheduler"), "scheduler.amazonaws.com", map[string]string{"aws:SourceAccount": devAcct,
		"aws:SourceArn": "arn:aws:scheduler:eu-west-1:" + devAcct + ":schedule-group/default"}); d.Allowed {
		t.Fatal("the scheduler role is assumable for schedules of another group")
	}
}

// TestIngestQueueProducerPolicy checks, on the real ingest queue and its own policy, that only
// the service's producer (and Herald's scheduler) may send, whatever an identity policy grants.
func TestIngestQueueProducerPolicy(t *testing.T) {
	s, _ := devStack(t)
	queue := devPrefix + "ingest-orders"
	producer := "arn:aws:iam::123456789012:role/orders-service"
	resource := s.ResourcePolicies(queue)
	for principal, want := range map[string]bool{
		producer:          true,
		role("scheduler"): true,
		role("fn-send"):   false,
		"arn:aws:iam::123456789012:role/payments-service": false,
	} {
		d := iam.Evaluate(iam.Request{Principal: principal, Action: "sqs:SendMessage", Resource: queue}, s.IdentityPolicies(principal), resource)
		if d.Allowed != want {
			t.Errorf("%s: allowed=%v, want %v: %s", principal, d.Allowed, want, d.Reason)
		}
	}
	// A broad identity grant does not get past the queue's explicit deny.
	broad := []iam.Policy{iam.MustParsePolicy("Broad", `{"Statement":[{"Effect":"Allow","Action":"sqs:*","Resource":"*"}]}`)}
	if d := iam.Evaluate(iam.Request{Principal: "arn:aws:iam::123456789012:role/payments-service", Action: "sqs:SendMessage", Resource: queue}, broad, resource); d.Allowed || !strings.Contains(d.Reason, "OnlyServiceAndHeraldSend") {
		t.Fatalf("%v %s", d.Allowed, d.Reason)
	}
}

func TestDevTemplateUnusedGrants(t *testing.T) {
	s, _ := devStack(t)
	send := role("fn-send")
	calls := []iam.Request{
		{Principal: send, Action: "dynamodb:UpdateItem", Resource: ddbPrefix + "deliveries"},
		{Principal: "arn:aws:sts::123456789012:assumed-role/herald-dev-fn-send/s", Action: "sqs:SendMessage", Resource: devPrefix + "record-realtime"},
	}
	var sendUnused []string
	for _, u := range s.UnusedGrants(calls) {
		if u.Principal == send {
			sendUnused = append(sendUnused, u.Action+" "+strings.Join(u.Resources, ","))
		}
	}
	joined := strings.Join(sendUnused, "\n")
	for _, used := range []string{"dynamodb:UpdateItem " + ddbPrefix + "deliveries,", "sqs:SendMessage " + devPrefix + "record-realtime"} {
		if strings.Contains(joined, used) {
			t.Errorf("%q reported unused although called:\n%s", used, joined)
		}
	}
	for _, unused := range []string{"dynamodb:UpdateItem " + ddbPrefix + "notifications", "ses:SendEmail "} {
		if !strings.Contains(joined, unused) {
			t.Errorf("%q not reported unused:\n%s", unused, joined)
		}
	}
}
