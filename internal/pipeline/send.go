package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"herald/internal/notify"
)

// cleanupMsg asks cleanup to remove dead tokens and suppress dead addresses.
type cleanupMsg struct {
	DeadTokens []deadToken    `json:"dead_tokens,omitempty"`
	Suppress   []suppressItem `json:"suppress,omitempty"`
	// Erase is the hash of a user whose erasure the API began (api.EnqueueErasure): a message of
	// its own.
	Erase string `json:"erase,omitempty"`
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

// Send returns the handler of the send queues: claim what the batch holds (so a redelivered
// batch never resends what was sent), wait for the provider's rate limit, send, classify each
// result, and enqueue retries, cleanup and record. Batches are claimed and completed as one
// record (notify.BatchStore), and on the realtime lane each delivery stored then with its
// outcome; a realtime notification without BatchClaims (AlimTalk, an express hand-over) has
// every delivery claimed and completed one by one.
func (p *Pipeline) Send() Handler {
	return func(ctx context.Context, msgs []notify.Message) []ItemFailure {
		return each(ctx, msgs, p.sendOne)
	}
}

func (p *Pipeline) sendOne(ctx context.Context, m notify.Message) error {
	if isVerdictCheck(m.Body) { // a late verdict's check (verdict.go)
		return p.checkVerdicts(ctx, m.Body)
	}
	// Each item is an object that starts with its id (sendMsg is ours): the items are decoded
	// into room for that many, not grown a doubling at a time.
	sm := sendMsg{Items: make([]sendItem, 0, min(bytes.Count(m.Body, []byte(`{"id":`)), maxItemsHint))}
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
	now := p.clock.Now()
	expired := n.Expired(now)
	if sm.HoldUntil != nil && !expired {
		if wait := sm.HoldUntil.Sub(now); wait > 0 {
			// Quiet hours for these recipients: come back when their night ends (SQS delays are
			// at most 15 minutes, so a long night is several hops), or when the notification
			// expires, to record them EXPIRED then. Nothing is claimed meanwhile.
			if at, ok := n.ExpiresAt(); ok {
				wait = min(wait, max(at.Sub(now), time.Second))
			}
			if err := p.send(ctx, notify.LaneQueue(notify.StageSend, lane(n)), n.Service, min(wait, notify.MaxQueueDelay), sm); err != nil {
				return fmt.Errorf("send %s: hold for quiet hours: %w", n.ID, err)
			}
			p.log.DebugContext(ctx, "batch held for quiet hours", "notification_id", n.ID, "until", sm.HoldUntil, "items", len(sm.Items))
			return nil
		}
	}
	sender, err := p.senderFor("send "+n.ID, sm.Provider)
	if err != nil {
		return err
	}
	// Wait for the provider's quota before claiming, so a lease covers only the send itself.
	if p.limiter != nil && n.Status != notify.StatusCanceled && !expired {
		if err := p.limiter.Wait(ctx, string(sm.Provider)+":"+sm.App, len(sm.Items)); err != nil {
			return notify.Wrap(notify.EUNAVAILABLE, err, "send %s: rate limit wait", n.ID)
		}
	}
	if sm.BatchID != "" {
		return p.sendBatch(ctx, n, sm, sender)
	}
	return p.sendDeliveries(ctx, n, sm, sender)
}

// recordLater nudges record to look at n.
func (p *Pipeline) recordLater(ctx context.Context, n *notify.Notification) error {
	return p.send(ctx, notify.LaneQueue(notify.StageRecord, lane(n)), n.Service, 0, recordMsg{NotificationID: n.ID})
}

// sendDeliveries is the realtime lane without BatchClaims: every delivery is claimed and
// completed in the store.
func (p *Pipeline) sendDeliveries(ctx context.Context, n *notify.Notification, sm sendMsg, sender notify.Sender) error {
	ids := make([]string, len(sm.Items))
	byID := make(map[string]sendItem, len(sm.Items))
	for i, it := range sm.Items {
		ids[i] = it.DeliveryID
		byID[it.DeliveryID] = it
	}
	start := p.clock.Now()
	claimed, busy, err := p.store.ClaimDeliveries(ctx, n.ID, ids, start, start.Add(p.cfg.SendLease))
	if err != nil {
		return fmt.Errorf("send %s: claim: %w", n.ID, err)
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
		return p.recordLater(ctx, n)
	}
	items := make([]sendItem, len(claimed))
	attempts := make(map[string]int, len(claimed))
	for i, d := range claimed {
		items[i] = byID[d.ID]
		attempts[d.ID] = d.Attempts
	}
	var o outcome
	switch {
	case n.Status == notify.StatusCanceled:
		o = canceled(items, start)
	case n.Expired(start):
		o = expiredOutcome(items, start)
	default:
		send, held, err := p.withoutErased(ctx, n, items, start)
		if err != nil {
			return fmt.Errorf("send %s: %w", n.ID, err)
		}
		o = p.deliver(ctx, n, sm, sender, send, func(id string) int { return attempts[id] }, start)
		o.hold(held)
		if _, err := p.fallBack(ctx, n, sm, &o, send); err != nil {
			return fmt.Errorf("send %s: %w", n.ID, err)
		}
		if err := p.awaitVerdicts(ctx, n, sm, &o, start, 1); err != nil {
			return fmt.Errorf("send %s: %w", n.ID, err)
		}
	}
	if _, err := p.store.CompleteDeliveries(ctx, n.ID, o.updates); err != nil {
		return fmt.Errorf("send %s: complete: %w", n.ID, err)
	}
	if err := p.followUp(ctx, n, sm, o, sm.Retry+1); err != nil {
		return err
	}
	p.logBatch(ctx, n, sm, o, len(claimed), start)
	return p.recordLater(ctx, n)
}

// sendBatch is the bulk lane, and the realtime lane of a notification with BatchClaims: the
// batch is claimed and completed as one store record, and its outcome counted into the
// notification's Stats with the completion; on the realtime lane each delivery is stored then,
// with its outcome (recordBatch). A batch whose holder died
// is sent again whole once its lease ends; the collapse id makes such a resend replace the first
// copy on the device.
func (p *Pipeline) sendBatch(ctx context.Context, n *notify.Notification, sm sendMsg, sender notify.Sender) error {
	start := p.clock.Now()
	if claimed, err := p.claimBatch(ctx, "send", n, sm.BatchID, sm, start); !claimed || err != nil {
		return err
	}
	ch := channelOf(sm.Provider)
	var o outcome
	switch {
	case n.Status == notify.StatusCanceled:
		o = canceled(sm.Items, start)
	case n.Expired(start):
		o = expiredOutcome(sm.Items, start)
	default:
		send, held, err := p.withoutErased(ctx, n, sm.Items, start)
		if err != nil {
			return fmt.Errorf("send %s batch %s: %w", n.ID, sm.BatchID, err)
		}
		attempt := sm.Retry + 1
		o = p.deliver(ctx, n, sm, sender, send, func(string) int { return attempt }, start)
		o.hold(held)
	}
	fallbacks, err := p.fallBack(ctx, n, sm, &o, sm.Items)
	if err != nil {
		return fmt.Errorf("send %s batch %s: %w", n.ID, sm.BatchID, err)
	}
	if err := p.awaitVerdicts(ctx, n, sm, &o, start, 1); err != nil {
		return fmt.Errorf("send %s batch %s: %w", n.ID, sm.BatchID, err)
	}
	// Retries and cleanup are enqueued before the batch is marked done: a crash in between
	// re-runs the batch, whose retry message has the same batch id and is claimed once.
	if err := p.followUp(ctx, n, sm, o, sm.Retry+1); err != nil {
		return err
	}
	if n.BatchClaims { // set only on the realtime lane (ingest's accept)
		err = p.recordBatch(ctx, n, sm, ch, o)
	} else {
		err = p.completeBatch(ctx, n, sm, ch, o, fallbacks)
	}
	if err != nil {
		return fmt.Errorf("send %s batch %s: complete: %w", n.ID, sm.BatchID, err)
	}
	p.logBatch(ctx, n, sm, o, len(sm.Items), start)
	return p.recordLater(ctx, n)
}

// withoutErased returns the items to send, and the verdicts on those whose user was erased
// after n was created (notify.ErasedBefore): skipped, never sent.
func (p *Pipeline) withoutErased(ctx context.Context, n *notify.Notification, items []sendItem, at time.Time) ([]sendItem, []notify.DeliveryUpdate, error) {
	erased, err := p.tombstones(ctx)
	if err != nil || len(erased) == 0 {
		return items, nil, err
	}
	keep := make([]sendItem, 0, len(items))
	var held []notify.DeliveryUpdate
	for _, it := range items {
		if notify.ErasedBefore(erased, it.UserID, n.CreatedAt) {
			held = append(held, notify.DeliveryUpdate{ID: it.DeliveryID, Status: notify.DeliverySkipped, Reason: notify.ReasonErased, At: at})
			continue
		}
		keep = append(keep, it)
	}
	return keep, held, nil
}

// hold adds the verdicts withoutErased made to o.
func (o *outcome) hold(held []notify.DeliveryUpdate) {
	if len(held) == 0 {
		return
	}
	o.updates = append(o.updates, held...)
	if o.reasons == nil {
		o.reasons = map[string]int{}
	}
	o.reasons[notify.ReasonErased] += len(held)
}

// canceled is the outcome of items of a canceled notification: skipped, never sent.
func canceled(items []sendItem, at time.Time) outcome {
	o := outcome{updates: make([]notify.DeliveryUpdate, len(items))}
	for i, it := range items {
		o.updates[i] = notify.DeliveryUpdate{ID: it.DeliveryID, Status: notify.DeliverySkipped, Reason: notify.ReasonCanceled, At: at}
	}
	return o
}

// expiredOutcome is the outcome of items whose notification's TTL ran out before they were
// sent: EXPIRED, never sent late.
func expiredOutcome(items []sendItem, at time.Time) outcome {
	o := outcome{updates: make([]notify.DeliveryUpdate, len(items)), expired: len(items)}
	for i, it := range items {
		o.updates[i] = notify.DeliveryUpdate{ID: it.DeliveryID, Status: notify.DeliveryExpired, Reason: notify.ReasonExpired,
			Detail: "its ttl ran out before it could be sent", At: at}
	}
	return o
}

// outcome is what one provider call decided for the items sent.
type outcome struct {
	updates []notify.DeliveryUpdate
	retry   []sendItem
	delay   time.Duration
	cleanup cleanupMsg
	sent    int
	failed  int
	expired int
	reasons map[string]int
	// fellBack counts the AlimTalk deliveries handed to an SMS/LMS fallback.
	fellBack int
	// pending are the deliveries accepted with their verdict to come (verdict.go).
	pending []verdictItem
}

// MetricProviderAuthFailed counts the deliveries a provider refused for Herald's credentials,
// account or balance (dimension Provider, with the Env of the runtime's metrics).
const MetricProviderAuthFailed = "ProviderAuthFailed"

// authAlertEvery is how often one process tells operators that a provider refuses Herald's
// credentials: each refusal fails its deliveries, the alert says so once a minute.
const authAlertEvery = time.Minute

// providerAuthFailed counts refused deliveries (metric ProviderAuthFailed, dimension Provider)
// and emits EventProviderAuthFailed, at most once per provider per authAlertEvery.
func (p *Pipeline) providerAuthFailed(ctx context.Context, n *notify.Notification, prov notify.Provider, err error, refused int) {
	p.metric(ctx, MetricProviderAuthFailed, refused, map[string]string{"Provider": string(prov)})
	now := p.clock.Now()
	p.authMu.Lock()
	last, seen := p.authAlerted[prov]
	due := !seen || now.Sub(last) >= authAlertEvery
	if due {
		if p.authAlerted == nil {
			p.authAlerted = map[notify.Provider]time.Time{}
		}
		p.authAlerted[prov] = now
	}
	p.authMu.Unlock()
	if !due {
		return
	}
	p.log.ErrorContext(ctx, "provider refused herald's credentials", "provider", prov, "error", notify.ErrorMessage(err), "deliveries", refused)
	p.emit(ctx, notify.Event{Type: notify.EventProviderAuthFailed, Time: now, Service: n.Service, NotificationID: n.ID,
		Recipients: refused, Detail: map[string]any{"provider": string(prov), "code": notify.ErrorCode(err), "error": notify.ErrorMessage(err)}})
}

// deliver sends items through sender and classifies each result by the one retry table:
// accepted, retry (while attempt(id) is under MaxAttempts), or a terminal failure with its
// reason, dead tokens and addresses going to cleanup.
func (p *Pipeline) deliver(ctx context.Context, n *notify.Notification, sm sendMsg, sender notify.Sender,
	items []sendItem, attempt func(id string) int, start time.Time) outcome {
	if len(items) == 0 { // every one held back (withoutErased)
		return outcome{reasons: map[string]int{}}
	}
	byID := itemsByID{items: items}
	out := make([]notify.OutboundMessage, len(items))
	// The provider may hold a message only for what is left of its TTL, not the whole of it
	// again: a message sent late still expires when it was meant to.
	ttl := n.TTL
	expiresAt, expires := n.ExpiresAt()
	if expires {
		ttl = max(expiresAt.Sub(start), time.Second)
	}
	for i, it := range items {
		content := p.contentFor(n, channelOf(sm.Provider), it.Locale)
		if it.FallbackOf != "" {
			content = fallbackContent(n, it.Locale)
		}
		out[i] = notify.OutboundMessage{
			DeliveryID: it.DeliveryID, NotificationID: n.ID, Channel: channelOf(sm.Provider), Address: it.Address,
			App: sm.App, Environment: it.Environment, Category: n.Category,
			Content: content, CollapseID: n.EffectiveCollapseID(),
			Priority: n.Priority, TTL: ttl, Attempt: attempt(it.DeliveryID), Since: n.CreatedAt,
		}
		if n.Category == notify.CategoryMarketing && out[i].Channel == notify.ChannelSMS {
			out[i].OptOutLine = p.cfg.OptOutSMS
		}
		if p.cfg.Unsubscribe != nil && n.Category == notify.CategoryMarketing && out[i].Channel == notify.ChannelEmail && it.UserID != "" {
			out[i].Unsubscribe = p.cfg.Unsubscribe(notify.Unsubscribe{UserID: it.UserID, Channel: notify.ChannelEmail, Category: notify.CategoryMarketing})
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
	o := outcome{updates: make([]notify.DeliveryUpdate, 0, len(results)), reasons: map[string]int{}}
	maxAttempts := p.cfg.MaxAttempts
	backoff := func(attempt int, retryAfter time.Duration) time.Duration {
		return notify.Backoff(attempt, p.cfg.RetryBase, p.cfg.RetryMax, retryAfter)
	}
	if rp, ok := p.cfg.ProviderRetry[sm.Provider]; ok {
		maxAttempts, backoff = rp.MaxAttempts, rp.Delay
	}
	var authErr error
	refused := 0
	defer func() {
		if authErr != nil {
			p.providerAuthFailed(ctx, n, sm.Provider, authErr, refused)
		}
	}()
	for i, r := range results {
		it := byID.find(i, r.DeliveryID)
		// The attempts before this one travel with the item (a retry's), and are stored with
		// this one's outcome.
		u := notify.DeliveryUpdate{ID: r.DeliveryID, ProviderMessageID: r.ProviderMessageID, At: now, History: it.History}
		code := notify.ErrorCode(r.Err)
		switch {
		case r.Err == nil && r.VerdictPending: // accepted, not done: awaitVerdicts checks later
			u.Status = notify.DeliverySending
			o.pending = append(o.pending, verdictItem{sendItem: it, ProviderMessageID: r.ProviderMessageID, Attempt: attempt(r.DeliveryID)})
		case r.Err == nil:
			u.Status = notify.DeliverySent
			o.sent++
		case code == notify.EAUTH:
			// The provider refused our credentials, account or balance (not retried on a
			// send: notify.IsRetryableSend): the delivery fails now and operators hear of it
			// (providerAuthFailed), not after eight retries.
			u.Status, u.Reason, u.Detail = notify.DeliveryFailed, notify.ReasonProviderAuth, notify.ErrorMessage(r.Err)
			if authErr == nil {
				authErr = r.Err
			}
			refused++
		case notify.IsRetryableSend(r.Err) && attempt(r.DeliveryID) < maxAttempts:
			wait := backoff(attempt(r.DeliveryID), notify.RetryAfter(r.Err))
			if expires && !now.Add(wait).Before(expiresAt) {
				// The retry would come after the notification expires: no retry is scheduled.
				u.Status, u.Reason, u.Detail = notify.DeliveryExpired, notify.ReasonExpired,
					"its ttl runs out before the next attempt; last attempt: "+code+": "+notify.ErrorMessage(r.Err)
				o.expired++
				break
			}
			u.Status, u.Reason, u.Detail = notify.DeliveryPending, code, notify.ErrorMessage(r.Err)
			it.History = notify.WithAttempt(it.History, notify.Attempt{Attempt: attempt(r.DeliveryID), At: now,
				Status: notify.DeliveryPending, Reason: code, Detail: u.Detail, RetryAt: now.Add(wait)})
			o.retry = append(o.retry, it)
			o.delay = max(o.delay, wait)
		case notify.IsRetryableSend(r.Err):
			u.Status, u.Reason, u.Detail = notify.DeliveryFailed, notify.ReasonRetriesExhausted, code+": "+notify.ErrorMessage(r.Err)
		case code == notify.EDEADADDRESS:
			u.Status, u.Detail = notify.DeliveryFailed, notify.ErrorMessage(r.Err)
			if sm.Provider == notify.ProviderFCM || sm.Provider == notify.ProviderAPNs || sm.Provider == notify.ProviderWebPush {
				u.Reason = notify.ReasonUnregistered
				o.cleanup.DeadTokens = append(o.cleanup.DeadTokens, deadToken{Token: it.Address, SeenBefore: start})
			} else {
				u.Reason = notify.ReasonBounced
				o.cleanup.Suppress = append(o.cleanup.Suppress, suppressItem{Channel: channelOf(sm.Provider), Address: it.Address, Reason: notify.ReasonBounced})
			}
		case code == notify.EUNREACHABLE:
			// Not the address's fault (the phone may take an SMS): nothing is suppressed, and
			// fallBack may hand the recipient to an SMS/LMS delivery.
			u.Status, u.Reason, u.Detail = notify.DeliveryFailed, notify.ReasonUnreachable, notify.ErrorMessage(r.Err)
		case code == notify.ESUPPRESSED:
			u.Status, u.Reason, u.Detail = notify.DeliveryFailed, notify.ReasonSuppressed, notify.ErrorMessage(r.Err)
			o.cleanup.Suppress = append(o.cleanup.Suppress, suppressItem{Channel: channelOf(sm.Provider), Address: it.Address, Reason: "provider_opt_out"})
		default:
			u.Status, u.Reason, u.Detail = notify.DeliveryFailed, notify.ReasonRejected, notify.ErrorMessage(r.Err)
		}
		if it.FallbackOf != "" && u.Status != notify.DeliveryPending {
			// A fallback says what it stands in for, whatever its outcome.
			u.Detail = strings.TrimSuffix(fallbackDetail(it)+"; "+u.Detail, "; ")
		}
		if u.Status == notify.DeliveryFailed {
			o.failed++
			o.reasons[u.Reason]++
		}
		o.updates = append(o.updates, u)
	}
	return o
}

// followUp enqueues an outcome's retry batch (as retry number `retry` of sm) and its cleanup.
func (p *Pipeline) followUp(ctx context.Context, n *notify.Notification, sm sendMsg, o outcome, retry int) error {
	if len(o.retry) > 0 {
		next := sendMsg{NotificationID: n.ID, Provider: sm.Provider, App: sm.App, Retry: retry, Items: o.retry}
		if sm.BatchID != "" {
			next.BatchID = retryBatchID(sm.BatchID, retry)
		}
		if err := p.send(ctx, notify.LaneQueue(notify.StageSend, lane(n)), n.Service, o.delay, next); err != nil {
			return fmt.Errorf("send %s: enqueue retry: %w", n.ID, err)
		}
	}
	if len(o.cleanup.DeadTokens)+len(o.cleanup.Suppress) > 0 {
		if err := p.send(ctx, notify.StageCleanup, n.Service, 0, o.cleanup); err != nil {
			return fmt.Errorf("send %s: enqueue cleanup: %w", n.ID, err)
		}
	}
	return nil
}

// logBatch emits the batch's metrics and its one summary line: never one per recipient and
// never an address.
func (p *Pipeline) logBatch(ctx context.Context, n *notify.Notification, sm sendMsg, o outcome, claimed int, start time.Time) {
	p.batchMetrics(ctx, sm, o)
	p.log.InfoContext(ctx, "batch sent", "notification_id", n.ID, "provider", sm.Provider, "app", sm.App,
		"batch", sm.BatchID, "claimed", claimed, "sent", o.sent, "failed", o.failed, "expired", o.expired, "retrying", len(o.retry),
		"retry_in", o.delay, "failure_reasons", o.reasons, "duration_ms", p.clock.Now().Sub(start).Milliseconds())
}

// batchMetrics emits a provider call's counters.
func (p *Pipeline) batchMetrics(ctx context.Context, sm sendMsg, o outcome) {
	dims := map[string]string{"Provider": string(sm.Provider)}
	p.metric(ctx, "Sent", o.sent, dims)
	p.metric(ctx, "Failed", o.failed, dims)
	p.metric(ctx, "Retried", len(o.retry), dims)
	p.metric(ctx, "Expired", o.expired, dims)
	if o.fellBack > 0 {
		p.metric(ctx, "FellBack", o.fellBack, dims)
	}
}

func (p *Pipeline) contentFor(n *notify.Notification, ch notify.Channel, locale string) notify.Content {
	c := n.ContentFor(ch, locale)
	if p.cfg.AdPrefix && (ch == notify.ChannelPush || ch == notify.ChannelSMS) {
		c.Title = notify.AdTitle(n.Category, c.Title, true)
	}
	return c
}

// sendsThrough reports whether prov is a provider send batches go to (the inbox is written by
// prepare and has no sender).
func sendsThrough(prov notify.Provider) bool {
	return slices.Contains(notify.Providers, prov)
}

func channelOf(prov notify.Provider) notify.Channel {
	switch prov {
	case notify.ProviderSES:
		return notify.ChannelEmail
	case notify.ProviderTwilio:
		return notify.ChannelSMS
	case notify.ProviderInbox:
		return notify.ChannelInbox
	case notify.ProviderAlimTalk:
		return notify.ChannelAlimTalk
	}
	return notify.ChannelPush
}

// senderFor is the sender of prov: EINVALID for a provider no runtime sends through (retrying
// cannot help), the retryable EINTERNAL for one this runtime is not configured for, so nothing is
// lost while an operator fixes the configuration.
func (p *Pipeline) senderFor(what string, prov notify.Provider) (notify.Sender, error) {
	sender, ok := p.senders[prov]
	switch {
	case !ok && !sendsThrough(prov):
		return nil, notify.Errorf(notify.EINVALID, "%s: unknown provider %q", what, prov)
	case !ok:
		return nil, notify.Errorf(notify.EINTERNAL, "%s: no sender configured for provider %q", what, prov)
	}
	return sender, nil
}

// claimBatch leases bulk batch batchID of n at now. claimed is false when there is nothing to do
// now: the batch is done (record is asked to look), or another worker — or an attempt of this
// message that died — holds it, and msg comes back once that lease can have ended.
func (p *Pipeline) claimBatch(ctx context.Context, what string, n *notify.Notification, batchID string, msg any, now time.Time) (claimed bool, err error) {
	c, err := p.store.ClaimBatch(ctx, n.ID, batchID, now, now.Add(p.cfg.SendLease))
	if err != nil {
		return false, fmt.Errorf("%s %s batch %s: claim: %w", what, n.ID, batchID, err)
	}
	switch c.State {
	case notify.BatchDone:
		return false, p.recordLater(ctx, n)
	case notify.BatchBusy:
		// Back when the holder's lease ends: a worker that died holding it kept it no longer.
		if err := p.send(ctx, notify.LaneQueue(notify.StageSend, lane(n)), n.Service, c.BusyFor(now, min(p.cfg.SendLease, notify.MaxQueueDelay)), msg); err != nil {
			return false, fmt.Errorf("%s %s batch %s: re-enqueue busy: %w", what, n.ID, batchID, err)
		}
		return false, nil
	}
	return true, nil
}

// completeBatch marks bulk batch sm done with the counts its outcome makes: o's verdicts on
// channel ch, and the fallback deliveries they created (counted as new ones).
func (p *Pipeline) completeBatch(ctx context.Context, n *notify.Notification, sm sendMsg, ch notify.Channel, o outcome, fallbacks []notify.Delivery) error {
	delta := map[notify.Channel]notify.ChannelStats{}
	for _, u := range o.updates {
		notify.CountDelivery(delta, ch, u.Status, u.Reason, false)
	}
	for _, d := range fallbacks {
		notify.CountDelivery(delta, d.Channel, d.Status, d.Reason, true)
	}
	_, err := p.store.CompleteBatch(ctx, n.ID, sm.BatchID, delta, p.clock.Now())
	return err
}

// recordBatch completes realtime batch sm of a BatchClaims notification: each delivery is stored
// with o's verdict for it (a retryable one PENDING, its retry batch already enqueued) and counted,
// and the batch marked done (notify.BatchStore.RecordBatch).
func (p *Pipeline) recordBatch(ctx context.Context, n *notify.Notification, sm sendMsg, ch notify.Channel, o outcome) error {
	items := itemsByID{items: sm.Items}
	attempt := sm.Retry + 1
	ds := make([]notify.Delivery, len(o.updates))
	for i, u := range o.updates {
		it := items.find(i, u.ID)
		ds[i] = notify.Delivery{
			ID: u.ID, NotificationID: n.ID, UserID: it.UserID, Channel: ch, Provider: sm.Provider, App: sm.App,
			AddressMasked: notify.MaskAddress(ch, it.Address), Status: u.Status, Reason: u.Reason, Detail: u.Detail,
			Attempts: attempt, ProviderMessageID: u.ProviderMessageID, UpdatedAt: u.At, History: u.History,
		}
	}
	_, err := p.store.RecordBatch(ctx, n.ID, sm.BatchID, ds, p.clock.Now())
	return err
}

// maxItemsHint bounds the room made for a send message's items before decoding it.
const maxItemsHint = 10000

// itemsByID finds a batch's send item by its delivery id, looking first where it was sent: a
// sender's results, and the updates made of them, come in the order of its messages, so a map of
// the batch is built only on the first miss.
type itemsByID struct {
	items []sendItem
	at    map[string]int
}

// find returns the item of delivery id, expected at position i; the zero item if there is none.
func (x *itemsByID) find(i int, id string) sendItem {
	if i >= 0 && i < len(x.items) && x.items[i].DeliveryID == id {
		return x.items[i]
	}
	if x.at == nil {
		x.at = make(map[string]int, len(x.items))
		for j, it := range x.items {
			x.at[it.DeliveryID] = j
		}
	}
	if j, ok := x.at[id]; ok {
		return x.items[j]
	}
	return sendItem{}
}
