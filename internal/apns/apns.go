// Package apns sends push notifications to Apple devices over the APNs HTTP/2 provider API with
// token (.p8 key) authentication, using github.com/sideshow/apns2. It implements notify.Sender:
// one provider token and one long-lived client per app and environment, as Apple asks (keep
// connections open; don't refresh tokens more than every 20 minutes).
package apns

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sideshow/apns2"
	"github.com/sideshow/apns2/token"
	"golang.org/x/net/http2"

	"herald/internal/notify"
)

// DefaultMaxConcurrency is the default bound on pushes in flight: well inside the 250 streams
// one HTTP/2 connection carries, so one connection per app suffices.
const DefaultMaxConcurrency = 64

// MaxPayload is APNs's limit on an alert notification's JSON body; bigger ones are refused
// here, without a request.
const MaxPayload = 4096

// MaxBatch is the most messages one Send call takes (APNs has no batch API; this bounds one call).
const MaxBatch = 500

// App is one bundle id (topic) with its token-auth key.
type App struct {
	Topic  string // bundle id, sent as apns-topic
	KeyID  string
	TeamID string
	KeyP8  []byte // PEM PKCS#8 P-256 key (.p8 from the Apple developer account)
	// Endpoint overrides the APNs host (e.g. the sandbox's TLS URL); "" picks api.push.apple.com
	// or api.sandbox.push.apple.com by each device's environment.
	Endpoint string
	// RootCAs, when set, replaces the system roots (to trust a sandbox's certificate).
	RootCAs *x509.CertPool
}

// LogValue keeps the key out of logs.
func (a App) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("topic", a.Topic),
		slog.String("key_id", a.KeyID),
		slog.String("team_id", a.TeamID),
		slog.String("endpoint", a.Endpoint),
		slog.Bool("key", a.KeyP8 != nil),
	)
}

// Config configures a Sender.
type Config struct {
	// Apps maps the app name carried by deliveries ("default") to its bundle and key.
	Apps map[string]App
	// MaxConcurrency bounds pushes in flight across all Send calls; default 64.
	MaxConcurrency int
}

// Validate reports every problem in c, including keys that do not parse.
func (c Config) Validate() error {
	var errs []error
	if len(c.Apps) == 0 {
		errs = append(errs, errors.New("apns: at least one app is required"))
	}
	for name, a := range c.Apps {
		if a.Topic == "" {
			errs = append(errs, fmt.Errorf("apns: app %q: topic (bundle id) is required", name))
		}
		if a.KeyID == "" || a.TeamID == "" {
			errs = append(errs, fmt.Errorf("apns: app %q: key id and team id are required", name))
		}
		if _, err := token.AuthKeyFromBytes(a.KeyP8); err != nil {
			errs = append(errs, fmt.Errorf("apns: app %q: key: %w", name, err))
		}
		if a.Endpoint != "" {
			if u, err := url.Parse(a.Endpoint); err != nil || u.Scheme != "https" || u.Host == "" {
				errs = append(errs, fmt.Errorf("apns: app %q: endpoint %q is not an https URL", name, a.Endpoint))
			}
		}
	}
	if c.MaxConcurrency < 0 {
		errs = append(errs, fmt.Errorf("apns: max concurrency %d is negative", c.MaxConcurrency))
	}
	return errors.Join(errs...)
}

// Sender delivers push messages through APNs. It is safe for concurrent use.
type Sender struct {
	apps     map[string]*app
	inFlight chan struct{}
	now      func() time.Time
}

type app struct {
	topic      string
	production *apns2.Client
	sandbox    *apns2.Client // the same client as production when the app has an Endpoint
}

var _ notify.Sender = (*Sender)(nil)

// New builds one provider token and the clients of every app. It makes no network call;
// connections open on first use and stay open.
func New(cfg Config) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := cfg.MaxConcurrency
	if n == 0 {
		n = DefaultMaxConcurrency
	}
	s := &Sender{apps: make(map[string]*app, len(cfg.Apps)), inFlight: make(chan struct{}, n), now: time.Now}
	for name, a := range cfg.Apps {
		key, _ := token.AuthKeyFromBytes(a.KeyP8) // checked by Validate
		// One token per app, shared by its clients: apns2 re-signs it only when it is 50 minutes
		// old, inside Apple's 20–60 minute window.
		tok := &token.Token{AuthKey: key, KeyID: a.KeyID, TeamID: a.TeamID}
		ap := &app{topic: a.Topic}
		if a.Endpoint != "" {
			ap.production = newClient(tok, strings.TrimSuffix(a.Endpoint, "/"), a.RootCAs)
			ap.sandbox = ap.production
		} else {
			ap.production = newClient(tok, apns2.HostProduction, a.RootCAs)
			ap.sandbox = newClient(tok, apns2.HostDevelopment, a.RootCAs)
		}
		s.apps[name] = ap
	}
	return s, nil
}

