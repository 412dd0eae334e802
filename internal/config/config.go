// Package config reads herald.yaml: the services that may send (with their API keys and ingest
// concurrency), the lanes, retry policy, provider apps and rate limits, quiet hours and the
// contact encryption key. The local runtime and the CDK app read the same file.
package config

import (
	"bytes"
	"crypto/ecdh"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"herald/internal/notify"
)

// Duration is a time.Duration written as "30s", "5m" in YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (e.g. 30s, 5m)", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Config is herald.yaml.
type Config struct {
	Env        string               `yaml:"env"`
	Services   []Service            `yaml:"services"`
	Lanes      map[string]Lane      `yaml:"lanes"`  // realtime, bulk
	Stages     map[string]Consumer  `yaml:"stages"` // consumer settings for cleanup, bounce
	Retry      Retry                `yaml:"retry"`
	Providers  Providers            `yaml:"providers"`
	QuietHours QuietHours           `yaml:"quiet_hours"`
	Marketing  Marketing            `yaml:"marketing"`
	Inbox      Inbox                `yaml:"inbox"`
	Contacts   Contacts             `yaml:"contacts"`
	Alerts     Alerts               `yaml:"alerts"`
	Sandbox    bool                 `yaml:"sandbox"` // local runtime: run sandbox providers and point every sender at them
	Extra      map[string]yaml.Node `yaml:",inline"` // rejected by Validate, so typos are caught
}

// Service is a calling service.
type Service struct {
	Name           string   `yaml:"name"`
	APIKeys        []string `yaml:"api_keys"`        // local and dev; in AWS prefer api_key_secret
	APIKeySecret   string   `yaml:"api_key_secret"`  // Secrets Manager secret name holding the key(s)
	IAMPrincipals  []string `yaml:"iam_principals"`  // AWS: IAM roles/users whose SigV4-signed calls act as this service
	Admin          bool     `yaml:"admin"`           // may inspect dead letters and redrive them (/v1/admin/…)
	MaxConcurrency int      `yaml:"max_concurrency"` // ingest consumers (Lambda MaximumConcurrency)
	BatchSize      int      `yaml:"batch_size"`      // ingest messages per invocation
	// BatchingWindow is how long a batch of the ingest queue is gathered before it is handled
	// (Lambda's MaximumBatchingWindowInSeconds; locally the worker waits as long): 0, the
	// default, hands over whatever is there at once. A window adds up to its length to every
	// send's latency and, under light traffic, fills batches — fewer invocations, receives and
	// deletes per notification.
	BatchingWindow Duration `yaml:"batching_window"`
	Lane           string   `yaml:"lane"` // default lane for transactional sends: realtime
}

// Alerts say where operator events are posted for people.
type Alerts struct {
	Slack SlackAlerts `yaml:"slack"`
}

// SlackAlerts posts operator events to a Slack incoming webhook (internal/slack): dead letters,
// large sends started, campaigns failed, and campaigns finished when asked. Unset, nothing is
// posted. The sandbox runtime points it at the sandbox's fake webhook.
type SlackAlerts struct {
	WebhookURL       string `yaml:"webhook_url"`        // local only: the URL holds the secret in its path
	WebhookURLSecret string `yaml:"webhook_url_secret"` // Secrets Manager name (AWS) holding the webhook URL
	// ConsoleURL is the base URL of the operator console that posts link to
	// (<console_url>/console#/queues/<queue>); locally the API's URL when unset.
	ConsoleURL       string `yaml:"console_url"`
	CampaignFinished bool   `yaml:"campaign_finished"` // also post campaign_finished
}

// Enabled reports whether posts have somewhere to go.
func (s SlackAlerts) Enabled() bool { return s.WebhookURL != "" || s.WebhookURLSecret != "" }

// Consumer mirrors an SQS event source mapping.
type Consumer struct {
	BatchSize         int      `yaml:"batch_size"`
	MaxConcurrency    int      `yaml:"max_concurrency"`
	VisibilityTimeout Duration `yaml:"visibility_timeout"`
	MaxReceiveCount   int      `yaml:"max_receive_count"`
}

// Lane configures the consumers of one lane's prepare, send and record queues.
type Lane struct {
	Prepare Consumer `yaml:"prepare"`
	Send    Consumer `yaml:"send"`
	Record  Consumer `yaml:"record"`
	// ExpressMaxRecipients (realtime only) is the most recipients a notification may have for
	// ingest to send it itself — the express path, docs/design.md §3; unset: 4, 0: never.
	ExpressMaxRecipients *int `yaml:"express_max_recipients"`
}

// ExpressMaxRecipients is pipeline.Config's: 0 for the default, negative for never.
func (c *Config) ExpressMaxRecipients() int {
	n := c.Lanes["realtime"].ExpressMaxRecipients
	switch {
	case n == nil:
		return 0
	case *n == 0:
		return -1
	}
	return *n
}

