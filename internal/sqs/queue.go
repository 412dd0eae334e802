// Package sqs is Herald's Amazon SQS adapter: notify.Queue on SQS (Queue), and the glue that runs
// a pipeline.Handler on a Lambda SQS event and settles each message exactly as the local runtime
// does (Glue). Its tests run against sqsfake, an in-process SQS speaking the same JSON protocol.
package sqs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"herald/internal/notify"
)

// Limits of SQS that the adapter checks before sending, so that callers get a precise error.
const (
	maxMessageSize = 1 << 20 // body plus attributes; also a whole batch
	maxBatch       = 10
	maxAttributes  = 10
	maxDelay       = int(notify.MaxQueueDelay / time.Second) // seconds
	maxVisibility  = 12 * time.Hour
	maxWaitPerCall = 20 // seconds of long polling SQS allows per ReceiveMessage
	// peekHold is how long Peek hides what it receives before releasing it again; the SDK
	// cannot send a zero visibility timeout with ReceiveMessage.
	peekHold = 2
	// movePoll bounds the wait between looks at a running message move task.
	movePoll = time.Second
)

// Queue is notify.Queue on Amazon SQS. Queues are addressed by logical name (e.g.
// "send-realtime"), mapped to queue URLs once at start-up; an unknown name is ENOTFOUND. SQS is
// at-least-once, and a receive can sample only some of a queue's servers, so counts and peeks are
// approximate, as the contract allows.
type Queue struct {
	client *sqs.Client
	urls   map[string]string

	mu   sync.Mutex
	arns map[string]string // queue URL → ARN, learned when first needed
}

var _ notify.Queue = (*Queue)(nil)

// New returns a Queue over client; urls maps each logical queue name to its queue URL (see
// Resolve).
func New(client *sqs.Client, urls map[string]string) *Queue {
	return &Queue{client: client, urls: maps.Clone(urls), arns: map[string]string{}}
}

// Resolve looks up the URL of each named queue (GetQueueUrl), keyed by the name. A queue that
// does not exist is ENOTFOUND; every problem is reported, not only the first.
func Resolve(ctx context.Context, client *sqs.Client, names []string) (map[string]string, error) {
	urls := make(map[string]string, len(names))
	var errs []error
	for _, n := range names {
		out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(n)})
		if err != nil {
			errs = append(errs, translate(err, "resolve queue %s", n))
			continue
		}
		urls[n] = aws.ToString(out.QueueUrl)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return urls, nil
}

// CreateQueues declares cfgs on SQS (CreateQueue, with a RedrivePolicy for queues that have a
// DLQ) and returns their URLs by name. A DLQ named but not declared is created with defaults. In
// AWS the CDK stack owns the queues; this is for tests and local tooling against an SQS endpoint.
func CreateQueues(ctx context.Context, client *sqs.Client, cfgs []notify.QueueConfig) (map[string]string, error) {
	pending := map[string]notify.QueueConfig{}
	for _, c := range cfgs {
		pending[c.Name] = c
	}
	for _, c := range cfgs {
		if _, ok := pending[c.DLQ]; c.DLQ != "" && !ok {
			pending[c.DLQ] = notify.QueueConfig{Name: c.DLQ}
		}
	}
	urls, arns := map[string]string{}, map[string]string{}
	for len(pending) > 0 {
		progress := false
		for name, c := range pending {
			redrive := c.DLQ != "" && c.MaxReceiveCount > 0
			if redrive && arns[c.DLQ] == "" {
				continue // its DLQ first: a redrive policy must name an existing queue
			}
			attrs := map[string]string{}
			if c.VisibilityTimeout > 0 {
				attrs[string(types.QueueAttributeNameVisibilityTimeout)] = strconv.Itoa(seconds(c.VisibilityTimeout))
			}
			if redrive {
				attrs[string(types.QueueAttributeNameRedrivePolicy)] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, arns[c.DLQ], c.MaxReceiveCount)
			}
			out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
			if err != nil {
				return nil, translate(err, "create queue %s", name)
			}
			urls[name] = aws.ToString(out.QueueUrl)
			a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl,
				AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
			if err != nil {
				return nil, translate(err, "create queue %s: get its ARN", name)
			}
			arns[name] = a.Attributes[string(types.QueueAttributeNameQueueArn)]
			delete(pending, name)
			progress = true
		}
		if !progress {
			return nil, notify.Errorf(notify.EINVALID, "create queues: the DLQs of %v form a cycle", slices.Sorted(maps.Keys(pending)))
		}
	}
	return urls, nil
}

