// Package webpush delivers W3C Web Push messages to browsers' push services (RFC 8030), with the
// payload encrypted for the subscription (RFC 8291, aes128gcm) and the application server
// identified by a VAPID key (RFC 8292), using github.com/SherClockHolmes/webpush-go. It
// implements notify.Sender. A subscription is a device whose token is its canonical JSON
// (notify.WebPushSubscription); every push service is reached directly, so requests are paced per
// push service origin (the endpoint's scheme and host) through the shared notify.RateLimiter.
package webpush

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	webpushgo "github.com/SherClockHolmes/webpush-go"

	"herald/internal/netguard"
	"herald/internal/notify"
)

// RateKeyPrefix starts the rate limiter key of each push service origin (see
// notify.WebPushOriginRateKey).
const RateKeyPrefix = notify.WebPushOriginRateKey

// MaxPayload is the most JSON one message carries: the library pads every message into one
// 4,096-byte record (so its length says nothing about its content), of which the encryption
// header, the tag and the padding delimiter take 103 bytes.
const MaxPayload = 4096 - 16 - 86 - 1

// MaxBatch is the most messages one Send call takes (push services have no batch API).
const MaxBatch = 500

// DefaultMaxConcurrency bounds pushes in flight across all Send calls.
const DefaultMaxConcurrency = 64

// Config configures a Sender.
type Config struct {
	// VAPIDPublicKey is the application server key browsers subscribe with: base64url of the
	// 65-byte uncompressed P-256 point. VAPIDPrivateKey is its private half: base64url of 32 bytes.
	VAPIDPublicKey  string
	VAPIDPrivateKey string
	// Subscriber is the VAPID "sub" claim: a mailto: or https: URL where a push service can reach
	// the operator.
	Subscriber string
	// Limiter, when set, paces requests per push service origin (keys RateKeyPrefix:<origin>).
	Limiter notify.RateLimiter
	// HTTPClient, default one with a 30 s timeout whose dialer refuses every address outside
	// the public internet (netguard), loopback too unless AllowLoopback: an endpoint is a URL a
	// browser — or whoever registers a subscription — chose.
	HTTPClient *http.Client
	// AllowLoopback lets the default client reach this machine: the sandbox's push service.
	AllowLoopback bool
	// MaxConcurrency bounds pushes in flight across all Send calls; default 64.
	MaxConcurrency int
}

// Validate reports every problem in c: keys that do not parse or do not belong together, and a
// subscriber that is neither mailto: nor https:.
func (c Config) Validate() error {
	var errs []error
	if _, err := ParseKeys(c.VAPIDPublicKey, c.VAPIDPrivateKey); err != nil {
		errs = append(errs, fmt.Errorf("webpush: %w", err))
	}
	if err := CheckSubscriber(c.Subscriber); err != nil {
		errs = append(errs, fmt.Errorf("webpush: %w", err))
	}
	if c.MaxConcurrency < 0 {
		errs = append(errs, fmt.Errorf("webpush: max concurrency %d is negative", c.MaxConcurrency))
	}
	return errors.Join(errs...)
}

// CheckSubscriber accepts a mailto: address or an https: URL, as RFC 8292 §2.1 asks.
func CheckSubscriber(s string) error {
	switch {
	case strings.HasPrefix(s, "mailto:") && strings.Contains(s, "@"):
		return nil
	case strings.HasPrefix(s, "https://"):
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			return nil
		}
	}
	return fmt.Errorf("subscriber %q is not a mailto: address or an https: URL", s)
}

// ParseKeys checks a VAPID key pair: public is base64url of an uncompressed P-256 point,
// private base64url of its 32-byte scalar, and they belong together.
func ParseKeys(public, private string) (*ecdh.PrivateKey, error) {
	pub, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(public, "="))
	if err != nil || len(pub) != 65 || pub[0] != 0x04 {
		return nil, errors.New("vapid public key: want base64url of a 65-byte uncompressed P-256 point")
	}
	priv, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(private, "="))
	if err != nil || len(priv) != 32 {
		return nil, errors.New("vapid private key: want base64url of 32 bytes")
	}
	k, err := ecdh.P256().NewPrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("vapid private key: %w", err)
	}
	if !bytes.Equal(k.PublicKey().Bytes(), pub) {
		return nil, errors.New("vapid public key is not the private key's")
	}
	return k, nil
}

// GenerateKeys makes a VAPID key pair, both base64url without padding.
func GenerateKeys() (public, private string, err error) {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	return base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()), base64.RawURLEncoding.EncodeToString(k.Bytes()), nil
}

// Sender delivers Web Push messages. It is safe for concurrent use.
type Sender struct {
	public, private string
	subscriber      string // without "mailto:": the library adds it to anything not https:
	limiter         atomic.Pointer[notify.RateLimiter]
	client          *http.Client
	inFlight        chan struct{}
	now             func() time.Time
}

var _ notify.Sender = (*Sender)(nil)

