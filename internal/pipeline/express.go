package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"

	"herald/internal/notify"
)

// The express path (docs/design.md §3): a small realtime notification is prepared, sent and
// recorded by the ingest invocation that accepts it, in the fewest store writes that keep the
// guarantees —
//
//  1. the create that dedupes the request also claims its deliveries: ingest resolves the
//     recipients first, so the notification is stored with its deliveries SENDING under a
//     lease (one record);
//  2. the inbox items, as prepare writes them;
//  3. the verdicts and the final status, in the same record.
//
// Whatever needs the stage queues leaves the express path through HandOverExpress, after which
// the notification is an ordinary one: a retryable verdict (its retry goes to the send queue
// with its backoff, as the send stage would enqueue it) or a worker that died mid-send (the
// redelivered ingest message finds the lease run out and hands the notification to prepare,
// which sends what was left, with the collapse id that makes a resend replace the first copy).

// expressable reports whether n may take the express path: realtime, due now, few recipients,
// and no channel whose sends continue after the provider's answer (AlimTalk's fallback).
func (p *Pipeline) expressable(n *notify.Notification) bool {
	return p.cfg.ExpressMaxRecipients >= 0 && lane(n) == notify.LaneRealtime && n.Status == notify.StatusAccepted &&
		len(n.Recipients) > 0 && len(n.Recipients) <= p.cfg.ExpressMaxRecipients && !n.HasChannel(notify.ChannelAlimTalk)
}

// expressPlan is what the express path sends once the notification is stored.
type expressPlan struct {
	inbox   []notify.InboxItem
	batches []sendMsg
	start   time.Time
}

// planExpress resolves n and, when it fits the express path, puts its claimed deliveries in
// n.Express (and its status and chunk counts with them), so that storing n claims them. It
// returns nil, leaving n as it was, when n turns out not to fit: more deliveries than a record
// keeps, a provider without a sender, a rate limiter that fails — the stage path takes it then.
func (p *Pipeline) planExpress(ctx context.Context, n *notify.Notification) (*expressPlan, error) {
	if !p.expressable(n) {
		return nil, nil
	}
	ds, inbox, items, _, err := p.resolve(ctx, n, n.Recipients, p.clock.Now(), n.Accepted)
	if err != nil {
		return nil, fmt.Errorf("ingest %s: resolve: %w", n.ID, err)
	}
	if len(ds) > notify.ExpressMaxDeliveries {
		return nil, nil
	}
	var pending []string
	for _, d := range ds {
		if d.Status != notify.DeliveryPending {
			continue
		}
		if _, ok := p.senders[items[d.ID].prov]; !ok {
			return nil, nil
		}
		pending = append(pending, d.ID)
	}
	batches := p.batches(n, pending, items, nil)
	// The provider's quota is taken before the claim, so the lease covers only the send.
	if p.limiter != nil {
		for _, sm := range batches {
			if err := p.limiter.Wait(ctx, string(sm.Provider)+":"+sm.App, len(sm.Items)); err != nil {
				return nil, nil
			}
		}
	}
	start := p.clock.Now()
	lease := start.Add(p.cfg.SendLease)
	for i := range ds {
		if ds[i].Status == notify.DeliveryPending {
			ds[i].Status, ds[i].Attempts, ds[i].LeaseUntil, ds[i].UpdatedAt = notify.DeliverySending, 1, lease, start
		}
	}
	x := &notify.Express{Deliveries: ds, Lease: lease, Verdicts: verdictsOf(ctx).key()}
	n.Express, n.Status = x, notify.StatusProcessing
	n.Stats.ChunksTotal, n.Stats.ChunksPrepared = 1, 1
	if len(pending) == 0 && len(inbox) == 0 {
		// Nothing left to do once stored (every delivery skipped): final at once.
		n.Status, x.Lease = x.FinalStatus(), time.Time{}
	}
	return &expressPlan{inbox: inbox, batches: batches, start: start}, nil
}

