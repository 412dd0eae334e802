package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"herald/internal/notify"
)

// Late verdicts. Some providers accept a message first and give their final verdict later:
// Solapi answers an AlimTalk with "accepted" (2000), and Kakao's verdict on the recipient — not a
// KakaoTalk user (3104), AlimTalk blocked (3107), delivered (4000) — reaches Solapi's message list
// seconds to minutes later. A delivery the sender reports VerdictPending is not done: on the
// realtime lane it stays SENDING, its provider message id recorded and its lease renewed past
// the verdict deadline (so a duplicate of its send message finds it busy, never sends it again);
// on the bulk lane it is left out of the batch's counts. Either way Stats.Complete stays false
// and record cannot finish the notification early. Instead a verdict check — a message of its
// own kind on the lane's send queue, so no new queue or permission exists for it — carries the
// provider message ids and asks the sender (notify.VerdictChecker) in one call per check, after
// Config.VerdictCheck (30 s), then twice as long each time up to the 15 minutes SQS can delay a
// message. Each verdict is classified by
// deliver, exactly as an immediate answer would be: delivered is SENT, unreachable goes to the
// SMS/LMS fallback (fallBack), a retryable failure is sent again, a permanent one FAILED. A
// delivery still without a verdict Config.VerdictDeadline (24 h) after it was accepted is
// counted SENT with reason "verdict_unknown": the provider took it, and nothing says it failed.
//
// Idempotency: on the realtime lane a verdict completes a delivery only while it is SENDING, and
// the fallback's SMS delivery id derives from the AlimTalk one, so a redelivered or duplicated
// check sends and counts nothing twice. On the bulk lane the check of a batch is itself claimed
// as a batch (named after the send batch), and only once every delivery in it has its verdict:
// until then the whole check goes round again, so two runs can never split it differently.

// verdictKind marks a verdict check among the send batches of a send queue.
const verdictKind = "verdict_check"

// Verdict check defaults (Config.VerdictCheck, Config.VerdictDeadline).
const (
	DefaultVerdictCheck    = 30 * time.Second
	DefaultVerdictDeadline = 24 * time.Hour
)

// verdictMsg asks the send stage for the verdicts of accepted deliveries.
type verdictMsg struct {
	Kind           string          `json:"kind"` // verdictKind
	NotificationID string          `json:"notification_id"`
	Provider       notify.Provider `json:"provider"`
	App            string          `json:"app,omitempty"`
	// Batch is the bulk lane's send batch these deliveries were sent in, Part which check of it
	// this is when it needed several: the check claims Batch.verdicts<Part> once.
	Batch  string        `json:"batch,omitempty"`
	Part   int           `json:"part,omitempty"`
	Retry  int           `json:"retry,omitempty"` // the send's retry number: a retried verdict continues from it
	Check  int           `json:"check"`           // 1 for the first check
	SentAt time.Time     `json:"sent_at"`         // when the provider accepted them: the deadline counts from it
	Items  []verdictItem `json:"items"`
}

type verdictItem struct {
	sendItem
	ProviderMessageID string `json:"provider_message_id"`
	Attempt           int    `json:"attempt,omitempty"` // the send attempt that was accepted
}

// isVerdictCheck reports whether a send queue's message is a verdict check (checkVerdicts
// decodes it) rather than a send batch.
func isVerdictCheck(body []byte) bool {
	if !bytes.Contains(body, []byte(`"`+verdictKind+`"`)) {
		return false
	}
	var k struct {
		Kind string `json:"kind"`
	}
	return json.Unmarshal(body, &k) == nil && k.Kind == verdictKind
}

// verdictDelay is how long check number `check` waits: VerdictCheck doubled each time, at most
// 15 minutes (SQS's longest delay), and never past the deadline.
func (p *Pipeline) verdictDelay(check int, sentAt time.Time) time.Duration {
	d := p.cfg.VerdictCheck
	for i := 1; i < check && d < notify.MaxQueueDelay; i++ {
		d *= 2
	}
	d = min(d, notify.MaxQueueDelay)
	if left := sentAt.Add(p.cfg.VerdictDeadline).Sub(p.clock.Now()); left < d {
		d = max(left, time.Second)
	}
	return d
}