// Retry is the delivery retry policy.
type Retry struct {
	MaxAttempts int      `yaml:"max_attempts"`
	Base        Duration `yaml:"base"`
	Max         Duration `yaml:"max"`
	// Providers overrides the policy per provider (fcm, apns, webpush, ses, twilio, alimtalk):
	// max_retries after the first send, at delays (the last one again past the list). AlimTalk
	// defaults to 3 retries at 1m, 5m and 15m; the others use max_attempts, base and max.
	Providers map[string]ProviderRetry `yaml:"providers"`
}

// ProviderRetry is one provider's retries.
type ProviderRetry struct {
	MaxRetries int        `yaml:"max_retries"`
	Delays     []Duration `yaml:"delays"`
}

// DefaultAlimTalkRetry is AlimTalk's policy unless retry.providers.alimtalk says otherwise: a
// few retries spaced out, since a KakaoTalk message resent late is worse than one not resent.
var DefaultAlimTalkRetry = ProviderRetry{MaxRetries: 3, Delays: []Duration{Duration(time.Minute), Duration(5 * time.Minute), Duration(15 * time.Minute)}}

// ProviderRetries is retry.providers for pipeline.Config.ProviderRetry.
func (c *Config) ProviderRetries() map[notify.Provider]notify.RetryPolicy {
	out := map[notify.Provider]notify.RetryPolicy{}
	for name, pr := range c.Retry.Providers {
		rp := notify.RetryPolicy{MaxAttempts: pr.MaxRetries + 1}
		for _, d := range pr.Delays {
			rp.Delays = append(rp.Delays, d.D())
		}
		out[notify.Provider(name)] = rp
	}
	return out
}

// Providers configures each provider.
type Providers struct {
	FCM    FCM    `yaml:"fcm"`
	APNs   APNs   `yaml:"apns"`
	SES    SES    `yaml:"ses"`
	Twilio Twilio `yaml:"twilio"`
	// AlimTalk is optional: configured, it gives the senders an AlimTalk sender; no channel
	// delivers through it yet.
	AlimTalk AlimTalk `yaml:"alimtalk"`
	// WebPush is W3C Web Push to browsers (RFC 8030) with a VAPID key (RFC 8292).
	WebPush WebPush `yaml:"webpush"`
}

// FCM is Firebase Cloud Messaging.
type FCM struct {
	RatePerSecond float64           `yaml:"rate_per_second"`
	Apps          map[string]FCMApp `yaml:"apps"`
}

// FCMApp is one Firebase project.
type FCMApp struct {
	ProjectID         string `yaml:"project_id"`
	CredentialsFile   string `yaml:"credentials_file"`   // service-account JSON (local)
	CredentialsSecret string `yaml:"credentials_secret"` // Secrets Manager name (AWS)
	Endpoint          string `yaml:"endpoint"`           // override, e.g. a sandbox
}

// APNs is Apple Push Notification service.
type APNs struct {
	RatePerSecond float64            `yaml:"rate_per_second"`
	Apps          map[string]APNsApp `yaml:"apps"`
}

// APNsApp is one bundle id with its token-auth key.
type APNsApp struct {
	Topic     string `yaml:"topic"`
	TeamID    string `yaml:"team_id"`
	KeyID     string `yaml:"key_id"`
	KeyFile   string `yaml:"key_file"`   // .p8 (local)
	KeySecret string `yaml:"key_secret"` // Secrets Manager name (AWS)
	Endpoint  string `yaml:"endpoint"`
}

// SES is Amazon SES v2.
type SES struct {
	RatePerSecond    float64 `yaml:"rate_per_second"`
	From             string  `yaml:"from"`
	ConfigurationSet string  `yaml:"configuration_set"`
	Region           string  `yaml:"region"`
	Endpoint         string  `yaml:"endpoint"`
}

// Twilio is Twilio Programmable Messaging.
type Twilio struct {
	RatePerSecond       float64 `yaml:"rate_per_second"`
	AccountSID          string  `yaml:"account_sid"`
	AuthToken           string  `yaml:"auth_token"`        // local only
	AuthTokenSecret     string  `yaml:"auth_token_secret"` // Secrets Manager name (AWS)
	From                string  `yaml:"from"`
	MessagingServiceSID string  `yaml:"messaging_service_sid"`
	BaseURL             string  `yaml:"base_url"`
}

