package pipeline

import (
	"context"
	"fmt"
	"time"

	"herald/internal/notify"
)

// cleanupMsg asks cleanup to remove dead tokens and suppress dead addresses.
type cleanupMsg struct {
	DeadTokens []deadToken    `json:"dead_tokens,omitempty"`
	Suppress   []suppressItem `json:"suppress,omitempty"`
}

type deadToken struct {
	Token      string    `json:"token"`
	SeenBefore time.Time `json:"seen_before"` // the send time: a registration newer than this survives
}

type suppressItem struct {
	Channel notify.Channel `json:"channel"`
	Address string         `json:"address"`
	Reason  string         `json:"reason"`
}

// Send returns the handler of the send queues: claim the batch's deliveries (so a redelivered
// batch never resends what was sent), wait for the provider's rate limit, send, classify each
// result, and enqueue retries, cleanup and record.
func (p *Pipeline) Send() Handler {
	return func(ctx context.Context, msgs []notify.Message) []ItemFailure {
		return each(ctx, msgs, p.sendOne)
	}
}

func (p *Pipeline) sendOne(ctx context.Context, m notify.Message) error {
	var sm sendMsg
	if err := decode(m.Body, &sm); err != nil {
		return err
	}
	n, err := p.notification(ctx, sm.NotificationID)
	if notify.IsCode(err, notify.ENOTFOUND) {
		return notify.Wrap(notify.EINVALID, err, "send: unknown notification %s", sm.NotificationID)
	}
	if err != nil {
		return fmt.Errorf("send %s: %w", sm.NotificationID, err)
	}
	if sm.HoldUntil != nil {
		if wait := sm.HoldUntil.Sub(p.clock.Now()); wait > 0 {
			// Quiet hours for these recipients: come back when their night ends (SQS delays are
			// at most 15 minutes, so a long night is several hops). Nothing is claimed meanwhile.
			if err := p.send(ctx, notify.LaneQueue(notify.StageSend, lane(n)), n.Service, min(wait, 15*time.Minute), sm); err != nil {
				return fmt.Errorf("send %s: hold for quiet hours: %w", n.ID, err)
			}
			p.log.DebugContext(ctx, "batch held for quiet hours", "notification_id", n.ID, "until", sm.HoldUntil, "items", len(sm.Items))
			return nil
		}
	}
	sender, ok := p.senders[sm.Provider]
	if !ok {
		return notify.Errorf(notify.EINTERNAL, "send %s: no sender configured for provider %q", n.ID, sm.Provider)
	}
	ids := make([]string, len(sm.Items))
	byID := make(map[string]sendItem, len(sm.Items))
	for i, it := range sm.Items {
		ids[i] = it.DeliveryID
		byID[it.DeliveryID] = it
	}
	// Wait for the provider's quota before claiming, so a lease covers only the send itself.
	if p.limiter != nil && n.Status != notify.StatusCanceled {
		if err := p.limiter.Wait(ctx, string(sm.Provider)+":"+sm.App, len(ids)); err != nil {
			return notify.Wrap(notify.EUNAVAILABLE, err, "send %s: rate limit wait", n.ID)
		}
	}
	start := p.clock.Now()
	claimed, busy, err := p.store.ClaimDeliveries(ctx, ids, start, start.Add(p.cfg.SendLease))
	if err != nil {
		return fmt.Errorf("send %s: claim: %w", n.ID, err)
	}
	record := func() error {
		return p.send(ctx, notify.LaneQueue(notify.StageRecord, lane(n)), n.Service, 0, recordMsg{NotificationID: n.ID})
	}
	if len(busy) > 0 {
		// Leased by another worker, or by an attempt of this very message that died: nobody else
		// will come back for them, so a later message of ours must. (Deleting this message with
		// them still SENDING would strand them.)
		items := make([]sendItem, 0, len(busy))
		for _, id := range busy {
			items = append(items, byID[id])
		}
		later := sendMsg{NotificationID: n.ID, Provider: sm.Provider, App: sm.App, Retry: sm.Retry + 1, Items: items}
		delay := notify.Backoff(sm.Retry+1, p.cfg.RetryBase, p.cfg.RetryMax, 0)
		if err := p.send(ctx, notify.LaneQueue(notify.StageSend, lane(n)), n.Service, delay, later); err != nil {
			return fmt.Errorf("send %s: re-enqueue busy: %w", n.ID, err)
		}
		p.log.InfoContext(ctx, "deliveries leased elsewhere; checking again later", "notification_id", n.ID,
			"provider", sm.Provider, "busy", len(busy), "retry_in", delay)
	}
	if len(claimed) == 0 { // all sent or leased elsewhere: nothing to do but make sure record looks
		return record()
	}
	if n.Status == notify.StatusCanceled {
		ups := make([]notify.DeliveryUpdate, len(claimed))
		for i, d := range claimed {
			ups[i] = notify.DeliveryUpdate{ID: d.ID, Status: notify.DeliverySkipped, Reason: notify.ReasonCanceled, At: start}
		}
		if _, err := p.store.CompleteDeliveries(ctx, n.ID, ups); err != nil {
			return fmt.Errorf("send %s: %w", n.ID, err)
		}
		return record()
	}

	out := make([]notify.OutboundMessage, len(claimed))
	attempts := make(map[string]int, len(claimed))
	for i, d := range claimed {
		it := byID[d.ID]
		attempts[d.ID] = d.Attempts
		out[i] = notify.OutboundMessage{
			DeliveryID: d.ID, NotificationID: n.ID, Channel: d.Channel, Address: it.Address,
			App: sm.App, Environment: it.Environment, Category: n.Category,
			Content: p.contentFor(n, d.Channel, it.Locale), CollapseID: n.EffectiveCollapseID(),
			Priority: n.Priority, TTL: n.TTL,
		}
	}
	results, err := sender.Send(ctx, out)
	if err == nil && len(results) != len(out) {
		err = notify.Errorf(notify.EINTERNAL, "%s sender returned %d results for %d messages", sm.Provider, len(results), len(out))
	}
	if err != nil {
		results = make([]notify.SendResult, len(out))
		for i := range out {
			results[i] = notify.SendResult{DeliveryID: out[i].DeliveryID, Err: err}
		}
	}

	now := p.clock.Now()
	var (
		ups     = make([]notify.DeliveryUpdate, 0, len(results))
		retry   []sendItem
		delay   time.Duration
		cleanup cleanupMsg
		sent    int
		failed  int
		reasons = map[string]int{}
	)
	for _, r := range results {
		u := notify.DeliveryUpdate{ID: r.DeliveryID, ProviderMessageID: r.ProviderMessageID, At: now}
		code := notify.ErrorCode(r.Err)
		switch {
		case r.Err == nil:
			u.Status = notify.DeliverySent
			sent++
		case notify.IsRetryable(r.Err) && attempts[r.DeliveryID] < p.cfg.MaxAttempts:
			u.Status, u.Reason, u.Detail = notify.DeliveryPending, code, notify.ErrorMessage(r.Err)
			retry = append(retry, byID[r.DeliveryID])
			delay = max(delay, notify.Backoff(attempts[r.DeliveryID], p.cfg.RetryBase, p.cfg.RetryMax, notify.RetryAfter(r.Err)))
		case notify.IsRetryable(r.Err):
			u.Status, u.Reason, u.Detail = notify.DeliveryFailed, notify.ReasonRetriesExhausted, code+": "+notify.ErrorMessage(r.Err)
		case code == notify.EDEADADDRESS:
			u.Status, u.Detail = notify.DeliveryFailed, notify.ErrorMessage(r.Err)
			it := byID[r.DeliveryID]
			if sm.Provider == notify.ProviderFCM || sm.Provider == notify.ProviderAPNs {
				u.Reason = notify.ReasonUnregistered
				cleanup.DeadTokens = append(cleanup.DeadTokens, deadToken{Token: it.Address, SeenBefore: start})
			} else {
				u.Reason = notify.ReasonBounced
				cleanup.Suppress = append(cleanup.Suppress, suppressItem{Channel: channelOf(sm.Provider), Address: it.Address, Reason: notify.ReasonBounced})
			}
		case code == notify.ESUPPRESSED:
			u.Status, u.Reason, u.Detail = notify.DeliveryFailed, notify.ReasonSuppressed, notify.ErrorMessage(r.Err)
			cleanup.Suppress = append(cleanup.Suppress, suppressItem{Channel: channelOf(sm.Provider), Address: byID[r.DeliveryID].Address, Reason: "provider_opt_out"})
		default:
			u.Status, u.Reason, u.Detail = notify.DeliveryFailed, notify.ReasonRejected, notify.ErrorMessage(r.Err)
		}
		if u.Status == notify.DeliveryFailed {
			failed++
			reasons[u.Reason]++
		}
		ups = append(ups, u)
	}
	if _, err := p.store.CompleteDeliveries(ctx, n.ID, ups); err != nil {
		return fmt.Errorf("send %s: complete: %w", n.ID, err)
	}
	if len(retry) > 0 {
		next := sendMsg{NotificationID: n.ID, Provider: sm.Provider, App: sm.App, Retry: sm.Retry + 1, Items: retry}
		if err := p.send(ctx, notify.LaneQueue(notify.StageSend, lane(n)), n.Service, delay, next); err != nil {
			return fmt.Errorf("send %s: enqueue retry: %w", n.ID, err)
		}
	}
	if len(cleanup.DeadTokens)+len(cleanup.Suppress) > 0 {
		if err := p.send(ctx, notify.StageCleanup, n.Service, 0, cleanup); err != nil {
			return fmt.Errorf("send %s: enqueue cleanup: %w", n.ID, err)
		}
	}
	dims := map[string]string{"Provider": string(sm.Provider)}
	p.metric(ctx, "Sent", sent, dims)
	p.metric(ctx, "Failed", failed, dims)
	p.metric(ctx, "Retried", len(retry), dims)
	// One summary line per batch, never one per recipient and never an address.
	p.log.InfoContext(ctx, "batch sent", "notification_id", n.ID, "provider", sm.Provider, "app", sm.App,
		"claimed", len(claimed), "sent", sent, "failed", failed, "retrying", len(retry), "retry_in", delay,
		"failure_reasons", reasons, "duration_ms", now.Sub(start).Milliseconds())
	return record()
}

func (p *Pipeline) contentFor(n *notify.Notification, ch notify.Channel, locale string) notify.Content {
	c := n.ContentFor(ch, locale)
	if p.cfg.AdPrefix && (ch == notify.ChannelPush || ch == notify.ChannelSMS) {
		c.Title = notify.AdTitle(n.Category, c.Title, true)
	}
	return c
}

func channelOf(prov notify.Provider) notify.Channel {
	switch prov {
	case notify.ProviderSES:
		return notify.ChannelEmail
	case notify.ProviderTwilio:
		return notify.ChannelSMS
	case notify.ProviderInbox:
		return notify.ChannelInbox
	}
	return notify.ChannelPush
}
