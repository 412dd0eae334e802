package awsenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"herald/internal/api"
	"herald/internal/campaign"
	"herald/internal/config"
	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/sqs"
)

// SQSHandler returns a Lambda handler for SQS event source mappings: each record's queue is
// taken from its event source ARN, the stage for that queue comes from pick, and the glue
// settles every record exactly as the local runtime's workers do (partial batch failures,
// backoff through the visibility timeout, immediate dead-lettering of permanent failures). An
// event that is not an SQS batch (sqs.CheckEvent: an SNS or S3 envelope, {}) fails the
// invocation before any record is handled.
func (e *Env) SQSHandler(pick func(queue string) pipeline.Handler) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		if err := sqs.CheckEvent(ev); err != nil {
			e.Log.ErrorContext(ctx, "invoked with an event that is not an SQS batch; failing the invocation", "error", err.Error())
			return events.SQSEventResponse{}, err
		}
		if m, ok := e.Metrics.(*emf); ok {
			m.hold() // one line per metric and dimensions for the whole batch
			defer m.release()
		}
		byQueue := map[string][]events.SQSMessage{}
		var order []string
		for _, r := range ev.Records {
			if !e.OwnQueue(r.EventSourceARN) {
				err := fmt.Errorf("record %s comes from %s, not a queue of this environment (%s…)", r.MessageId, r.EventSourceARN, e.queuePrefix)
				e.Log.ErrorContext(ctx, "invoked with a record of another queue; failing the invocation", "error", err.Error())
				return events.SQSEventResponse{}, err
			}
			q := e.LogicalQueue(r.EventSourceARN)
			if _, ok := byQueue[q]; !ok {
				order = append(order, q)
			}
			byQueue[q] = append(byQueue[q], r)
		}
		// An empty list, not null: "nothing failed".
		resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		for _, q := range order {
			g := &sqs.Glue{Queue: e.Queue, QueueName: q, DLQName: notify.DLQName(q),
				RetryBase: e.Config.Retry.Base.D(), RetryMax: e.Config.Retry.Max.D(), Logger: e.Log, Events: e.Events}
			w0 := e.Writes.Writes()
			r, err := g.Handle(ctx, events.SQSEvent{Records: byQueue[q]}, pick(q))
			if n := e.Writes.Writes() - w0; n > 0 && e.Metrics != nil {
				e.Metrics.Add(ctx, MetricStoreWrites, int(n), map[string]string{"Queue": q})
			}
			if err != nil {
				return r, err
			}
			resp.BatchItemFailures = append(resp.BatchItemFailures, r.BatchItemFailures...)
		}
		return resp, nil
	}
}

// MetricStoreWrites is the DynamoDB items one SQS batch of a stage wrote (dimension Queue).
const MetricStoreWrites = "StoreWrites"

// IngestStage picks the ingest handler of the service whose queue a record came from.
func (e *Env) IngestStage(queue string) pipeline.Handler {
	const prefix = "ingest-"
	service := queue
	if len(queue) > len(prefix) && queue[:len(prefix)] == prefix {
		service = queue[len(prefix):]
	}
	return e.Pipeline.Ingest(service, e.Scheduler)
}

// The campaigns the admin function is given in AWS wait for their fires, so POST
// /v1/admin/schedules/rearm re-arms them with the notifications (the scheduler is e.Scheduler for
// both).
var _ api.CampaignRearmer = (*campaign.Control)(nil)

// APIHandler serves the HTTP API behind API Gateway (HTTP API, payload format 2.0) without the
// operator routes, which the admin function serves (AdminHandler); campaigns serves
// /v1/campaigns (nil: 501, as without a campaign state machine).
func (e *Env) APIHandler(campaigns api.Campaigns) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	h := api.New(api.Options{Store: e.Store, Queue: e.Queue, Keys: e.Keys, Logger: e.Log, LogFailuresOnly: true, Authenticate: gatewayAuth(e.Config),
		Campaigns: campaigns, Scheduler: e.Scheduler, Apps: e.Config.ProviderApps(), CursorKey: e.CursorKey, UnsubscribeKey: e.UnsubscribeKey,
		VAPIDPublicKey: e.Config.Providers.WebPush.VAPIDPublicKey, Routes: api.ServiceRoutes, Audit: e.Store, RequestID: gatewayRequestID,
		InboxEvents: e.InboxEvents})
	return gatewayHandler(h)
}

// gatewayHandler serves h to API Gateway HTTP API (payload 2.0) events. An event that is not
// one — no method or no path — fails the invocation: it is no request to answer. A request the
// adapter cannot turn into an http.Request (a body that is not the base64 it says, a path with
// a malformed escape) is a 400 in the API's error shape, not a failed invocation that API
// Gateway would turn into a 500.
func gatewayHandler(h http.Handler) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	proxy := httpadapter.NewV2(h).ProxyWithContext
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if req.RequestContext.HTTP.Method == "" || req.RawPath == "" && req.RequestContext.HTTP.Path == "" {
			return events.APIGatewayV2HTTPResponse{}, notify.Errorf(notify.EINVALID, "not an API Gateway HTTP API request (no method or path)")
		}
		resp, err := proxy(ctx, req)
		if err != nil {
			field := "path"
			if req.IsBase64Encoded && strings.Contains(strings.ToLower(err.Error()), "base64") {
				field = "body"
			}
			b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": notify.EINVALID, "field": field,
				"message": "the request cannot be read: " + err.Error()}})
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusBadRequest, Body: string(b),
				Headers: map[string]string{"Content-Type": "application/json"}}, nil
		}
		return resp, nil
	}
}

