package herald

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// SQSAPI is the part of the SQS client SQSTransport uses (an *sqs.Client).
type SQSAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// SQS limits.
const (
	MaxSQSBatch      = 10         // entries of one SendMessageBatch
	MaxSQSBatchBytes = 256 * 1024 // bodies and attributes of one SendMessageBatch, and of one message
)

// The message attributes ingest reads (internal/notify/queues.go): the lane, which the local
// runtime's workers schedule ingest by. Nothing else is needed: ingest derives the id and the
// request's fingerprint itself.
const attrLane = "herald-lane"

// SQSOptions tune SQSTransport.
type SQSOptions struct {
	FlushInterval time.Duration // the longest a message waits for its batch to fill; default 20ms
	MaxBuffered   int           // messages buffered before Send blocks or fails; default 1,000
	FailFast      bool          // a full buffer fails Send at once (too_many_buffered) instead of blocking
	Concurrency   int           // SendMessageBatch calls in flight; default 4
	Retry         Retry
}

// SQSTransport sends each request as one message to the service's ingest queue, gathering
// messages into SendMessageBatch calls of up to 10 messages and 256 KB in the background. A
// request is never dropped: Send returns only once its message is on the queue, or with the
// error that kept it off. An entry the queue failed in a partial failure is retried alone (a
// throttled or server-side failure) or fails alone (a sender fault: the message itself is bad).
// Every request goes as its own message, so a bad one never takes others with it.
type SQSTransport struct {
	api      SQSAPI
	queueURL string
	service  string
	o        SQSOptions

	in      chan *sqsEntry
	batches chan []*sqsEntry
	done    chan struct{}
	wg      sync.WaitGroup

	mu     sync.RWMutex
	closed bool
}

type sqsEntry struct {
	body  string
	attrs map[string]types.MessageAttributeValue
	size  int
	done  chan struct{} // closed once err is final
	err   error
}

func (e *sqsEntry) complete(err error) {
	e.err = err
	close(e.done)
}

