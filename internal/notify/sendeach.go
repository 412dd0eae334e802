package notify

import (
	"context"
	"sync"
)

// SendEach is the body of a Sender.Send for providers without a batch API: it checks the batch
// size, then sends every message with sendOne concurrently — at most cap(slots) in flight across
// every caller sharing slots — and returns one result per message, in order. A message whose
// turn comes after ctx is done gets EUNAVAILABLE without being sent.
func SendEach(ctx context.Context, provider Provider, maxBatch int, slots chan struct{}, msgs []OutboundMessage,
	sendOne func(context.Context, OutboundMessage) (providerMessageID string, err error)) ([]SendResult, error) {
	if len(msgs) > maxBatch {
		return nil, Errorf(ETOOLARGE, "%d messages; the %s sender takes at most %d per call", len(msgs), provider, maxBatch)
	}
	if err := ctx.Err(); err != nil {
		return nil, Wrap(EUNAVAILABLE, err, "%s send canceled", provider)
	}
	results := make([]SendResult, len(msgs))
	var wg sync.WaitGroup
	for i, m := range msgs {
		results[i].DeliveryID = m.DeliveryID
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			results[i].Err = Wrap(EUNAVAILABLE, ctx.Err(), "%s send %s canceled before sending", provider, m.DeliveryID)
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			results[i].ProviderMessageID, results[i].Err = sendOne(ctx, m)
		})
	}
	wg.Wait()
	return results, nil
}
