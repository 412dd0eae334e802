// Package local is Herald's local runtime (`herald dev`): one process wiring the SQLite store and
// queue, worker pools that mirror Lambda's SQS event source mappings, the scheduler loop, the HTTP
// API and — in sandbox mode — fake providers on 127.0.0.1. It runs the same stage functions as
// the Lambdas.
package local

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"herald/internal/api"
	"herald/internal/campaign"
	"herald/internal/config"
	"herald/internal/export"
	"herald/internal/inboxstream"
	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/ratelimit"
	"herald/internal/sandbox"
	"herald/internal/seal"
	"herald/internal/slack"
	"herald/internal/sqlite"
	"herald/internal/webpush"
)

// Options configure a Runtime.
type Options struct {
	// IngestBacklog is how many messages a service's ingest queue may hold before the API holds
	// that service's next request back (up to 2 s, then queues it anyway): 0 is the default,
	// defaultIngestBacklog; negative turns the backpressure off. See backpressure.
	IngestBacklog int
	Config        *config.Config
	DataDir       string // holds store.db, queue.db and the sandbox's record
	Addr          string // API listen address, default 127.0.0.1:8080
	SandboxAddr   string // sandbox plain-HTTP address, default 127.0.0.1:0
	// SandboxInMemory keeps the sandbox's record in memory only (benchmarks); by default it is
	// appended to a file in DataDir so it survives restarts.
	SandboxInMemory bool
	Logger          *slog.Logger
	Clock           notify.Clock
	// HTTP bounds the API's connections (read, write and idle timeouts, header size); zero
	// fields take api's defaults, e.g. a request must arrive, body included, within 30 s.
	HTTP api.ServerLimits
	// Events receive the operator events (large_send_started, campaign_finished,
	// campaign_failed, message_dead_lettered); nil: one log line each on Logger
	// (notify.LogEvents). With alerts.slack configured — or in sandbox mode, where posts go to
	// the sandbox's fake webhook — they are posted to Slack too.
	Events notify.Events
	// ExportLinkTTL is how long an export's download link is valid; default notify.ExportLinkTTL.
	ExportLinkTTL time.Duration
	// AlertFold is the Slack alerts' folding window; 0: a minute (tests shorten it).
	AlertFold time.Duration
}

// Runtime is a running local Herald.
type Runtime struct {
	Store     *sqlite.Store
	Queue     *sqlite.Queue
	Scheduler *sqlite.Scheduler
	Sandbox   *sandbox.Server // nil unless Config.Sandbox
	Pipeline  *pipeline.Pipeline
	Campaigns *campaign.Steps  // pause, resume, cancel; the runner loop drives the rest
	Exports   *export.Builder  // builds export files under DataDir/exports
	Alerts    *slack.Notifier  // Slack alerts; nil when they are off
	Inbox     *inboxstream.Hub // the live inbox streams (GET /v1/users/{user}/inbox/stream)
	URL       string           // API base URL

	cfg     *config.Config
	log     *slog.Logger
	clock   notify.Clock
	storeDB *sqlite.DB
	queueDB *sqlite.DB
	server  *http.Server
	cancel  context.CancelFunc
	workers sync.WaitGroup
	loops   sync.WaitGroup
	closers []func() error
	unlock  func() error            // the data directory's lock, let go of after every closer
	paused  map[string]*atomic.Bool // each consumed queue's pause (SetPaused)
}

var _ notify.Consumers = (*Runtime)(nil)

// SetPaused implements notify.Consumers: queue's workers stop receiving (their batches in flight
// finish) or start again. The pause lasts until it is lifted or the process restarts.
func (r *Runtime) SetPaused(_ context.Context, queue string, paused bool) error {
	p, ok := r.paused[queue]
	if !ok {
		return notify.Errorf(notify.ENOTFOUND, "nothing consumes queue %q here", queue)
	}
	p.Store(paused)
	r.log.Info("queue consumers "+map[bool]string{true: "paused", false: "resumed"}[paused], "queue", queue)
	return nil
}

// Paused implements notify.Consumers.
func (r *Runtime) Paused(_ context.Context, queue string) (bool, error) {
	p, ok := r.paused[queue]
	if !ok {
		return false, notify.Errorf(notify.ENOTFOUND, "nothing consumes queue %q here", queue)
	}
	return p.Load(), nil
}