// newClient is apns2.NewTokenClient with a context-aware dialer and optional private roots.
func newClient(tok *token.Token, host string, roots *x509.CertPool) *apns2.Client {
	tr := &http2.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialTLSContext: func(ctx context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
			d := &tls.Dialer{
				NetDialer: &net.Dialer{Timeout: apns2.TLSDialTimeout, KeepAlive: apns2.TCPKeepAlive},
				Config:    cfg,
			}
			return d.DialContext(ctx, network, addr)
		},
		ReadIdleTimeout: apns2.ReadIdleTimeout,
	}
	return &apns2.Client{
		Host:       host,
		Token:      tok,
		HTTPClient: &http.Client{Transport: tr, Timeout: apns2.HTTPClientTimeout},
	}
}

// Close closes every client's connections.
func (s *Sender) Close() error {
	for _, a := range s.apps {
		a.production.CloseIdleConnections()
		if a.sandbox != a.production {
			a.sandbox.CloseIdleConnections()
		}
	}
	return nil
}

// Provider is APNs.
func (s *Sender) Provider() notify.Provider { return notify.ProviderAPNs }

// MaxBatch is how many messages one Send call takes.
func (s *Sender) MaxBatch() int { return MaxBatch }

// Send pushes msgs concurrently (at most MaxConcurrency in flight across all calls) and returns
// one result per message in input order. Per-message failures carry EDEADADDRESS, EREJECTED,
// ETHROTTLED, EUNAVAILABLE, EAUTH or EINTERNAL; an unknown app or an empty token is EREJECTED.
// The call itself fails only with ETOOLARGE for more than MaxBatch messages.
func (s *Sender) Send(ctx context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	if len(msgs) > MaxBatch {
		return nil, notify.Errorf(notify.ETOOLARGE, "apns: %d messages in one send; at most %d", len(msgs), MaxBatch)
	}
	results := make([]notify.SendResult, len(msgs))
	now := s.now()
	// A batch is usually one notification's content for many devices: encode each distinct
	// payload once instead of once per device.
	encoded := make(map[string][]byte, 1)
	var wg sync.WaitGroup
	for i := range msgs {
		m := &msgs[i]
		r := &results[i]
		r.DeliveryID = m.DeliveryID
		a, ok := s.apps[m.App]
		switch {
		case !ok:
			r.Err = notify.Errorf(notify.EREJECTED, "apns: unknown app %q (not in the apns config)", m.App)
			continue
		case m.Address == "":
			r.Err = notify.Errorf(notify.EREJECTED, "apns: empty device token")
			continue
		}
		client := a.production
		if m.Environment == "sandbox" || m.Environment == "development" {
			client = a.sandbox
		}
		key := payloadKey(m)
		body, ok := encoded[key]
		if !ok {
			var err error
			if body, err = json.Marshal(toPayload(*m)); err != nil {
				r.Err = notify.Wrap(notify.EREJECTED, err, "apns: payload")
				continue
			}
			encoded[key] = body
		}
		if len(body) > MaxPayload {
			r.Err = notify.Errorf(notify.EREJECTED, "apns: payload of %d bytes; at most %d", len(body), MaxPayload)
			continue
		}
		n := toHeaders(*m, a.topic, now)
		n.Payload = body
		select {
		case s.inFlight <- struct{}{}:
		case <-ctx.Done():
			r.Err = classify(nil, ctx.Err(), m.Address)
			continue
		}
		wg.Go(func() {
			defer func() { <-s.inFlight }()
			resp, err := client.PushWithContext(ctx, n)
			if r.Err = classify(resp, err, m.Address); r.Err == nil {
				r.ProviderMessageID = resp.ApnsID
			}
		})
	}
	wg.Wait()
	return results, nil
}
