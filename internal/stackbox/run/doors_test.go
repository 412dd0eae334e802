package run_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"herald/internal/stackbox/iam"
	"herald/internal/stackbox/run"
)

// The side doors: each scenario tries one as a principal whose own policies would let it, and
// must be refused by the template's policy that names the door.

// intruder is a role of the account with broad rights of its own (sqs:*, s3:*, dynamodb:*,
// scheduler:* and iam:PassRole on everything): what the isolation must hold against.
func (s *scenarios) intruder() string {
	p := fmt.Sprintf("arn:aws:iam::%s:role/stackbox-intruder", run.AccountID)
	s.box.AddIntruder(p, iam.MustParsePolicy("intruder-identity", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow",`+
		`"Action":["sqs:*","s3:*","dynamodb:*","scheduler:*","iam:PassRole"],"Resource":"*"}]}`))
	return p
}

// refusedBy fails t unless err is an access denial naming the statement sid.
func refusedBy(t *testing.T, what string, err error, sid string) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("%s was allowed: want it refused by %s", what, sid)
	case !strings.Contains(err.Error(), sid):
		t.Fatalf("%s was refused, but not by %s: %v", what, sid, err)
	}
	t.Logf("%s: refused by %s", what, sid)
}

func (s *scenarios) env(t *testing.T) string {
	e := s.box.Function("ingest").Getenv("HERALD_ENV")
	if e == "" {
		t.Fatal("ingest has no HERALD_ENV")
	}
	return e
}

// forgedUpload: the marketing service uploads a list under orders' prefix of the lists bucket;
// its own policy allows s3:PutObject everywhere, the bucket's policy refuses it.
func (s *scenarios) forgedUpload(t *testing.T) {
	marketing := s.box.ServicePrincipals("marketing")
	if len(marketing) == 0 {
		t.Fatal("the marketing service has no iam_principals")
	}
	s.box.AddProducer(marketing[0])
	bucket := s.box.Function("audience").Getenv("HERALD_AUDIENCE_BUCKET")
	err := s.box.PutObject(context.Background(), marketing[0], bucket, "lists/orders/forged.txt", "mallory\n")
	refusedBy(t, "marketing's upload to lists/orders/", err, "OnlyServiceUploadsOrders")
	err = s.box.PutObject(context.Background(), s.intruder(), bucket, "elsewhere/forged.txt", "mallory\n")
	refusedBy(t, "an upload outside lists/<service>/", err, "UploadsOnlyUnderAService")
	// Its own prefix is its to write.
	if err := s.box.PutObject(context.Background(), marketing[0], bucket, "lists/marketing/own.txt", "maria\n"); err != nil {
		t.Fatalf("marketing's upload to its own prefix: %v", err)
	}
	waitFor(t, 30*time.Second, "marketing's list imported", func() (bool, string) {
		_, v := s.call(t, marketing[0], "", "GET", "/v1/audience-lists/own", nil)
		n, _ := v["members"].(float64)
		return n == 1, fmt.Sprint(v)
	})
}

// purgeOtherQueue: a role with sqs:* on everything purges, drains and re-polices the orders
// service's ingest queue.
func (s *scenarios) purgeOtherQueue(t *testing.T) {
	who := s.intruder()
	q := s.box.Queue("ingest-orders")
	c := s.box.SQSClient(who)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.PurgeQueue(ctx, &awssqs.PurgeQueueInput{QueueUrl: aws.String(q.URL)})
	refusedBy(t, "PurgeQueue on ingest-orders", err, "OnlyHeraldConsumes")
	_, err = c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL)})
	refusedBy(t, "ReceiveMessage on ingest-orders", err, "OnlyHeraldConsumes")
	_, err = c.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: aws.String(q.URL), Attributes: map[string]string{"Policy": "{}"}})
	refusedBy(t, "SetQueueAttributes on ingest-orders", err, "OnlyHeraldConsumes")
	// The marketing service, allowed to send to its own queue, may not consume orders' either.
	m := s.box.ServicePrincipals("marketing")[0]
	_, err = s.box.SQSClient(m).PurgeQueue(ctx, &awssqs.PurgeQueueInput{QueueUrl: aws.String(q.URL)})
	refusedBy(t, "marketing's PurgeQueue on ingest-orders", err, "OnlyHeraldConsumes")
}