// Start opens the databases, starts the sandbox (if configured), the workers, the scheduler loop
// and the API. On error everything started so far is stopped.
func Start(ctx context.Context, o Options) (_ *Runtime, err error) {
	if o.Config == nil {
		return nil, errors.New("local: no config")
	}
	// A configuration built in code is held to what a file's is (config.Load validates those).
	if err := o.Config.Validate(); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:8080"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = notify.SystemClock{}
	}
	if o.Events == nil {
		o.Events = notify.LogEvents{Logger: o.Logger}
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("local: data dir: %w", err)
	}
	r := &Runtime{cfg: o.Config, log: o.Logger, clock: o.Clock}
	defer func() {
		if err != nil {
			r.closeAll()
		}
	}()
	var exclusive bool
	if r.unlock, exclusive, err = lockDataDir(o.DataDir); err != nil {
		return nil, err
	}

	box, err := seal.FromBase64(o.Config.Contacts.EncryptionKey)
	if err != nil {
		return nil, fmt.Errorf("local: contacts.encryption_key: %w", err)
	}
	if r.storeDB, err = sqlite.Open(filepath.Join(o.DataDir, "store.db")); err != nil {
		return nil, err
	}
	r.closers = append(r.closers, r.storeDB.Close)
	if r.Store, err = sqlite.NewStore(r.storeDB, box); err != nil {
		return nil, err
	}
	if r.Scheduler, err = sqlite.NewScheduler(r.storeDB); err != nil {
		return nil, err
	}
	if r.queueDB, err = sqlite.Open(filepath.Join(o.DataDir, "queue.db")); err != nil {
		return nil, err
	}
	r.closers = append(r.closers, r.queueDB.Close)
	consumers := r.consumers()
	r.paused = make(map[string]*atomic.Bool, len(consumers))
	for _, c := range consumers {
		r.paused[c.Queue] = new(atomic.Bool)
	}
	var qcfgs []notify.QueueConfig
	for _, c := range consumers {
		qcfgs = append(qcfgs,
			notify.QueueConfig{Name: c.Queue, VisibilityTimeout: c.Visibility, MaxReceiveCount: c.maxReceive, DLQ: c.DLQ},
			notify.QueueConfig{Name: c.DLQ, VisibilityTimeout: c.Visibility})
	}
	if r.Queue, err = sqlite.NewQueue(r.queueDB, qcfgs, o.Clock); err != nil {
		return nil, err
	}
	r.closers = append([]func() error{func() error { r.Queue.Close(); return nil }}, r.closers...)
	if exclusive {
		if err := r.releaseInFlight(ctx); err != nil {
			return nil, err
		}
	} else {
		o.Logger.Warn("the data directory cannot be locked here: work in flight when a run is killed comes back after its visibility timeouts and leases", "data", o.DataDir)
	}

	if o.Config.Sandbox {
		record := filepath.Join(o.DataDir, "sandbox-deliveries.jsonl")
		if o.SandboxInMemory {
			record = ""
		}
		r.Sandbox, err = sandbox.Start(sandbox.Options{
			Addr:       o.SandboxAddr,
			RecordFile: record,
			Logger:     o.Logger,
			OnBounce: func(env []byte) {
				if err := r.Queue.Send(context.Background(), notify.StageBounce, notify.OutMessage{Body: env}); err != nil {
					o.Logger.Error("sandbox: enqueue SES feedback", "error", err)
				}
			},
		})
		if err != nil {
			return nil, err
		}
		r.closers = append([]func() error{r.Sandbox.Close}, r.closers...)
	}
	r.Alerts = r.startAlerts(&o)
	senders, closeSenders, err := buildSenders(ctx, o.Config, r.Sandbox)
	if err != nil {
		return nil, err
	}
	r.closers = append([]func() error{closeSenders}, r.closers...)
	for i := range senders {
		senders[i] = yieldingOf(senders[i])
	}

	p := o.Config.Providers
	limiter := ratelimit.New(map[string]ratelimit.Rate{
		string(notify.ProviderFCM):    {PerSecond: p.FCM.RatePerSecond},
		string(notify.ProviderAPNs):   {PerSecond: p.APNs.RatePerSecond},
		string(notify.ProviderSES):    {PerSecond: p.SES.RatePerSecond},
		string(notify.ProviderTwilio): {PerSecond: p.Twilio.RatePerSecond},

		string(notify.ProviderAlimTalk): {PerSecond: p.AlimTalk.RatePerSecond},
		webpush.RateKeyPrefix:           {PerSecond: p.WebPush.RatePerSecond}, // each push service origin on its own
	}, o.Clock)
	r.Inbox = inboxstream.New(inboxstream.Options{Inbox: r.Store, Users: r.Store, Clock: o.Clock, Log: o.Logger})
	r.Pipeline = pipeline.New(pipeline.Deps{
		Store: r.Store, Queue: r.Queue, Senders: senders, Limiter: limiter, Clock: o.Clock, Logger: o.Logger,
		Events: o.Events, InboxEvents: r.Inbox,
	}, pipeline.Config{
		MaxAttempts:   o.Config.Retry.MaxAttempts,
		ProviderRetry: o.Config.ProviderRetries(),
		RetryBase:     o.Config.Retry.Base.D(),
		RetryMax:      o.Config.Retry.Max.D(),
		SendLease:     o.Config.Lanes["realtime"].Send.VisibilityTimeout.D(),
		InboxTTL:      o.Config.Inbox.TTL.D(),
		QuietHours:    o.Config.QuietHoursPolicy(),
		AdPrefix:      o.Config.Marketing.AdPrefix,
		Unsubscribe:   r.unsubscribeURL(o.Config),
		OptOutSMS:     o.Config.Marketing.OptOutSMS,
		// The one line the AlimTalk channel adds: its SMS/LMS fallback default.
		AlimTalkFallback: o.Config.Providers.AlimTalk.FallbackSMS(), ExpressMaxRecipients: o.Config.ExpressMaxRecipients(),
		VerdictCheck:    o.Config.Providers.AlimTalk.VerdictCheck.D(),
		VerdictDeadline: o.Config.Providers.AlimTalk.VerdictDeadline.D(),
	})

	r.Campaigns = campaign.New(campaign.Deps{
		Campaigns: r.Store, Audience: r.Store, Notifications: r.Store, Dispatcher: r.Pipeline,
		Broadcasts: r.Store, Clock: o.Clock, Logger: o.Logger, Events: o.Events, InboxEvents: r.Inbox,
	}, campaign.Config{InboxTTL: o.Config.Inbox.TTL.D()})

	exportDir := export.Dir{Root: o.DataDir}
	if err := exportDir.Sweep(o.Clock.Now()); err != nil {
		o.Logger.Warn("exports: sweep", "error", err)
	}
	r.Exports = export.New(export.Deps{Jobs: r.Store, Deliveries: r.Store, Notifications: r.Store, Suppressions: r.Store, Users: r.Store,
		Audit: r.Store, Addresses: r.Store, Files: exportDir,
		Clock: o.Clock, Logger: o.Logger})

	// API first, so a port conflict fails before any work starts.
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("local: listen %s: %w", o.Addr, err)
	}
	r.URL = "http://" + ln.Addr().String()
	if r.Alerts != nil {
		r.Alerts.SetConsoleURL(r.URL) // the API serves the console locally
	}
	extra := map[string]http.Handler{}
	if r.Sandbox != nil {
		extra["GET /sandbox/deliveries"] = r.Sandbox.Handler()
		extra["DELETE /sandbox/deliveries"] = r.Sandbox.Handler()
		// Subscriptions minted here get endpoints on the API's address, which a restart keeps.
		extra["POST /sandbox/webpush/subscriptions"] = r.Sandbox.Handler()
		extra["POST /sandbox/webpush/push/{subscription}"] = r.Sandbox.Handler()
		extra["GET /sandbox/slack"] = r.Sandbox.Handler()
		extra["DELETE /sandbox/slack"] = r.Sandbox.Handler()
		// The example web app (Web Push and the live inbox), on the API's origin so that its calls
		// and its stream are same-origin.
		extra["GET "+sandbox.WebAppPrefix] = sandbox.WebApp()
	}
	var producer notify.Producer = r.Queue
	if o.IngestBacklog >= 0 {
		producer = newBackpressure(r.Queue, r.Queue.Depth, cmp.Or(o.IngestBacklog, defaultIngestBacklog))
	}
	r.server = api.NewServer(api.New(api.Options{
		Store: r.Store, Queue: producer, Clock: o.Clock, Keys: o.Config.Keys(), Logger: o.Logger, Extra: extra,
		Admin: r.Queue, Queues: append(o.Config.QueueNames(), notify.QueueExport), AdminServices: o.Config.AdminServices(), Consumers: r,
		Scheduler: r.Scheduler, Apps: o.Config.ProviderApps(), CursorKey: api.CursorKeyFrom(o.Config.Contacts.EncryptionKey),
		UnsubscribeKey: notify.UnsubscribeKeyFrom(o.Config.Contacts.EncryptionKey),
		Audit:          r.Store,
		Exports:        r.Store,
		ExportFiles:    exportDir,
		ExportLinkTTL:  o.ExportLinkTTL,
		VAPIDPublicKey: o.Config.Providers.WebPush.VAPIDPublicKey, LocalPushEndpoints: o.Config.Sandbox,
		InboxEvents: r.Inbox, InboxStream: r.Inbox,
		// The store creates and reads campaigns; the steps pause, resume and cancel them.
		Campaigns: struct {
			notify.CampaignStore
			*campaign.Steps
		}{r.Store, r.Campaigns},
	}), o.HTTP)
	go func() {
		if err := r.server.Serve(api.JSONErrors(ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Logger.Error("api server stopped", "error", err)
		}
	}()

	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	gate := &Gate{MaxHold: 250 * time.Millisecond, Linger: 10 * time.Millisecond}
	for _, c := range consumers {
		c.Paused = r.paused[c.Queue]
		c.Handler = r.handlerFor(c)
		c.Gate = gate
		c.Foreground = c.stage == notify.StageIngest || strings.HasSuffix(c.Queue, "-"+string(notify.LaneRealtime))
		c.ByLane = c.stage == notify.StageIngest
		c.Background = strings.HasSuffix(c.Queue, "-"+string(notify.LaneBulk))
		c.Events = o.Events
		pool(wctx, r.Queue, c.Consumer, o.Logger, &r.workers)
	}
	r.loops.Add(1)
	go r.schedulerLoop(wctx)
	r.loops.Add(1)
	go func() {
		defer r.loops.Done()
		runner := campaign.NewRunner(r.Campaigns, 250*time.Millisecond)
		runner.Yield = gate.yield
		runner.Run(wctx)
	}()
	return r, nil
}

