// Package fcm sends push notifications through Firebase Cloud Messaging (HTTP v1) with the
// Firebase Admin SDK. It implements notify.Sender: one firebase App and messaging.Client per
// configured app, built once; messages with identical payloads share one payload, sent as the
// SDK's SendEachForMulticast sends a multicast: one request per token.
package fcm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	firebase "firebase.google.com/go/v4"
	"firebase.google.com/go/v4/messaging"
	"golang.org/x/sync/semaphore"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"

	"herald/internal/notify"
)

// MaxBatch is FCM's multicast limit and the most messages one Send call takes.
const MaxBatch = 500

// DefaultMaxConcurrency is the default bound on HTTP requests in flight. Over HTTP/1.1 every
// in-flight request holds its own connection; past ~100 the connection pool churns and
// throughput drops, so 100 is where plain HTTP/1.1 is fastest.
const DefaultMaxConcurrency = 100

// sdkWorkers is how many requests one chunk keeps in flight: the number SendEachForMulticast
// fixes for each of its calls.
const sdkWorkers = 50

// requestTimeout bounds one HTTP request (each attempt of the SDK's retries) of the sender's own
// client, from sending it to reading its body. A variable for tests.
var requestTimeout = 30 * time.Second

// scopes are what FCM HTTP v1 needs of a service account.
var scopes = []string{
	"https://www.googleapis.com/auth/cloud-platform",
	"https://www.googleapis.com/auth/firebase.messaging",
}

// App is one Firebase project messages are sent through.
type App struct {
	ProjectID string
	// Endpoint is the FCM base URL, e.g. a sandbox URL + "/v1"; "" means Google's.
	Endpoint string
	// CredentialsJSON is a service-account key. nil with Endpoint set means no authentication
	// (the sandbox); nil without Endpoint means Application Default Credentials.
	CredentialsJSON []byte
}

// LogValue keeps the credentials out of logs.
func (a App) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("project_id", a.ProjectID),
		slog.String("endpoint", a.Endpoint),
		slog.Bool("credentials", a.CredentialsJSON != nil),
	)
}

// Config configures a Sender.
type Config struct {
	// Apps maps the app name carried by deliveries ("default") to its Firebase project.
	Apps map[string]App
	// HTTPClient, when set, carries every request (e.g. an HTTP/2 client trusting the sandbox's
	// TLS listener); the Sender adds authentication on top of its transport when an app needs
	// it, and the caller closes it. nil: the Sender's own client, which speaks HTTP/2 to Google
	// (TLS) and HTTP/1.1 to a plain-HTTP endpoint, with an idle pool as large as
	// MaxConcurrency so HTTP/1.1 connections are reused rather than churned.
	HTTPClient *http.Client
	// MaxConcurrency bounds HTTP requests in flight across all Send calls; default 100.
	MaxConcurrency int
}

// Validate reports every problem in c.
func (c Config) Validate() error {
	var errs []error
	if len(c.Apps) == 0 {
		errs = append(errs, errors.New("fcm: at least one app is required"))
	}
	for name, a := range c.Apps {
		if a.ProjectID == "" {
			errs = append(errs, fmt.Errorf("fcm: app %q: project id is required", name))
		}
		if a.Endpoint != "" && !notify.IsHTTPURL(a.Endpoint) {
			errs = append(errs, fmt.Errorf("fcm: app %q: endpoint %q is not an http(s) URL", name, a.Endpoint))
		}
	}
	if c.MaxConcurrency < 0 {
		errs = append(errs, fmt.Errorf("fcm: max concurrency %d is negative", c.MaxConcurrency))
	}
	return errors.Join(errs...)
}

// Sender delivers push messages through FCM. It is safe for concurrent use.
type Sender struct {
	apps        map[string]*messaging.Client
	inFlight    *semaphore.Weighted
	maxInFlight int
	transport   *http.Transport // the Sender's own, closed by Close; nil when Config.HTTPClient is used
	now         func() time.Time
}

