package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"herald/internal/notify"
)

// prepareMsg asks prepare to resolve one chunk of a notification's recipients, or Count
// consecutive chunks from Chunk (a campaign page, so that its state machine sends one message a
// page: every message is a Step Functions transition, billed).
type prepareMsg struct {
	NotificationID string `json:"notification_id"`
	Chunk          int    `json:"chunk"`
	Count          int    `json:"count,omitempty"` // 0 or 1: the one chunk
	// Accepted is notify.Notification.Accepted (unix nanos), when ingest knew it.
	Accepted int64 `json:"accepted,omitempty"`
}

// maxChunksPerMessage bounds a prepareMsg's Count: a page of the campaign's (5,000 recipients
// in chunks of 500).
const maxChunksPerMessage = 10

// Ingest returns the handler of service's ingest queue: validate, dedupe on (service,
// idempotency key), persist, then schedule (future send_at) or fan out to prepare.
func (p *Pipeline) Ingest(service string, scheduler notify.Scheduler) Handler {
	return p.IngestWithCampaigns(service, scheduler, nil)
}

func (p *Pipeline) ingestOne(ctx context.Context, service string, scheduler notify.Scheduler, m notify.Message) error {
	if f, ok := fireOf(m.Body); ok {
		return p.fire(ctx, service, scheduler, f)
	}
	if b, ok, err := notify.SendBatchIn(m.Body); ok {
		if err != nil {
			return notify.Wrap(notify.EINVALID, err, "ingest: body is not a SendBatch")
		}
		return p.ingestBatch(ctx, service, scheduler, m, b)
	}
	n, err := p.parseSend(ctx, service, m)
	if err != nil {
		return err
	}
	return p.accept(ctx, service, scheduler, n)
}

// ingestBatch ingests a SendBatch: every request is checked first, so a batch with a bad one
// creates nothing and is dead-lettered naming it (notifications[i].…); then each is accepted as
// its own notification, side by side. When some fail, the message comes back (a retryable
// failure first) and the ones accepted before are deduped then, each on its own key.
func (p *Pipeline) ingestBatch(ctx context.Context, service string, scheduler notify.Scheduler, m notify.Message, b *notify.SendBatch) error {
	if err := b.Validate(); err != nil {
		return err
	}
	ns := make([]*notify.Notification, len(b.Notifications))
	for i, raw := range b.Notifications {
		sub := notify.Message{ID: BatchItemID(m.ID, i), Body: raw, ReceiveCount: m.ReceiveCount}
		if b.Attributes != nil {
			sub.Attributes = b.Attributes[i]
		}
		n, err := p.parseSend(ctx, service, sub)
		if err != nil {
			return notify.InBatch(i, err)
		}
		ns[i] = n
	}
	return decisive(notify.Concurrently(len(ns), batchParallelism, func(i int) error {
		return notify.InBatch(i, p.accept(ctx, service, scheduler, ns[i]))
	}))
}

// IngestedID is the id ingest gives the send request of message m on service's ingest queue:
// the one the API chose (AttrNotificationID), else one derived from the request's idempotency
// key or, without one, from m's id, so a redelivered message makes the same notification. A
// SendBatch's requests are messages of their own (BatchItemID).
func IngestedID(service string, m notify.Message, idempotencyKey string) string {
	if id := m.Attributes[notify.AttrNotificationID]; id != "" {
		return id
	}
	key := idempotencyKey
	if key == "" {
		key = "sqs-message:" + m.ID
	}
	return notify.NotificationIDFor(service, key, time.Time{}) // a key's id does not depend on the time
}

// BatchItemID is the message id of request i of a SendBatch that came as message id.
func BatchItemID(id string, i int) string { return id + "#" + strconv.Itoa(i) }

// batchParallelism is how many requests of one SendBatch are accepted at once: on the express
// path each waits on a provider.
const batchParallelism = 10

// parseSend decodes, renders and validates the send request in m and makes its notification,
// with the id the API chose (AttrNotificationID) or the one its key derives.
func (p *Pipeline) parseSend(ctx context.Context, service string, m notify.Message) (*notify.Notification, error) {
	req := notify.SendRequest{Recipients: notify.RecipientsRoom(m.Body)}
	if err := notify.DecodeSendRequest(m.Body, &req); err != nil {
		return nil, notify.Wrap(notify.EINVALID, err, "ingest: body is not a SendRequest")
	}
	now := p.clock.Now()
	// A producer writing straight to the queue may name a template: it is rendered here, and a
	// missing variable or unknown template dead-letters the message with its reason, as the API
	// answers 400. A request the API rendered arrives with its content, its fingerprint and the
	// template it came from in the message's attributes.
	fingerprint, tmplName, tmplVersion, err := req.Prepare(ctx, p.store, service, now, m.Attributes[notify.AttrFingerprint])
	if err != nil {
		return nil, err
	}
	if name := m.Attributes[notify.AttrTemplateName]; tmplName == "" && name != "" {
		tmplName = name
		tmplVersion, _ = strconv.Atoi(m.Attributes[notify.AttrTemplateVersion])
	}
	n := req.Notification(IngestedID(service, m, req.IdempotencyKey), service, now)
	if !m.SentAt.IsZero() && m.SentAt.Before(now) {
		n.Accepted = m.SentAt
	}
	n.Fingerprint = fingerprint
	n.TemplateName, n.TemplateVersion = tmplName, tmplVersion
	n.Stats.ChunksTotal = (len(n.Recipients) + p.cfg.ChunkSize - 1) / p.cfg.ChunkSize
	return n, nil
}

