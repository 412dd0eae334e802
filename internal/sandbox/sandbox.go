// Package sandbox runs fake providers on 127.0.0.1 that speak the real wire protocols — FCM HTTP
// v1, APNs over HTTP/2 with JWT auth, SES v2, Twilio Messages, Solapi's AlimTalk send — so the
// real SDKs and clients talk to them unchanged. Every accepted message is recorded (durably, when
// a file is given) and listed at GET /sandbox/deliveries. Failures are injected
// deterministically by address; see rules.go. A fake Slack incoming webhook takes the operator
// alerts (slack.go), listed apart at GET /sandbox/slack.
package sandbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Options configure a Server.
type Options struct {
	// Addr is the plain-HTTP listen address (FCM, SES, Twilio, listing); default 127.0.0.1:0.
	Addr string
	// TLSAddr is the HTTP/2-over-TLS listen address (APNs, and everything else too); default
	// 127.0.0.1:0.
	TLSAddr string
	// RecordFile, when set, makes the recording durable: one JSON line per delivery, appended
	// before the provider answers, and loaded again at start.
	RecordFile string
	// OnBounce receives SES feedback (bounces and complaints) exactly as SES → SNS → SQS
	// would put it on a queue: the SNS envelope JSON. It is called from a goroutine.
	OnBounce func(snsEnvelope []byte)
	// Logger, default slog.Default().
	Logger *slog.Logger
}

// Server is the running sandbox.
type Server struct {
	Recorder *Recorder

	opts     Options
	mux      *http.ServeMux
	plain    *http.Server
	plainURL string
	tlsSrv   *httptest.Server
	log      *slog.Logger

	mu       sync.Mutex
	attempts map[string]int  // address → attempts seen, for throttleN rules
	refuse   map[string]bool // providers refusing credentials (RefuseCredentials)
	refusedN map[string]int  // requests each refused

	apnsKeysMu sync.Mutex
	apnsKeys   map[string]any // key id → *ecdsa.PublicKey registered by tests/runtime (see apns.go)
	apnsTokens sync.Map       // verified JWT string → struct{}

	alimtalkMu   sync.Mutex
	alimtalkKeys map[string]string          // Solapi API key → secret (TrustAlimTalkKey)
	alimtalkSigs map[string]time.Time       // signatures seen, refused again within 15 minutes
	alimtalkMsgs map[string]*alimtalkStored // accepted messages by id, for the message list

	slack slackPosts // the fake Slack webhook's posts (slack.go)

	feedback sync.WaitGroup // pending SES feedback callbacks
	closedMu sync.Mutex
	closed   bool
}

// Start starts both listeners.
func Start(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.TLSAddr == "" {
		opts.TLSAddr = "127.0.0.1:0"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	rec, err := NewRecorder(opts.RecordFile)
	if err != nil {
		return nil, err
	}
	s := &Server{
		Recorder: rec,
		opts:     opts,
		mux:      http.NewServeMux(),
		log:      opts.Logger.With("component", "sandbox"),
		attempts: map[string]int{}, refuse: map[string]bool{}, refusedN: map[string]int{},
		apnsKeys: map[string]any{},

		alimtalkKeys: map[string]string{},
		alimtalkSigs: map[string]time.Time{},
		alimtalkMsgs: map[string]*alimtalkStored{},
	}
	s.routes()

	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		rec.Close()
		return nil, fmt.Errorf("sandbox listen %s: %w", opts.Addr, err)
	}
	s.plain = boundedServer(s.mux)
	s.plainURL = "http://" + ln.Addr().String()
	go func() { _ = s.plain.Serve(ln) }()

	tln, err := net.Listen("tcp", opts.TLSAddr)
	if err != nil {
		s.plain.Close()
		rec.Close()
		return nil, fmt.Errorf("sandbox listen %s: %w", opts.TLSAddr, err)
	}
	s.tlsSrv = &httptest.Server{Listener: tln, Config: boundedServer(s.mux), EnableHTTP2: true}
	s.tlsSrv.Config.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)
	s.tlsSrv.StartTLS()
	return s, nil
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /sandbox/deliveries", s.handleList)
	s.mux.HandleFunc("DELETE /sandbox/deliveries", s.handleReset)
	s.fcmRoutes(s.mux)
	s.apnsRoutes(s.mux)
	s.sesRoutes(s.mux)
	s.twilioRoutes(s.mux)
	s.alimtalkRoutes(s.mux)
	s.webPushRoutes(s.mux)
	s.slackRoutes(s.mux)
}

// URL is the plain-HTTP base URL, e.g. http://127.0.0.1:41234.
func (s *Server) URL() string { return s.plainURL }

// TLSURL is the HTTP/2-over-TLS base URL; trust CertPool() to reach it.
func (s *Server) TLSURL() string { return s.tlsSrv.URL }

// CertPool trusts the sandbox's self-signed TLS certificate.
func (s *Server) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(s.tlsSrv.Certificate())
	return p
}

// TLSConfig is a client TLS config that trusts the sandbox.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{RootCAs: s.CertPool(), MinVersion: tls.VersionTLS12}
}

// Handler serves the sandbox routes, for mounting /sandbox/deliveries on another server.
func (s *Server) Handler() http.Handler { return s.mux }

// Close stops both listeners and closes the record file.
func (s *Server) Close() error {
	s.closedMu.Lock()
	s.closed = true
	s.closedMu.Unlock()
	s.feedback.Wait()
	// Clients may hold idle keep-alive connections that never send a request; Shutdown would
	// wait for them, so give in-flight requests a moment and then close hard.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := s.plain.Shutdown(ctx); err != nil {
		_ = s.plain.Close()
	}
	s.tlsSrv.CloseClientConnections()
	s.tlsSrv.Close()
	return s.Recorder.Close()
}

// later runs fn after d unless the server closes first; Close waits for running callbacks.
func (s *Server) later(d time.Duration, fn func()) {
	s.closedMu.Lock()
	defer s.closedMu.Unlock()
	if s.closed {
		return
	}
	s.feedback.Add(1)
	time.AfterFunc(d, func() {
		defer s.feedback.Done()
		s.closedMu.Lock()
		closed := s.closed
		s.closedMu.Unlock()
		if !closed {
			fn()
		}
	})
}

// attempt counts one more attempt for address and returns the count (1 for the first).
func (s *Server) attempt(address string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts[address]++
	return s.attempts[address]
}

// boundedServer serves h with every connection bounded, as the API's server is: a client that
// trickles a request or idles on a keep-alive connection does not hold it forever.
func boundedServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}