func (q *Queue) url(op, queue string) (string, error) {
	u, ok := q.urls[queue]
	if !ok {
		return "", notify.Errorf(notify.ENOTFOUND, "%s %s: unknown queue", op, queue)
	}
	return u, nil
}

// seconds rounds d up to whole seconds, SQS's unit.
func seconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}

// Send implements notify.Producer with SendMessageBatch calls of up to 10 messages and 1 MiB.
// Entries SQS fails on its side are retried once. SQS cannot send a batch atomically: when some
// messages fail, the others are sent and the error names the failed ones (msgs[i]).
func (q *Queue) Send(ctx context.Context, queue string, msgs ...notify.OutMessage) error {
	url, err := q.url("send to", queue)
	if err != nil {
		return err
	}
	entries := make([]types.SendMessageBatchRequestEntry, len(msgs))
	sizes := make([]int, len(msgs))
	for i, m := range msgs {
		if entries[i], sizes[i], err = toEntry(i, m); err != nil {
			return fmt.Errorf("send to %s: %w", queue, err)
		}
	}
	var failed []types.BatchResultErrorEntry
	for lo := 0; lo < len(entries); {
		hi, total := lo, 0
		for hi < len(entries) && hi-lo < maxBatch && total+sizes[hi] <= maxMessageSize {
			total += sizes[hi]
			hi++
		}
		f, err := q.sendBatch(ctx, url, entries[lo:hi])
		if err != nil {
			return q.fail(ctx, err, "send to %s: msgs[%d:%d] of %d not sent (%d before them were)", queue, lo, hi, len(msgs), lo-len(failed))
		}
		failed = append(failed, f...)
		lo = hi
	}
	if len(failed) == 0 {
		return nil
	}
	var b strings.Builder
	for i, f := range failed {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(failed)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "msgs[%s] %s: %s", aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message))
	}
	return notify.Errorf(entryCode(failed[0]), "send to %s: %d of %d messages failed, the others were sent: %s", queue, len(failed), len(msgs), b.String())
}

// sendBatch sends one batch and retries once the entries that failed on SQS's side; an entry
// SQS blames on the sender would fail the same way again. It returns the entries that failed.
func (q *Queue) sendBatch(ctx context.Context, url string, entries []types.SendMessageBatchRequestEntry) ([]types.BatchResultErrorEntry, error) {
	var final []types.BatchResultErrorEntry
	for attempt := 1; ; attempt++ {
		out, err := q.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			return nil, err
		}
		if attempt == 2 {
			return append(final, out.Failed...), nil
		}
		byID := make(map[string]types.SendMessageBatchRequestEntry, len(entries))
		for _, e := range entries {
			byID[aws.ToString(e.Id)] = e
		}
		entries = entries[:0:0]
		for _, f := range out.Failed {
			if f.SenderFault {
				final = append(final, f)
			} else {
				entries = append(entries, byID[aws.ToString(f.Id)])
			}
		}
		if len(entries) == 0 {
			return final, nil
		}
	}
}

