package costbench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/sqs/esm"
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

// poll is one poller of m (internal/sqs/esm). An invocation runs to its end even when the
// pollers stop: Lambda does not cut a running function short.
func (w *world) poll(ctx context.Context, m mapping, p *pollers) {
	esm.Poll(ctx, w.sqs, esm.Mapping{
		QueueURL: w.queueURL(m.queue), QueueARN: w.queueARN(m.queue), Region: region, BatchSize: m.batch, ReportFailures: true,
		Invoke: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			var r events.SQSEventResponse
			raw, err := json.Marshal(ev)
			if err != nil {
				return r, err
			}
			var resp []byte
			w.meter.Invoke(m.function, func() { resp, err = m.handler.Invoke(context.WithoutCancel(ctx), raw) })
			if err != nil {
				return r, fmt.Errorf("%s on %s: %w", m.function, m.queue, err)
			}
			if err := json.Unmarshal(resp, &r); err != nil {
				return r, fmt.Errorf("%s on %s: unreadable response %s", m.function, m.queue, resp)
			}
			return r, nil
		},
		Failed: func(what string, err error) { p.fail(fmt.Errorf("%s %s: %w", what, m.queue, err)) },
	})
}
