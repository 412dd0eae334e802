package pipeline

import (
	"context"
	"fmt"

	"herald/internal/notify"
)

// Cleanup returns the handler of the cleanup queue: remove device tokens providers reported dead
// (unless re-registered since) and suppress dead addresses.
func (p *Pipeline) Cleanup() Handler {
	return func(ctx context.Context, msgs []notify.Message) []ItemFailure {
		return each(ctx, msgs, p.cleanupOne)
	}
}

func (p *Pipeline) cleanupOne(ctx context.Context, m notify.Message) error {
	var cm cleanupMsg
	if err := decode(m.Body, &cm); err != nil {
		return err
	}
	removed := 0
	for _, t := range cm.DeadTokens {
		ok, err := p.store.RemoveDeadDevice(ctx, t.Token, t.SeenBefore)
		if err != nil {
			return fmt.Errorf("cleanup: remove device %s: %w", notify.MaskToken(t.Token), err)
		}
		if ok {
			removed++
		}
	}
	for _, s := range cm.Suppress {
		if err := p.suppress(ctx, s.Channel, s.Address, s.Reason); err != nil {
			return err
		}
	}
	p.log.InfoContext(ctx, "cleanup", "dead_tokens", len(cm.DeadTokens), "devices_removed", removed, "suppressed", len(cm.Suppress))
	return nil
}

func (p *Pipeline) suppress(ctx context.Context, ch notify.Channel, address, reason string) error {
	s := notify.Suppression{
		AddressKey: notify.AddressKey(ch, address),
		Masked:     notify.MaskAddress(ch, notify.NormalizeAddress(ch, address)),
		Channel:    ch,
		Reason:     reason,
		CreatedAt:  p.clock.Now(),
	}
	if err := p.store.Suppress(ctx, s); err != nil {
		return fmt.Errorf("suppress %s: %w", s.Masked, err)
	}
	return nil
}