// expressSend writes the inbox items, sends the batches and records the verdicts of n, stored
// with its claimed deliveries. An error leaves nothing lost: the message comes back, finds the
// claim and, once its lease has run out, hands the notification to the stage queues.
func (p *Pipeline) expressSend(ctx context.Context, n *notify.Notification, plan *expressPlan) error {
	inbox, batches, start := plan.inbox, plan.batches, plan.start
	if len(inbox) > 0 {
		if err := p.store.PutInboxItems(ctx, inbox); err != nil {
			// Prepare writes them again, and sends what is pending.
			if herr := p.handOver(ctx, n); herr != nil {
				return fmt.Errorf("ingest %s: inbox: %w (and %w)", n.ID, err, herr)
			}
			p.log.WarnContext(ctx, "express inbox write failed; handed to the stage queues", "notification_id", n.ID, "error", err.Error())
			return nil
		}
		for _, it := range inbox {
			p.inboxEv.Publish(ctx, it.UserID, notify.ItemEvent(it))
		}
	}
	first := func(string) int { return 1 }
	outcomes := make([]outcome, len(batches))
	var updates []notify.DeliveryUpdate
	retry := false
	for i, sm := range batches {
		outcomes[i] = p.deliver(ctx, n, sm, p.senders[sm.Provider], sm.Items, first, start)
		updates = append(updates, outcomes[i].updates...)
		retry = retry || len(outcomes[i].retry) > 0
	}
	if retry {
		// A retry is the send stage's: the deliveries become records first, so its message
		// finds them to claim.
		if err := p.store.HandOverExpress(ctx, n.ID, updates, false); err != nil {
			return fmt.Errorf("ingest %s: hand over: %w", n.ID, err)
		}
	} else if vb := verdictsOf(ctx); vb != nil && n.Express.Verdicts != "" {
		// Recorded with the invocation's other express notifications once they are all sent.
		vb.add(ctx, n.Express.Verdicts, notify.ExpressDone{ID: n.ID, Updates: updates})
	} else {
		if _, err := p.store.CompleteExpress(ctx, n.ID, updates); err != nil {
			return fmt.Errorf("ingest %s: complete: %w", n.ID, err)
		}
	}
	sum := summaryOf(ctx)
	for i, sm := range batches {
		if err := p.followUp(ctx, n, sm, outcomes[i], 1); err != nil {
			return err
		}
		p.batchMetrics(ctx, sm, outcomes[i])
		sum.add(n.ID, outcomes[i])
	}
	if len(batches) == 0 {
		sum.add(n.ID, outcome{})
	}
	if retry {
		return p.recordLater(ctx, n)
	}
	p.metric(ctx, "Express", 1, nil)
	return nil
}

// expressSummary gathers an ingest batch's express sends for its one log line: a line per
// notification would be a line per recipient, and CloudWatch Logs bills every byte.
type expressSummary struct {
	mu                             sync.Mutex
	ids                            []string
	sent, failed, expired, retried int
	reasons                        map[string]int
	start                          time.Time
}

type summaryKey struct{}

func withSummary(ctx context.Context, now time.Time) (context.Context, *expressSummary) {
	s := &expressSummary{reasons: map[string]int{}, start: now}
	return context.WithValue(ctx, summaryKey{}, s), s
}

// summaryOf is ctx's summary, or one that goes nowhere.
func summaryOf(ctx context.Context) *expressSummary {
	if s, ok := ctx.Value(summaryKey{}).(*expressSummary); ok {
		return s
	}
	return &expressSummary{reasons: map[string]int{}}
}

func (s *expressSummary) add(id string, o outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 || s.ids[len(s.ids)-1] != id {
		s.ids = append(s.ids, id)
	}
	s.sent, s.failed, s.expired, s.retried = s.sent+o.sent, s.failed+o.failed, s.expired+o.expired, s.retried+len(o.retry)
	for r, k := range o.reasons {
		s.reasons[r] += k
	}
}

// log writes the batch's line, if it sent anything on the express path.
func (s *expressSummary) log(ctx context.Context, p *Pipeline, service string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 {
		return
	}
	p.log.InfoContext(ctx, "express batch sent", "service", service, "notifications", len(s.ids), "notification_ids", s.ids,
		"sent", s.sent, "failed", s.failed, "expired", s.expired, "retrying", s.retried, "failure_reasons", s.reasons,
		"duration_ms", p.clock.Now().Sub(s.start).Milliseconds())
}