// toEntry checks m against SQS's rules and returns its batch entry (Id = its index in the
// Send call) and the size SQS counts.
func toEntry(i int, m notify.OutMessage) (types.SendMessageBatchRequestEntry, int, error) {
	var e types.SendMessageBatchRequestEntry
	field := func(f string) string { return fmt.Sprintf("msgs[%d].%s", i, f) }
	switch {
	case len(m.Body) == 0:
		return e, 0, notify.FieldError(field("body"), "SQS needs a body of at least one character")
	case !validText(string(m.Body)):
		return e, 0, notify.FieldError(field("body"), "SQS accepts only UTF-8 text of XML-legal characters")
	case m.Delay < 0:
		return e, 0, notify.FieldError(field("delay"), "negative delay %s", m.Delay)
	case len(m.Attributes) > maxAttributes:
		return e, 0, notify.FieldError(field("attributes"), "%d attributes, SQS allows %d", len(m.Attributes), maxAttributes)
	case len(m.GroupID) > 128:
		return e, 0, notify.FieldError(field("group_id"), "longer than 128 characters")
	}
	size := len(m.Body)
	if len(m.Attributes) > 0 {
		e.MessageAttributes = make(map[string]types.MessageAttributeValue, len(m.Attributes))
	}
	for k, v := range m.Attributes {
		if !validAttrName(k) || v == "" || !validText(v) {
			return e, 0, notify.FieldError(field("attributes."+k), "SQS needs a name of letters, digits, '-', '_' or '.' and a non-empty text value")
		}
		e.MessageAttributes[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		size += len(k) + len("String") + len(v)
	}
	if size > maxMessageSize {
		return e, 0, notify.Errorf(notify.ETOOLARGE, "msgs[%d]: %d bytes of body and attributes, over SQS's %d", i, size, maxMessageSize)
	}
	e.Id = aws.String(strconv.Itoa(i))
	e.MessageBody = aws.String(string(m.Body))
	e.DelaySeconds = int32(min(seconds(m.Delay), maxDelay))
	if m.GroupID != "" {
		e.MessageGroupId = aws.String(m.GroupID)
	}
	return e, size, nil
}

// validText reports whether s is UTF-8 of the characters SQS accepts (those legal in XML).
func validText(s string) bool {
	for _, r := range s {
		switch {
		case r == 0x9, r == 0xA, r == 0xD, r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return utf8.ValidString(s)
}

func validAttrName(n string) bool {
	l := strings.ToLower(n)
	if n == "" || len(n) > 256 || strings.HasPrefix(l, "aws.") || strings.HasPrefix(l, "amazon.") ||
		strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".") || strings.Contains(n, "..") {
		return false
	}
	return strings.IndexFunc(n, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0
}

var systemAttributes = []types.MessageSystemAttributeName{
	types.MessageSystemAttributeNameApproximateReceiveCount,
	types.MessageSystemAttributeNameSentTimestamp,
	types.MessageSystemAttributeNameMessageGroupId,
}

// Receive implements notify.Queue. visibility 0 means the queue's VisibilityTimeout; waits
// longer than SQS's 20 s per call are served by several calls. A cancelled ctx ends a waiting
// Receive with an EUNAVAILABLE error wrapping ctx.Err().
func (q *Queue) Receive(ctx context.Context, queue string, n int, visibility, wait time.Duration) ([]notify.Message, error) {
	url, err := q.url("receive from", queue)
	if err != nil {
		return nil, err
	}
	switch {
	case n < 1 || n > maxBatch:
		return nil, notify.FieldError("max", "receive from %s: max %d outside 1..%d", queue, n, maxBatch)
	case visibility < 0 || visibility > maxVisibility:
		return nil, notify.FieldError("visibility", "receive from %s: visibility %s outside 0..%s", queue, visibility, maxVisibility)
	case wait < 0:
		return nil, notify.FieldError("wait", "receive from %s: negative wait %s", queue, wait)
	}
	in := &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         int32(n),
		VisibilityTimeout:           int32(seconds(visibility)), // 0 is not sent: the queue's default
		MessageSystemAttributeNames: systemAttributes,
		MessageAttributeNames:       []string{"All"},
	}
	deadline := time.Now().Add(wait)
	for {
		in.WaitTimeSeconds = int32(min(maxWaitPerCall, max(0, seconds(time.Until(deadline)))))
		out, err := q.client.ReceiveMessage(ctx, in)
		if err != nil {
			return nil, q.fail(ctx, err, "receive from %s", queue)
		}
		if len(out.Messages) > 0 || !time.Now().Before(deadline) {
			msgs := make([]notify.Message, len(out.Messages))
			for i, m := range out.Messages {
				msgs[i] = fromSQS(m)
			}
			return msgs, nil
		}
	}
}

func fromSQS(m types.Message) notify.Message {
	msg := newMessage(aws.ToString(m.MessageId), aws.ToString(m.ReceiptHandle), aws.ToString(m.Body), m.Attributes)
	for k, v := range m.MessageAttributes {
		if v.StringValue != nil && isTextType(aws.ToString(v.DataType)) {
			if msg.Attributes == nil {
				msg.Attributes = map[string]string{}
			}
			msg.Attributes[k] = *v.StringValue
		}
	}
	return msg
}

// newMessage builds a notify.Message from what SQS and Lambda events both carry: system
// attributes give the receive count, the send time and the fair-queue group.
func newMessage(id, receipt, body string, system map[string]string) notify.Message {
	m := notify.Message{ID: id, ReceiptHandle: receipt, Body: []byte(body),
		GroupID: system[string(types.MessageSystemAttributeNameMessageGroupId)]}
	m.ReceiveCount, _ = strconv.Atoi(system[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if ms, err := strconv.ParseInt(system[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		m.SentAt = time.UnixMilli(ms).UTC()
	}
	return m
}

// isTextType: String and Number attributes (and their custom subtypes) carry a StringValue.
func isTextType(dataType string) bool {
	base, _, _ := strings.Cut(dataType, ".")
	return base == "String" || base == "Number"
}

// Delete implements notify.Queue. A message already deleted deletes fine, as in SQS; a stale
// receipt (SQS: ReceiptHandleIsInvalid) is ECONFLICT.
func (q *Queue) Delete(ctx context.Context, queue, receiptHandle string) error {
	url, err := q.url("delete from", queue)
	if err != nil {
		return err
	}
	_, err = q.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(receiptHandle)})
	if err != nil {
		return q.fail(ctx, err, "delete from %s", queue)
	}
	return nil
}

// ChangeVisibility implements notify.Queue; d is rounded up to whole seconds. A stale receipt,
// or a message no longer in flight, is ECONFLICT; a message deleted meanwhile is ENOTFOUND.
func (q *Queue) ChangeVisibility(ctx context.Context, queue, receiptHandle string, d time.Duration) error {
	url, err := q.url("change visibility in", queue)
	if err != nil {
		return err
	}
	if d < 0 || d > maxVisibility {
		return notify.FieldError("visibility", "change visibility in %s: %s outside 0..%s", queue, d, maxVisibility)
	}
	_, err = q.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
		ReceiptHandle: aws.String(receiptHandle), VisibilityTimeout: int32(seconds(d))})
	if err != nil {
		if isGone(err) {
			return notify.Wrap(notify.ENOTFOUND, err, "change visibility in %s: the message was deleted", queue)
		}
		return q.fail(ctx, err, "change visibility in %s", queue)
	}
	return nil
}

// Peek implements notify.Queue. SQS cannot browse, so Peek receives — raising each message's
// receive count, which can move a message at its queue's maxReceiveCount to the DLQ — and
// releases what it received at once. It returns no receipt handles.
func (q *Queue) Peek(ctx context.Context, queue string, max int) ([]notify.Message, error) {
	url, err := q.url("peek", queue)
	if err != nil {
		return nil, err
	}
	if max < 1 {
		return nil, notify.FieldError("max", "peek %s: max %d below 1", queue, max)
	}
	var out []notify.Message
	receipts := map[string]string{} // id → latest receipt, to release
	defer func() { q.release(context.WithoutCancel(ctx), url, receipts) }()
	for len(out) < max {
		n := min(maxBatch, max-len(out))
		res, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: int32(n), VisibilityTimeout: peekHold,
			MessageSystemAttributeNames: systemAttributes, MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			return nil, q.fail(ctx, err, "peek %s", queue)
		}
		fresh := 0
		for _, m := range res.Messages {
			id := aws.ToString(m.MessageId)
			if _, seen := receipts[id]; !seen && len(out) < max {
				msg := fromSQS(m)
				msg.ReceiptHandle = ""
				out = append(out, msg)
				fresh++
			}
			receipts[id] = aws.ToString(m.ReceiptHandle)
		}
		if fresh == 0 || len(res.Messages) < n {
			break
		}
	}
	return out, nil
}