type consumer struct {
	Consumer
	stage      string
	service    string
	maxReceive int
}

// consumers lists every queue the local runtime drains, with its event-source-mapping settings.
func (r *Runtime) consumers() []consumer {
	cfg := r.cfg
	mk := func(queue, stage, service string, c config.Consumer) consumer {
		return consumer{Consumer: Consumer{
			Queue: queue, DLQ: notify.DLQName(queue), BatchSize: c.BatchSize, MaxConcurrency: c.MaxConcurrency,
			Visibility: c.VisibilityTimeout.D(), RetryBase: cfg.Retry.Base.D(), RetryMax: cfg.Retry.Max.D(),
		}, stage: stage, service: service, maxReceive: c.MaxReceiveCount}
	}
	var out []consumer
	for _, s := range cfg.Services {
		c := mk(notify.IngestQueue(s.Name), notify.StageIngest, s.Name, config.Consumer{
			BatchSize: s.BatchSize, MaxConcurrency: s.MaxConcurrency, VisibilityTimeout: config.Duration(30 * time.Second), MaxReceiveCount: 5,
		})
		c.Window = s.BatchingWindow.D()
		out = append(out, c)
	}
	for _, l := range notify.Lanes {
		lc := cfg.Lanes[string(l)]
		out = append(out,
			mk(notify.LaneQueue(notify.StagePrepare, l), notify.StagePrepare, "", lc.Prepare),
			mk(notify.LaneQueue(notify.StageSend, l), notify.StageSend, "", lc.Send),
			mk(notify.LaneQueue(notify.StageRecord, l), notify.StageRecord, "", lc.Record))
	}
	out = append(out,
		mk(notify.StageCleanup, notify.StageCleanup, "", cfg.Stages["cleanup"]),
		mk(notify.StageBounce, notify.StageBounce, "", cfg.Stages["bounce"]),
		// One export at a time: a file is built in one pass, and the lease (2 min, extended every
		// page) is shorter than the visibility timeout.
		mk(notify.QueueExport, notify.QueueExport, "", config.Consumer{BatchSize: 1, MaxConcurrency: 1,
			VisibilityTimeout: config.Duration(5 * time.Minute), MaxReceiveCount: 5}))
	return out
}

