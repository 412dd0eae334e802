package main

import (
	"fmt"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"herald/internal/config"
)

// Audience lists too large for API Gateway's 10 MB are uploaded to S3 (docs/design.md §4): one
// bucket per environment, objects under lists/<service>/<list id>; S3 notifies the audience queue
// of each created object (S3 → SQS → Lambda, so a failed import is retried with backoff and ends
// in audience-dlq with its alarm, never lost), and functions/audience streams it into the users
// table's list. All of it exists only once functions/audience does.

const (
	audienceFunction = "audience"
	audienceQueue    = "audience" // internal/awsenv.AudienceQueue
	listsPrefix      = "lists/"   // internal/audience.ListsPrefix
	listsExpiryDays  = 7          // an uploaded file is imported within minutes; the list lives in DynamoDB
)

// addAudienceQueue adds the queue S3 notifies (before addFunctions, which maps it to its consumer
// like every stage queue: batch 1, partial batch failures, DLQ after 5 receives, age and DLQ
// alarms with the bulk lane's thresholds).
func (h *herald) addAudienceQueue() {
	if !slices.Contains(h.props.Functions, audienceFunction) {
		return
	}
	h.addQueue(&stageQueue{logical: audienceQueue, kind: "bulk", consumer: audienceFunction, batch: 1, maxConc: 2},
		6*h.settings.Function(audienceFunction).Timeout.D(), config.DefaultConsumer.MaxReceiveCount)
}

// listsBucketName is the bucket's name: account and region make it globally unique. S3 allows
// 63 characters: an env name longer than what is left beside a 12-digit account and the longest
// region is shortened (fit), so any env name the config accepts fits.
func (h *herald) listsBucketName() string {
	room := maxBucketName - len("herald--lists--") - 12 - maxRegionName
	return fmt.Sprintf("herald-%s-lists-%s-%s", fit(h.env, room), *h.stack.Account(), *h.stack.Region())
}

// isolateLists gives each service its own prefix of the lists bucket, lists/<service>/, in the
// bucket policy: the service's iam_principals may upload there (also from another account, which
// needs the bucket's Allow), every other principal is explicitly denied it whatever its own
// policies say, and nobody may write anywhere else in the bucket. A service without
// iam_principals uploads nothing; its lists go through POST /v1/audiences (the API stores
// them under the caller's service).
func (h *herald) isolateLists(bucket awss3.Bucket, arn string) {
	var prefixes []*string
	for _, s := range h.cfg.Services {
		prefix := jsii.String(arn + "/" + listsPrefix + s.Name + "/*")
		prefixes = append(prefixes, prefix)
		principals := make([]*string, 0, len(s.IAMPrincipals))
		for _, p := range s.IAMPrincipals {
			principals = append(principals, jsii.String(p))
		}
		if len(principals) > 0 {
			bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:        jsii.String("ServiceMayUpload" + pascal(s.Name)),
				Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
				Actions:    jsii.Strings("s3:PutObject"),
				Resources:  &[]*string{prefix},
				Conditions: &map[string]any{"ArnLike": map[string]any{"aws:PrincipalArn": principals}},
			}))
		}
		// ArnNotLike with no principals would match nobody: deny outright then.
		deny := &awsiam.PolicyStatementProps{
			Sid:        jsii.String("OnlyServiceUploads" + pascal(s.Name)),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			Actions:    jsii.Strings("s3:PutObject"),
			Resources:  &[]*string{prefix},
		}
		if len(principals) > 0 {
			deny.Conditions = &map[string]any{"ArnNotLike": map[string]any{"aws:PrincipalArn": principals}}
		}
		bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(deny))
	}
	bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:          jsii.String("UploadsOnlyUnderAService"),
		Effect:       awsiam.Effect_DENY,
		Principals:   &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:      jsii.Strings("s3:PutObject"),
		NotResources: &prefixes,
	}))
}

// addAudience creates the lists bucket and connects it to the audience queue and function.
func (h *herald) addAudience() {
	fn, ok := h.functions[audienceFunction]
	if !ok {
		return
	}
	q := h.queueByName[audienceQueue]
	name := h.listsBucketName()
	bucket := awss3.NewBucket(h.stack, jsii.String("ListsBucket"), &awss3.BucketProps{
		BucketName:        jsii.String(name),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		RemovalPolicy:     h.removal(), // objects expire within days; an emptied bucket goes with the stack (dev)
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("expire-uploaded-lists"),
			Expiration:                          awscdk.Duration_Days(jsii.Number(listsExpiryDays)),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}},
	})
	h.listsBucket = bucket
	// The ARN from the name, not from the bucket: the queue policy must exist before the bucket's
	// notification (S3 checks it may send), so it cannot reference the bucket.
	arn := fmt.Sprintf("arn:%s:s3:::%s", *h.stack.Partition(), name)

	q.queue.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("S3ListUploads"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("s3.amazonaws.com"), nil)},
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  &[]*string{q.queue.QueueArn()},
		Conditions: &map[string]interface{}{
			"ArnLike":      map[string]interface{}{"aws:SourceArn": arn},
			"StringEquals": map[string]interface{}{"aws:SourceAccount": h.stack.Account()},
		},
	}))
	// Set on the CloudFormation resource, not with AddEventNotification: that needs a custom
	// resource Lambda, a function outside functions/ with a managed policy.
	cfn := bucket.Node().DefaultChild().(awss3.CfnBucket)
	cfn.AddPropertyOverride(jsii.String("NotificationConfiguration"), map[string]any{
		"QueueConfigurations": []any{map[string]any{
			"Event": "s3:ObjectCreated:*",
			"Queue": q.queue.QueueArn(),
			"Filter": map[string]any{"S3Key": map[string]any{"Rules": []any{
				map[string]any{"Name": "prefix", "Value": listsPrefix},
			}}},
		}},
	})
	cfn.Node().AddDependency(q.queue.Node().FindChild(jsii.String("Policy")))

	// Least privilege: read the uploaded lists, nothing else in the bucket, never write.
	h.roles[audienceFunction].AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("ReadUploadedLists"),
		Actions:   jsii.Strings("s3:GetObject", "s3:GetObjectVersion"),
		Resources: &[]*string{jsii.String(arn + "/" + listsPrefix + "*")},
	}))
	fn.AddEnvironment(jsii.String("HERALD_AUDIENCE_BUCKET"), jsii.String(name), nil)
	h.isolateLists(bucket, arn)

	awscdk.NewCfnOutput(h.stack, jsii.String("ListsBucketName"), &awscdk.CfnOutputProps{
		Value:       jsii.String(name),
		Description: jsii.String("Upload audience lists to s3://<this>/" + listsPrefix + "<service>/<list id>"),
	})
}
