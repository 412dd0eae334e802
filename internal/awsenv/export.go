package awsenv

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"herald/internal/api"
	"herald/internal/export"
	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/s3"
)

// Exports' environment: the bucket export files go to (under export.Prefix), and how long a
// download link is valid (a Go duration; default notify.ExportLinkTTL). The export function
// writes there; the admin function presigns links to it. Without the bucket the admin
// function's export routes answer 501.
const (
	EnvExportsBucket = "HERALD_EXPORTS_BUCKET"
	EnvExportLinkTTL = "HERALD_EXPORT_LINK_TTL"
)

// ExportFiles is the exports bucket, or nil when EnvExportsBucket is not set.
func (e *Env) ExportFiles() (*s3.Exports, error) {
	bucket := os.Getenv(EnvExportsBucket)
	if bucket == "" {
		return nil, nil
	}
	client := awss3.NewFromConfig(e.AWS, func(o *awss3.Options) {
		// A test endpoint (AWS_ENDPOINT_URL_S3) serves buckets by path, not by host name.
		o.UsePathStyle = os.Getenv("AWS_ENDPOINT_URL_S3") != ""
	})
	return s3.NewExports(client, awss3.NewPresignClient(client), bucket)
}

// exportLinkTTL reads EnvExportLinkTTL.
func exportLinkTTL() (time.Duration, error) {
	v := os.Getenv(EnvExportLinkTTL)
	if v == "" {
		return notify.ExportLinkTTL, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > 7*24*time.Hour {
		return 0, fmt.Errorf("environment variable %s: want a duration up to 168h, got %q", EnvExportLinkTTL, v)
	}
	return d, nil
}

// withExports adds the export routes' dependencies to o when the exports bucket is configured.
func (e *Env) withExports(o *api.Options) error {
	files, err := e.ExportFiles()
	if err != nil || files == nil {
		return err
	}
	ttl, err := exportLinkTTL()
	if err != nil {
		return err
	}
	o.Exports, o.ExportLinks, o.ExportLinkTTL = e.Store, files, ttl
	// The export queue exists with the bucket (infra/exports.go): its depth and dead letters
	// show with the others'.
	o.Queues = append(o.Queues, notify.QueueExport)
	return nil
}

// StartExport is the export function's main, returning like StartSQS: it builds the export
// jobs named on the export queue into the exports bucket.
func StartExport() error {
	e, err := Load(context.Background(), Options{})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	files, err := e.ExportFiles()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if files == nil {
		return fmt.Errorf("config: environment variable %s is not set", EnvExportsBucket)
	}
	b := export.New(export.Deps{Jobs: e.Store, Deliveries: e.Store, Notifications: e.Store, Suppressions: e.Store, Audit: e.Store, Users: e.Store,
		Addresses: e.Store, Files: files, Logger: e.Log})
	lambda.Start(e.SQSHandler(func(string) pipeline.Handler { return b.Handler() }))
	return nil
}