// NewSQS starts a transport to the ingest queue at queueURL of service (the service's name, from
// which the notifications' ids derive). Close it to flush what is buffered.
func NewSQS(api SQSAPI, queueURL, service string, o SQSOptions) *SQSTransport {
	if o.FlushInterval <= 0 {
		o.FlushInterval = 20 * time.Millisecond
	}
	if o.MaxBuffered <= 0 {
		o.MaxBuffered = 1000
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	o.Retry = o.Retry.withDefaults()
	t := &SQSTransport{api: api, queueURL: queueURL, service: service, o: o,
		in: make(chan *sqsEntry, o.MaxBuffered), batches: make(chan []*sqsEntry), done: make(chan struct{})}
	t.wg.Add(1 + o.Concurrency)
	go t.gather()
	for range o.Concurrency {
		go t.sender()
	}
	return t
}

// Send implements Sender: the request's message is on the queue when it returns nil. Its
// Accepted carries the id Herald derives from the service and the key. A request whose context
// ends after it was buffered may still be sent: its key makes sending it again safe.
func (t *SQSTransport) Send(ctx context.Context, req *SendRequest) (*Accepted, error) {
	e, err := t.entry(req, "")
	if err != nil {
		return nil, err
	}
	if err := t.put(ctx, e); err != nil {
		return nil, err
	}
	select {
	case <-e.done:
		if e.err != nil {
			return nil, e.err
		}
		return &Accepted{ID: NotificationID(t.service, req.IdempotencyKey), Status: "ACCEPTED"}, nil
	case <-ctx.Done():
		return nil, &Error{Code: CodeUnavailable, Message: "gave up waiting for the queue", Err: ctx.Err()}
	}
}

// BatchError is SendBatch's error when some requests did not reach the queue: Errs[i] is request
// i's error, nil for those that did.
type BatchError struct {
	Errs []error
}

func (b *BatchError) Error() string {
	n, first := 0, error(nil)
	for _, e := range b.Errs {
		if e != nil {
			if first == nil {
				first = e
			}
			n++
		}
	}
	return fmt.Sprintf("herald: %d of %d requests not sent; first: %v", n, len(b.Errs), first)
}

// SendBatch implements Sender: each request as its own message, so one bad request fails alone.
// Accepted[i] is set for every request that reached the queue; the error, a *BatchError, says
// which did not.
func (t *SQSTransport) SendBatch(ctx context.Context, reqs []*SendRequest) ([]Accepted, error) {
	out := make([]Accepted, len(reqs))
	errs := make([]error, len(reqs))
	entries := make([]*sqsEntry, len(reqs))
	failed := false
	for i, r := range reqs {
		e, err := t.entry(r, fmt.Sprintf("notifications[%d].", i))
		if err != nil {
			return nil, err // nothing is sent for a batch that is not whole
		}
		entries[i] = e
	}
	for i, e := range entries {
		if err := t.put(ctx, e); err != nil {
			errs[i], entries[i], failed = err, nil, true
		}
	}
	for i, e := range entries {
		if e == nil {
			continue
		}
		select {
		case <-e.done:
			errs[i] = e.err
		case <-ctx.Done():
			errs[i] = &Error{Code: CodeUnavailable, Message: "gave up waiting for the queue", Err: ctx.Err()}
		}
		if errs[i] != nil {
			failed = true
			continue
		}
		out[i] = Accepted{ID: NotificationID(t.service, reqs[i].IdempotencyKey), Status: "ACCEPTED"}
	}
	if failed {
		return out, &BatchError{Errs: errs}
	}
	return out, nil
}

// Flush sends what is buffered now and returns when it is on the queue (or failed).
func (t *SQSTransport) Flush(ctx context.Context) error {
	e := &sqsEntry{done: make(chan struct{})} // a marker: flushes the batch it closes
	if err := t.put(ctx, e); err != nil {
		return err
	}
	select {
	case <-e.done:
		return e.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close flushes what is buffered, refuses new sends (code closed) and stops the background work.
func (t *SQSTransport) Close(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.in)
	t.mu.Unlock()
	stopped := make(chan struct{})
	go func() { t.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// entry checks and encodes a request as a message.
func (t *SQSTransport) entry(req *SendRequest, field string) (*sqsEntry, error) {
	if err := checkKey(req.IdempotencyKey, field); err != nil {
		return nil, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, invalid(field, "encode: %v", err)
	}
	lane := "realtime"
	if req.Category == Marketing {
		lane = "bulk"
	}
	e := &sqsEntry{body: string(b), done: make(chan struct{}),
		attrs: map[string]types.MessageAttributeValue{attrLane: {DataType: aws.String("String"), StringValue: aws.String(lane)}}}
	e.size = len(b) + len(attrLane) + len("String") + len(lane)
	if e.size > MaxSQSBatchBytes {
		return nil, &Error{Code: CodeTooLarge, Field: field, Message: fmt.Sprintf("the request is %d bytes as a message, over SQS's %d; send fewer recipients a request", e.size, MaxSQSBatchBytes)}
	}
	return e, nil
}

// put buffers e: waiting for room, or failing at once with FailFast.
func (t *SQSTransport) put(ctx context.Context, e *sqsEntry) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return &Error{Code: CodeClosed, Message: "the transport is closed"}
	}
	if t.o.FailFast {
		select {
		case t.in <- e:
			return nil
		default:
			return &Error{Code: CodeTooMany, Message: fmt.Sprintf("%d messages are buffered already; retry, or send slower", t.o.MaxBuffered)}
		}
	}
	select {
	case t.in <- e:
		return nil
	case <-ctx.Done():
		return &Error{Code: CodeUnavailable, Message: "gave up waiting for room in the buffer", Err: ctx.Err()}
	}
}

// gather makes batches of up to 10 messages and 256 KB, closing one when it is full, when the
// flush interval passed since its first message, or at a Flush marker.
func (t *SQSTransport) gather() {
	defer t.wg.Done()
	defer close(t.batches)
	var (
		batch []*sqsEntry
		size  int
		timer *time.Timer
		tick  <-chan time.Time
	)
	flush := func() {
		if timer != nil {
			timer.Stop()
			timer, tick = nil, nil
		}
		if len(batch) > 0 {
			t.batches <- batch
		}
		batch, size = nil, 0
	}
	for {
		select {
		case e, ok := <-t.in:
			if !ok {
				flush()
				return
			}
			if e.body == "" { // a Flush marker: answered once the batch before it is sent
				b := batch
				flush()
				go func() {
					var err error
					for _, x := range b {
						<-x.done
						if x.err != nil && err == nil {
							err = x.err
						}
					}
					e.complete(err)
				}()
				continue
			}
			if len(batch) > 0 && size+e.size > MaxSQSBatchBytes {
				flush()
			}
			batch = append(batch, e)
			size += e.size
			if len(batch) == 1 {
				timer = time.NewTimer(t.o.FlushInterval)
				tick = timer.C
			}
			if len(batch) == MaxSQSBatch {
				flush()
			}
		case <-tick:
			timer, tick = nil, nil
			flush()
		}
	}
}

// sender sends batches until gather stops.
func (t *SQSTransport) sender() {
	defer t.wg.Done()
	for b := range t.batches {
		t.sendBatch(b)
	}
}

// sendBatch sends one batch: a call that fails whole is retried whole while worth it; in a
// partial failure each failed entry is retried alone (throttled, server-side) or failed
// (a sender fault).
func (t *SQSTransport) sendBatch(pending []*sqsEntry) {
	ctx := context.Background()
	r := t.o.Retry
	for attempt := 1; len(pending) > 0; attempt++ {
		in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(t.queueURL)}
		for i, e := range pending {
			in.Entries = append(in.Entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)),
				MessageBody: aws.String(e.body), MessageAttributes: e.attrs, MessageGroupId: aws.String(t.service)})
		}
		out, err := t.api.SendMessageBatch(ctx, in)
		var retry []*sqsEntry
		if err != nil {
			he := sqsError(err)
			if !sqsRetryable(err) || attempt >= r.MaxAttempts {
				for _, e := range pending {
					e.complete(he)
				}
				return
			}
			retry = pending
		} else {
			failed := map[int]types.BatchResultErrorEntry{}
			for _, f := range out.Failed {
				if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i >= 0 && i < len(pending) {
					failed[i] = f
				}
			}
			for i, e := range pending {
				f, bad := failed[i]
				switch {
				case !bad:
					e.complete(nil)
				case f.SenderFault && !throttling(aws.ToString(f.Code)):
					e.complete(&Error{Code: CodeInvalid, Message: fmt.Sprintf("the queue refused the message: %s %s", aws.ToString(f.Code), aws.ToString(f.Message))})
				case attempt >= r.MaxAttempts:
					e.complete(&Error{Code: CodeUnavailable, Message: fmt.Sprintf("the queue failed the message %d times; last: %s %s", attempt, aws.ToString(f.Code), aws.ToString(f.Message))})
				default:
					retry = append(retry, e)
				}
			}
		}
		pending = retry
		if len(pending) > 0 {
			_ = sleep(ctx, r.wait(attempt, 0))
		}
	}
}

// throttling reports whether an SQS error code is throttling or a transient service fault.
func throttling(code string) bool {
	switch code {
	case "ThrottlingException", "RequestThrottled", "ServiceUnavailable", "InternalError", "InternalFailure", "KmsThrottled":
		return true
	}
	return false
}

// sqsRetryable reports whether a failed SendMessageBatch call is worth another try.
func sqsRetryable(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return throttling(ae.ErrorCode()) || ae.ErrorFault() == smithy.FaultServer
	}
	return true // no answer: a network failure
}

// sqsError is a failed call's *Error.
func sqsError(err error) *Error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := CodeUnavailable
		if ae.ErrorFault() == smithy.FaultClient && !throttling(ae.ErrorCode()) {
			code = CodeInvalid
			if ae.ErrorCode() == "AccessDenied" || ae.ErrorCode() == "AccessDeniedException" {
				code = CodeUnauthorized
			}
		}
		return &Error{Code: code, Message: ae.ErrorCode() + ": " + ae.ErrorMessage(), Err: err}
	}
	return &Error{Code: CodeUnavailable, Message: "no answer from the queue", Err: err}
}