// awaitVerdicts turns o's deliveries whose verdict is pending into SENDING updates that keep
// them claimed until past the verdict deadline (recording the provider's message id, counting
// nothing), and enqueues their verdict check (number `check`, counting from sentAt) on the
// lane's send queue. It runs before o is stored, so a delivery is never left without a check
// that will complete it.
func (p *Pipeline) awaitVerdicts(ctx context.Context, n *notify.Notification, sm sendMsg, o *outcome, sentAt time.Time, check int) error {
	if len(o.pending) == 0 {
		return nil
	}
	pending := make(map[string]bool, len(o.pending))
	for _, it := range o.pending {
		pending[it.DeliveryID] = true
	}
	delay := p.verdictDelay(check, sentAt)
	// The lease outlasts the last check, so no duplicate of the send can claim and send again
	// meanwhile; the check completes it whatever the lease.
	lease := sentAt.Add(p.cfg.VerdictDeadline + notify.MaxQueueDelay)
	for i := range o.updates {
		if u := &o.updates[i]; pending[u.ID] {
			u.Status, u.LeaseUntil = notify.DeliverySending, lease
			u.Detail = fmt.Sprintf("accepted by %s; its verdict is checked from %s", sm.Provider, p.clock.Now().Add(delay).UTC().Format(time.RFC3339))
		}
	}

	size := maxVerdictBatch(p.senders[sm.Provider])
	var msgs []any
	for part, rest := 0, o.pending; len(rest) > 0; part++ {
		k := min(len(rest), size)
		msgs = append(msgs, verdictMsg{Kind: verdictKind, NotificationID: n.ID, Provider: sm.Provider, App: sm.App,
			Batch: sm.BatchID, Part: part, Retry: sm.Retry, Check: check, SentAt: sentAt, Items: rest[:k]})
		rest = rest[k:]
	}
	if err := p.send(ctx, notify.LaneQueue(notify.StageSend, lane(n)), n.Service, delay, msgs...); err != nil {
		return fmt.Errorf("enqueue verdict check: %w", err)
	}
	if check == 1 { // deliveries accepted with their verdict to come, each counted once
		p.metric(ctx, "VerdictsPending", len(o.pending), map[string]string{"Provider": string(sm.Provider)})
	}
	p.log.DebugContext(ctx, "verdicts pending", "notification_id", n.ID, "provider", sm.Provider,
		"deliveries", len(o.pending), "check", check, "check_in", delay)
	o.pending = nil
	return nil
}

// maxVerdictBatch is how many deliveries one verdict check of s asks about.
func maxVerdictBatch(s notify.Sender) int {
	if c, ok := s.(notify.VerdictChecker); ok && c.MaxVerdictBatch() > 0 {
		return c.MaxVerdictBatch()
	}
	return 50
}

