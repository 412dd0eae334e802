// Package pipeline holds Herald's stages — ingest, prepare, send, record, cleanup and bounce —
// as plain functions over the ports in internal/notify. The AWS runtime calls them from Lambda
// handlers fed by SQS; the local runtime calls them from worker pools over the SQLite queue. No
// stage knows which runtime it runs in.
package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"herald/internal/erasure"
	"herald/internal/notify"
)

// Config tunes the stages. Zero fields take the defaults in withDefaults.
type Config struct {
	ChunkSize   int // recipients per prepare message (default 500)
	MaxAttempts int // send attempts per delivery before FAILED retries_exhausted (default 8)
	// ProviderRetry overrides MaxAttempts and the exponential backoff for a provider: AlimTalk
	// retries a few times at fixed delays (config retry.providers).
	ProviderRetry   map[notify.Provider]notify.RetryPolicy
	RetryBase       time.Duration // first retry delay (default 1s)
	RetryMax        time.Duration // longest retry delay (default 5m; SQS delay caps at 15m)
	SendLease       time.Duration // how long a claimed delivery is ours (default 60s = send queue visibility)
	InboxTTL        time.Duration // inbox item lifetime when the notification has no TTL (default 30 days)
	NotificationTTL time.Duration // how long the notification cache trusts an entry (default 2s)
	// QuietHours is the night-time rule for marketing notifications that carry none of their
	// own; the zero value (Enabled false) holds nothing.
	QuietHours notify.QuietHours
	// AdPrefix starts marketing push and SMS titles with "(광고)".
	AdPrefix bool
	// Unsubscribe is the one-click unsubscribe URL of what it names (a user's marketing email),
	// which a marketing email to a known user carries (RFC 8058); nil sends none.
	Unsubscribe func(notify.Unsubscribe) string
	// OptOutSMS is the free refusal line a marketing SMS ends with (an AlimTalk's SMS fallback of
	// a marketing message too); "" adds none.
	OptOutSMS        string
	MaxSendBatchSize map[notify.Provider]int
	// AlimTalkFallback sends the text of an AlimTalk that KakaoTalk cannot deliver as SMS/LMS,
	// unless the send says otherwise (see fallBack).
	AlimTalkFallback bool
	// ExpressMaxRecipients is the most recipients a realtime notification may have to take the
	// express path (default 4; negative turns the path off).
	ExpressMaxRecipients int
	// VerdictCheck is how long after a provider accepted a message with its verdict to come
	// (AlimTalk) the first verdict check waits; each next one waits twice as long, at most 15
	// minutes (default 30s). VerdictDeadline is how long verdicts are awaited before such a
	// delivery counts SENT with reason verdict_unknown (default 24h). See verdict.go.
	VerdictCheck    time.Duration
	VerdictDeadline time.Duration
}

func (c Config) withDefaults() Config {
	if c.ChunkSize <= 0 {
		c.ChunkSize = 500
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 8
	}
	if c.RetryBase <= 0 {
		c.RetryBase = time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 5 * time.Minute
	}
	if c.RetryMax > notify.MaxQueueDelay {
		c.RetryMax = notify.MaxQueueDelay
	}
	if c.SendLease <= 0 {
		c.SendLease = 60 * time.Second
	}
	if c.InboxTTL <= 0 {
		c.InboxTTL = 30 * 24 * time.Hour
	}
	if c.ExpressMaxRecipients == 0 {
		c.ExpressMaxRecipients = 4
	}
	if c.VerdictCheck <= 0 {
		c.VerdictCheck = DefaultVerdictCheck
	}
	c.VerdictCheck = min(c.VerdictCheck, notify.MaxQueueDelay)
	if c.VerdictDeadline <= 0 {
		c.VerdictDeadline = DefaultVerdictDeadline
	}
	if c.NotificationTTL <= 0 {
		c.NotificationTTL = 2 * time.Second
	}
	return c
}