var _ notify.Sender = (*Sender)(nil)

// New builds a messaging client for every app. It fails if any app's credentials cannot be
// loaded; it sends nothing to FCM.
func New(ctx context.Context, cfg Config) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sender{
		apps:        make(map[string]*messaging.Client, len(cfg.Apps)),
		maxInFlight: cfg.MaxConcurrency,
		now:         time.Now,
	}
	if s.maxInFlight == 0 {
		s.maxInFlight = DefaultMaxConcurrency
	}
	s.inFlight = semaphore.NewWeighted(int64(s.maxInFlight))

	hc := cfg.HTTPClient
	var timeout time.Duration // a request's own, for the sender's client; a caller's client has its own
	if hc == nil {
		// http.DefaultTransport's settings, with an idle pool that holds every connection the
		// in-flight bound can open.
		s.transport = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          2 * s.maxInFlight,
			MaxIdleConnsPerHost:   s.maxInFlight,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
		// No http.Client.Timeout: behind a transport of its own (markingTransport, the
		// credentials' one) it costs a goroutine, a timer and a channel per request. The
		// deadline is the request's context's instead (markingTransport).
		hc = &http.Client{Transport: s.transport}
		timeout = requestTimeout
	}
	for name, a := range cfg.Apps {
		client, err := appHTTPClient(ctx, hc, a)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("fcm: app %q: credentials: %w", name, err)
		}
		opts := []option.ClientOption{option.WithHTTPClient(markingRequests(client, timeout))}
		if a.Endpoint != "" {
			opts = append(opts, option.WithEndpoint(a.Endpoint))
		}
		fa, err := firebase.NewApp(ctx, &firebase.Config{ProjectID: a.ProjectID}, opts...)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("fcm: app %q: %w", name, err)
		}
		mc, err := fa.Messaging(ctx)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("fcm: app %q: messaging client: %w", name, err)
		}
		s.apps[name] = mc
	}
	return s, nil
}

// appHTTPClient returns hc with authentication for app a added to its transport: the service
// account when given, none for a custom endpoint without one, else Application Default
// Credentials.
func appHTTPClient(ctx context.Context, hc *http.Client, a App) (*http.Client, error) {
	if a.Endpoint != "" && a.CredentialsJSON == nil {
		return hc, nil
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	opts := []option.ClientOption{option.WithScopes(scopes...), option.WithTelemetryDisabled()}
	if a.CredentialsJSON != nil {
		opts = append(opts, option.WithCredentialsJSON(a.CredentialsJSON))
	}
	rt, err := htransport.NewTransport(ctx, base, opts...)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: rt, Timeout: hc.Timeout, CheckRedirect: hc.CheckRedirect, Jar: hc.Jar}, nil
}

// Close releases the Sender's idle connections. A Config.HTTPClient belongs to the caller.
func (s *Sender) Close() error {
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
	return nil
}

// Provider is FCM.
func (s *Sender) Provider() notify.Provider { return notify.ProviderFCM }

// MaxBatch is FCM's multicast limit, 500.
func (s *Sender) MaxBatch() int { return MaxBatch }

