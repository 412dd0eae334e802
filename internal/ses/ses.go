// Package ses sends Herald's email deliveries through Amazon SES v2 (SendEmail, one message per
// address). It translates SES errors into notify error codes; retries are the pipeline's job,
// so the SDK's own retries are off.
package ses

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/mail"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"herald/internal/notify"
)

// MaxBatch is the most messages one Send call takes. SES has no batch send for distinct
// content, so a batch is MaxBatch concurrent SendEmail calls at most.
const MaxBatch = 50

// Defaults for Config.
const (
	DefaultMaxConcurrency = 16
	DefaultTimeout        = 10 * time.Second
	sandboxRegion         = "us-east-1"
)

// Config configures a Sender.
type Config struct {
	// From is the verified sender, "no-reply@example.com" or "Example <no-reply@example.com>".
	From string
	// ConfigurationSet routes bounce and complaint events to Herald's SNS topic; "" sends
	// without one (and then no feedback arrives).
	ConfigurationSet string
	// Region overrides the region of AWS or of the loaded default config.
	Region string
	// Endpoint overrides the SES endpoint, e.g. the sandbox's URL; "" talks to AWS.
	Endpoint string
	// MaxConcurrency bounds in-flight SendEmail calls across all Send calls; default 16.
	MaxConcurrency int
	// Timeout bounds one SendEmail call; default 10s.
	Timeout time.Duration
	// AWS is the SDK config to use. nil loads config.LoadDefaultConfig; then, when Endpoint is
	// set and the environment names no credential source, static dummy credentials are used so
	// a sandbox works offline (the SDK would otherwise go looking for IMDS).
	AWS *aws.Config
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if c.From == "" {
		errs = append(errs, errors.New("ses: From is required"))
	} else if _, err := mail.ParseAddress(c.From); err != nil {
		errs = append(errs, fmt.Errorf("ses: From %q is not an email address", c.From))
	}
	if c.Endpoint != "" && !notify.IsHTTPURL(c.Endpoint) {
		errs = append(errs, fmt.Errorf("ses: Endpoint %q is not an http(s) URL", c.Endpoint))
	}
	if c.MaxConcurrency < 0 {
		errs = append(errs, errors.New("ses: MaxConcurrency must not be negative"))
	}
	if c.Timeout < 0 {
		errs = append(errs, errors.New("ses: Timeout must not be negative"))
	}
	return errors.Join(errs...)
}

// LogValue is c without the AWS config (and so without any credentials).
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("from", c.From),
		slog.String("configuration_set", c.ConfigurationSet),
		slog.String("region", c.Region),
		slog.String("endpoint", c.Endpoint),
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

// sesAPI is the part of *sesv2.Client the Sender uses.
type sesAPI interface {
	SendEmail(ctx context.Context, in *sesv2.SendEmailInput, optFns ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error)
}

// Sender delivers email through SES. It is safe for concurrent use.
type Sender struct {
	cfg    Config
	client sesAPI
	slots  chan struct{} // one per in-flight SendEmail
	idle   idleCloser    // the HTTP client, when it can close idle connections
}

var _ notify.Sender = (*Sender)(nil)

// New returns a Sender for cfg. It fails only on an invalid cfg or an unloadable AWS config; it
// makes no request.
func New(ctx context.Context, cfg Config) (*Sender, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	awsCfg, err := loadAWSConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	hc := awsCfg.HTTPClient
	if b, ok := hc.(*awshttp.BuildableClient); ok || hc == nil {
		if b == nil {
			b = awshttp.NewBuildableClient()
		}
		// The SDK keeps 10 idle connections per host; more concurrent calls than that would
		// open and close a connection per message. A plain *http.Client over the SDK's
		// transport settings also lets CloseIdleConnections reach the pool, which the
		// BuildableClient's wrapping hides.
		tr := b.GetTransport()
		tr.MaxIdleConnsPerHost = max(tr.MaxIdleConnsPerHost, cfg.MaxConcurrency)
		tr.MaxIdleConns = max(tr.MaxIdleConns, cfg.MaxConcurrency)
		hc = &http.Client{
			Transport:     tr,
			Timeout:       b.GetTimeout(),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	client := sesv2.NewFromConfig(awsCfg, func(o *sesv2.Options) {
		o.HTTPClient = hc
		// Herald retries through its queues with backoff; an SDK retry would hold a worker.
		o.RetryMaxAttempts = 1
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	s := &Sender{cfg: cfg, client: client, slots: make(chan struct{}, cfg.MaxConcurrency)}
	s.idle, _ = hc.(idleCloser)
	return s, nil
}

type idleCloser interface{ CloseIdleConnections() }

// CloseIdleConnections closes the connections not carrying a request. The Sender stays usable;
// call it at shutdown, or before closing a sandbox the Sender talked to.
func (s *Sender) CloseIdleConnections() {
	if s.idle != nil {
		s.idle.CloseIdleConnections()
	}
}

func loadAWSConfig(ctx context.Context, cfg Config) (aws.Config, error) {
	dummy := credentials.NewStaticCredentialsProvider("sandbox", "sandbox", "")
	var awsCfg aws.Config
	if cfg.AWS != nil {
		awsCfg = cfg.AWS.Copy()
		if cfg.Endpoint != "" && awsCfg.Credentials == nil {
			awsCfg.Credentials = dummy
		}
	} else {
		var opts []func(*config.LoadOptions) error
		if cfg.Region != "" {
			opts = append(opts, config.WithRegion(cfg.Region))
		}
		if cfg.Endpoint != "" && !envHasCredentialSource() {
			opts = append(opts, config.WithCredentialsProvider(dummy))
		}
		var err error
		if awsCfg, err = config.LoadDefaultConfig(ctx, opts...); err != nil {
			return aws.Config{}, fmt.Errorf("ses: load AWS config: %w", err)
		}
	}
	if cfg.Region != "" {
		awsCfg.Region = cfg.Region
	}
	if awsCfg.Region == "" {
		if cfg.Endpoint == "" {
			return aws.Config{}, errors.New("ses: no region: set Config.Region or AWS_REGION")
		}
		awsCfg.Region = sandboxRegion // signing needs one; a fake does not care which
	}
	return awsCfg, nil
}

// envHasCredentialSource reports whether the environment names a credential source the default
// chain would use: keys, a profile, web identity (EKS), or a container endpoint (ECS).
func envHasCredentialSource() bool {
	for _, k := range []string{
		"AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
	} {
		if os.Getenv(k) != "" {
			return true
		}
	}
	return false
}

// Provider is SES.
func (s *Sender) Provider() notify.Provider { return notify.ProviderSES }

// MaxBatch is 50.
func (s *Sender) MaxBatch() int { return MaxBatch }

// Send sends each message with its own SendEmail call, concurrently up to MaxConcurrency, and
// returns one result per message in order. Per-message errors carry EREJECTED, EAUTH,
// ETHROTTLED, EUNAVAILABLE or EINTERNAL. The call itself fails with ETOOLARGE for more than
// MaxBatch messages, and with EUNAVAILABLE if ctx is done before anything was sent.
func (s *Sender) Send(ctx context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	return notify.SendEach(ctx, notify.ProviderSES, MaxBatch, s.slots, msgs, s.sendOne)
}

func (s *Sender) sendOne(ctx context.Context, m notify.OutboundMessage) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	out, err := s.client.SendEmail(ctx, toSendEmailInput(m, s.cfg))
	if err != nil {
		return "", classifyError(err, m.DeliveryID, m.Address)
	}
	return aws.ToString(out.MessageId), nil
}
