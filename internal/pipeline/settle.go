package pipeline

import (
	"context"
	"log/slog"
	"maps"
	"strconv"
	"time"

	"herald/internal/notify"
)

// Action is what a runtime does with a message after its stage ran.
type Action int

const (
	// Done: delete the message.
	Done Action = iota
	// Retry: leave it on the queue, visible again after the returned delay; the queue's
	// maxReceiveCount moves it to the DLQ when retries run out.
	Retry
	// DeadLetter: the failure is permanent (e.g. a malformed body) — copy the message to the DLQ
	// now with its reason, then delete it, instead of retrying what cannot succeed.
	DeadLetter
)

// Message attributes set on a dead-lettered message so operators see why it is there.
const (
	AttrErrorCode   = "herald-error-code"
	AttrErrorReason = "herald-error"
	AttrSourceQueue = "herald-source-queue"
	// AttrReceiveCount is how many times the source queue had delivered the message when it was
	// dead-lettered: the copy in the DLQ is a new message, whose own count says nothing.
	AttrReceiveCount = "herald-receive-count"
)

// Settle decides, identically in both runtimes, what happens to a message whose stage returned
// err after receiveCount receives. Retries back off exponentially from base to max, honouring
// the error's Retry-After.
func Settle(err error, receiveCount int, base, max time.Duration) (Action, time.Duration) {
	if err == nil {
		return Done, 0
	}
	if !notify.IsRetryable(err) {
		return DeadLetter, 0
	}
	return Retry, notify.Backoff(receiveCount, base, max, notify.RetryAfter(err))
}

// Run runs h on msgs, turning a panic into a (retryable) failure of every message, never a
// crash of the runtime.
func Run(ctx context.Context, h Handler, msgs []notify.Message, log *slog.Logger) (out []ItemFailure) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("stage panicked", "panic", r)
			out = make([]ItemFailure, len(msgs))
			for i, m := range msgs {
				out[i] = ItemFailure{MessageID: m.ID, Err: notify.Errorf(notify.EINTERNAL, "stage panicked: %v", r)}
			}
		}
	}()
	return h(ctx, msgs)
}

// SettleFailed carries out Settle for message m of queue, whose stage failed with err, the same
// way in both runtimes: a retryable failure makes it visible again after its backoff; a
// permanent one copies it to dlq with its reason (AttrErrorCode, AttrErrorReason,
// AttrSourceQueue) and deletes it — or, when the copy fails, leaves it to come back after base,
// so the queue's maxReceiveCount gets it to the DLQ in the end. It returns the action taken.
// log should carry the queue's name. A message dead-lettered is announced on events (nil: none)
// as message_dead_lettered (notify.DeadLetterEvent); the event is advisory — a failed Emit is
// logged (the adapter counts it) and changes nothing about the settle.
func SettleFailed(ctx context.Context, q notify.Queue, queue, dlq string, m notify.Message, err error,
	base, max time.Duration, log *slog.Logger, events notify.Events) Action {
	action, delay := Settle(err, m.ReceiveCount, base, max)
	switch action {
	case Retry:
		log.Warn("message will be retried", "message_id", m.ID, "receive_count", m.ReceiveCount,
			"retry_in", delay, "code", notify.ErrorCode(err), "error", err.Error())
		if cerr := q.ChangeVisibility(ctx, queue, m.ReceiptHandle, delay); cerr != nil && !notify.IsCode(cerr, notify.ECONFLICT) {
			log.Error("change visibility failed; the message returns after its visibility timeout", "message_id", m.ID, "error", cerr)
		}
	case DeadLetter:
		attrs := maps.Clone(m.Attributes)
		if attrs == nil {
			attrs = map[string]string{}
		}
		attrs[AttrErrorCode] = notify.ErrorCode(err)
		attrs[AttrErrorReason] = notify.Truncate(err.Error(), 1000) // SQS takes only valid UTF-8
		attrs[AttrSourceQueue] = queue
		attrs[AttrReceiveCount] = strconv.Itoa(m.ReceiveCount)
		var serr error = notify.Errorf(notify.EINVALID, "no DLQ configured")
		if dlq != "" {
			serr = q.Send(ctx, dlq, notify.OutMessage{Body: m.Body, GroupID: m.GroupID, Attributes: attrs})
		}
		if serr != nil {
			log.Error("dead-letter failed; message stays for retry", "message_id", m.ID,
				"code", notify.ErrorCode(err), "error", err.Error(), "dlq_error", serr)
			_ = q.ChangeVisibility(ctx, queue, m.ReceiptHandle, base)
			return Retry
		}
		log.Error("message dead-lettered", "dlq", dlq, "message_id", m.ID, "code", notify.ErrorCode(err), "error", err.Error())
		if events != nil {
			e := notify.DeadLetterEvent(time.Now().UTC(), queue, m.ID, notify.ErrorCode(err), err.Error(), m.Body)
			if eerr := events.Emit(ctx, e); eerr != nil {
				log.Warn("operator event not emitted", "event", e.Type, "message_id", m.ID, "error", eerr)
			}
		}
		if derr := q.Delete(ctx, queue, m.ReceiptHandle); derr != nil && !notify.IsCode(derr, notify.ECONFLICT) {
			log.Error("delete after dead-letter failed", "message_id", m.ID, "error", derr)
		}
	}
	return action
}