// Send delivers msgs and returns one result per message in input order. Messages that resolve
// to the same payload share it, built once. Per-message failures carry EDEADADDRESS, EREJECTED,
// ETHROTTLED (with RetryAfter), EUNAVAILABLE, EAUTH or EINTERNAL; an unknown app or an empty
// token is EREJECTED. The call itself fails only with ETOOLARGE for more than MaxBatch messages.
func (s *Sender) Send(ctx context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	if len(msgs) > MaxBatch {
		return nil, notify.Errorf(notify.ETOOLARGE, "fcm: %d messages in one send; at most %d", len(msgs), MaxBatch)
	}
	results := make([]notify.SendResult, len(msgs))
	for i := range msgs {
		results[i].DeliveryID = msgs[i].DeliveryID
		if msgs[i].Address == "" {
			results[i].Err = notify.Errorf(notify.EREJECTED, "fcm: empty registration token")
		}
	}

	// Bigger chunks than the in-flight bound would break it: the SDK runs 50 requests per call.
	chunkSize := MaxBatch
	if s.maxInFlight < sdkWorkers {
		chunkSize = s.maxInFlight
	}
	now := s.now()
	groups := groupByPayload(msgs)
	// A send of one chunk — a single push, most often — runs on the caller's goroutine, whose
	// stack has grown already: a new goroutine's would grow again, copied at each doubling,
	// through the SDK's JSON encoding.
	inline := len(groups) == 1 && len(groups[0]) <= chunkSize
	var wg sync.WaitGroup
	for _, g := range groups {
		client, ok := s.apps[msgs[g[0]].App]
		if !ok {
			for _, i := range g {
				results[i].Err = notify.Errorf(notify.EREJECTED, "fcm: unknown app %q (not in the fcm config)", msgs[i].App)
			}
			continue
		}
		tmpl := toMessage(msgs[g[0]], now)
		for start := 0; start < len(g); start += chunkSize {
			chunk := g[start:min(start+chunkSize, len(g))]
			weight := int64(min(len(chunk), sdkWorkers))
			if err := s.inFlight.Acquire(ctx, weight); err != nil {
				for _, i := range chunk {
					results[i].Err = classify(err, msgs[i].Address)
				}
				continue
			}
			send := func() {
				defer s.inFlight.Release(weight)
				sendChunk(ctx, client, tmpl, msgs, chunk, results)
			}
			if inline {
				send()
			} else {
				wg.Go(send)
			}
		}
	}
	wg.Wait()
	return results, nil
}

// sendChunk sends the messages msgs[i], i in idx, which share the payload tmpl, and fills their
// results. Each token is one request, as in the SDK's SendEachForMulticast, which calls the same
// Send for each; but that call starts all 50 of its workers whatever the batch, so a single push
// paid for 49 goroutines with nothing to do (3 % of a stream of single sends' CPU went to
// starting goroutines). Here notify.Workers runs no more workers than a chunk has tokens,
// and for a single token none.
func sendChunk(ctx context.Context, client *messaging.Client, tmpl *messaging.Message, msgs []notify.OutboundMessage, idx []int, results []notify.SendResult) {
	workers := make([]*attempts, min(len(idx), sdkWorkers))
	defer func() {
		for _, a := range workers {
			if a != nil {
				a.stop()
			}
		}
	}()
	notify.Workers(len(idx), sdkWorkers, func(w, j int) {
		a := workers[w]
		if a == nil {
			a = &attempts{}
			a.ctx = context.WithValue(ctx, attemptsKey{}, a)
			workers[w] = a
		}
		i := idx[j]
		m := *tmpl // the payload's parts are shared, as SendEachForMulticast shares them
		m.Token = msgs[i].Address
		a.sent = false
		id, err := client.Send(a.ctx, &m)
		if err != nil {
			if !a.sent && ctx.Err() == nil {
				// The SDK refused the payload before any request (a malformed image URL, say).
				err = fmt.Errorf("%w: %w", errRefused, err)
			}
			results[i].Err = classify(err, msgs[i].Address)
			return
		}
		results[i].ProviderMessageID = id
	})
}

// attemptsKey keys a worker's attempts in the context of its sends.
type attemptsKey struct{}

// attempts is one sendChunk worker's requests, one at a time: whether the SDK made a request for
// the current send (an error without one is the SDK refusing the message, where an error after
// one may follow a delivery), and each request's deadline. The deadline is a timer and a context
// per worker, not per request: context.WithTimeout per request cost a timer, a context, its
// registration with the caller's context and a copy of the request each — 3–4 % of a large
// send's CPU. The timer is armed when a request starts and disarmed when its body is closed; if
// it fires first, it cancels the worker's request context (with DeadlineExceeded as the cause),
// which the next request replaces. The send's own context is not canceled, so the SDK retries a
// request that ran out of time, as it retries any failed request.
type attempts struct {
	ctx  context.Context // the worker's sends' context: the caller's, carrying this
	sent bool            // a request was made for the current send (the worker's goroutine only)

	mu       sync.Mutex
	req      context.Context // requests' context, a child of base ended by the timer; nil before the first
	base     context.Context // the context req was made from
	cancel   context.CancelCauseFunc
	deadline time.Time // of the request in flight; zero when none
	timer    *time.Timer
}