func (r *Runtime) handlerFor(c consumer) pipeline.Handler {
	switch c.stage {
	case notify.StageIngest:
		return r.Pipeline.Ingest(c.service, r.Scheduler)
	case notify.StagePrepare:
		return r.Pipeline.Prepare()
	case notify.StageSend:
		return r.Pipeline.Send()
	case notify.StageRecord:
		return r.Pipeline.Record()
	case notify.StageCleanup:
		return r.Pipeline.Cleanup()
	case notify.QueueExport:
		return r.Exports.Handler()
	default:
		return r.Pipeline.Bounce()
	}
}

func (r *Runtime) schedulerLoop(ctx context.Context) {
	defer r.loops.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := r.Scheduler.Fire(ctx, r.clock.Now(), r.Queue); err != nil && ctx.Err() == nil {
				r.log.Error("scheduler", "error", err)
			} else if n > 0 {
				r.log.Info("scheduled sends fired", "count", n)
			}
		}
	}
}

// Shutdown stops taking requests, lets in-flight batches finish (up to ctx's deadline), and
// closes everything. Whatever did not finish stays on the durable queue for the next start.
func (r *Runtime) Shutdown(ctx context.Context) error {
	var errs []error
	if r.server != nil {
		errs = append(errs, r.server.Shutdown(ctx))
	}
	if r.Inbox != nil { // Shutdown leaves upgraded connections alone
		errs = append(errs, r.Inbox.Close())
	}
	if r.cancel != nil {
		r.cancel()
	}
	done := make(chan struct{})
	go func() { r.workers.Wait(); r.loops.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("local: drain: %w", ctx.Err()))
	}
	errs = append(errs, r.closeAll())
	return errors.Join(errs...)
}

