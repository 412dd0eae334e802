package costbench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"herald/internal/notify"
	"herald/internal/pipeline"
)

// mapping is an SQS event source mapping of the stack: a queue, the function it invokes, the
// batch size and maximum concurrency herald.yaml gives it (infra/ deploys the same).
type mapping struct {
	queue, function string
	batch, pollers  int
	handler         lambda.Handler
}

// mappings are the stack's event source mappings over this world's Env: every stage queue's, its
// handler what functions/<stage>/main.go hands to lambda.Start. campaigns serves reserved campaign
// fires arriving on an ingest queue.
func (w *world) mappings(campaigns pipeline.CampaignFirer) []mapping {
	e, cfg := w.env, w.cfg
	var out []mapping
	add := func(queue, function string, c struct{ batch, conc int }, pick func(q string) pipeline.Handler) {
		out = append(out, mapping{queue: queue, function: function, batch: c.batch, pollers: c.conc,
			handler: lambda.NewHandler(e.SQSHandler(pick))})
	}
	type consumer = struct{ batch, conc int }
	for _, s := range cfg.Services {
		add(notify.IngestQueue(s.Name), "ingest", consumer{s.BatchSize, s.MaxConcurrency}, func(q string) pipeline.Handler {
			return e.Pipeline.IngestWithCampaigns(strings.TrimPrefix(q, "ingest-"), e.Scheduler, campaigns)
		})
	}
	for _, lane := range notify.Lanes {
		l := cfg.Lanes[string(lane)]
		add(notify.LaneQueue(notify.StagePrepare, lane), "prepare", consumer{l.Prepare.BatchSize, l.Prepare.MaxConcurrency},
			func(string) pipeline.Handler { return e.Pipeline.Prepare() })
		add(notify.LaneQueue(notify.StageSend, lane), "send", consumer{l.Send.BatchSize, l.Send.MaxConcurrency},
			func(string) pipeline.Handler { return e.Pipeline.Send() })
		add(notify.LaneQueue(notify.StageRecord, lane), "record", consumer{l.Record.BatchSize, l.Record.MaxConcurrency},
			func(string) pipeline.Handler { return e.Pipeline.Record() })
	}
	c := cfg.Stages[notify.StageCleanup]
	add(notify.StageCleanup, "cleanup", consumer{c.BatchSize, c.MaxConcurrency}, func(string) pipeline.Handler { return e.Pipeline.Cleanup() })
	b := cfg.Stages[notify.StageBounce]
	add(notify.StageBounce, "bounce", consumer{b.BatchSize, b.MaxConcurrency}, func(string) pipeline.Handler { return e.Pipeline.Bounce() })
	return out
}

// pollers runs every mapping's pollers as Lambda's do until stop: receive up to the batch size
// (long polling, so an empty queue answers after a second), invoke the function with the batch,
// delete what it did not report failed in one DeleteMessageBatch. A failed invocation leaves
// the whole batch to come back after its visibility timeout.
type pollers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
}

func (w *world) startPollers(ms []mapping) *pollers {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pollers{cancel: cancel}
	for _, m := range ms {
		for range max(1, m.pollers) {
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				w.poll(ctx, m, p)
			}()
		}
	}
	return p
}

// stop ends the pollers and returns the first invocation error they met.
func (p *pollers) stop() error {
	p.cancel()
	p.wg.Wait()
	if len(p.errs) > 0 {
		return p.errs[0]
	}
	return nil
}

func (p *pollers) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, err)
}

func (w *world) poll(ctx context.Context, m mapping, p *pollers) {
	url := w.queueURL(m.queue)
	for ctx.Err() == nil {
		out, err := w.sqs.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: int32(min(m.batch, 10)), WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil || len(out.Messages) == 0 {
			if err != nil && ctx.Err() == nil {
				p.fail(fmt.Errorf("receive from %s: %w", m.queue, err))
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		ev := events.SQSEvent{}
		for _, msg := range out.Messages {
			ev.Records = append(ev.Records, w.record(m.queue, msg))
		}
		raw, err := json.Marshal(ev)
		if err != nil {
			p.fail(err)
			continue
		}
		var resp []byte
		// The invocation runs to its end even when the pollers stop: Lambda does not cut a
		// running function short.
		w.meter.Invoke(m.function, func() { resp, err = m.handler.Invoke(context.WithoutCancel(ctx), raw) })
		if err != nil {
			p.fail(fmt.Errorf("%s on %s: %w", m.function, m.queue, err))
			continue
		}
		var r events.SQSEventResponse
		if err := json.Unmarshal(resp, &r); err != nil {
			p.fail(fmt.Errorf("%s on %s: unreadable response %s", m.function, m.queue, resp))
			continue
		}
		failed := map[string]bool{}
		for _, f := range r.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		var entries []sqstypes.DeleteMessageBatchRequestEntry
		for i, msg := range out.Messages {
			if !failed[aws.ToString(msg.MessageId)] {
				entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msg.ReceiptHandle})
			}
		}
		if len(entries) > 0 {
			if _, err := w.sqs.DeleteMessageBatch(context.WithoutCancel(ctx), &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries}); err != nil {
				p.fail(fmt.Errorf("delete from %s: %w", m.queue, err))
			}
		}
	}
}

// record is a received message as Lambda hands it to the function.
func (w *world) record(queue string, m sqstypes.Message) events.SQSMessage {
	attrs := map[string]events.SQSMessageAttribute{}
	for k, v := range m.MessageAttributes {
		attrs[k] = events.SQSMessageAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType)}
	}
	return events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		Md5OfBody: aws.ToString(m.MD5OfBody), Attributes: m.Attributes, MessageAttributes: attrs,
		EventSource: "aws:sqs", EventSourceARN: w.queueARN(queue), AWSRegion: region,
	}
}
