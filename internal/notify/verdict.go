package notify

import "context"

// VerdictChecker is a Sender whose provider accepts a message first and reports its final
// verdict later (AlimTalk through Solapi: "accepted" in the send response, Kakao's "not a
// KakaoTalk user" minutes later in the message list). The pipeline asks it about the deliveries
// whose SendResult had VerdictPending, on a delay, until each has a verdict or a deadline passes.
type VerdictChecker interface {
	Sender
	// MaxVerdictBatch is the most deliveries one Verdicts call takes.
	MaxVerdictBatch() int
	// Verdicts looks up each query's message by its ProviderMessageID and returns one result per
	// query, in order: Err nil for delivered, VerdictPending (Err nil) when the provider has no
	// final verdict yet, or an *Error classified exactly as Send classifies the same answer. The
	// call itself fails (retryably unless the request is refused as malformed) when the provider
	// could not be asked.
	Verdicts(ctx context.Context, qs []VerdictQuery) ([]SendResult, error)
}

// VerdictQuery names one accepted message whose verdict is awaited.
type VerdictQuery struct {
	DeliveryID        string
	ProviderMessageID string
	Address           string // only to mask it in error messages
}

// ReasonVerdictUnknown is the reason on a delivery counted SENT because the provider accepted it
// and never reported a final verdict before the pipeline stopped asking.
const ReasonVerdictUnknown = "verdict_unknown"