// Pipeline holds the ports the stages use.
type Pipeline struct {
	store   notify.Store
	queue   notify.Producer
	senders map[notify.Provider]notify.Sender
	limiter notify.RateLimiter
	clock   notify.Clock
	log     *slog.Logger
	metrics notify.Metrics
	events  notify.Events
	inboxEv notify.InboxEvents
	cfg     Config
	// erased holds back deliveries to users erased after their notification was created
	// (notify.ErasedBefore); nil when the store keeps no erasures.
	erased *notify.Tombstones
	// eraser finishes the erasures the API began (Cleanup); nil likewise.
	eraser *erasure.Eraser

	cacheMu sync.Mutex
	cache   map[string]cachedNotification

	authMu      sync.Mutex
	authAlerted map[notify.Provider]time.Time // when providerAuthFailed last emitted, per provider
}

type cachedNotification struct {
	n  *notify.Notification
	at time.Time
}

// Deps are the ports a Pipeline is built from.
type Deps struct {
	Store   notify.Store
	Queue   notify.Producer
	Senders []notify.Sender
	Limiter notify.RateLimiter // nil: no limit
	Clock   notify.Clock       // nil: system clock
	Logger  *slog.Logger       // nil: slog.Default()
	Metrics notify.Metrics     // nil: none
	Events  notify.Events      // operator events (large_send_started); nil: logged on Logger only
	// InboxEvents hears every inbox item prepare writes (the live inbox stream); nil: none.
	InboxEvents notify.InboxEvents
}