// accept stores n — taking the express path when it fits — and then schedules it or fans it
// out; a notification stored before (a redelivered message, a producer's retry) is checked to
// be the same request and taken up where it is.
func (p *Pipeline) accept(ctx context.Context, service string, scheduler notify.Scheduler, n *notify.Notification) error {
	id := n.ID
	plan, err := p.planExpress(ctx, n)
	if err != nil {
		return err
	}
	// Off the express path, a realtime notification's send batches are claimed whole and each
	// delivery stored once with its outcome — except AlimTalk's, whose verdicts come later and
	// whose fallbacks continue them one delivery at a time.
	n.BatchClaims = plan == nil && lane(n) == notify.LaneRealtime && !n.HasChannel(notify.ChannelAlimTalk)
	stored, created, err := p.store.CreateNotification(ctx, n)
	if err != nil {
		return fmt.Errorf("ingest %s: %w", id, err)
	}
	if created && plan != nil {
		return p.expressSend(ctx, n, plan)
	}
	if !created {
		if stored.Service != service {
			// Only a message that names the id itself (AttrNotificationID) can meet another
			// service's notification: it is refused, and the notification left alone.
			return notify.Errorf(notify.EFORBIDDEN, "notification %s belongs to another service", id)
		}
		if err := sameRequest(stored, n); err != nil {
			return err
		}
		p.log.InfoContext(ctx, "duplicate request", "notification_id", stored.ID, "service", service, "status", stored.Status)
		if stored.Express != nil {
			return p.recoverExpress(ctx, stored)
		}
	}
	switch stored.Status {
	case notify.StatusScheduled:
		if scheduler == nil {
			return notify.FieldError("send_at", "reserved sends are not available in this runtime")
		}
		if err := scheduler.Schedule(ctx, stored.ID, notify.IngestQueue(service), *stored.SendAt); err != nil {
			return fmt.Errorf("ingest %s: schedule: %w", stored.ID, err)
		}
		if created {
			p.log.InfoContext(ctx, "notification scheduled", "notification_id", stored.ID, "service", service, "send_at", stored.SendAt)
		}
		return nil
	case notify.StatusAccepted:
		stored.Accepted = n.Accepted
		return p.fanOut(ctx, stored)
	default: // already fanned out, finished or canceled: the first delivery of this message did the work
		return nil
	}
}

// sameRequest is nil when n repeats the request that made stored, and otherwise the permanent
// EKEYREUSED that dead-letters the message: a second request under a key already used is not
// dropped in silence. A notification stored without a fingerprint can't be compared and passes.
func sameRequest(stored, n *notify.Notification) error {
	if stored.Fingerprint == "" || stored.Fingerprint == n.Fingerprint {
		return nil
	}
	return &notify.Error{Code: notify.EKEYREUSED, Field: "idempotency_key", Message: fmt.Sprintf(
		"idempotency_key %q already names notification %s, made from a different request; this one is not sent",
		n.IdempotencyKey, stored.ID)}
}

// fanOut enqueues one prepare message per chunk and then marks the notification PROCESSING, so
// PROCESSING implies every chunk is enqueued; a crash in between re-runs it (prepare is idempotent).
// The one fan-out that makes the move emits large_send_started for a notification of at least
// notify.LargeSend recipients.
func (p *Pipeline) fanOut(ctx context.Context, n *notify.Notification) error {
	chunks := n.Stats.ChunksTotal
	if chunks == 0 {
		chunks = (n.RecipientCount + p.cfg.ChunkSize - 1) / p.cfg.ChunkSize
		if err := p.store.SetChunksTotal(ctx, n.ID, chunks); err != nil {
			return fmt.Errorf("fan out %s: %w", n.ID, err)
		}
	}
	bodies := make([]any, chunks)
	for i := range bodies {
		bodies[i] = prepareMsg{NotificationID: n.ID, Chunk: i}
		if !n.Accepted.IsZero() {
			bodies[i] = prepareMsg{NotificationID: n.ID, Chunk: i, Accepted: n.Accepted.UnixNano()}
		}
	}
	if err := p.send(ctx, notify.LaneQueue(notify.StagePrepare, lane(n)), n.Service, 0, bodies...); err != nil {
		return fmt.Errorf("fan out %s: %w", n.ID, err)
	}
	err := p.store.SetNotificationStatus(ctx, n.ID, notify.StatusProcessing, notify.StatusAccepted)
	if err != nil && !errors.Is(err, context.Canceled) && !notify.IsCode(err, notify.ECONFLICT) {
		return fmt.Errorf("fan out %s: %w", n.ID, err)
	}
	if err == nil && n.RecipientCount >= notify.LargeSend {
		p.emit(ctx, notify.Event{Type: notify.EventLargeSendStarted, Time: p.clock.Now(), Service: n.Service,
			NotificationID: n.ID, Recipients: n.RecipientCount,
			Detail: map[string]any{"category": n.Category, "channels": n.Channels, "chunks": chunks}})
	}
	p.log.InfoContext(ctx, "notification accepted", "notification_id", n.ID, "service", n.Service,
		"category", n.Category, "channels", n.Channels, "recipients", len(n.Recipients), "chunks", chunks, "lane", lane(n))
	return nil
}