// checkVerdicts is the send stage's handling of a verdict check.
func (p *Pipeline) checkVerdicts(ctx context.Context, body []byte) error {
	var vm verdictMsg
	if err := decode(body, &vm); err != nil {
		return err
	}
	n, err := p.notification(ctx, vm.NotificationID)
	if notify.IsCode(err, notify.ENOTFOUND) {
		return notify.Wrap(notify.EINVALID, err, "verdict check: unknown notification %s", vm.NotificationID)
	}
	if err != nil {
		return fmt.Errorf("verdict check %s: %w", vm.NotificationID, err)
	}
	sender, err := p.senderFor("verdict check "+n.ID, vm.Provider)
	if err != nil {
		return err
	}
	checker, isChecker := sender.(notify.VerdictChecker)
	switch {
	case !isChecker:
		// Retryable: the configuration may be fixed, and the deliveries wait SENDING meanwhile.
		return notify.Errorf(notify.EINTERNAL, "verdict check %s: no %s sender that reads verdicts is configured", n.ID, vm.Provider)
	case len(vm.Items) == 0:
		return nil
	}

	now := p.clock.Now()
	qs := make([]notify.VerdictQuery, len(vm.Items))
	for i, it := range vm.Items {
		qs[i] = notify.VerdictQuery{DeliveryID: it.DeliveryID, ProviderMessageID: it.ProviderMessageID, Address: it.Address}
	}
	results, err := checker.Verdicts(ctx, qs)
	if err == nil && len(results) != len(qs) {
		err = notify.Errorf(notify.EINTERNAL, "%s verdicts: %d results for %d queries", vm.Provider, len(results), len(qs))
	}
	if err != nil {
		if !notify.IsRetryable(err) {
			return fmt.Errorf("verdict check %s: %w", n.ID, err)
		}
		// The provider could not be asked now: as if nothing were in yet, so the checks keep
		// their schedule (and their deadline) rather than burning the message's receives.
		p.log.WarnContext(ctx, "verdict check failed; asking again later", "notification_id", n.ID,
			"provider", vm.Provider, "deliveries", len(qs), "check", vm.Check, "code", notify.ErrorCode(err), "error", err.Error())
		results = make([]notify.SendResult, len(qs))
		for i, q := range qs {
			results[i] = notify.SendResult{DeliveryID: q.DeliveryID, ProviderMessageID: q.ProviderMessageID, VerdictPending: true}
		}
	}
	pastDeadline := !now.Before(vm.SentAt.Add(p.cfg.VerdictDeadline))
	unknown := map[string]bool{}
	stillPending := 0
	for i := range results {
		results[i].ProviderMessageID = qs[i].ProviderMessageID
		if !results[i].VerdictPending {
			continue
		}
		if pastDeadline {
			results[i].VerdictPending = false
			unknown[results[i].DeliveryID] = true
			continue
		}
		stillPending++
	}

	sm := sendMsg{NotificationID: n.ID, Provider: vm.Provider, App: vm.App, Retry: vm.Retry}
	if vm.Batch != "" {
		if stillPending > 0 {
			// The bulk lane counts a check once, whole: go round again until every verdict is in.
			next := vm
			next.Check++
			if err := p.send(ctx, notify.LaneQueue(notify.StageSend, lane(n)), n.Service, p.verdictDelay(next.Check, vm.SentAt), next); err != nil {
				return fmt.Errorf("verdict check %s batch %s: enqueue next check: %w", n.ID, vm.Batch, err)
			}
			return nil
		}
		sm.BatchID = vm.Batch + ".verdicts" + strconv.Itoa(vm.Part)
		if claimed, err := p.claimBatch(ctx, "verdict check", n, sm.BatchID, vm, now); !claimed || err != nil {
			return err
		}
	}

	items := make([]sendItem, len(vm.Items))
	attempts := make(map[string]int, len(vm.Items))
	for i, it := range vm.Items {
		items[i] = it.sendItem
		attempts[it.DeliveryID] = max(it.Attempt, 1)
	}
	o := p.deliver(ctx, n, sm, answered{prov: vm.Provider, results: results}, items, func(id string) int { return attempts[id] }, now)
	for i := range o.updates {
		if u := &o.updates[i]; unknown[u.ID] && u.Status == notify.DeliverySent {
			u.Reason = notify.ReasonVerdictUnknown
			u.Detail = fmt.Sprintf("accepted by %s; no final verdict within %s", vm.Provider, p.cfg.VerdictDeadline)
		}
	}
	fallbacks, err := p.fallBack(ctx, n, sm, &o, items)
	if err != nil {
		return fmt.Errorf("verdict check %s: %w", n.ID, err)
	}
	if err := p.awaitVerdicts(ctx, n, sm, &o, vm.SentAt, vm.Check+1); err != nil {
		return fmt.Errorf("verdict check %s: %w", n.ID, err)
	}
	if sm.BatchID == "" {
		if _, err := p.store.CompleteDeliveries(ctx, n.ID, o.updates); err != nil {
			return fmt.Errorf("verdict check %s: complete: %w", n.ID, err)
		}
		if err := p.followUp(ctx, n, sm, o, sm.Retry+1); err != nil {
			return err
		}
	} else {
		if err := p.followUp(ctx, n, sm, o, sm.Retry+1); err != nil {
			return err
		}
		if err := p.completeBatch(ctx, n, sm, channelOf(vm.Provider), o, fallbacks); err != nil {
			return fmt.Errorf("verdict check %s batch %s: complete: %w", n.ID, sm.BatchID, err)
		}
	}
	p.metric(ctx, "VerdictUnknown", len(unknown), map[string]string{"Provider": string(vm.Provider)})
	p.logBatch(ctx, n, sm, o, len(items), now)
	return p.recordLater(ctx, n)
}

// answered is a Sender that sends nothing: it gives deliver the verdicts a check read, so they
// are classified by the very code that classifies a provider's immediate answer.
type answered struct {
	prov    notify.Provider
	results []notify.SendResult
}

func (a answered) Provider() notify.Provider { return a.prov }
func (a answered) MaxBatch() int             { return len(a.results) }
func (a answered) Send(_ context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	byID := make(map[string]notify.SendResult, len(a.results))
	for _, r := range a.results {
		byID[r.DeliveryID] = r
	}
	out := make([]notify.SendResult, len(msgs))
	for i, m := range msgs {
		r, ok := byID[m.DeliveryID]
		if !ok {
			r = notify.SendResult{DeliveryID: m.DeliveryID, Err: notify.Errorf(notify.EINTERNAL, "no verdict read for %s", m.DeliveryID)}
		}
		out[i] = r
	}
	return out, nil
}
