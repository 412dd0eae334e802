package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"herald/internal/config"
	"herald/internal/ddb"
	"herald/internal/notify"
)

// Export files (README "Exports"): the admin function records a job and sends its id to the
// export queue; functions/export streams the rows into a multipart upload in the exports bucket,
// under exports/, completed only once whole; the admin function presigns a GetObject link to it
// (valid 15 minutes), which acts with the admin role's rights — so that role may read exports/*
// and nothing else there. Objects expire after 7 days, with the jobs; incomplete uploads of a
// crashed worker after one day. All of it exists only once functions/export does.

const (
	exportFunction    = "export"
	exportsPrefix     = "exports/" // internal/export.Prefix
	exportsExpiryDays = 7          // notify.ExportRetention
)

// addExportQueue adds the export queue (before addFunctions, which maps it to its consumer like
// every stage queue: batch 1, partial batch failures, DLQ after 5 receives, age and DLQ alarms
// with the bulk lane's thresholds).
func (h *herald) addExportQueue() {
	if !slices.Contains(h.props.Functions, exportFunction) {
		return
	}
	h.addQueue(&stageQueue{logical: notify.QueueExport, kind: "bulk", consumer: exportFunction, batch: 1, maxConc: 2},
		6*h.settings.Function(exportFunction).Timeout.D(), config.DefaultConsumer.MaxReceiveCount)
}

// exportsBucketName is the bucket's name, unique by account and region, fitted like the lists
// bucket's.
func (h *herald) exportsBucketName() string {
	room := maxBucketName - len("herald--exports--") - 12 - maxRegionName
	return fmt.Sprintf("herald-%s-exports-%s-%s", fit(h.env, room), *h.stack.Account(), *h.stack.Region())
}

// addExports creates the exports bucket and grants the export and admin functions their part.
func (h *herald) addExports() {
	fn, ok := h.functions[exportFunction]
	if !ok {
		return
	}
	name := h.exportsBucketName()
	h.exportsBucket = awss3.NewBucket(h.stack, jsii.String("ExportsBucket"), &awss3.BucketProps{
		BucketName:        jsii.String(name),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		RemovalPolicy:     h.removal(), // objects expire within days; an emptied bucket goes with the stack (dev)
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("expire-exports"),
			Expiration:                          awscdk.Duration_Days(jsii.Number(exportsExpiryDays)),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}},
	})
	objects := fmt.Sprintf("arn:%s:s3:::%s/%s*", *h.stack.Partition(), name, exportsPrefix)
	jobs := func(role awsiam.Role, sid string) {
		// Export jobs live in the notifications table under EXPORT#<id>: every write of a job is
		// a conditional PutItem, on those keys only.
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String(sid),
			Actions:   jsii.Strings("dynamodb:PutItem"),
			Resources: &[]*string{h.tables["notifications"].TableArn()},
			Conditions: &map[string]any{"ForAllValues:StringLike": map[string]any{
				"dynamodb:LeadingKeys": []string{ddb.ExportKeyPrefix + "*"},
			}},
		}))
	}

	// The worker: write objects under exports/ (a multipart upload is s3:PutObject, plus abort),
	// nothing else in the bucket, never read or delete.
	worker := h.roles[exportFunction]
	worker.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("WriteExportFiles"),
		Actions:   jsii.Strings("s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"),
		Resources: &[]*string{jsii.String(objects)},
	}))
	jobs(worker, "ExportJobs")
	// A suppressions export pages the whole suppressions table with Scan (no index serves it:
	// the table is keyed by address hash for prepare's lookups), so it gets Scan rather than the
	// table's read grant; a user export's BatchGetItem of its user's address hashes is in the
	// function's wiring (functions.go).
	worker.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("ScanSuppressionsForExports"),
		Actions:   jsii.Strings("dynamodb:Scan"),
		Resources: &[]*string{h.tables["suppressions"].TableArn()},
	}))
	fn.AddEnvironment(jsii.String("HERALD_EXPORTS_BUCKET"), jsii.String(name), nil)

	// The admin function: records jobs, queues them (wiring), and presigns GetObject links.
	if admin, ok := h.functions[adminFunction]; ok {
		role := h.roles[adminFunction]
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("PresignExportDownloads"),
			Actions:   jsii.Strings("s3:GetObject"),
			Resources: &[]*string{jsii.String(objects)},
		}))
		jobs(role, "CreateAndCancelExports")
		admin.AddEnvironment(jsii.String("HERALD_EXPORTS_BUCKET"), jsii.String(name), nil)
		admin.AddEnvironment(jsii.String("HERALD_EXPORT_LINK_TTL"), jsii.String(h.settings.ExportLinkTTL().String()), nil)
	}

	awscdk.NewCfnOutput(h.stack, jsii.String("ExportsBucketName"), &awscdk.CfnOutputProps{
		Value:       jsii.String(name),
		Description: jsii.String("Export files, under " + exportsPrefix + ", kept " + fmt.Sprint(exportsExpiryDays) + " days"),
	})
}

// exportLinkTTLDefault is how long a presigned download link is valid unless
// exports.link_ttl says otherwise.
const exportLinkTTLDefault = 15 * time.Minute
