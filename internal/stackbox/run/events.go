package run

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"herald/internal/s3/s3fake"
	"herald/internal/scheduler/schedulerfake"
	"herald/internal/stackbox/iam"
)

// startScheduler fires due schedules every 200ms until the box closes: each target is sent as
// the schedule's role, which the queue's policy and the role's grants must allow.
func (b *Box) startScheduler() {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-b.ctx.Done():
				return
			case now := <-t.C:
				b.FireSchedules(now.Add(time.Duration(b.schedAhead.Load())))
			}
		}
	}()
}

// AdvanceSchedulerClock moves EventBridge Scheduler's clock d ahead of this machine's, so that
// schedules armed at least a minute out (Herald's MinLead) fire now; what the fire names is
// unchanged, so ingest sees a fire that came early, as after a console edit.
func (b *Box) AdvanceSchedulerClock(d time.Duration) { b.schedAhead.Add(int64(d)) }

// SchedulerNow is the scheduler's clock.
func (b *Box) SchedulerNow() time.Time { return time.Now().Add(time.Duration(b.schedAhead.Load())) }

// FireSchedules fires every schedule due at now and returns how many fired.
func (b *Box) FireSchedules(now time.Time) int {
	return b.Sched.Fire(now, func(inv schedulerfake.Invocation) (err error) {
		defer func() {
			b.log.Info("stackbox: schedule fired", "schedule", inv.ScheduleName, "attempt", inv.Attempt, "input", inv.Input, "error", err)
		}()
		q, ok := b.QueueByARN(inv.TargetArn)
		if !ok {
			return fmt.Errorf("schedule %s: target %s is not a queue of the template", inv.ScheduleName, inv.TargetArn)
		}
		// EventBridge Scheduler names the schedule's group as aws:SourceArn when it assumes the
		// schedule's role. A schedule in another group than the template's is someone else's:
		// its refusal is the trust policy doing its job, not a defect.
		group := b.arn("scheduler", "schedule-group/"+inv.GroupName)
		trust := map[string]string{"aws:SourceArn": group, "aws:SourceAccount": AccountID}
		if d := b.IAM.AssumeRole(inv.RoleArn, "scheduler.amazonaws.com", trust); !d.Allowed {
			b.recorder.checkAs("scheduler ("+inv.GroupName+")", iam.Request{Principal: "scheduler.amazonaws.com", Action: "sts:AssumeRole", Resource: inv.RoleArn, Context: trust},
				inv.GroupName != b.scheduleGroup(), &d)
			return fmt.Errorf("scheduler cannot assume %s: %s", inv.RoleArn, d.Reason)
		}
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		defer cancel()
		_, err = b.SQSClient(inv.RoleArn).SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(inv.Input)})
		return err
	})
}

// scheduleGroup is the template's schedule group.
func (b *Box) scheduleGroup() string {
	for _, id := range b.Template.LogicalIDs("AWS::Scheduler::ScheduleGroup") {
		return str(b.Template.Resources[id].Properties["Name"])
	}
	return ""
}

// Publish delivers a message published on an SNS topic of the template to its SQS
// subscriptions, as SNS does: raw, or wrapped in SNS's envelope (envelope is that envelope, as
// the sandbox's SES feedback already is). Each send is authorized as sns.amazonaws.com with the
// topic as aws:SourceArn against the queue's policy.
func (b *Box) Publish(ctx context.Context, topicARN string, envelope []byte) error {
	var env map[string]any
	if err := json.Unmarshal(envelope, &env); err != nil {
		return fmt.Errorf("sns envelope: %w", err)
	}
	env["TopicArn"] = topicARN
	wrapped, _ := json.Marshal(env)
	n := 0
	for _, id := range b.Template.LogicalIDs("AWS::SNS::Subscription") {
		p, err := b.props(id)
		if err != nil {
			return err
		}
		if str(p["TopicArn"]) != topicARN || str(p["Protocol"]) != "sqs" {
			continue
		}
		q, ok := b.QueueByARN(str(p["Endpoint"]))
		if !ok {
			return fmt.Errorf("subscription %s: %s is not a queue of the template", id, str(p["Endpoint"]))
		}
		body := string(wrapped)
		if raw, _ := p["RawMessageDelivery"].(bool); raw || str(p["RawMessageDelivery"]) == "true" {
			body = str(env["Message"])
		}
		if err := b.serviceSend(ctx, "sns.amazonaws.com", topicARN, q, body); err != nil {
			return fmt.Errorf("subscription %s: %w", id, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("topic %s has no SQS subscription", topicARN)
	}
	return nil
}

// serviceSend puts a message on a queue on behalf of an AWS service, if the queue's policy
// lets the service send for source.
func (b *Box) serviceSend(ctx context.Context, service, source string, q Queue, body string) error {
	c := b.recorder.check(service, iam.Request{Principal: service, Action: "sqs:SendMessage", Resource: q.ARN,
		Context: map[string]string{"aws:SourceArn": source, "aws:SourceAccount": AccountID}})
	if !c.Allowed {
		return fmt.Errorf("denied: %s", c.Reason)
	}
	admin, err := b.sqsAdmin()
	if err != nil {
		return err
	}
	_, err = admin.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(body)})
	return err
}

