// Package costbench measures what Herald's AWS runtime makes AWS bill per recipient: it runs the
// stage handlers the Lambdas run (internal/awsenv) on DynamoDB Local, the SQS, EventBridge and
// Scheduler fakes and the sandbox providers, drives the queues as Lambda's event source mappings
// do and the campaign state machine's own definition on the asl interpreter, counts every
// billable request as AWS bills it (Meter), and prices the counts with internal/cost's table.
// `herald bench cost` prints it.
package costbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	herald "herald/clients/go"
	"herald/internal/cost"
	"herald/internal/notify"
)

// Options say what to measure.
type Options struct {
	DynamoDB string // DynamoDB Local's endpoint
	Sends    int    // single-recipient transactional sends per transactional scenario
	Devices  int    // the campaign's devices
	// Progress receives a line as each step starts; nil: nothing.
	Progress io.Writer
	// Timeout bounds each scenario's wait for its queues to drain; 0: 5 minutes.
	Timeout time.Duration
}

// Scenario is one measured run.
type Scenario struct {
	Title string
	Usage cost.Usage
	Wall  time.Duration
	// StoreWrites is what the functions' ddb.WriteCounter counted in the same run: the items
	// they asked DynamoDB to write.
	StoreWrites int64
	Deliveries  int // what the sandbox received
}

// Result is every scenario and what the figures rest on.
type Result struct {
	Scenarios []Scenario
	Mappings  int // event source mappings of the configuration (idle polling)
}

// The scenarios' titles.
const (
	TitleProducer     = "transactional (SQS producer, push+inbox)"
	TitleProducerPush = "transactional (SQS producer, push)"
	TitleAPI          = "transactional (HTTP API, push+inbox)"
	TitleProducerBulk = "transactional (SQS producer, push+inbox, 10 a message)"
	TitleAPIBatch     = "transactional (HTTP API batch of 10, push+inbox)"
	TitleFanOut       = "transactional fan-out (SQS producer, push, up to 1,000 users a request, realtime lane)"
	TitleCampaign     = "marketing campaign (app_devices, bulk lane, push)"
	TitleClient       = "transactional (producer client, SQS batch, push+inbox)"
)

// fanOutUsers is how many users one request of the fan-out scenario names.
const fanOutUsers = 1000

// perBatch is how many send requests the batch scenarios put in one message or API request.
const perBatch = 10

