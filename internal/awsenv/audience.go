package awsenv

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"herald/internal/audience"
	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/s3"
	"herald/internal/sqs"
)

// EnvAudienceBucket is the S3 bucket audience lists are uploaded to (the audience function only);
// events from any other bucket are dead-lettered.
const EnvAudienceBucket = "HERALD_AUDIENCE_BUCKET"

// AudienceQueue is the queue S3 sends the lists bucket's ObjectCreated events to.
const AudienceQueue = "audience"

// AudienceImporter builds the importer from the function's environment: the bucket's objects on
// S3, the lists and the import markers in the DynamoDB store.
func (e *Env) AudienceImporter() (*audience.Importer, error) {
	bucket := os.Getenv(EnvAudienceBucket)
	if bucket == "" {
		return nil, fmt.Errorf("environment variable %s is not set", EnvAudienceBucket)
	}
	objects, err := s3.NewObjects(awss3.NewFromConfig(e.AWS), bucket)
	if err != nil {
		return nil, err
	}
	services := map[string]bool{}
	for _, s := range e.Config.Services {
		services[s.Name] = true
	}
	return &audience.Importer{Objects: objects, Lists: e.Store, Markers: e.Store, Source: bucket,
		Services: services, Log: e.Log, Now: time.Now}, nil
}

// AudienceStage is the pipeline stage for the audience queue: each message is an S3 event
// notification for the importer's bucket (im.Source), each created object imported once.
func AudienceStage(im *audience.Importer) pipeline.Handler {
	return func(ctx context.Context, msgs []notify.Message) []pipeline.ItemFailure {
		var out []pipeline.ItemFailure
		for _, m := range msgs {
			if err := importObjects(ctx, im, m.Body); err != nil {
				out = append(out, pipeline.ItemFailure{MessageID: m.ID, Err: err})
			}
		}
		return out
	}
}

func importObjects(ctx context.Context, im *audience.Importer, body []byte) error {
	objs, err := s3.ObjectsCreated(body, im.Source)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := im.Import(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// AudienceHandler is the audience function's handler: S3 event notifications from the
// audience queue, settled by the same SQS glue as every stage (partial batch failures, backoff,
// immediate dead-lettering of what can never succeed).
func (e *Env) AudienceHandler(im *audience.Importer) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	urlPrefix := os.Getenv(EnvQueueURLPrefix)
	q := sqs.New(awssqs.NewFromConfig(e.AWS), map[string]string{
		AudienceQueue: urlPrefix + AudienceQueue, notify.DLQName(AudienceQueue): urlPrefix + notify.DLQName(AudienceQueue),
	})
	g := &sqs.Glue{Queue: q, QueueName: AudienceQueue, DLQName: notify.DLQName(AudienceQueue),
		RetryBase: e.Config.Retry.Base.D(), RetryMax: e.Config.Retry.Max.D(), Logger: e.Log, Events: e.Events}
	stage := AudienceStage(im)
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		resp, err := g.Handle(ctx, ev, stage)
		if resp.BatchItemFailures == nil {
			resp.BatchItemFailures = []events.SQSBatchItemFailure{} // "nothing failed"
		}
		return resp, err
	}
}

// StartAudience is the audience function's main, returning like StartSQS: only when the
// environment is wrong, before lambda.Start.
func StartAudience() error {
	e, err := Load(context.Background(), Options{})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	im, err := e.AudienceImporter()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	lambda.Start(e.AudienceHandler(im))
	return nil
}
