package pipeline

import (
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