// AlimTalk is Kakao AlimTalk through Solapi (internal/alimtalk).
type AlimTalk struct {
	RatePerSecond   float64 `yaml:"rate_per_second"`
	APIKey          string  `yaml:"api_key"`           // the Solapi API key (not secret: the secret signs)
	APISecret       string  `yaml:"api_secret"`        // local only
	APISecretSecret string  `yaml:"api_secret_secret"` // Secrets Manager name (AWS) holding the API secret
	// From is the sender number registered with Solapi (발신번호), required on every message:
	// digits only once loaded ("02-1234-5678" reads as "0212345678").
	From    string                 `yaml:"from"`
	BaseURL string                 `yaml:"base_url"` // override, e.g. a sandbox
	Apps    map[string]AlimTalkApp `yaml:"apps"`     // provider app → KakaoTalk channel
	// Fallback is what a recipient KakaoTalk cannot reach gets instead: "sms" (the same text as
	// SMS, or LMS when longer, through the SMS provider) or "none" (the default). A send may
	// choose otherwise with channel_content.alimtalk.data.alimtalk_fallback.
	Fallback string `yaml:"fallback"`
	// VerdictCheck is how long after Solapi accepted an AlimTalk Herald first reads its message
	// list for Kakao's verdict (each next read waits twice as long, at most 15 minutes): default
	// 30s. VerdictDeadline is how long it keeps reading before a delivery with no verdict counts
	// as sent ("verdict_unknown"): default 24h.
	VerdictCheck    Duration `yaml:"verdict_check"`
	VerdictDeadline Duration `yaml:"verdict_deadline"`
}

// FallbackSMS reports whether unreachable AlimTalk recipients fall back to SMS by default.
func (a AlimTalk) FallbackSMS() bool { return a.Fallback == "sms" }

// AlimTalkApp is one KakaoTalk channel.
type AlimTalkApp struct {
	SenderKey string `yaml:"sender_key"` // the channel's sender profile key (Solapi's pfId)
}

// Configured reports whether any AlimTalk key is set.
func (a AlimTalk) Configured() bool {
	return a.APIKey != "" || a.APISecret != "" || a.APISecretSecret != "" || len(a.Apps) > 0 || a.From != "" || a.BaseURL != ""
}

// WebPush is W3C Web Push: one VAPID key pair for every browser subscription. Browsers
// subscribe with the public key (served at GET /v1/web-push/vapid-public-key); subscriptions are
// bound to it, so changing it orphans every existing one.
type WebPush struct {
	RatePerSecond         float64 `yaml:"rate_per_second"`          // per push service origin (each browser vendor's service)
	VAPIDPublicKey        string  `yaml:"vapid_public_key"`         // base64url, uncompressed P-256 point (`herald webpush keys`)
	VAPIDPrivateKey       string  `yaml:"vapid_private_key"`        // base64url of 32 bytes (local)
	VAPIDPrivateKeySecret string  `yaml:"vapid_private_key_secret"` // Secrets Manager name (AWS)
	Subscriber            string  `yaml:"subscriber"`               // mailto: or https: contact sent in the VAPID JWT
}

// Enabled reports whether Web Push is configured.
func (w WebPush) Enabled() bool { return w.VAPIDPublicKey != "" }

// validate checks the key pair (when the private key is in the file) and the subscriber.
func (w WebPush) validate(sandbox bool, bad func(string, string, ...any)) {
	const key = "providers.webpush"
	if !w.Enabled() {
		if w.VAPIDPrivateKey != "" || w.VAPIDPrivateKeySecret != "" || w.Subscriber != "" {
			bad(key+".vapid_public_key", "required when web push is configured (`herald webpush keys` makes a pair)")
		}
		return
	}
	pub, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(w.VAPIDPublicKey, "="))
	if err != nil || len(pub) != 65 || pub[0] != 4 {
		bad(key+".vapid_public_key", "must be base64url of a 65-byte uncompressed P-256 point")
		pub = nil
	} else if _, err := ecdh.P256().NewPublicKey(pub); err != nil {
		bad(key+".vapid_public_key", "not a point on the P-256 curve")
		pub = nil
	}
	switch {
	case w.VAPIDPrivateKey != "":
		d, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(w.VAPIDPrivateKey, "="))
		var k *ecdh.PrivateKey
		if err == nil && len(d) == 32 {
			k, err = ecdh.P256().NewPrivateKey(d)
		}
		if err != nil || k == nil {
			bad(key+".vapid_private_key", "must be base64url of a 32-byte P-256 private key")
		} else if pub != nil && !bytes.Equal(k.PublicKey().Bytes(), pub) {
			bad(key+".vapid_private_key", "is not the private half of vapid_public_key")
		}
	case w.VAPIDPrivateKeySecret == "":
		bad(key, "needs vapid_private_key or vapid_private_key_secret")
	}
	if w.Subscriber == "" && !sandbox {
		bad(key+".subscriber", "required: a mailto: address or https: URL where push services can reach you")
	} else if w.Subscriber != "" && !validSubscriber(w.Subscriber) {
		bad(key+".subscriber", "%q is not a mailto: address or an https: URL", w.Subscriber)
	}
	if w.RatePerSecond < 0 {
		bad(key+".rate_per_second", "must not be negative")
	}
}

