package run

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"herald/internal/sqs/esm"
)

// Mapping is an AWS::Lambda::EventSourceMapping on an SQS queue.
type Mapping struct {
	LogicalID      string
	Function       *Function
	Queue          Queue
	BatchSize      int
	MaxConcurrency int
	ReportFailures bool
	state          *mappingState // Enabled, as UpdateEventSourceMapping sets it
}

// startMappings starts the pollers of every SQS event source mapping: MaximumConcurrency of
// them (capped by the function's environments), each receiving as the function's role.
func (b *Box) startMappings() error {
	for _, id := range b.Template.LogicalIDs("AWS::Lambda::EventSourceMapping") {
		p, err := b.props(id)
		if err != nil {
			return err
		}
		if enabled, ok := p["Enabled"].(bool); ok && !enabled {
			continue
		}
		q, ok := b.QueueByARN(str(p["EventSourceArn"]))
		if !ok {
			return fmt.Errorf("event source mapping %s: %s is not a queue of the template", id, str(p["EventSourceArn"]))
		}
		f, ok := b.FunctionByARN(str(p["FunctionName"]))
		if !ok {
			return fmt.Errorf("event source mapping %s: function %s is not in the template", id, str(p["FunctionName"]))
		}
		m := Mapping{LogicalID: id, Function: f, Queue: q, BatchSize: num(p["BatchSize"], 10), MaxConcurrency: 1000}
		m.state = b.Mappings.add(b.Resolver.Resources[id].Ref, f.ARN, q.ARN)
		if sc, ok := p["ScalingConfig"].(map[string]any); ok {
			m.MaxConcurrency = num(sc["MaximumConcurrency"], 1000)
		}
		if rt, ok := p["FunctionResponseTypes"].([]any); ok {
			for _, t := range rt {
				m.ReportFailures = m.ReportFailures || t == "ReportBatchItemFailures"
			}
		}
		client := b.SQSClient(f.Role)
		for range min(m.MaxConcurrency, f.max) {
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				b.poll(m, client)
			}()
		}
	}
	return nil
}

// poll receives batches and invokes the function until the box closes (internal/sqs/esm).
func (b *Box) poll(m Mapping, client *awssqs.Client) {
	esm.Poll(b.ctx, client, esm.Mapping{
		QueueURL: m.Queue.URL, QueueARN: m.Queue.ARN, Region: Region, BatchSize: m.BatchSize, ReportFailures: m.ReportFailures,
		Enabled: m.state.enabled.Load,
		Invoke: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			var r events.SQSEventResponse
			resp, err := m.Function.Invoke(ctx, ev)
			if err != nil || !m.ReportFailures || len(resp) == 0 || string(resp) == "null" {
				return r, err
			}
			if err := json.Unmarshal(resp, &r); err != nil {
				return r, fmt.Errorf("unreadable batch response %s: the batch fails", resp)
			}
			return r, nil
		},
		Failed: func(what string, err error) {
			b.log.Warn("stackbox: "+what+" failed", "mapping", m.LogicalID, "function", m.Function.Name, "queue", m.Queue.Name, "error", err)
		},
	})
}
