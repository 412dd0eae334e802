// Package twilio sends Herald's SMS deliveries through Twilio's Messages API with twilio-go,
// one request per message, and translates Twilio's error codes into notify error codes.
package twilio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	twiliosdk "github.com/twilio/twilio-go"
	"github.com/twilio/twilio-go/client"

	"herald/internal/notify"
)

// MaxBatch is the most messages one Send call takes; Twilio has no batch send.
const MaxBatch = 50

// Defaults for Config.
const (
	DefaultMaxConcurrency = 16
	DefaultTimeout        = 10 * time.Second
)

// Config configures a Sender.
type Config struct {
	AccountSID string // AC…
	// AuthToken, or APIKey (SK…) with APISecret, authenticates; give one of the two.
	AuthToken string
	APIKey    string
	APISecret string
	// MessagingServiceSID (MG…) lets Twilio pick the sender from the service's pool; when set,
	// From is not sent. Otherwise From (an E.164 number or alphanumeric sender id) is.
	From                string
	MessagingServiceSID string
	// BaseURL, when set, receives every request meant for *.twilio.com (the sandbox); "" talks
	// to Twilio.
	BaseURL string
	// MaxConcurrency bounds in-flight requests across all Send calls; default 16.
	MaxConcurrency int
	// Timeout bounds one request; default 10s.
	Timeout time.Duration
}

// twilio-go refuses credentials with anything but letters and digits (error 21222/21224).
var alnum = regexp.MustCompile(`^[A-Za-z0-9]+$`)

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if !strings.HasPrefix(c.AccountSID, "AC") || !alnum.MatchString(c.AccountSID) {
		errs = append(errs, errors.New("twilio: AccountSID must be an account SID (AC…)"))
	}
	switch {
	case c.APIKey != "" || c.APISecret != "":
		if !strings.HasPrefix(c.APIKey, "SK") || !alnum.MatchString(c.APIKey) {
			errs = append(errs, errors.New("twilio: APIKey must be an API key SID (SK…)"))
		}
		if !alnum.MatchString(c.APISecret) {
			errs = append(errs, errors.New("twilio: APISecret is required with APIKey and must be letters and digits"))
		}
		if c.AuthToken != "" {
			errs = append(errs, errors.New("twilio: give AuthToken or APIKey/APISecret, not both"))
		}
	case c.AuthToken == "":
		errs = append(errs, errors.New("twilio: AuthToken (or APIKey and APISecret) is required"))
	case !alnum.MatchString(c.AuthToken):
		errs = append(errs, errors.New("twilio: AuthToken must be letters and digits"))
	}
	if c.From == "" && c.MessagingServiceSID == "" {
		errs = append(errs, errors.New("twilio: From or MessagingServiceSID is required"))
	}
	if c.MessagingServiceSID != "" && !strings.HasPrefix(c.MessagingServiceSID, "MG") {
		errs = append(errs, errors.New("twilio: MessagingServiceSID must be a messaging service SID (MG…)"))
	}
	if c.BaseURL != "" && !notify.IsHTTPURL(c.BaseURL) {
		errs = append(errs, fmt.Errorf("twilio: BaseURL %q is not an http(s) URL", c.BaseURL))
	}
	if c.MaxConcurrency < 0 {
		errs = append(errs, errors.New("twilio: MaxConcurrency must not be negative"))
	}
	if c.Timeout < 0 {
		errs = append(errs, errors.New("twilio: Timeout must not be negative"))
	}
	return errors.Join(errs...)
}

// LogValue is c with the secrets masked.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("account_sid", c.AccountSID),
		slog.String("auth_token", notify.MaskSecret(c.AuthToken)),
		slog.String("api_key", c.APIKey),
		slog.String("api_secret", notify.MaskSecret(c.APISecret)),
		slog.String("from", c.From),
		slog.String("messaging_service_sid", c.MessagingServiceSID),
		slog.String("base_url", c.BaseURL),
		slog.Int("max_concurrency", c.MaxConcurrency),
		slog.Duration("timeout", c.Timeout),
	)
}