func validSubscriber(s string) bool {
	if rest, ok := strings.CutPrefix(s, "mailto:"); ok {
		return strings.Contains(rest, "@")
	}
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "https" && u.Host != ""
}

// DevVAPIDPublicKey and its private half are the development configuration's VAPID key pair:
// published, like its contacts key, so a page subscribed against `herald dev` keeps working
// across restarts. Real deployments generate their own (`herald webpush keys`).
const (
	DevVAPIDPublicKey  = "BPHndDgeUWreF-Mqpx26CbsZkBRTXA6oNuRGEru4ziQWeowoviMTrlnWNYvR-GwkWvW0WTKm9AWnlsD4sA38AEQ"
	devVAPIDPrivateKey = "xYsKtQFyLFkSYM84LyV8CbG-hnSPjIx-R1uDeAQjSZg"
)

// QuietHours is when marketing is not sent to people without night-time consent.
type QuietHours struct {
	Start    string `yaml:"start"`     // "21:00"
	End      string `yaml:"end"`       // "08:00"
	TimeZone string `yaml:"time_zone"` // default for recipients without one: Asia/Seoul
}

// Marketing configures advertising messages.
type Marketing struct {
	AdPrefix bool `yaml:"ad_prefix"` // start marketing push and SMS titles with "(광고)" (Korean 정보통신망법 §50)
	// UnsubscribeBaseURL is where recipients reach Herald's API (a custom domain, say): marketing
	// email's one-click unsubscribe links are <it>/u/<token>. Default: locally the API's own
	// address, in AWS the API's endpoint.
	UnsubscribeBaseURL string `yaml:"unsubscribe_base_url"`
	// OptOutSMS is the free refusal line every marketing SMS (and an AlimTalk's SMS fallback of a
	// marketing message) ends with, e.g. "무료수신거부 080-123-4567" (Korean 정보통신망법 §50).
	// Required with ad_prefix wherever SMS can be sent.
	OptOutSMS string `yaml:"opt_out_sms"`
}

// Inbox configures inbox items.
type Inbox struct {
	TTL Duration `yaml:"ttl"`
}

// Contacts configures encryption of contact data at rest.
type Contacts struct {
	EncryptionKey       string `yaml:"encryption_key"`        // base64 of 32 bytes (local)
	EncryptionKeySecret string `yaml:"encryption_key_secret"` // Secrets Manager name (AWS)
}

// Load reads and validates path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(b)
}

