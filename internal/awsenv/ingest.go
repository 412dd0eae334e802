package awsenv

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"

	"herald/internal/pipeline"
)

// StartIngest is the ingest function's main, returning like StartSQS: every service's ingest
// queue, where a reserved fire for a campaign starts its execution.
func StartIngest() error {
	e, err := Load(context.Background(), Options{})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var campaigns pipeline.CampaignFirer
	switch c, err := e.CampaignControl(); {
	case err != nil:
		return fmt.Errorf("config: %w", err)
	case c != nil:
		campaigns = c
	}
	lambda.Start(e.SQSHandler(func(queue string) pipeline.Handler {
		return e.Pipeline.IngestWithCampaigns(strings.TrimPrefix(queue, "ingest-"), e.Scheduler, campaigns)
	}))
	return nil
}