func (r *Runtime) closeAll() error {
	var errs []error
	for _, c := range r.closers {
		errs = append(errs, c())
	}
	r.closers = nil
	if r.unlock != nil {
		errs = append(errs, r.unlock())
		r.unlock = nil
	}
	return errors.Join(errs...)
}

// releaseInFlight hands back, before any worker starts, what the process that stopped last left
// in flight — a `herald dev` killed mid-send: the queue messages its workers had received, the
// send batches they had claimed, and the express sends of the ingest messages among them. They
// are sent again now instead of after their visibility timeouts and leases (a minute by
// default); what was in flight goes again whole, with its collapse id, as it would then. Only
// with the data directory's lock, which proves no other process works on these files.
func (r *Runtime) releaseInFlight(ctx context.Context) error {
	msgs, err := r.Queue.ReleaseInFlight(ctx)
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	now := r.clock.Now()
	batches, err := r.Store.ReleaseBatchLeases(ctx, now)
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	var ids []string
	for _, m := range msgs {
		if service, ok := strings.CutPrefix(m.Queue, notify.IngestQueue("")); ok {
			ids = append(ids, ingestedIDs(service, m.Message)...)
		}
	}
	express, err := r.Store.ReleaseExpressLeases(ctx, ids, now)
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	if len(msgs) > 0 || batches > 0 || express > 0 {
		r.log.InfoContext(ctx, "released the work in flight when the last run stopped",
			"queue_messages", len(msgs), "send_batches", batches, "express_sends", express)
	}
	return nil
}

// ingestedIDs are the notification ids ingest gives the requests of message m on service's
// ingest queue (pipeline.IngestedID): the API's attribute, or one derived from the request's
// idempotency key or the message's id — for each request of a batch (notify.SendBatch). A body
// that is no send request (a reserved send's fire) names an id no notification has.
func ingestedIDs(service string, m notify.Message) []string {
	b, ok, err := notify.SendBatchIn(m.Body)
	if !ok {
		return []string{ingestedID(service, m)}
	}
	if err != nil {
		return nil
	}
	ids := make([]string, len(b.Notifications))
	for i, raw := range b.Notifications {
		sub := notify.Message{ID: pipeline.BatchItemID(m.ID, i), Body: raw}
		if i < len(b.Attributes) {
			sub.Attributes = b.Attributes[i]
		}
		ids[i] = ingestedID(service, sub)
	}
	return ids
}

// ingestedID is the id of the one send request in m.
func ingestedID(service string, m notify.Message) string {
	var req struct {
		IdempotencyKey string `json:"idempotency_key"`
	}
	_ = json.Unmarshal(m.Body, &req) // no key read: the message's id derives it, as in ingest
	return pipeline.IngestedID(service, m, req.IdempotencyKey)
}

// unsubscribeURL builds marketing email's one-click unsubscribe links: under
// marketing.unsubscribe_base_url, else the API's own address (known once it listens, before any
// worker sends).
func (r *Runtime) unsubscribeURL(cfg *config.Config) func(notify.Unsubscribe) string {
	key := notify.UnsubscribeKeyFrom(cfg.Contacts.EncryptionKey)
	return func(u notify.Unsubscribe) string {
		return strings.TrimRight(cmp.Or(cfg.Marketing.UnsubscribeBaseURL, r.URL), "/") + notify.UnsubscribePath(notify.UnsubscribeToken(key, u))
	}
}
