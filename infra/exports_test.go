package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// roleStatements returns the JSON of every statement of the IAM policies attached to role.
func (s *synthesis) roleStatements(role string) []string {
	var out []string
	for _, r := range s.resources {
		pp, _ := r["Properties"].(map[string]any)
		if r["Type"] != "AWS::IAM::Policy" || !slices.ContainsFunc(list(pp["Roles"]), func(v any) bool { return ref(v) == role }) {
			continue
		}
		for _, st := range list(pp["PolicyDocument"].(map[string]any)["Statement"]) {
			out = append(out, mustJSON(st))
		}
	}
	return out
}

// TestExportsBucketQueueAndFunction: the exports bucket is encrypted, blocks public access,
// refuses plain HTTP and expires objects after 7 days (incomplete uploads after 1); the export
// queue has its DLQ and alarms; the export function consumes it and may write only under
// exports/ (and never read or delete there); the admin function may send to the queue and read
// under exports/ only, for its presigned links. The export function may Scan the suppressions
// table and do nothing else with it.
func TestExportsBucketQueueAndFunction(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		env := s.env.Name
		var bucket string
		for _, b := range s.ofType("AWS::S3::Bucket") {
			if strings.Contains(mustJSON(s.props(b)["BucketName"]), "-exports-") {
				bucket = b
			}
		}
		if bucket == "" {
			t.Fatal("no exports bucket")
		}
		p := s.props(bucket)
		for k, want := range map[string]string{
			"BucketEncryption":               `{"ServerSideEncryptionConfiguration":[{"ServerSideEncryptionByDefault":{"SSEAlgorithm":"AES256"}}]}`,
			"PublicAccessBlockConfiguration": `{"BlockPublicAcls":true,"BlockPublicPolicy":true,"IgnorePublicAcls":true,"RestrictPublicBuckets":true}`,
		} {
			if got := mustJSON(p[k]); got != want {
				t.Errorf("%s = %s, want %s", k, got, want)
			}
		}
		if lc := mustJSON(p["LifecycleConfiguration"]); !strings.Contains(lc, `"ExpirationInDays":7`) || !strings.Contains(lc, `"DaysAfterInitiation":1`) {
			t.Errorf("lifecycle %s: want expiry after 7 days and incomplete uploads aborted after 1", lc)
		}
		tlsOnly := false
		for _, id := range s.ofType("AWS::S3::BucketPolicy") {
			pp := s.props(id)
			if ref(pp["Bucket"]) == bucket && strings.Contains(mustJSON(pp["PolicyDocument"]), `"Condition":{"Bool":{"aws:SecureTransport":"false"}},"Effect":"Deny"`) {
				tlsOnly = true
			}
		}
		if !tlsOnly {
			t.Error("the exports bucket's policy does not deny plain HTTP")
		}

		queue := s.idByProp(t, "AWS::SQS::Queue", "QueueName", "herald-"+env+"-export")
		dlq := s.idByProp(t, "AWS::SQS::Queue", "QueueName", "herald-"+env+"-export-dlq")
		if rp := mustJSON(s.props(queue)["RedrivePolicy"]); !strings.Contains(rp, dlq) || !strings.Contains(rp, `"maxReceiveCount":5`) {
			t.Errorf("export queue redrive %s, want its DLQ after 5 receives", rp)
		}
		alarmsOn := func(q string) int {
			n := 0
			for _, a := range s.ofType("AWS::CloudWatch::Alarm") {
				if strings.Contains(mustJSON(s.props(a)["Dimensions"]), q) {
					n++
				}
			}
			return n
		}
		if alarmsOn(queue) == 0 || alarmsOn(dlq) == 0 {
			t.Errorf("alarms on the export queue %d, on its DLQ %d: want both", alarmsOn(queue), alarmsOn(dlq))
		}

		fn := s.idByProp(t, "AWS::Lambda::Function", "FunctionName", "herald-"+env+"-export")
		fp := s.props(fn)
		if _, ok := fp["Environment"].(map[string]any)["Variables"].(map[string]any)["HERALD_EXPORTS_BUCKET"]; !ok {
			t.Error("HERALD_EXPORTS_BUCKET is not set on the export function")
		}
		mapped := false
		for _, id := range s.ofType("AWS::Lambda::EventSourceMapping") {
			mp := s.props(id)
			if ref(mp["FunctionName"]) == fn && ref(mp["EventSourceArn"]) == queue {
				mapped = num(mp["BatchSize"]) == 1
			}
		}
		if !mapped {
			t.Error("no event source mapping of batch 1 from the export queue to the export function")
		}
		var s3w []string
		for _, st := range s.roleStatements(ref(fp["Role"])) {
			if strings.Contains(st, `"s3:`) {
				s3w = append(s3w, st)
			}
			if strings.Contains(st, `"dynamodb:PutItem"`) && !strings.Contains(st, "EXPORT#*") && !strings.Contains(st, "dynamodb:BatchWriteItem") {
				t.Errorf("export role writes the table beyond its jobs: %s", st)
			}
			if strings.Contains(st, "dynamodb:BatchWriteItem") || strings.Contains(st, "dynamodb:DeleteItem") || strings.Contains(st, "dynamodb:UpdateItem") {
				t.Errorf("export role may change other items: %s", st)
			}
		}
		// Suppressions exports scan the suppressions table, and a user export looks up its user's
		// address hashes: Scan and BatchGetItem, and no other access to it.
		supp := s.idByProp(t, "AWS::DynamoDB::Table", "TableName", "herald-"+env+"-suppressions")
		var suppActions []string
		for _, st := range s.roleStatements(ref(fp["Role"])) {
			if strings.Contains(st, `"`+supp+`"`) {
				var one struct{ Action any }
				if err := json.Unmarshal([]byte(st), &one); err != nil {
					t.Fatal(err)
				}
				suppActions = append(suppActions, fmt.Sprint(one.Action))
			}
		}
		slices.Sort(suppActions)
		if !slices.Equal(suppActions, []string{"dynamodb:BatchGetItem", "dynamodb:Scan"}) {
			t.Errorf("export role's actions on the suppressions table %v, want dynamodb:BatchGetItem and dynamodb:Scan alone", suppActions)
		}
		if len(s3w) != 1 || !strings.Contains(s3w[0], `/exports/*`) || !strings.Contains(s3w[0], "s3:PutObject") ||
			strings.Contains(s3w[0], "GetObject") || strings.Contains(s3w[0], "Delete") {
			t.Errorf("export role's S3 statements %v, want one write under exports/*", s3w)
		}

		admin := s.idByProp(t, "AWS::Lambda::Function", "FunctionName", "herald-"+env+"-admin")
		vars := s.props(admin)["Environment"].(map[string]any)["Variables"].(map[string]any)
		if vars["HERALD_EXPORT_LINK_TTL"] != "15m0s" || vars["HERALD_EXPORTS_BUCKET"] == nil {
			t.Errorf("admin environment %v: want the bucket and a 15m link TTL", vars)
		}
		var adminS3 []string
		sendsExport := false
		for _, st := range s.roleStatements(ref(s.props(admin)["Role"])) {
			if strings.Contains(st, `"s3:`) {
				adminS3 = append(adminS3, st)
			}
			if strings.Contains(st, "sqs:SendMessage") && strings.Contains(st, queue) {
				sendsExport = true
			}
		}
		if len(adminS3) != 1 || !strings.Contains(adminS3[0], `"s3:GetObject"`) || !strings.Contains(adminS3[0], `/exports/*`) || strings.Contains(adminS3[0], "Put") {
			t.Errorf("admin role's S3 statements %v, want GetObject under exports/* only", adminS3)
		}
		if !sendsExport {
			t.Error("the admin role may not send to the export queue")
		}
		s.template.HasOutput(jsii.String("ExportsBucketName"), map[string]any{})
		errs := assertions.Annotations_FromStack(s.stack).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
		for _, m := range *errs {
			t.Errorf("cdk-nag: %s: %v", *m.Id, m.Entry.Data)
		}
	})
}