// New returns a Pipeline.
func New(d Deps, cfg Config) *Pipeline {
	p := &Pipeline{
		store:   d.Store,
		queue:   d.Queue,
		senders: map[notify.Provider]notify.Sender{},
		limiter: d.Limiter,
		clock:   d.Clock,
		log:     d.Logger,
		metrics: d.Metrics,
		events:  d.Events,
		inboxEv: d.InboxEvents,
		cfg:     cfg.withDefaults(),
		cache:   map[string]cachedNotification{},
	}
	for _, s := range d.Senders {
		p.senders[s.Provider()] = s
		// A sender that paces itself by a finer key than its provider app shares the limiter.
		if sl, ok := s.(notify.SelfLimiting); ok && d.Limiter != nil {
			sl.SetRateLimiter(d.Limiter)
		}
	}
	if p.clock == nil {
		p.clock = notify.SystemClock{}
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.events == nil {
		p.events = notify.LogEvents{Logger: p.log}
	}
	if p.inboxEv == nil {
		p.inboxEv = notify.NopInboxEvents{}
	}
	if es, ok := d.Store.(notify.ErasureStore); ok {
		p.erased = &notify.Tombstones{Store: es, Clock: p.clock}
		p.eraser = erasure.For(d.Store, p.inboxEv, p.clock, p.log)
	}
	return p
}

// tombstones returns the recent erasures (nil when there are none or none are kept).
func (p *Pipeline) tombstones(ctx context.Context) (map[string]time.Time, error) {
	if p.erased == nil {
		return nil, nil
	}
	return p.erased.Erased(ctx)
}

// emit hands e to the operator events. They are advisory: a failure is logged (the adapter
// counts it) and never fails the message that caused it.
func (p *Pipeline) emit(ctx context.Context, e notify.Event) {
	if err := p.events.Emit(ctx, e); err != nil {
		p.log.WarnContext(ctx, "operator event not emitted", "event", e.Type, "notification_id", e.NotificationID, "error", err)
	}
}

func (p *Pipeline) metric(ctx context.Context, name string, value int, dims map[string]string) {
	if p.metrics != nil && value > 0 {
		p.metrics.Add(ctx, name, value, dims)
	}
}

// ItemFailure is one message of a batch that was not processed.
type ItemFailure struct {
	MessageID string
	Err       error
}

// Handler processes a batch of messages from one queue and returns the ones that failed; every
// other message counts as done.
type Handler func(ctx context.Context, msgs []notify.Message) []ItemFailure

// Refuse is the handler of a queue that is no stage's: every message fails with err (a
// permanent one, so it is dead-lettered with its reason) and nothing is done.
func Refuse(err error) Handler {
	return func(_ context.Context, msgs []notify.Message) []ItemFailure {
		out := make([]ItemFailure, len(msgs))
		for i, m := range msgs {
			out[i] = ItemFailure{MessageID: m.ID, Err: err}
		}
		return out
	}
}

// each runs fn for every message and collects failures, so one bad message never fails the batch.
// eachConcurrently is each with the messages handled side by side: the ingest batch, whose
// messages are independent notifications that, on the express path, each wait on a provider.
// Two messages of one notification (a producer's retry) meet at the store's conditional create.
func eachConcurrently(ctx context.Context, msgs []notify.Message, fn func(context.Context, notify.Message) error) []ItemFailure {
	if len(msgs) < 2 {
		return each(ctx, msgs, fn)
	}
	errs := notify.Concurrently(len(msgs), 0, func(i int) error { return fn(ctx, msgs[i]) })
	var out []ItemFailure
	for i, err := range errs {
		if err != nil {
			out = append(out, ItemFailure{MessageID: msgs[i].ID, Err: err})
		}
	}
	return out
}

// decisive is the error that decides the fate of a message done in parts (a batch's requests, a
// run's chunks): a retryable one first, so the message comes back for it; else the first
// permanent one; nil when every part succeeded.
func decisive(errs []error) error {
	var first error
	for _, err := range errs {
		if err != nil && notify.IsRetryable(err) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func each(ctx context.Context, msgs []notify.Message, fn func(context.Context, notify.Message) error) []ItemFailure {
	var out []ItemFailure
	for _, m := range msgs {
		if err := fn(ctx, m); err != nil {
			out = append(out, ItemFailure{MessageID: m.ID, Err: err})
		}
	}
	return out
}

// notification returns n from a short-lived cache; content is immutable, status may lag by
// Config.NotificationTTL.
func (p *Pipeline) notification(ctx context.Context, id string) (*notify.Notification, error) {
	now := p.clock.Now()
	p.cacheMu.Lock()
	c, ok := p.cache[id]
	p.cacheMu.Unlock()
	if ok && now.Sub(c.at) < p.cfg.NotificationTTL {
		return c.n, nil
	}
	n, err := p.store.GetNotification(ctx, id)
	if err != nil {
		return nil, err
	}
	p.cacheMu.Lock()
	if len(p.cache) > 4096 {
		for k, v := range p.cache {
			if now.Sub(v.at) >= p.cfg.NotificationTTL {
				delete(p.cache, k)
			}
		}
	}
	p.cache[id] = cachedNotification{n: n, at: now}
	p.cacheMu.Unlock()
	return n, nil
}

// send enqueues JSON bodies on queue.
func (p *Pipeline) send(ctx context.Context, queue, group string, delay time.Duration, bodies ...any) error {
	msgs := make([]notify.OutMessage, 0, len(bodies))
	for _, b := range bodies {
		raw, ok := []byte(nil), false
		if f, flat := b.(flatJSON); flat {
			raw, ok = f.appendJSON(nil)
		}
		if !ok {
			var err error
			if raw, err = json.Marshal(b); err != nil {
				return fmt.Errorf("encode message for %s: %w", queue, err)
			}
		}
		msgs = append(msgs, notify.OutMessage{Body: raw, GroupID: group, Delay: delay})
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := p.queue.Send(ctx, queue, msgs...); err != nil {
		return fmt.Errorf("enqueue %d on %s: %w", len(msgs), queue, err)
	}
	return nil
}

// decode reads a message body into v: flat when v reads itself so and can (flatDecoder), else
// with encoding/json; then v, a stage message, checks its required fields (strict.go).
func decode(body []byte, v any) error {
	if f, ok := v.(flatDecoder); !ok || !f.decodeFlat(body) {
		if err := json.Unmarshal(body, v); err != nil {
			return notify.Wrap(notify.EINVALID, err, "undecodable message body")
		}
	}
	if c, ok := v.(checked); ok {
		return c.check()
	}
	return nil
}

func lane(n *notify.Notification) notify.Lane {
	if n.Lane == "" {
		return notify.LaneRealtime
	}
	return n.Lane
}