// onBounce is the sandbox's SES feedback: SES publishes it on the configuration set's SNS
// event destination.
func (b *Box) onBounce(envelope []byte) {
	topic, set := b.sesFeedbackTopic()
	if topic == "" {
		b.log.Error("stackbox: SES feedback but no configuration set event destination on SNS")
		return
	}
	// SES publishes for the configuration set: the topic's and its key's policies must let it.
	if err := b.servicePublish("ses", "ses.amazonaws.com", b.arn("ses", "configuration-set/"+set), topic); err != nil {
		b.log.Error("stackbox: SES feedback refused", "error", err)
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if err := b.Publish(ctx, topic, envelope); err != nil {
		b.log.Error("stackbox: SES feedback", "error", err)
	}
}

func (b *Box) sesFeedbackTopic() (topic, configurationSet string) {
	for _, id := range b.Template.LogicalIDs("AWS::SES::ConfigurationSetEventDestination") {
		p, err := b.props(id)
		if err != nil {
			continue
		}
		d, _ := p["EventDestination"].(map[string]any)
		if sns, ok := d["SnsDestination"].(map[string]any); ok {
			return str(sns["TopicARN"]), str(p["ConfigurationSetName"])
		}
	}
	return "", ""
}

// PutObject stores an object in a bucket of the template as principal would (s3:PutObject is
// checked against principal's grants), then delivers the bucket's ObjectCreated notifications
// whose key filters match, as s3.amazonaws.com.
func (b *Box) PutObject(ctx context.Context, principal, bucket, key, content string) error {
	res := "arn:aws:s3:::" + bucket + "/" + key
	if c := b.recorder.check(b.callerName(principal), iam.Request{Principal: principal, Action: "s3:PutObject", Resource: res, ResourceAccount: AccountID}); !c.Allowed {
		return fmt.Errorf("denied: %s", c.Reason)
	}
	b.S3.Put(bucket, key, content)
	// The bucket's own NotificationConfiguration, or CDK's custom resource that sets it.
	var configs []map[string]any
	for _, id := range b.Template.LogicalIDs("") {
		typ := b.Template.Resources[id].Type
		if typ != "AWS::S3::Bucket" && typ != "Custom::S3BucketNotifications" {
			continue
		}
		p, err := b.props(id)
		if err != nil {
			return err
		}
		name := b.Resolver.Resources[id].Ref
		if typ == "Custom::S3BucketNotifications" {
			name = str(p["BucketName"])
		}
		if name != bucket {
			continue
		}
		if nc, ok := p["NotificationConfiguration"].(map[string]any); ok {
			configs = append(configs, nc)
		}
	}
	for _, nc := range configs {
		qcs, _ := nc["QueueConfigurations"].([]any)
		for _, raw := range qcs {
			qc, _ := raw.(map[string]any)
			if ev := str(qc["Event"]); ev != "s3:ObjectCreated:*" && ev != "s3:ObjectCreated:Put" {
				continue
			}
			if !keyMatches(qc["Filter"], key) {
				continue
			}
			q, ok := b.QueueByARN(str(qc["Queue"]))
			if !ok {
				return fmt.Errorf("bucket %s: notification queue %s is not in the template", bucket, str(qc["Queue"]))
			}
			body := s3Event(bucket, key, content)
			if err := b.serviceSend(ctx, "s3.amazonaws.com", "arn:aws:s3:::"+bucket, q, body); err != nil {
				return fmt.Errorf("bucket %s notification: %w", bucket, err)
			}
		}
	}
	return nil
}

func keyMatches(filter any, key string) bool {
	f, _ := filter.(map[string]any)
	k, _ := f["S3Key"].(map[string]any)
	rules, _ := k["Rules"].([]any)
	for _, raw := range rules {
		r, _ := raw.(map[string]any)
		switch strings.ToLower(str(r["Name"])) {
		case "prefix":
			if !strings.HasPrefix(key, str(r["Value"])) {
				return false
			}
		case "suffix":
			if !strings.HasSuffix(key, str(r["Value"])) {
				return false
			}
		}
	}
	return true
}

// s3Event is an S3 event notification for one created object, as S3 sends it to SQS.
func s3Event(bucket, key, content string) string {
	now := time.Now().UTC()
	ev := map[string]any{"Records": []any{map[string]any{
		"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": Region, "eventTime": now.Format("2006-01-02T15:04:05.000Z"),
		"eventName": "ObjectCreated:Put", "userIdentity": map[string]any{"principalId": "AWS:STACKBOX"},
		"s3": map[string]any{"s3SchemaVersion": "1.0", "configurationId": "stackbox",
			"bucket": map[string]any{"name": bucket, "arn": "arn:aws:s3:::" + bucket, "ownerIdentity": map[string]any{"principalId": "STACKBOX"}},
			"object": map[string]any{"key": url.QueryEscape(key), "size": len(content), "eTag": s3fake.ETag(content),
				"versionId": "", "sequencer": fmt.Sprintf("%016X", now.UnixNano())}},
	}}}
	raw, _ := json.Marshal(ev)
	return string(raw)
}