// recoverExpress is a redelivered ingest message's look at an express notification it (or a
// producer's retry) already stored: nothing to do once it is final; while its lease runs, come
// back later; after, the worker that held it died mid-send, so the stage queues take over.
func (p *Pipeline) recoverExpress(ctx context.Context, n *notify.Notification) error {
	if n.Status.Final() || n.Status != notify.StatusProcessing {
		return nil // done, or canceled: nothing of it is sent any more
	}
	if wait := n.Express.Lease.Sub(p.clock.Now()); wait > 0 {
		return &notify.Error{Code: notify.EUNAVAILABLE, RetryAfter: wait + time.Second,
			Message: fmt.Sprintf("ingest %s: its express send is in flight; looking again when its lease ends", n.ID)}
	}
	if err := p.handOver(ctx, n); err != nil {
		return err
	}
	p.log.WarnContext(ctx, "express send interrupted; handed to the stage queues", "notification_id", n.ID, "service", n.Service)
	return nil
}

// handOver gives an express notification whose send did not finish to prepare, which writes
// its inbox items again and sends what is pending (HandOverExpress with reprepare).
func (p *Pipeline) handOver(ctx context.Context, n *notify.Notification) error {
	if err := p.store.HandOverExpress(ctx, n.ID, nil, true); err != nil {
		return fmt.Errorf("ingest %s: hand over: %w", n.ID, err)
	}
	return p.fanOut(ctx, n)
}

// verdictBatch gathers the verdicts of an ingest invocation's express notifications, to record
// them with one CompleteExpressBatch per verdictsPerBatch of them (docs/design.md §10): on
// DynamoDB one item for all of them instead of one write each. Each notification names its batch
// when it is created (Express.Verdicts). A batch that cannot be recorded is recorded one
// notification at a time; one that fails even so fails its message, which comes back and finds
// the notification as a crashed worker would have left it.
type verdictBatch struct {
	mu   sync.Mutex
	id   string
	n    int
	done map[string][]batchedVerdict
}

type batchedVerdict struct {
	messageID string
	done      notify.ExpressDone
}

// verdictsPerBatch bounds one batch's record (a few dozen bytes a delivery).
const verdictsPerBatch = 100

type verdictsKey struct{}
type messageIDKey struct{}

func withVerdicts(ctx context.Context) (context.Context, *verdictBatch) {
	v := &verdictBatch{id: notify.NewID("", time.Now()), done: map[string][]batchedVerdict{}}
	return context.WithValue(ctx, verdictsKey{}, v), v
}

// verdictsOf is ctx's verdict batch, or nil outside an ingest invocation.
func verdictsOf(ctx context.Context) *verdictBatch {
	v, _ := ctx.Value(verdictsKey{}).(*verdictBatch)
	return v
}

func withMessageID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, messageIDKey{}, id)
}

// key is the batch the next express notification names; "" without a batch.
func (v *verdictBatch) key() string {
	if v == nil {
		return ""
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	k := fmt.Sprintf("%s.%d", v.id, v.n/verdictsPerBatch)
	v.n++
	return k
}

func (v *verdictBatch) add(ctx context.Context, key string, d notify.ExpressDone) {
	id, _ := ctx.Value(messageIDKey{}).(string)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.done[key] = append(v.done[key], batchedVerdict{messageID: id, done: d})
}

// record writes every batch's verdicts and returns fails with the messages whose verdicts could
// not be written added.
func (v *verdictBatch) record(ctx context.Context, p *Pipeline, fails []ItemFailure) []ItemFailure {
	failed := map[string]bool{}
	for _, f := range fails {
		failed[f.MessageID] = true
	}
	for key, vs := range v.done {
		dones := make([]notify.ExpressDone, len(vs))
		for i, bv := range vs {
			dones[i] = bv.done
		}
		err := p.store.CompleteExpressBatch(ctx, key, dones)
		if err == nil {
			continue
		}
		p.log.WarnContext(ctx, "express verdicts not recorded as a batch; recording them one by one", "batch", key, "notifications", len(dones), "error", err.Error())
		for _, bv := range vs {
			if _, err := p.store.CompleteExpress(ctx, bv.done.ID, bv.done.Updates); err != nil && !failed[bv.messageID] {
				failed[bv.messageID] = true
				fails = append(fails, ItemFailure{MessageID: bv.messageID, Err: fmt.Errorf("ingest %s: complete: %w", bv.done.ID, err)})
			}
		}
	}
	return fails
}