// Parse decodes YAML, applies defaults and validates.
func Parse(b []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// DefaultConsumer is the event source mapping used where the file says nothing.
var DefaultConsumer = Consumer{BatchSize: 10, MaxConcurrency: 2, VisibilityTimeout: Duration(60 * time.Second), MaxReceiveCount: 5}

func (c *Consumer) applyDefaults(d Consumer) {
	if c.BatchSize == 0 {
		c.BatchSize = d.BatchSize
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = d.MaxConcurrency
	}
	if c.VisibilityTimeout == 0 {
		c.VisibilityTimeout = d.VisibilityTimeout
	}
	if c.MaxReceiveCount == 0 {
		c.MaxReceiveCount = d.MaxReceiveCount
	}
}

// ApplyDefaults fills every unset field.
func (c *Config) ApplyDefaults() {
	if c.Env == "" {
		c.Env = "dev"
	}
	for i := range c.Services {
		s := &c.Services[i]
		if s.MaxConcurrency == 0 {
			s.MaxConcurrency = 2
		}
		if s.BatchSize == 0 {
			s.BatchSize = 10
		}
		if s.Lane == "" {
			s.Lane = "realtime"
		}
	}
	if c.Lanes == nil {
		c.Lanes = map[string]Lane{}
	}
	for _, name := range []string{"realtime", "bulk"} {
		l := c.Lanes[name]
		// The bulk lane gets one worker per stage by default: on a small machine every extra bulk
		// worker takes the shared database writer and CPU from real-time traffic (measured with
		// `herald bench campaign`: 60,000 devices, real-time p99 2.5 s with 2+4 bulk workers,
		// 0.3 s with 1+1, for 10 % less campaign throughput).
		prep, send := 4, 8
		if name == "bulk" {
			prep, send = 1, 1
		}
		l.Prepare.applyDefaults(Consumer{BatchSize: 1, MaxConcurrency: prep, VisibilityTimeout: Duration(60 * time.Second), MaxReceiveCount: 5})
		l.Send.applyDefaults(Consumer{BatchSize: 1, MaxConcurrency: send, VisibilityTimeout: Duration(60 * time.Second), MaxReceiveCount: 5})
		l.Record.applyDefaults(Consumer{BatchSize: 10, MaxConcurrency: 1, VisibilityTimeout: Duration(30 * time.Second), MaxReceiveCount: 5})
		c.Lanes[name] = l
	}
	if c.Stages == nil {
		c.Stages = map[string]Consumer{}
	}
	for _, name := range []string{"cleanup", "bounce"} {
		s := c.Stages[name]
		s.applyDefaults(DefaultConsumer)
		c.Stages[name] = s
	}
	if c.Retry.MaxAttempts == 0 {
		c.Retry.MaxAttempts = 8
	}
	if c.Retry.Base == 0 {
		c.Retry.Base = Duration(time.Second)
	}
	if _, ok := c.Retry.Providers[string(notify.ProviderAlimTalk)]; !ok {
		if c.Retry.Providers == nil {
			c.Retry.Providers = map[string]ProviderRetry{}
		}
		c.Retry.Providers[string(notify.ProviderAlimTalk)] = DefaultAlimTalkRetry
	}
	if c.Retry.Max == 0 {
		c.Retry.Max = Duration(5 * time.Minute)
	}
	if c.QuietHours.Start == "" {
		c.QuietHours.Start = "21:00"
	}
	if c.QuietHours.End == "" {
		c.QuietHours.End = "08:00"
	}
	if c.QuietHours.TimeZone == "" {
		c.QuietHours.TimeZone = "Asia/Seoul"
	}
	if c.Inbox.TTL == 0 {
		c.Inbox.TTL = Duration(30 * 24 * time.Hour)
	}
	if c.Providers.SES.Region == "" {
		c.Providers.SES.Region = "us-east-1"
	}
}

var (
	nameRe      = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
	clockRe     = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)
	principalRe = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/[\w+=,.@/-]+$`)
)

// Validate collects every problem, each naming its key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config %s: %s", key, fmt.Sprintf(format, args...)))
	}
	for k := range c.Extra {
		bad(k, "unknown key")
	}
	if !nameRe.MatchString(c.Env) {
		bad("env", "%q must be lower-case letters, digits and dashes", c.Env)
	}
	if len(c.Services) == 0 {
		bad("services", "at least one service is required")
	}
	names, keys := map[string]bool{}, map[string]string{}
	for i, s := range c.Services {
		key := fmt.Sprintf("services[%d]", i)
		if !nameRe.MatchString(s.Name) {
			bad(key+".name", "%q must be 1–40 lower-case letters, digits and dashes, starting with a letter", s.Name)
		}
		if names[s.Name] {
			bad(key+".name", "service %q listed twice", s.Name)
		}
		names[s.Name] = true
		if len(s.APIKeys) == 0 && s.APIKeySecret == "" && len(s.IAMPrincipals) == 0 {
			bad(key, "needs api_keys, api_key_secret or iam_principals")
		}
		for j, p := range s.IAMPrincipals {
			if !principalRe.MatchString(p) {
				bad(fmt.Sprintf("%s.iam_principals[%d]", key, j), "%q is not an IAM role or user ARN (arn:aws:iam::123456789012:role/name)", p)
			}
		}
		for j, k := range s.APIKeys {
			if len(k) < 8 {
				bad(fmt.Sprintf("%s.api_keys[%d]", key, j), "keys must be at least 8 characters")
			}
			if other, ok := keys[k]; ok {
				bad(fmt.Sprintf("%s.api_keys[%d]", key, j), "key also used by service %q", other)
			}
			keys[k] = s.Name
		}
		if s.MaxConcurrency < 2 || s.MaxConcurrency > 1000 {
			bad(key+".max_concurrency", "%d is outside 2–1000 (Lambda's SQS MaximumConcurrency range)", s.MaxConcurrency)
		}
		if s.BatchSize < 1 || s.BatchSize > 10 {
			bad(key+".batch_size", "%d is outside 1–10", s.BatchSize)
		}
		if w := s.BatchingWindow.D(); w < 0 || w > 300*time.Second || w%time.Second != 0 {
			bad(key+".batching_window", "%v is not whole seconds from 0 to 300s (Lambda's MaximumBatchingWindowInSeconds)", w)
		}
		if s.Lane != "realtime" && s.Lane != "bulk" {
			bad(key+".lane", "%q: want realtime or bulk", s.Lane)
		}
	}
	for name, l := range c.Lanes {
		if name != "realtime" && name != "bulk" {
			bad("lanes."+name, "unknown lane (want realtime or bulk)")
			continue
		}
		for stage, cs := range map[string]Consumer{"prepare": l.Prepare, "send": l.Send, "record": l.Record} {
			cs.validate("lanes."+name+"."+stage, bad)
		}
		if n := l.ExpressMaxRecipients; n != nil && (name != "realtime" || *n < 0 || *n > 8) {
			bad("lanes."+name+".express_max_recipients", "%d: want 0 (never) to 8, on the realtime lane only", *n)
		}
	}
	for name, cs := range c.Stages {
		if name != "cleanup" && name != "bounce" {
			bad("stages."+name, "unknown stage (want cleanup or bounce)")
			continue
		}
		cs.validate("stages."+name, bad)
	}
	for _, name := range SortedApps(c.Retry.Providers) {
		pr, key := c.Retry.Providers[name], "retry.providers."+name
		if !slices.Contains(notify.Providers, notify.Provider(name)) {
			bad(key, "unknown provider (want one of fcm, apns, webpush, ses, twilio, alimtalk)")
		}
		if pr.MaxRetries < 0 || pr.MaxRetries > 49 {
			bad(key+".max_retries", "%d is outside 0–49", pr.MaxRetries)
		}
		if pr.MaxRetries > 0 && len(pr.Delays) == 0 {
			bad(key+".delays", "required when max_retries is above 0 (e.g. [1m, 5m, 15m])")
		}
		for i, d := range pr.Delays {
			if d.D() < time.Second || d.D() > notify.MaxQueueDelay {
				bad(fmt.Sprintf("%s.delays[%d]", key, i), "%s is outside 1s–15m (SQS delays a message 15 minutes at most)", d.D())
			}
		}
	}
	if c.Retry.MaxAttempts < 1 || c.Retry.MaxAttempts > 50 {
		bad("retry.max_attempts", "%d is outside 1–50", c.Retry.MaxAttempts)
	}
	if c.Retry.Base.D() <= 0 || c.Retry.Max.D() < c.Retry.Base.D() || c.Retry.Max.D() > notify.MaxQueueDelay {
		bad("retry", "need 0 < base ≤ max ≤ 15m (SQS's longest delay)")
	}
	if !clockRe.MatchString(c.QuietHours.Start) {
		bad("quiet_hours.start", "%q is not HH:MM", c.QuietHours.Start)
	}
	if !clockRe.MatchString(c.QuietHours.End) {
		bad("quiet_hours.end", "%q is not HH:MM", c.QuietHours.End)
	} else if c.QuietHours.End == c.QuietHours.Start {
		bad("quiet_hours.end", "%q equals start: give a window (it reads as both never and always)", c.QuietHours.End)
	}
	if _, err := time.LoadLocation(c.QuietHours.TimeZone); err != nil {
		bad("quiet_hours.time_zone", "%q is not an IANA time zone", c.QuietHours.TimeZone)
	}
	if c.Contacts.EncryptionKey != "" {
		if k, err := base64.StdEncoding.DecodeString(c.Contacts.EncryptionKey); err != nil || len(k) != 32 {
			bad("contacts.encryption_key", "must be base64 of 32 bytes (e.g. `openssl rand -base64 32`)")
		}
	} else if c.Contacts.EncryptionKeySecret == "" {
		bad("contacts", "needs encryption_key or encryption_key_secret")
	}
	for name, a := range c.Providers.FCM.Apps {
		if a.ProjectID == "" {
			bad("providers.fcm.apps."+name+".project_id", "required")
		}
	}
	c.Providers.WebPush.validate(c.Sandbox, bad)
	for name, a := range c.Providers.APNs.Apps {
		if a.Topic == "" {
			bad("providers.apns.apps."+name+".topic", "required (the app's bundle id)")
		}
		if !c.Sandbox && (a.KeyID == "" || a.TeamID == "" || (a.KeyFile == "" && a.KeySecret == "")) {
			bad("providers.apns.apps."+name, "needs key_id, team_id and key_file or key_secret")
		}
	}
	if a := c.Providers.AlimTalk; a.Configured() {
		if a.APIKey == "" {
			bad("providers.alimtalk.api_key", "required (the Solapi API key)")
		}
		if !c.Sandbox && a.APISecret == "" && a.APISecretSecret == "" {
			bad("providers.alimtalk", "needs api_secret or api_secret_secret")
		}
		if len(a.Apps) == 0 {
			bad("providers.alimtalk.apps", "at least one app (a KakaoTalk channel) is required")
		}
		switch from := KoreanSenderNumber(a.From); {
		case a.From == "":
			bad("providers.alimtalk.from", "required: the sender number registered with Solapi (발신번호), e.g. 0212345678")
		case from == "":
			bad("providers.alimtalk.from", "%q is not a Korean sender number (8 to 11 digits: 0…, or 15xx/16xx/18xx-xxxx)", a.From)
		default:
			c.Providers.AlimTalk.From = from
		}
		for _, name := range SortedApps(a.Apps) {
			if strings.TrimSpace(a.Apps[name].SenderKey) == "" {
				bad("providers.alimtalk.apps."+name+".sender_key", "required (the channel's sender profile key, Solapi's pfId)")
			}
		}
		if a.RatePerSecond < 0 {
			bad("providers.alimtalk.rate_per_second", "must not be negative (0 is unlimited)")
		}
		if a.VerdictCheck < 0 || a.VerdictCheck.D() > notify.MaxQueueDelay {
			bad("providers.alimtalk.verdict_check", "must be from 0 (the default, 30s) to 15m, the longest SQS delay")
		}
		if a.VerdictDeadline < 0 || (a.VerdictDeadline > 0 && a.VerdictDeadline < a.VerdictCheck) {
			bad("providers.alimtalk.verdict_deadline", "must not be negative or shorter than verdict_check (0 is the default, 24h)")
		}
		switch a.Fallback {
		case "", "none", "sms":
		default:
			bad("providers.alimtalk.fallback", "%q is not a fallback (want sms or none)", a.Fallback)
		}
		if a.BaseURL != "" && !notify.IsHTTPURL(a.BaseURL) {
			bad("providers.alimtalk.base_url", "%q is not an http(s) URL", a.BaseURL)
		}
	}
	if s := c.Alerts.Slack; s.WebhookURL != "" || s.ConsoleURL != "" || s.WebhookURLSecret != "" {
		if s.WebhookURL != "" && s.WebhookURLSecret != "" {
			bad("alerts.slack.webhook_url", "set webhook_url or webhook_url_secret, not both")
		}
		if s.WebhookURL != "" && !notify.IsHTTPURL(s.WebhookURL) {
			bad("alerts.slack.webhook_url", "is not an http(s) URL")
		}
		// A base URL: the console's paths are appended to it, so no query or fragment.
		if s.ConsoleURL != "" && (!notify.IsHTTPURL(s.ConsoleURL) || strings.ContainsAny(s.ConsoleURL, "?#")) {
			bad("alerts.slack.console_url", "%q is not an http(s) base URL", s.ConsoleURL)
		}
	}
	if c.Marketing.AdPrefix && c.Marketing.OptOutSMS == "" && (c.Providers.Twilio.AccountSID != "" || c.Sandbox) {
		bad("marketing.opt_out_sms", "required with ad_prefix where SMS can be sent: the free refusal line every marketing SMS ends with (e.g. \"무료수신거부 080-123-4567\")")
	}
	if len(c.Marketing.OptOutSMS) > 200 || strings.ContainsAny(c.Marketing.OptOutSMS, "\r\n") {
		bad("marketing.opt_out_sms", "must be one line of at most 200 bytes")
	}
	if u := c.Marketing.UnsubscribeBaseURL; u != "" && (!notify.IsHTTPURL(u) || strings.ContainsAny(u, "?#")) {
		bad("marketing.unsubscribe_base_url", "%q is not an http(s) base URL", u)
	}
	if !c.Sandbox {
		if c.Providers.SES.From == "" {
			bad("providers.ses.from", "required (a verified identity)")
		}
		if c.Providers.Twilio.AccountSID == "" {
			bad("providers.twilio.account_sid", "required")
		}
	}
	return errors.Join(errs...)
}

func (cs Consumer) validate(key string, bad func(string, string, ...any)) {
	if cs.BatchSize < 1 || cs.BatchSize > 10 {
		bad(key+".batch_size", "%d is outside 1–10", cs.BatchSize)
	}
	if cs.MaxConcurrency < 1 || cs.MaxConcurrency > 1000 {
		bad(key+".max_concurrency", "%d is outside 1–1000", cs.MaxConcurrency)
	}
	if cs.VisibilityTimeout.D() < time.Second || cs.VisibilityTimeout.D() > 12*time.Hour {
		bad(key+".visibility_timeout", "must be 1s–12h")
	}
	if cs.MaxReceiveCount < 1 || cs.MaxReceiveCount > 1000 {
		bad(key+".max_receive_count", "%d is outside 1–1000", cs.MaxReceiveCount)
	}
}

// QuietHoursPolicy is the night-time rule for marketing notifications that carry none.
func (c *Config) QuietHoursPolicy() notify.QuietHours {
	return notify.QuietHours{Enabled: true, Start: c.QuietHours.Start, End: c.QuietHours.End, TimeZone: c.QuietHours.TimeZone}
}

// Keys maps every API key to its service.
func (c *Config) Keys() map[string]string {
	out := map[string]string{}
	for _, s := range c.Services {
		for _, k := range s.APIKeys {
			out[k] = s.Name
		}
	}
	return out
}

// AdminServices lists the services allowed to operate the queues.
func (c *Config) AdminServices() []string {
	var out []string
	for _, s := range c.Services {
		if s.Admin {
			out = append(out, s.Name)
		}
	}
	return out
}

// QueueNames lists every source queue Herald consumes (each has a DLQ named <queue>-dlq).
func (c *Config) QueueNames() []string {
	var out []string
	for _, s := range c.Services {
		out = append(out, notify.IngestQueue(s.Name))
	}
	for _, l := range notify.Lanes {
		for _, st := range []string{notify.StagePrepare, notify.StageSend, notify.StageRecord} {
			out = append(out, notify.LaneQueue(st, l))
		}
	}
	return append(out, notify.StageCleanup, notify.StageBounce)
}

// ProviderApps lists the configured provider apps of each push platform, sorted.
func (c *Config) ProviderApps() map[notify.Platform][]string {
	apps := map[notify.Platform][]string{
		notify.PlatformFCM:  SortedApps(c.Providers.FCM.Apps),
		notify.PlatformAPNs: SortedApps(c.Providers.APNs.Apps),
	}
	if c.Providers.WebPush.Enabled() {
		// One VAPID key serves every page: web push subscriptions belong to the app "default".
		apps[notify.PlatformWebPush] = []string{"default"}
	}
	return apps
}

// ServiceNames lists the services in file order.
func (c *Config) ServiceNames() []string {
	out := make([]string, len(c.Services))
	for i, s := range c.Services {
		out[i] = s.Name
	}
	return out
}

// Redacted is a copy safe to log: keys, tokens and secrets masked.
func (c Config) Redacted() Config {
	svcs := make([]Service, len(c.Services))
	copy(svcs, c.Services)
	for i := range svcs {
		ks := make([]string, len(svcs[i].APIKeys))
		for j := range ks {
			ks[j] = "***"
		}
		svcs[i].APIKeys = ks
	}
	c.Services = svcs
	if c.Contacts.EncryptionKey != "" {
		c.Contacts.EncryptionKey = "***"
	}
	if c.Providers.Twilio.AuthToken != "" {
		c.Providers.Twilio.AuthToken = "***"
	}
	if c.Providers.AlimTalk.APISecret != "" {
		c.Providers.AlimTalk.APISecret = "***"
	}
	if c.Providers.WebPush.VAPIDPrivateKey != "" {
		c.Providers.WebPush.VAPIDPrivateKey = "***"
	}
	if c.Alerts.Slack.WebhookURL != "" {
		c.Alerts.Slack.WebhookURL = "***"
	}
	c.Extra = nil
	return c
}

// Dev is the configuration `herald dev` runs without a file: one service "demo" with key
// "dev-demo-key", sandbox providers for everything, and a fixed development encryption key.
func Dev() *Config {
	c := &Config{
		Env:      "local",
		Sandbox:  true,
		Services: []Service{{Name: "demo", APIKeys: []string{"dev-demo-key"}, MaxConcurrency: 4, Admin: true}},
		Providers: Providers{
			FCM:    FCM{Apps: map[string]FCMApp{"default": {ProjectID: "herald-sandbox"}}},
			APNs:   APNs{Apps: map[string]APNsApp{"default": {Topic: "com.example.herald"}}},
			SES:    SES{From: "Herald Sandbox <noreply@sandbox.herald.local>"},
			Twilio: Twilio{AccountSID: "AC00000000000000000000000000000000", AuthToken: "sandboxtoken0000", From: "+15005550006"},
			AlimTalk: AlimTalk{APIKey: "NCSSANDBOX0000000", APISecret: "sandbox-alimtalk-secret", From: "0212345678",
				Apps: map[string]AlimTalkApp{"default": {SenderKey: "KA01PF000000000000sandbox"}},
				// The sandbox reports verdicts at once: a short first read keeps a local send quick.
				VerdictCheck: Duration(time.Second)},
			WebPush: WebPush{VAPIDPublicKey: DevVAPIDPublicKey, VAPIDPrivateKey: devVAPIDPrivateKey,
				Subscriber: "mailto:dev@sandbox.herald.local"},
		},
		// A published key: contacts in a dev database are not secret. Real deployments set their own.
		Contacts: Contacts{EncryptionKey: base64.StdEncoding.EncodeToString([]byte("herald-dev-only-not-a-secret-key"))},
	}
	c.ApplyDefaults()
	return c
}

// SortedApps returns map keys in order, for stable output.
func SortedApps[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// KoreanSenderNumber is s as the digits of a Korean sender number — a subscriber number
// starting 0 (mobile, area code, 070) of 9 to 11 digits, or an 8-digit representative number
// (15xx, 16xx, 18xx) — with the separators people write (-, space, parentheses, dots) removed,
// or "" when s is none. Solapi takes a message's from in digits only.
func KoreanSenderNumber(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '-' || r == ' ' || r == '(' || r == ')' || r == '.':
		default:
			return ""
		}
	}
	d := b.String()
	switch {
	case len(d) >= 9 && len(d) <= 11 && d[0] == '0':
		return d
	case len(d) == 8 && (strings.HasPrefix(d, "15") || strings.HasPrefix(d, "16") || strings.HasPrefix(d, "18")):
		return d
	}
	return ""
}