// foreignSchedule: a role that may create schedules and pass any role arms one in another
// group, sending into the orders ingest queue as Herald's scheduler role. The schedule is
// created (its own rights allow that), but EventBridge Scheduler cannot assume the role for it:
// the role trusts only schedules of the environment's group.
func (s *scenarios) foreignSchedule(t *testing.T) {
	who := s.intruder()
	role := s.schedulerRole(t)
	c := awsscheduler.NewFromConfig(s.box.AWSConfig(who), func(o *awsscheduler.Options) { o.BaseEndpoint = aws.String(s.box.Endpoint("SCHEDULER")) })
	at := s.box.SchedulerNow().Add(2 * time.Minute).UTC()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := `{"fire":"n_forged","at":"` + at.Format(time.RFC3339) + `"}`
	_, err := c.CreateSchedule(ctx, &awsscheduler.CreateScheduleInput{
		Name: aws.String("stackbox-foreign"), GroupName: aws.String("default"),
		ScheduleExpression: aws.String("at(" + at.Format("2006-01-02T15:04:05") + ")"),
		FlexibleTimeWindow: &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
		Target:             &schedtypes.Target{Arn: aws.String(s.box.Queue("ingest-orders").ARN), RoleArn: aws.String(role), Input: aws.String(body)},
	})
	if err != nil {
		t.Fatalf("the intruder's CreateSchedule in its own group: %v (its own policy allows it)", err)
	}
	s.box.AdvanceSchedulerClock(3 * time.Minute)
	var refusal string
	waitFor(t, 20*time.Second, "the foreign schedule's fire refused", func() (bool, string) {
		for _, c := range s.box.Calls() {
			if c.Foreign && c.Request.Action == "sts:AssumeRole" && c.Request.Resource == role && !c.Allowed {
				refusal = c.Reason
				return true, ""
			}
		}
		return false, "no refused AssumeRole yet"
	})
	if !strings.Contains(refusal, "implicit deny") && !strings.Contains(refusal, "no statement allows") {
		t.Fatalf("refused for another reason: %s", refusal)
	}
	t.Logf("refused by the scheduler role's trust policy: %s", refusal)
}

// auditTampered: the api role, which writes the notifications table, rewrites and deletes an
// audit entry there; its own AuditLogIsAppendOnly deny refuses both.
func (s *scenarios) auditTampered(t *testing.T) {
	api := s.box.Function("api")
	akid := s.box.ProbeCredentials(api.Role)
	cfg := aws.Config{Region: run.Region, Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: akid, SecretAccessKey: "stackbox-secret"}, nil
	})}
	c := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(s.box.Endpoint("DYNAMODB")) })
	table := "herald-" + s.env(t) + "-notifications"
	key := map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "AUDIT#2026-12-07"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "stackbox"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key,
		UpdateExpression:          aws.String("SET actor = :a"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":a": &ddbtypes.AttributeValueMemberS{Value: "nobody"}}})
	refusedBy(t, "the api role's UpdateItem of an audit entry", err, "AuditLogIsAppendOnly")
	_, err = c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key})
	refusedBy(t, "the api role's DeleteItem of an audit entry", err, "AuditLogIsAppendOnly")
	_, err = c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{table: {
		{DeleteRequest: &ddbtypes.DeleteRequest{Key: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "n_other"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "x"}}}},
		{DeleteRequest: &ddbtypes.DeleteRequest{Key: key}},
	}}})
	refusedBy(t, "the api role's BatchWriteItem with one audit entry among others", err, "AuditLogIsAppendOnly")
	// A role that writes the table but never appends to the log may not even put an entry.
	send := s.box.ProbeCredentials(s.box.Function("send").Role)
	cfg.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: send, SecretAccessKey: "stackbox-secret"}, nil
	})
	c = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(s.box.Endpoint("DYNAMODB")) })
	_, err = c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: key})
	refusedBy(t, "the send role's PutItem of an audit entry", err, "AuditLogIsAppendOnly")
}

// failedCampaignAlert: the bulk prepare queue is down for the state machine, so a campaign's
// dispatch fails after its retries; the campaign fails, campaign_failed goes on the operator
// bus, and its rule delivers it to the alarm topic — allowed by the topic's policy and by the
// topic key's policy for EventBridge, as AWS checks both.
func (s *scenarios) failedCampaignAlert(t *testing.T) {
	s.device(t, "doomed", "fcm-stackbox-doomed")
	s.box.FailQueueSends("prepare-bulk")
	defer s.box.RestoreQueueSends()
	out := s.mustCall(t, 202, "POST", "/v1/campaigns", map[string]any{
		"idempotency_key": "stackbox-campaign-fails", "category": "transactional", "channels": []string{"push"},
		"content":  map[string]any{"title": "Stack in a box", "body": "A campaign that fails"},
		"audience": map[string]any{"sources": []any{map[string]any{"kind": "app_devices", "app": "default"}}},
	})
	id, _ := out["id"].(string)
	waitFor(t, 60*time.Second, "campaign "+id+" FAILED", func() (bool, string) {
		v := s.mustCall(t, 200, "GET", "/v1/campaigns/"+id, nil)
		return v["state"] == "FAILED", fmt.Sprint(v["state"])
	})
	topic := fmt.Sprintf("arn:aws:sns:%s:%s:herald-%s-alarms", run.Region, run.AccountID, s.env(t))
	var got run.Delivery
	waitFor(t, 20*time.Second, "campaign_failed on the alarm topic", func() (bool, string) {
		for _, d := range s.box.TopicDeliveries(topic) {
			if d.DetailType == "Campaign Failed" && strings.Contains(d.Detail, id) {
				got = d
				return true, ""
			}
		}
		return false, fmt.Sprint(len(s.box.TopicDeliveries(topic)), " deliveries")
	})
	var detail map[string]any
	_ = json.Unmarshal([]byte(got.Detail), &detail)
	t.Logf("on-call heard through %s: %v", got.Rule, detail)
	// The key policy was asked, as EventBridge, and said yes.
	asked := false
	for _, c := range s.box.Calls() {
		if c.Request.Principal == "events.amazonaws.com" && strings.HasPrefix(c.Request.Action, "kms:") && c.Allowed {
			asked = true
		}
	}
	if !asked {
		t.Fatal("no KMS call of EventBridge's was checked against the alarm key's policy")
	}
}
