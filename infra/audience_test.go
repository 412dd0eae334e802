package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

func TestAudienceListsBucket(t *testing.T) {
	for _, env := range []string{"dev", "prod"} {
		t.Run(env, func(t *testing.T) {
			s := synth(t, env)
			var buckets []string
			for _, b := range s.ofType("AWS::S3::Bucket") {
				if strings.Contains(mustJSON(s.props(b)["BucketName"]), "-lists-") {
					buckets = append(buckets, b)
				}
			}
			if len(buckets) != 1 {
				t.Fatalf("%d buckets, want the lists bucket", len(buckets))
			}
			p := s.props(buckets[0])
			for k, want := range map[string]string{
				"BucketEncryption":               `{"ServerSideEncryptionConfiguration":[{"ServerSideEncryptionByDefault":{"SSEAlgorithm":"AES256"}}]}`,
				"PublicAccessBlockConfiguration": `{"BlockPublicAcls":true,"BlockPublicPolicy":true,"IgnorePublicAcls":true,"RestrictPublicBuckets":true}`,
			} {
				if got := mustJSON(p[k]); got != want {
					t.Errorf("%s = %s, want %s", k, got, want)
				}
			}
			if lc := mustJSON(p["LifecycleConfiguration"]); !strings.Contains(lc, `"ExpirationInDays":7`) {
				t.Errorf("lifecycle %s: want expiry after 7 days", lc)
			}
			nc := p["NotificationConfiguration"].(map[string]any)["QueueConfigurations"].([]any)
			if len(nc) != 1 || !strings.Contains(mustJSON(nc[0]), `"Value":"lists/"`) || ref(nc[0].(map[string]any)["Queue"]) == "" {
				t.Errorf("notifications %s: want ObjectCreated under lists/ to the audience queue", mustJSON(nc))
			}
			queue := ref(nc[0].(map[string]any)["Queue"])
			if name := s.props(queue)["QueueName"]; name != "herald-"+env+"-audience" {
				t.Errorf("notified queue %v, want herald-%s-audience", name, env)
			}
			// TLS only, on the bucket's policy.
			s.template.HasResourceProperties(jsii.String("AWS::S3::BucketPolicy"), map[string]any{
				"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
					"Effect": "Deny", "Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
				})})},
			})
			// Only S3, from this account's bucket, may send to the queue.
			s.template.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), map[string]any{
				"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
					"Effect": "Allow", "Action": "sqs:SendMessage", "Principal": map[string]any{"Service": "s3.amazonaws.com"},
					"Condition": assertions.Match_ObjectLike(&map[string]any{"ArnLike": assertions.Match_AnyValue(), "StringEquals": assertions.Match_AnyValue()}),
				})})},
			})
			fn := s.idByProp(t, "AWS::Lambda::Function", "FunctionName", "herald-"+env+"-audience")
			fp := s.props(fn)
			if num(fp["Timeout"]) != 900 {
				t.Errorf("audience timeout %v, want 900", fp["Timeout"])
			}
			if _, ok := fp["Environment"].(map[string]any)["Variables"].(map[string]any)["HERALD_AUDIENCE_BUCKET"]; !ok {
				t.Error("HERALD_AUDIENCE_BUCKET is not set")
			}
			// The role reads objects under lists/ only and writes nothing to S3.
			role := ref(fp["Role"])
			var s3Statements []string
			for _, r := range s.resources {
				pp, _ := r["Properties"].(map[string]any)
				if r["Type"] != "AWS::IAM::Policy" || !slices.ContainsFunc(list(pp["Roles"]), func(v any) bool { return ref(v) == role }) {
					continue
				}
				for _, st := range list(pp["PolicyDocument"].(map[string]any)["Statement"]) {
					if j := mustJSON(st); strings.Contains(j, `"s3:`) {
						s3Statements = append(s3Statements, j)
					}
				}
			}
			if len(s3Statements) != 1 || !strings.Contains(s3Statements[0], `/lists/*`) || strings.Contains(s3Statements[0], "Put") || strings.Contains(s3Statements[0], "Delete") {
				t.Errorf("audience role's S3 statements %v, want one GetObject on lists/*", s3Statements)
			}
			ids := s.ofType("AWS::Lambda::EventSourceMapping")
			found := false
			for _, id := range ids {
				if ref(s.props(id)["FunctionName"]) == fn {
					found = num(s.props(id)["BatchSize"]) == 1
				}
			}
			if !found {
				t.Error("no event source mapping of batch 1 from the audience queue")
			}
			errs := assertions.Annotations_FromStack(s.stack).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
			for _, m := range *errs {
				t.Errorf("cdk-nag: %s: %v", *m.Id, m.Entry.Data)
			}
		})
	}
}