// release makes peeked messages visible again. Failures need no handling: the messages come back
// by themselves after peekHold.
func (q *Queue) release(ctx context.Context, url string, receipts map[string]string) {
	var batch []types.ChangeMessageVisibilityBatchRequestEntry
	flush := func() {
		if len(batch) > 0 {
			_, _ = q.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: batch})
			batch = batch[:0]
		}
	}
	for _, r := range receipts {
		batch = append(batch, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(len(batch))), ReceiptHandle: aws.String(r)})
		if len(batch) == maxBatch {
			flush()
		}
	}
	flush()
}

// Redrive implements notify.Queue with a message move task on dlq. When dlq serves exactly one
// source queue, messages go there (DestinationArn), including copies the Lambda glue sent
// directly; otherwise each goes back to the queue it dead-lettered from. It waits for the task to
// finish and returns how many moved. In-flight DLQ messages are not moved (SQS moves by
// receiving). If ctx ends first, the task keeps running in SQS and Redrive returns the count
// so far with the error.
func (q *Queue) Redrive(ctx context.Context, dlq string) (int, error) {
	url, err := q.url("redrive", dlq)
	if err != nil {
		return 0, err
	}
	arn, err := q.arn(ctx, url)
	if err != nil {
		return 0, q.fail(ctx, err, "redrive %s", dlq)
	}
	in := &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn)}
	srcs, err := q.client.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(url)})
	if err != nil {
		return 0, q.fail(ctx, err, "redrive %s: list its source queues", dlq)
	}
	if len(srcs.QueueUrls) == 1 {
		dst, err := q.arn(ctx, srcs.QueueUrls[0])
		if err != nil {
			return 0, q.fail(ctx, err, "redrive %s: source queue", dlq)
		}
		in.DestinationArn = aws.String(dst)
	}
	if _, err := q.client.StartMessageMoveTask(ctx, in); err != nil {
		return 0, q.fail(ctx, err, "redrive %s", dlq)
	}
	pause := 100 * time.Millisecond
	for {
		// The newest task is ours: SQS runs one task per source queue at a time.
		out, err := q.client.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(arn), MaxResults: aws.Int32(1)})
		if err != nil {
			return 0, q.fail(ctx, err, "redrive %s: task status", dlq)
		}
		if len(out.Results) == 0 {
			return 0, notify.Errorf(notify.EINTERNAL, "redrive %s: the move task is not listed", dlq)
		}
		t := out.Results[0]
		moved := int(t.ApproximateNumberOfMessagesMoved)
		switch aws.ToString(t.Status) {
		case "COMPLETED":
			return moved, nil
		case "FAILED":
			return moved, notify.Errorf(notify.EINTERNAL, "redrive %s: move task failed after %d messages: %s", dlq, moved, aws.ToString(t.FailureReason))
		case "CANCELLING", "CANCELLED":
			return moved, notify.Errorf(notify.ECONFLICT, "redrive %s: move task cancelled after %d messages", dlq, moved)
		}
		select {
		case <-ctx.Done():
			return moved, notify.Wrap(notify.EUNAVAILABLE, ctx.Err(), "redrive %s: stopped waiting after %d messages; the task goes on", dlq, moved)
		case <-time.After(pause):
		}
		pause = min(2*pause, movePoll)
	}
}