// Run measures the seven scenarios: Sends single-recipient transactional pushes with the inbox
// channel produced to the ingest queue in SendMessageBatch calls of 10, and as many without the
// inbox; as many with the inbox through the HTTP API; the same two again with 10 requests in a
// message (notify.SendBatch) and in an API request (POST /v1/notifications/batch); the same
// Sends users as transactional pushes of up to 1,000 users each (the realtime lane's stages);
// a campaign to Devices devices.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Sends < 1 || o.Devices < 1 {
		return nil, errors.New("need at least one send and one device")
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", args...)
		}
	}
	m := NewMeter()
	w, err := newWorld(ctx, o.DynamoDB, m)
	if err != nil {
		return nil, err
	}
	defer w.close()
	x, err := newMachines(w)
	if err != nil {
		return nil, err
	}
	control := w.env.CampaignControlWith(x)
	api := lambda.NewHandler(w.env.APIHandler(control))
	ms := w.mappings(control)
	res := &Result{Mappings: len(ms)}
	var queues []string
	for _, mp := range ms {
		queues = append(queues, mp.queue)
	}

	progress("setup: %d users with an FCM device, %d users with a device of app %q and marketing consent (not measured)", o.Sends, o.Devices, campaignApp)
	if err := w.devices(ctx, "cost-user", transactApp, o.Sends, false); err != nil {
		return nil, err
	}
	if err := w.devices(ctx, "cost-member", campaignApp, o.Devices, true); err != nil {
		return nil, err
	}
	run := time.Now().UnixNano()

	measure := func(title string, recipients int, produce func(ctx context.Context) error) error {
		progress("%s: %d recipients", title, recipients)
		m.Reset()
		w0, d0 := w.env.Writes.Writes(), w.sandbox.Recorder.Len()
		start := time.Now()
		p := w.startPollers(ms)
		err := produce(ctx)
		if err == nil {
			err = w.drain(ctx, queues, o.Timeout)
		}
		if perr := p.stop(); err == nil {
			err = perr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", title, err)
		}
		s := Scenario{Title: title, Usage: m.Usage(recipients), Wall: time.Since(start),
			StoreWrites: w.env.Writes.Writes() - w0, Deliveries: w.sandbox.Recorder.Len() - d0}
		if s.Deliveries != recipients {
			return fmt.Errorf("%s: the sandbox received %d pushes, want %d", title, s.Deliveries, recipients)
		}
		if n, err := w.deadLetters(ctx, queues); err != nil || n > 0 {
			return fmt.Errorf("%s: %d messages dead-lettered (%v)", title, n, err)
		}
		res.Scenarios = append(res.Scenarios, s)
		return nil
	}

	// (a) a producer's SendMessageBatch calls of 10 to its ingest queue, with the inbox channel and
	// without.
	produce := func(tag string, channels ...string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			bodies := make([]string, o.Sends)
			for i := range bodies {
				body, _ := json.Marshal(sendRequest(fmt.Sprintf("cost-%d-%s-%d", run, tag, i), i, channels...))
				bodies[i] = string(body)
			}
			return w.produce(ctx, bodies)
		}
	}
	if err := measure(TitleProducer, o.Sends, produce("q", "push", "inbox")); err != nil {
		return nil, err
	}
	if err := measure(TitleProducerPush, o.Sends, produce("p", "push")); err != nil {
		return nil, err
	}

	// (a) the same sends through API Gateway and the api function, a few callers at once.
	if err := measure(TitleAPI, o.Sends, func(ctx context.Context) error {
		return parallel(o.Sends, 4, func(i int) error {
			_, err := w.call(ctx, api, "POST", "/v1/notifications", sendRequest(fmt.Sprintf("cost-%d-a-%d", run, i), i, "push", "inbox"), 202)
			return err
		})
	}); err != nil {
		return nil, err
	}

	// (a) the same with 10 send requests a message (notify.SendBatch), 10 messages a
	// SendMessageBatch call, and 10 a POST /v1/notifications/batch.
	if err := measure(TitleProducerBulk, o.Sends, func(ctx context.Context) error {
		var bodies []string
		for i := 0; i < o.Sends; i += perBatch {
			var b notify.SendBatch
			for j := i; j < min(i+perBatch, o.Sends); j++ {
				raw, _ := json.Marshal(sendRequest(fmt.Sprintf("cost-%d-qb-%d", run, j), j, "push", "inbox"))
				b.Notifications = append(b.Notifications, raw)
			}
			body, _ := json.Marshal(&b)
			bodies = append(bodies, string(body))
		}
		return w.produce(ctx, bodies)
	}); err != nil {
		return nil, err
	}
	if err := measure(TitleAPIBatch, o.Sends, func(ctx context.Context) error {
		for i := 0; i < o.Sends; i += perBatch {
			var reqs []map[string]any
			for j := i; j < min(i+perBatch, o.Sends); j++ {
				reqs = append(reqs, sendRequest(fmt.Sprintf("cost-%d-ab-%d", run, j), j, "push", "inbox"))
			}
			if _, err := w.call(ctx, api, "POST", "/v1/notifications/batch", map[string]any{"notifications": reqs}, 202); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}

	// (a) one transactional push to many users (a service notice): too many recipients for the
	// express path, so it crosses the realtime lane's prepare, send and record.
	if err := measure(TitleFanOut, o.Sends, func(ctx context.Context) error {
		var bodies []string
		for i := 0; i < o.Sends; i += fanOutUsers {
			req := sendRequest(fmt.Sprintf("cost-%d-f-%d", run, i), i, "push")
			var rs []map[string]string
			for j := i; j < min(i+fanOutUsers, o.Sends); j++ {
				rs = append(rs, map[string]string{"user_id": userID("cost-user", j)})
			}
			req["recipients"] = rs
			body, _ := json.Marshal(req)
			bodies = append(bodies, string(body))
		}
		return w.produce(ctx, bodies)
	}); err != nil {
		return nil, err
	}

	// (b) a campaign: created through the API, its state machine run, the bulk lane draining.
	if err := measure(TitleCampaign, o.Devices, func(ctx context.Context) error {
		if _, err := w.call(ctx, api, "POST", "/v1/campaigns", map[string]any{
			"channels":    []string{"push"},
			"content":     map[string]string{"title": "This week only", "body": "Two for one on everything."},
			"audience":    map[string]any{"sources": []map[string]string{{"kind": "app_devices", "app": campaignApp}}},
			"quiet_hours": map[string]bool{"enabled": false},
		}, 202); err != nil {
			return err
		}
		return x.Run(ctx)
	}); err != nil {
		return nil, err
	}

	// (a) the push+inbox sends again through the Go producer client (clients/go): its background
	// batcher gathers callers' sends into SendMessageBatch calls of up to 10.
	if err := measure(TitleClient, o.Sends, func(ctx context.Context) error {
		q := herald.NewSQS(w.sqs, w.queueURL(notify.IngestQueue(service)), service, herald.SQSOptions{})
		err := parallel(o.Sends, 16, func(i int) error {
			r := sendRequest(fmt.Sprintf("cost-%d-c-%d", run, i), i, "push", "inbox")
			_, err := q.Send(ctx, &herald.SendRequest{IdempotencyKey: r["idempotency_key"].(string),
				Channels:   []herald.Channel{herald.Push, herald.Inbox},
				Content:    &herald.Content{Title: "Your order shipped", Body: fmt.Sprintf("Order #%d is on its way.", 1000+i)},
				Recipients: []herald.Recipient{{UserID: userID("cost-user", i)}}})
			return err
		})
		return errors.Join(err, q.Close(ctx))
	}); err != nil {
		return nil, err
	}
	return res, nil
}

// produce sends bodies to the service's ingest queue as a producer does: SendMessageBatch
// calls of 10.
func (w *world) produce(ctx context.Context, bodies []string) error {
	for start := 0; start < len(bodies); start += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i := start; i < min(start+10, len(bodies)); i++ {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(bodies[i])})
		}
		out, err := w.sqs.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(w.queueURL(notify.IngestQueue(service))), Entries: entries})
		if err == nil && len(out.Failed) > 0 {
			err = fmt.Errorf("SendMessageBatch: %d entries failed (%s)", len(out.Failed), aws.ToString(out.Failed[0].Message))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sendRequest is one single-recipient transactional notification on channels to user i.
func sendRequest(key string, i int, channels ...string) map[string]any {
	return map[string]any{
		"idempotency_key": key, "channels": channels,
		"content":    map[string]string{"title": "Your order shipped", "body": fmt.Sprintf("Order #%d is on its way.", 1000+i)},
		"recipients": []map[string]string{{"user_id": userID("cost-user", i)}},
	}
}

func userID(prefix string, i int) string { return fmt.Sprintf("%s-%07d", prefix, i) }

// devices registers n users, one FCM device of app each, straight into the store; with
// marketing, each has consented to marketing (at night too).
func (w *world) devices(ctx context.Context, prefix, app string, n int, marketing bool) error {
	now := time.Now()
	return parallel(n, 8, func(i int) error {
		d := notify.Device{UserID: userID(prefix, i), Platform: notify.PlatformFCM, App: app,
			Token: fmt.Sprintf("%s-%07d-fcm-token-padding-to-a-realistic-length", prefix, i), Environment: "production"}
		if err := w.env.Store.PutDevice(ctx, d); err != nil {
			return fmt.Errorf("register devices: %w", err)
		}
		if !marketing {
			return nil
		}
		if err := w.env.Store.PutPreferences(ctx, notify.Preferences{UserID: d.UserID, MarketingConsent: &now, NightConsent: &now, UpdatedAt: now}); err != nil {
			return fmt.Errorf("marketing consent: %w", err)
		}
		return nil
	})
}

// parallel runs f(0) … f(n-1) on workers goroutines and returns the first error; a worker stops
// at its first.
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// call is one HTTP API request as API Gateway hands it to the api function (payload 2.0, the
// caller's SigV4 identity verified), billed as one API Gateway request and one invocation.
func (w *world) call(ctx context.Context, api lambda.Handler, method, path string, body any, want int) ([]byte, error) {
	b, _ := json.Marshal(body)
	req := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: path, Body: string(b),
		Headers: map[string]string{"content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID:  fmt.Sprintf("bench-%d", time.Now().UnixNano()),
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: principal}},
		},
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out []byte
	start := time.Now()
	w.meter.Invoke("api", func() { out, err = api.Invoke(ctx, raw) })
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	w.meter.HTTPAPIRequest(len(b), AccessLogLine(req.RequestContext.RequestID, "ANY /v1/{proxy+}", principal,
		resp.StatusCode, len(resp.Body), time.Since(start)))
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %d %s, want %d", method, path, resp.StatusCode, resp.Body, want)
	}
	return []byte(resp.Body), nil
}

// drain waits until every queue is empty — nothing visible, in flight or delayed — twice in a
// row, a poll interval apart.
func (w *world) drain(ctx context.Context, queues []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	quiet := 0
	for quiet < 2 {
		if time.Now().After(deadline) {
			n, _ := w.pending(ctx, queues)
			return fmt.Errorf("%d messages still queued after %v", n, timeout)
		}
		time.Sleep(100 * time.Millisecond)
		n, err := w.pending(ctx, queues)
		if err != nil {
			return err
		}
		if n == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return nil
}
