package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"herald/internal/notify"
)

// Cleanup returns the handler of the cleanup queue: remove device tokens providers reported dead
// (unless re-registered since), suppress dead addresses, and finish users' erasures the API
// began (a message naming the user under "erase": erasure.Eraser.Resume).
func (p *Pipeline) Cleanup() Handler {
	return func(ctx context.Context, msgs []notify.Message) []ItemFailure {
		return each(ctx, msgs, p.cleanupOne)
	}
}

func (p *Pipeline) cleanupOne(ctx context.Context, m notify.Message) error {
	cm, err := decodeCleanup(m.Body)
	if err != nil {
		return err
	}
	if cm.Erase != "" {
		return p.finishErasure(ctx, cm.Erase)
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

// decodeCleanup reads a cleanup message strictly: the send stage writes one only with dead
// tokens or addresses to suppress, so anything else — null, {}, an S3 or SNS envelope, an
// unknown key, an entry without its token or address — is refused (dead-lettered with its
// reason), never acknowledged as work done.
func decodeCleanup(body []byte) (cleanupMsg, error) {
	var cm cleanupMsg
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cm); err != nil {
		return cm, notify.Wrap(notify.EINVALID, err, "cleanup: body is not a cleanup message")
	}
	if dec.More() {
		return cm, notify.Errorf(notify.EINVALID, "cleanup: trailing data after the message")
	}
	if cm.Erase != "" && (len(cm.DeadTokens)+len(cm.Suppress) > 0 || !notify.IsUserHash(cm.Erase)) {
		return cm, notify.Errorf(notify.EINVALID, "cleanup: an erasure comes alone, naming a user hash")
	}
	if len(cm.DeadTokens)+len(cm.Suppress) == 0 && cm.Erase == "" {
		return cm, notify.Errorf(notify.EINVALID, "cleanup: the message names no dead token, no address to suppress and no user to erase")
	}
	for i, t := range cm.DeadTokens {
		if t.Token == "" {
			return cm, notify.FieldError(fmt.Sprintf("dead_tokens[%d].token", i), "required")
		}
	}
	for i, s := range cm.Suppress {
		if s.Address == "" || !s.Channel.Valid() {
			return cm, notify.FieldError(fmt.Sprintf("suppress[%d]", i), "needs a channel and an address")
		}
	}
	return cm, nil
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

// erasureBudget is how long one cleanup message works on an erasure before it hands the rest to
// the next.
const erasureBudget = 20 * time.Second

// finishErasure finishes the erasure of the user whose hash is userHash if it is still running; one that needs longer than
// erasureBudget goes on in a message of its own (its checkpoint is stored), so no message is
// held past its visibility timeout.
func (p *Pipeline) finishErasure(ctx context.Context, userHash string) error {
	if p.eraser == nil {
		return notify.Errorf(notify.EINVALID, "cleanup: this store keeps no erasures")
	}
	e, err := p.eraser.Resume(ctx, userHash, erasureBudget)
	if notify.IsCode(err, notify.ENOTFOUND) {
		return notify.Wrap(notify.EINVALID, err, "cleanup: no erasure of this user was begun")
	}
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	if e.Status == notify.ErasureRunning {
		body, err := json.Marshal(cleanupMsg{Erase: userHash})
		if err != nil {
			return err
		}
		return p.queue.Send(ctx, notify.StageCleanup, notify.OutMessage{Body: body, Delay: time.Second, GroupID: "erasure"})
	}
	return nil
}