func (q *Queue) arn(ctx context.Context, url string) (string, error) {
	q.mu.Lock()
	arn, ok := q.arns[url]
	q.mu.Unlock()
	if ok {
		return arn, nil
	}
	out, err := q.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", err
	}
	arn = out.Attributes[string(types.QueueAttributeNameQueueArn)]
	q.mu.Lock()
	q.arns[url] = arn
	q.mu.Unlock()
	return arn, nil
}

// Stats implements notify.Queue from SQS's approximate counts: visible, in flight (not
// visible) and delayed.
func (q *Queue) Stats(ctx context.Context, queue string) (notify.QueueStats, error) {
	var s notify.QueueStats
	url, err := q.url("stats", queue)
	if err != nil {
		return s, err
	}
	out, err := q.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		}})
	if err != nil {
		return s, q.fail(ctx, err, "stats %s", queue)
	}
	for name, n := range map[types.QueueAttributeName]*int{
		types.QueueAttributeNameApproximateNumberOfMessages:           &s.Visible,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible: &s.InFlight,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed:    &s.Delayed,
	} {
		if *n, err = strconv.Atoi(out.Attributes[string(name)]); err != nil {
			return s, notify.Wrap(notify.EINTERNAL, err, "stats %s: attribute %s", queue, name)
		}
	}
	return s, nil
}

// fail translates err, and names ctx's end as the cause when the call was cut short by it.
func (q *Queue) fail(ctx context.Context, err error, format string, args ...any) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return translate(err, format, args...)
}
