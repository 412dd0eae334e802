package sqs

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"herald/internal/notify"
	"herald/internal/pipeline"
)

// Glue runs a stage on the batch a Lambda SQS event source mapping delivers, and settles each
// message as the local runtime's worker does (internal/local): a retryable failure comes back
// after pipeline.Settle's backoff, a permanent one is copied to the DLQ with its reason and
// deleted. The mapping must have ReportBatchItemFailures on; it deletes the messages the
// response does not list.
type Glue struct {
	Queue     notify.Queue // for the DLQ copy, ChangeVisibility and Delete
	QueueName string       // logical name of the queue the mapping reads
	DLQName   string       // logical name of its DLQ
	RetryBase time.Duration
	RetryMax  time.Duration
	Logger    *slog.Logger // nil: slog.Default()
	// Events hears of every message dead-lettered (message_dead_lettered); nil: none.
	Events notify.Events
}

// Handle runs h on ev's records and returns the partial batch response. It returns an error
// only for an event that is not an SQS batch (CheckEvent) — the invocation fails and nothing is
// deleted or acknowledged — and otherwise never: an error would fail, and retry, the whole
// batch. It recovers from a panic in h by failing every record. Every listed record is either
// retried (visible again after its backoff) or already dead-lettered and deleted: listing the
// latter costs nothing, since the mapping deletes only unlisted messages, and makes the
// response name exactly the records that did not succeed. Logs carry message ids, codes and
// reasons, never bodies.
func (g *Glue) Handle(ctx context.Context, ev events.SQSEvent, h pipeline.Handler) (events.SQSEventResponse, error) {
	log := g.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("queue", g.QueueName)
	if err := CheckEvent(ev); err != nil {
		log.Error("invoked with an event that is not an SQS batch; failing the invocation", "error", err.Error())
		return events.SQSEventResponse{}, err
	}
	base, maxDelay := g.RetryBase, g.RetryMax
	if base <= 0 {
		base = time.Second
	}
	if maxDelay <= 0 {
		maxDelay = 5 * time.Minute
	}
	maxDelay = min(maxDelay, maxVisibility)

	msgs := make([]notify.Message, len(ev.Records))
	for i, r := range ev.Records {
		msgs[i] = fromRecord(r)
	}
	failed := map[string]error{}
	for _, f := range pipeline.Run(ctx, h, msgs, log) {
		failed[f.MessageID] = f.Err
	}
	var resp events.SQSEventResponse
	for _, m := range msgs {
		err, ok := failed[m.ID]
		if !ok {
			continue
		}
		delete(failed, m.ID) // a record listed twice in the event is settled once
		if err == nil {
			continue
		}
		pipeline.SettleFailed(ctx, g.Queue, g.QueueName, g.DLQName, m, err, base, maxDelay, log, g.Events)
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.ID})
	}
	for id := range failed {
		log.Warn("stage reported a failure for a message not in the batch", "message_id", id)
	}
	return resp, nil
}

// CheckEvent reports an error unless ev is what an SQS event source mapping delivers: a Records
// list (empty is a valid, empty batch) whose every record has eventSource "aws:sqs" and a
// messageId. Anything else — an SNS or S3 envelope from a function subscribed or notified
// directly, a test invocation with {} — would otherwise decode into records without ids, be
// handed to the stage as empty messages and reported as done, and so be lost without a trace.
// The error (EINVALID) names what the event was.
func CheckEvent(ev events.SQSEvent) error {
	if ev.Records == nil {
		return notify.Errorf(notify.EINVALID, "sqs: the event has no Records list; an SQS function takes SQS event source mapping batches only")
	}
	for i, r := range ev.Records {
		switch {
		case r.EventSource != "aws:sqs":
			what := "no eventSource"
			if r.EventSource != "" {
				what = fmt.Sprintf("eventSource %q", r.EventSource)
				if svc, ok := strings.CutPrefix(r.EventSource, "aws:"); ok {
					what += " (an event from " + strings.ToUpper(svc) + ")"
				}
			}
			return notify.Errorf(notify.EINVALID, "sqs: Records[%d] has %s, want \"aws:sqs\"; an SQS function takes SQS event source mapping batches only", i, what)
		case r.MessageId == "":
			return notify.Errorf(notify.EINVALID, "sqs: Records[%d] has no messageId; an SQS function takes SQS event source mapping batches only", i)
		}
	}
	return nil
}

// fromRecord converts a Lambda SQS record; String and Number attributes become Attributes.
func fromRecord(r events.SQSMessage) notify.Message {
	m := newMessage(r.MessageId, r.ReceiptHandle, r.Body, r.Attributes)
	for k, v := range r.MessageAttributes {
		if v.StringValue != nil && isTextType(v.DataType) {
			if m.Attributes == nil {
				m.Attributes = map[string]string{}
			}
			m.Attributes[k] = *v.StringValue
		}
	}
	return m
}