// arm starts a request made with ctx and returns the context to make it with, which ends
// timeout from now unless disarm comes first.
func (a *attempts) arm(ctx context.Context, timeout time.Duration) context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.req == nil || a.base != ctx || a.req.Err() != nil {
		if a.cancel != nil {
			a.cancel(context.Canceled)
		}
		a.req, a.cancel = context.WithCancelCause(ctx)
		a.base = ctx
	}
	a.deadline = time.Now().Add(timeout)
	if a.timer == nil {
		a.timer = time.AfterFunc(timeout, a.expire)
	} else {
		a.timer.Reset(timeout)
	}
	return a.req
}

// expire ends the request in flight if its deadline has passed: a timer armed for an earlier
// request that fires late finds a later deadline, or none, and does nothing.
func (a *attempts) expire() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.deadline.IsZero() || time.Now().Before(a.deadline) {
		return
	}
	a.deadline = time.Time{}
	a.cancel(context.DeadlineExceeded)
}

// disarm ends the deadline of the request in flight: it is done.
func (a *attempts) disarm() {
	a.mu.Lock()
	a.deadline = time.Time{}
	a.mu.Unlock()
	a.timer.Stop()
}

// stop releases the timer and the requests' context once the worker is done.
func (a *attempts) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.deadline = time.Time{}
	if a.timer != nil {
		a.timer.Stop()
	}
	if a.cancel != nil {
		a.cancel(context.Canceled)
	}
}

// markingRequests returns hc with every request of a sendChunk worker marking its attempts as
// sent and, when timeout is positive, bounded by it.
func markingRequests(hc *http.Client, timeout time.Duration) *http.Client {
	c := *hc
	if c.Transport == nil {
		c.Transport = http.DefaultTransport
	}
	c.Transport = markingTransport{base: c.Transport, timeout: timeout}
	return &c
}

// markingTransport is the sender's transport over the HTTP client's: it marks each request of
// a worker's send as made and, with a timeout, gives the request (each attempt of the SDK's
// retries) a deadline of its own — what http.Client.Timeout would, without its goroutine per
// request.
type markingTransport struct {
	base    http.RoundTripper
	timeout time.Duration // from the request until its body is closed; none if zero
}

func (t markingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	// Every request of the sender's client is a sendChunk worker's: the SDK makes it with the
	// worker's context. One made otherwise is passed through as it is.
	a, _ := r.Context().Value(attemptsKey{}).(*attempts)
	if a == nil {
		return t.base.RoundTrip(r)
	}
	a.sent = true
	if t.timeout <= 0 {
		return t.base.RoundTrip(r)
	}
	resp, err := t.base.RoundTrip(r.WithContext(a.arm(r.Context(), t.timeout)))
	if err != nil {
		a.disarm()
		return nil, err
	}
	resp.Body = disarmOnClose{resp.Body, a}
	return resp, nil
}

// disarmOnClose is a response body whose request's deadline ends when it is closed: the
// deadline covers reading it too.
type disarmOnClose struct {
	io.ReadCloser
	a *attempts
}

func (b disarmOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.a.disarm()
	return err
}

// groupByPayload returns the indices of msgs grouped by identical resolved payload (and app), in
// order of first appearance. Messages without a token form no group; they get no request.
func groupByPayload(msgs []notify.OutboundMessage) [][]int {
	var groups [][]int
	byKey := make(map[string]int, 1)
	for i := range msgs {
		if msgs[i].Address == "" {
			continue
		}
		k := payloadKey(&msgs[i])
		g, ok := byKey[k]
		if !ok {
			g = len(groups)
			byKey[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}
