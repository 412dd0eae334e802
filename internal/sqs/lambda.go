package sqs

import (
	"context"
	"log/slog"
	"maps"
	"time"
	"unicode/utf8"

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
}

// Handle runs h on ev's records and returns the partial batch response. It never returns an
// error — that would fail, and retry, the whole batch — and recovers from a panic in h by
// failing every record. Every listed record is either retried (visible again after its
// backoff) or already dead-lettered and deleted: listing the latter costs nothing, since the
// mapping deletes only unlisted messages, and makes the response name exactly the records
// that did not succeed. Logs carry message ids, codes and reasons, never bodies.
func (g *Glue) Handle(ctx context.Context, ev events.SQSEvent, h pipeline.Handler) (events.SQSEventResponse, error) {
	log := g.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("queue", g.QueueName)
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
	for _, f := range g.run(ctx, h, msgs, log) {
		failed[f.MessageID] = f.Err
	}
	var resp events.SQSEventResponse
	for _, m := range msgs {
		err, ok := failed[m.ID]
		if !ok {
			continue
		}
		delete(failed, m.ID) // a record listed twice in the event is settled once
		action, delay := pipeline.Settle(err, m.ReceiveCount, base, maxDelay)
		switch action {
		case pipeline.Done:
			continue
		case pipeline.Retry:
			log.Warn("message will be retried", "message_id", m.ID, "receive_count", m.ReceiveCount,
				"retry_in", delay, "code", notify.ErrorCode(err), "error", err.Error())
			if cerr := g.Queue.ChangeVisibility(ctx, g.QueueName, m.ReceiptHandle, delay); cerr != nil && !notify.IsCode(cerr, notify.ECONFLICT) {
				log.Error("change visibility failed; the message returns after its visibility timeout", "message_id", m.ID, "error", cerr)
			}
		case pipeline.DeadLetter:
			g.deadLetter(ctx, m, err, base, log)
		}
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.ID})
	}
	for id := range failed {
		log.Warn("stage reported a failure for a message not in the batch", "message_id", id)
	}
	return resp, nil
}

// run calls h, turning a panic into a failure of every message (retried), never a crash.
func (g *Glue) run(ctx context.Context, h pipeline.Handler, msgs []notify.Message, log *slog.Logger) (out []pipeline.ItemFailure) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("stage panicked", "panic", r)
			out = make([]pipeline.ItemFailure, len(msgs))
			for i, m := range msgs {
				out[i] = pipeline.ItemFailure{MessageID: m.ID, Err: notify.Errorf(notify.EINTERNAL, "stage panicked: %v", r)}
			}
		}
	}()
	return h(ctx, msgs)
}

// deadLetter copies a message that can never succeed to the DLQ with its reason, then deletes
// it. If the copy fails the message stays, back soon for another try; maxReceiveCount gets it
// to the DLQ in the end anyway.
func (g *Glue) deadLetter(ctx context.Context, m notify.Message, err error, retry time.Duration, log *slog.Logger) {
	attrs := maps.Clone(m.Attributes)
	if attrs == nil {
		attrs = map[string]string{}
	}
	attrs[pipeline.AttrErrorCode] = notify.ErrorCode(err)
	attrs[pipeline.AttrErrorReason] = truncate(err.Error(), 1000)
	attrs[pipeline.AttrSourceQueue] = g.QueueName
	var serr error = notify.Errorf(notify.EINVALID, "no DLQ configured")
	if g.DLQName != "" {
		serr = g.Queue.Send(ctx, g.DLQName, notify.OutMessage{Body: m.Body, GroupID: m.GroupID, Attributes: attrs})
	}
	if serr != nil {
		log.Error("dead-letter failed; message stays for retry", "message_id", m.ID,
			"code", notify.ErrorCode(err), "error", err.Error(), "dlq_error", serr)
		_ = g.Queue.ChangeVisibility(ctx, g.QueueName, m.ReceiptHandle, retry)
		return
	}
	log.Error("message dead-lettered", "dlq", g.DLQName, "message_id", m.ID, "code", notify.ErrorCode(err), "error", err.Error())
	if derr := g.Queue.Delete(ctx, g.QueueName, m.ReceiptHandle); derr != nil && !notify.IsCode(derr, notify.ECONFLICT) {
		log.Error("delete after dead-letter failed", "message_id", m.ID, "error", derr)
	}
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

// truncate cuts s to at most n bytes without splitting a character: SQS accepts only valid
// UTF-8.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
