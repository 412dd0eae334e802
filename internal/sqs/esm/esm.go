// Package esm plays a Lambda SQS event source mapping against any SQS endpoint, for the tools
// that run the AWS handlers off AWS — the stack in a box (internal/stackbox/run) and the cost
// meter (internal/cost/costbench): receive up to the batch size (long polling, so an empty queue
// answers after a second), invoke the function with the batch as Lambda's SQS event, and delete
// in one DeleteMessageBatch what it did not report failed. A failed invocation leaves the whole
// batch to come back after its visibility timeout.
package esm

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Mapping is one event source mapping's poller.
type Mapping struct {
	QueueURL, QueueARN, Region string
	BatchSize                  int
	// ReportFailures is FunctionResponseTypes ReportBatchItemFailures: the response's
	// batchItemFailures stay on the queue; without it a successful invocation deletes the batch.
	ReportFailures bool
	// Invoke runs the function on a batch. An error fails the whole batch.
	Invoke func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)
	// Failed hears every receive, invocation and delete failure (nil: none).
	Failed func(what string, err error)
	// Enabled, when set, is the mapping's Enabled flag: while it is false nothing is received,
	// and a batch received as it turned false goes back to the queue at once.
	Enabled func() bool
}

// Poll runs m on client until ctx ends.
func Poll(ctx context.Context, client *awssqs.Client, m Mapping) {
	failed := func(what string, err error) {
		if m.Failed != nil && ctx.Err() == nil {
			m.Failed(what, err)
		}
	}
	for ctx.Err() == nil {
		if m.Enabled != nil && !m.Enabled() {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		out, err := client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
			QueueUrl: aws.String(m.QueueURL), MaxNumberOfMessages: int32(min(m.BatchSize, 10)), WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			failed("receive", err)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if len(out.Messages) == 0 {
			continue
		}
		if m.Enabled != nil && !m.Enabled() {
			for _, msg := range out.Messages {
				if _, err := client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(m.QueueURL),
					ReceiptHandle: msg.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
					failed("release", err)
				}
			}
			continue
		}
		ev := events.SQSEvent{}
		for _, msg := range out.Messages {
			ev.Records = append(ev.Records, Record(msg, m.QueueARN, m.Region))
		}
		resp, err := m.Invoke(ctx, ev)
		if err != nil {
			failed("invoke", err)
			continue
		}
		gone := map[string]bool{}
		if m.ReportFailures {
			for _, f := range resp.BatchItemFailures {
				gone[f.ItemIdentifier] = true
			}
		}
		var entries []types.DeleteMessageBatchRequestEntry
		for i, msg := range out.Messages {
			if !gone[aws.ToString(msg.MessageId)] {
				entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msg.ReceiptHandle})
			}
		}
		if len(entries) > 0 {
			// The batch's deletes outlive a stop: what ran is not received again.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if _, err := client.DeleteMessageBatch(dctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.QueueURL), Entries: entries}); err != nil {
				failed("delete", err)
			}
			cancel()
		}
	}
}

// Record is a received message as Lambda hands it to the function.
func Record(m types.Message, queueARN, region string) events.SQSMessage {
	attrs := map[string]events.SQSMessageAttribute{}
	for k, v := range m.MessageAttributes {
		attrs[k] = events.SQSMessageAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType)}
	}
	return events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		Md5OfBody: aws.ToString(m.MD5OfBody), Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes: m.Attributes, MessageAttributes: attrs,
		EventSource: "aws:sqs", EventSourceARN: queueARN, AWSRegion: region,
	}
}
