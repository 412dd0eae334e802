package run

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Mapping is an AWS::Lambda::EventSourceMapping on an SQS queue.
type Mapping struct {
	LogicalID      string
	Function       *Function
	Queue          Queue
	BatchSize      int
	MaxConcurrency int
	ReportFailures bool
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

// poll receives batches and invokes the function until the box closes.
func (b *Box) poll(m Mapping, client *awssqs.Client) {
	ctx := b.ctx
	for ctx.Err() == nil {
		out, err := client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
			QueueUrl: aws.String(m.Queue.URL), MaxNumberOfMessages: int32(min(m.BatchSize, 10)), WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			if ctx.Err() == nil {
				b.log.Error("stackbox: receive", "mapping", m.LogicalID, "error", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		if len(out.Messages) == 0 {
			continue
		}
		ev := events.SQSEvent{}
		for _, msg := range out.Messages {
			ev.Records = append(ev.Records, record(m.Queue, msg))
		}
		resp, err := m.Function.Invoke(ctx, ev)
		if err != nil {
			// The whole batch stays: its messages return after the visibility timeout.
			b.log.Warn("stackbox: invocation failed", "function", m.Function.Name, "queue", m.Queue.Name, "error", err)
			continue
		}
		failed := map[string]bool{}
		if m.ReportFailures && len(resp) > 0 && string(resp) != "null" {
			var r events.SQSEventResponse
			if err := json.Unmarshal(resp, &r); err != nil {
				b.log.Warn("stackbox: unreadable batch response: the batch fails", "function", m.Function.Name, "response", string(resp))
				continue
			}
			for _, f := range r.BatchItemFailures {
				failed[f.ItemIdentifier] = true
			}
		}
		var entries []types.DeleteMessageBatchRequestEntry
		for i, msg := range out.Messages {
			if !failed[aws.ToString(msg.MessageId)] {
				entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msg.ReceiptHandle})
			}
		}
		if len(entries) > 0 {
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if _, err := client.DeleteMessageBatch(dctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.Queue.URL), Entries: entries}); err != nil {
				b.log.Error("stackbox: delete", "queue", m.Queue.Name, "error", err)
			}
			cancel()
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// record is a received message as Lambda hands it to the function.
func record(q Queue, m types.Message) events.SQSMessage {
	attrs := map[string]events.SQSMessageAttribute{}
	for k, v := range m.MessageAttributes {
		attrs[k] = events.SQSMessageAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType)}
	}
	return events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		Md5OfBody: aws.ToString(m.MD5OfBody), Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes: m.Attributes, MessageAttributes: attrs,
		EventSource: "aws:sqs", EventSourceARN: q.ARN, AWSRegion: Region,
	}
}