// AdminHandler serves the operator routes (/v1/admin/…: queue depths, dead letters, redrive,
// re-arming schedules) behind the same API, for the services marked admin; every other route
// answers 404. Its function's role alone may read and move dead letters. campaigns re-arms
// reserved campaigns (nil: only notifications are re-armed).
func (e *Env) AdminHandler(campaigns api.Campaigns) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	auth := operatorAuth(gatewayAuth(e.Config), os.Getenv(EnvConsoleAdminGroup), os.Getenv(EnvConsoleAdminScope))
	o := api.Options{Store: e.Store, Queue: e.Queue, Keys: e.Keys, Logger: e.Log, Authenticate: auth,
		Admin: e.Queue, Queues: e.Config.QueueNames(), AdminServices: e.Config.AdminServices(), Campaigns: campaigns,
		Scheduler: e.Scheduler, Apps: e.Config.ProviderApps(), CursorKey: e.CursorKey, Routes: api.AdminRoutes,
		Audit: e.Store, RequestID: gatewayRequestID}
	if err := e.withExports(&o); err != nil {
		// A wrong link TTL or bucket is a deployment mistake: say so on every export call
		// rather than take the other operator routes down with it.
		e.Log.Error("exports are not available", "error", err.Error())
	}
	// Pausing a queue's consumers turns its event source mapping off and on.
	if m, err := NewMappings(e.AWS); err != nil {
		e.Log.Error("pausing queues is not available", "error", err.Error())
	} else if m != nil {
		o.Consumers = m
	}
	return gatewayHandler(api.New(o))
}

// StartSQS is a stage function's main: load the environment and serve SQS batches with the
// handler pick chooses. It returns only when the environment is wrong — before lambda.Start —
// and main then exits with that error.
func StartSQS(o Options, pick func(e *Env, queue string) pipeline.Handler) error {
	e, err := Load(context.Background(), o)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	lambda.Start(e.SQSHandler(func(q string) pipeline.Handler { return pick(e, q) }))
	return nil
}

// startWithCampaigns loads the environment and its campaign control (nil without a campaign
// state machine), then serves with start; it returns like StartSQS.
func startWithCampaigns(o Options, start func(e *Env, c *campaign.Control)) error {
	e, err := Load(context.Background(), o)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	c, err := e.CampaignControl()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	start(e, c)
	return nil
}

// orNil is c as the interface I, and a nil I — not an I holding a nil pointer — when c is nil,
// which is how the API and ingest tell "no campaign state machine".
func orNil[I any](c *campaign.Control) I {
	var none I
	if c == nil {
		return none
	}
	return any(c).(I)
}

// StartAPI is the api function's main, returning like StartSQS.
func StartAPI() error {
	return startWithCampaigns(Options{API: true}, func(e *Env, c *campaign.Control) {
		lambda.Start(e.APIHandler(orNil[api.Campaigns](c)))
	})
}

// StartIngest is the ingest function's main, returning like StartSQS: every service's ingest
// queue, where a reserved fire for a campaign starts its execution. senders builds the
// providers' senders, with which ingest sends express notifications (docs/design.md §3).
func StartIngest(senders SenderBuilder) error {
	return startWithCampaigns(Options{Senders: senders}, func(e *Env, c *campaign.Control) {
		campaigns := orNil[pipeline.CampaignFirer](c)
		lambda.Start(e.SQSHandler(func(queue string) pipeline.Handler {
			service, err := IngestService(e.Config, queue)
			if err != nil {
				return pipeline.Refuse(err)
			}
			return e.Pipeline.IngestWithCampaigns(service, e.Scheduler, campaigns)
		}))
	})
}

// IngestService is the service whose ingest queue is queue (a logical name, ingest-<service>).
// The queue names the service a message is accepted for, so a queue of a service that is not
// configured — a mapping added by hand, a forged event — is forbidden: its messages are
// dead-lettered and nothing is sent.
func IngestService(cfg *config.Config, queue string) (string, error) {
	service, ok := strings.CutPrefix(queue, "ingest-")
	if ok {
		for _, s := range cfg.Services {
			if s.Name == service {
				return service, nil
			}
		}
	}
	return "", notify.Errorf(notify.EFORBIDDEN, "ingest: %s is not the ingest queue of a configured service", queue)
}

// StartAdmin is the admin function's main, returning like StartSQS. It reads no API keys: behind
// API Gateway every /v1 call is SigV4-signed, and the caller's role decides the service.
func StartAdmin() error {
	return startWithCampaigns(Options{}, func(e *Env, c *campaign.Control) {
		lambda.Start(e.AdminHandler(orNil[api.Campaigns](c)))
	})
}