// New checks cfg and builds the sender. It makes no network call.
func New(cfg Config) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := cfg.MaxConcurrency
	if n == 0 {
		n = DefaultMaxConcurrency
	}
	s := &Sender{
		public:     strings.TrimRight(cfg.VAPIDPublicKey, "="),
		private:    strings.TrimRight(cfg.VAPIDPrivateKey, "="),
		subscriber: strings.TrimPrefix(cfg.Subscriber, "mailto:"),
		client:     cfg.HTTPClient,
		inFlight:   make(chan struct{}, n),
		now:        time.Now,
	}
	if s.client == nil {
		s.client = &http.Client{Timeout: 30 * time.Second, Transport: netguard.Policy{AllowLoopback: cfg.AllowLoopback}.Transport()}
	}
	if cfg.Limiter != nil {
		s.SetRateLimiter(cfg.Limiter)
	}
	return s, nil
}

// SetRateLimiter paces later requests per push service origin through l (notify.SelfLimiting).
func (s *Sender) SetRateLimiter(l notify.RateLimiter) {
	if l != nil {
		s.limiter.Store(&l)
	}
}

// PublicKey is the VAPID public key browsers subscribe with (applicationServerKey).
func (s *Sender) PublicKey() string { return s.public }

// CloseIdleConnections closes the client's idle connections.
func (s *Sender) CloseIdleConnections() { s.client.CloseIdleConnections() }

// Provider is Web Push.
func (s *Sender) Provider() notify.Provider { return notify.ProviderWebPush }

// MaxBatch is how many messages one Send call takes.
func (s *Sender) MaxBatch() int { return MaxBatch }

// Send pushes msgs concurrently (at most MaxConcurrency in flight across all calls), each after
// its push service origin's rate limit allows, and returns one result per message in input
// order. A token that is not a web push subscription is EREJECTED. The call itself fails only
// with ETOOLARGE for more than MaxBatch messages.
func (s *Sender) Send(ctx context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	if len(msgs) > MaxBatch {
		return nil, notify.Errorf(notify.ETOOLARGE, "webpush: %d messages in one send; at most %d", len(msgs), MaxBatch)
	}
	results := make([]notify.SendResult, len(msgs))
	var limiter notify.RateLimiter
	if l := s.limiter.Load(); l != nil {
		limiter = *l
	}
	var wg sync.WaitGroup
	for i := range msgs {
		m := &msgs[i]
		r := &results[i]
		r.DeliveryID = m.DeliveryID
		sub, ok := notify.ParseWebPushToken(m.Address)
		if !ok {
			r.Err = notify.Errorf(notify.EREJECTED, "webpush: the device token is not a web push subscription")
			continue
		}
		body, err := json.Marshal(toPayload(*m))
		if err != nil {
			r.Err = notify.Wrap(notify.EREJECTED, err, "webpush: payload")
			continue
		}
		if len(body) > MaxPayload {
			r.Err = notify.Errorf(notify.EREJECTED, "webpush: payload of %d bytes; at most %d", len(body), MaxPayload)
			continue
		}
		origin := Origin(sub.Endpoint)
		if limiter != nil {
			if err := limiter.Wait(ctx, RateKeyPrefix+":"+origin, 1); err != nil {
				r.Err = classify(0, nil, err, sub.Endpoint, s.now())
				continue
			}
		}
		select {
		case s.inFlight <- struct{}{}:
		case <-ctx.Done():
			r.Err = classify(0, nil, ctx.Err(), sub.Endpoint, s.now())
			continue
		}
		h := toHeaders(*m)
		wg.Go(func() {
			defer func() { <-s.inFlight }()
			r.ProviderMessageID, r.Err = s.push(ctx, body, sub, h)
		})
	}
	wg.Wait()
	return results, nil
}

// push sends one encrypted message and classifies the answer; the message id is the push
// service's Location (the message's URI), when it gives one.
func (s *Sender) push(ctx context.Context, body []byte, sub notify.WebPushSubscription, h headers) (string, error) {
	ws := &webpushgo.Subscription{Endpoint: sub.Endpoint, Keys: webpushgo.Keys{P256dh: sub.Keys.P256dh, Auth: sub.Keys.Auth}}
	resp, err := webpushgo.SendNotificationWithContext(ctx, body, ws, &webpushgo.Options{
		HTTPClient:      s.client,
		Subscriber:      s.subscriber,
		VAPIDPublicKey:  s.public,
		VAPIDPrivateKey: s.private,
		TTL:             h.TTL,
		Urgency:         h.Urgency,
		Topic:           h.Topic,
	})
	if err != nil {
		return "", classify(0, nil, err, sub.Endpoint, s.now())
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so the connection is reused
	if err := classify(resp.StatusCode, resp.Header, nil, sub.Endpoint, s.now()); err != nil {
		return "", err
	}
	return resp.Header.Get("Location"), nil
}

// Origin is an endpoint's push service: its scheme and host ("https://fcm.googleapis.com").
func Origin(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