func (c Config) withDefaults() Config {
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

// Sender delivers SMS through Twilio. It is safe for concurrent use.
type Sender struct {
	cfg       Config
	creds     *client.Credentials
	transport http.RoundTripper // base-URL rewriting over pool
	pool      *http.Transport
	slots     chan struct{} // one per in-flight request
}

var _ notify.Sender = (*Sender)(nil)

// New returns a Sender for cfg; it makes no request.
func New(cfg Config) (*Sender, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Go keeps 2 idle connections per host by default: with more requests in flight than that,
	// connections are closed after each response and pile up in TIME_WAIT.
	t.MaxIdleConnsPerHost = cfg.MaxConcurrency
	t.MaxIdleConns = max(t.MaxIdleConns, cfg.MaxConcurrency)
	var rt http.RoundTripper = t
	if cfg.BaseURL != "" {
		base, _ := url.Parse(cfg.BaseURL) // checked by Validate
		rt = &rewriteTransport{base: base, next: t}
	}
	user, pass := cfg.AccountSID, cfg.AuthToken
	if cfg.APIKey != "" {
		user, pass = cfg.APIKey, cfg.APISecret
	}
	return &Sender{
		cfg:       cfg,
		creds:     client.NewCredentials(user, pass),
		transport: rt,
		pool:      t,
		slots:     make(chan struct{}, cfg.MaxConcurrency),
	}, nil
}

// CloseIdleConnections closes the connections not carrying a request. The Sender stays usable;
// call it at shutdown, or before closing a sandbox the Sender talked to.
func (s *Sender) CloseIdleConnections() { s.pool.CloseIdleConnections() }

// Provider is Twilio.
func (s *Sender) Provider() notify.Provider { return notify.ProviderTwilio }

// MaxBatch is 50.
func (s *Sender) MaxBatch() int { return MaxBatch }

// Send creates one Twilio message per OutboundMessage, concurrently up to MaxConcurrency, and
// returns one result per message in order. Per-message errors carry EREJECTED (invalid or
// non-mobile number, body refused), ESUPPRESSED (the recipient replied STOP), ETHROTTLED,
// EAUTH, EUNAVAILABLE or EINTERNAL. The call itself fails with ETOOLARGE for more than MaxBatch
// messages, and with EUNAVAILABLE if ctx is done before anything was sent.
func (s *Sender) Send(ctx context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	return notify.SendEach(ctx, notify.ProviderTwilio, MaxBatch, s.slots, msgs, s.sendOne)
}

// sendOne sends m with a client bound to this call. twilio-go takes no context and hides the HTTP
// response of a failure, so the client's transport attaches ctx and notes the status and
// Retry-After; the client itself is a few small structs.
func (s *Sender) sendOne(ctx context.Context, m notify.OutboundMessage) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	call := &callTransport{ctx: ctx, next: s.transport}
	base := &client.Client{
		Credentials: s.creds,
		HTTPClient: &http.Client{
			Transport:     call,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	base.SetAccountSid(s.cfg.AccountSID)
	rc := twiliosdk.NewRestClientWithParams(twiliosdk.ClientParams{Client: base})
	msg, err := rc.Api.CreateMessage(toCreateMessageParams(m, s.cfg))
	if err != nil {
		return "", classifyError(err, call.status, notify.ParseRetryAfter(call.retryAfter, time.Now()), m.DeliveryID, m.Address)
	}
	if msg.Sid == nil {
		return "", notify.Errorf(notify.EINTERNAL, "twilio send %s: response without a message sid", m.DeliveryID)
	}
	return *msg.Sid, nil
}

// callTransport binds one request to ctx and remembers what twilio-go does not pass on.
type callTransport struct {
	ctx        context.Context
	next       http.RoundTripper
	status     int
	retryAfter string
}

func (t *callTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req.WithContext(t.ctx))
	if resp != nil {
		t.status, t.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	}
	return resp, err
}

// rewriteTransport sends every request for twilio.com or a subdomain to base instead (twilio-go
// has no base-URL option, and TWILIO_EDGE/TWILIO_REGION change the host it builds).
type rewriteTransport struct {
	base *url.URL
	next http.RoundTripper
}

func (t *rewriteTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Hostname()
	if host != "twilio.com" && !strings.HasSuffix(host, ".twilio.com") {
		return t.next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.URL.Scheme = t.base.Scheme
	r.URL.Host = t.base.Host
	r.URL.Path = strings.TrimRight(t.base.Path, "/") + req.URL.Path
	r.URL.RawPath = ""
	r.Host = ""
	return t.next.RoundTrip(r)
}
