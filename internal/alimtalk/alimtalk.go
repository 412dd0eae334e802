// Package alimtalk sends Kakao AlimTalk — template messages to a phone number's KakaoTalk —
// through Solapi's REST API, one message per request, and classifies Solapi's answers into
// notify error codes, among them EUNREACHABLE for a recipient KakaoTalk cannot reach (the
// trigger of an SMS/LMS fallback).
//
// Solapi rather than NHN Cloud: its API reference, authentication and status codes are published
// in its own documentation repository and matched by its official SDKs (request and response
// types, signing), so every field here can be checked against two sources; NHN Cloud's reference
// is only the rendered pages. What this package follows:
//
//   - Sending: POST /messages/v4/send-many/detail with {"messages": [{"to", "type": "ATA",
//     "kakaoOptions": {"pfId", "templateId", "variables": {"#{name}": value}, "disableSms",
//     "buttons"}}], "showMessageList": true}; the answer carries groupInfo, failedMessageList
//     (messages refused at registration, with statusCode and statusMessage) and messageList
//     (the accepted ones, with messageId) — https://developers.solapi.com/references/messages/sendManyDetail
//   - Authentication: "Authorization: HMAC-SHA256 apiKey=<key>, date=<ISO 8601>, salt=<12–64
//     random characters>, signature=<hex HMAC-SHA256 of date+salt keyed by the API secret>",
//     refused with 403 InvalidAPIKey, SignatureDoesNotMatch, RequestTimeTooSkewed (±15 minutes)
//     or DuplicatedSignature — https://docs.solapi.com/authentication/api-key
//   - Status codes: four digits, 1xxx refused at registration, 2000 accepted, 3xxx failed at
//     Kakao or the carrier (3104 not a KakaoTalk user, 3107 blocked or inactive), 4000
//     received — https://docs.solapi.com/api-reference/message-status-codes
//   - Errors: non-2xx answers are {"errorCode", "errorMessage"} (400 ValidationError for a
//     malformed request).
//
// Kakao's own verdict on a recipient (3104, 3107, 3103 template mismatch) reaches Solapi after
// the send response, so Solapi reports it later (message list, webhooks). An accepted message
// (2000) is therefore sent with its verdict pending (SendResult.VerdictPending), and Verdicts
// reads the message list (list.go) for it; the one table in errors.go classifies the codes
// wherever they are read. The sandbox answers some numbers' verdicts at once in
// failedMessageList and others late in its message list, so every path can be exercised.
package alimtalk

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"herald/internal/notify"
)

// Solapi's API.
const (
	DefaultBaseURL = "https://api.solapi.com"
	SendPath       = "/messages/v4/send-many/detail"
)

// MaxBatch is the most messages one Send call takes; each is its own request, so one message's
// retry never resends another.
const MaxBatch = 50

// Defaults for Config.
const (
	DefaultMaxConcurrency = 8
	DefaultTimeout        = 10 * time.Second
)

// Config configures a Sender.
type Config struct {
	APIKey    string // Solapi API key
	APISecret string // its secret; it signs requests and is never sent
	// Apps maps Herald's provider app (notify.OutboundMessage.App) to its KakaoTalk channel.
	Apps map[string]App
	// From is the sender number registered with Solapi, in digits: every message carries it
	// (Solapi refuses a message without one, even with its own SMS substitution off).
	From string
	// BaseURL is Solapi's API root; "" is DefaultBaseURL. The sandbox's URL in development.
	BaseURL string
	// MaxConcurrency bounds in-flight requests across all Send calls; default 8.
	MaxConcurrency int
	// Timeout bounds one request; default 10s.
	Timeout time.Duration
}

// App is one KakaoTalk channel.
type App struct {
	SenderKey string // the channel's pfId in Solapi
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if c.APIKey == "" {
		errs = append(errs, errors.New("alimtalk: APIKey is required"))
	}
	if c.APISecret == "" {
		errs = append(errs, errors.New("alimtalk: APISecret is required"))
	}
	if len(c.Apps) == 0 {
		errs = append(errs, errors.New("alimtalk: at least one app (KakaoTalk channel) is required"))
	}
	for name, a := range c.Apps {
		if strings.TrimSpace(a.SenderKey) == "" {
			errs = append(errs, fmt.Errorf("alimtalk: app %q needs its SenderKey (pfId)", name))
		}
	}
	if c.From == "" {
		errs = append(errs, errors.New("alimtalk: From (the registered sender number) is required"))
	} else if !isKoreanNumber(c.From) || strings.Trim(c.From, "0123456789") != "" {
		errs = append(errs, fmt.Errorf("alimtalk: From %q is not a Korean phone number in digits", c.From))
	}
	if c.BaseURL != "" && !notify.IsHTTPURL(c.BaseURL) {
		errs = append(errs, fmt.Errorf("alimtalk: BaseURL %q is not an http(s) URL", c.BaseURL))
	}
	if c.MaxConcurrency < 0 {
		errs = append(errs, errors.New("alimtalk: MaxConcurrency must not be negative"))
	}
	if c.Timeout < 0 {
		errs = append(errs, errors.New("alimtalk: Timeout must not be negative"))
	}
	return errors.Join(errs...)
}

// isKoreanNumber accepts any national number (sender numbers may be landlines: 02-…, 1588-…).
func isKoreanNumber(s string) bool {
	digits := strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return -1
		}
		return r
	}, s)
	if len(digits) < 8 || len(digits) > 12 {
		return false
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// LogValue is c with the secret masked.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("api_key", c.APIKey),
		slog.String("api_secret", notify.MaskSecret(c.APISecret)),
		slog.Int("apps", len(c.Apps)),
		slog.String("base_url", c.BaseURL),
		slog.Int("max_concurrency", c.MaxConcurrency),
		slog.Duration("timeout", c.Timeout),
	)
}

func (c Config) withDefaults() Config {
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

// Sender delivers AlimTalk through Solapi. It is safe for concurrent use.
type Sender struct {
	cfg      Config
	endpoint string
	client   *http.Client
	pool     *http.Transport
	slots    chan struct{} // one per in-flight request
	now      func() time.Time
}

var _ notify.Sender = (*Sender)(nil)

// New returns a Sender for cfg; it makes no request.
func New(cfg Config) (*Sender, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Keep as many idle connections as requests may be in flight (Go keeps 2 per host).
	t.MaxIdleConnsPerHost = cfg.MaxConcurrency
	t.MaxIdleConns = max(t.MaxIdleConns, cfg.MaxConcurrency)
	return &Sender{
		cfg:      cfg,
		endpoint: strings.TrimRight(cfg.BaseURL, "/") + SendPath,
		client: &http.Client{
			Transport:     t,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		pool:  t,
		slots: make(chan struct{}, cfg.MaxConcurrency),
		now:   time.Now,
	}, nil
}

// CloseIdleConnections closes the connections not carrying a request; the Sender stays usable.
func (s *Sender) CloseIdleConnections() { s.pool.CloseIdleConnections() }

// Provider is AlimTalk.
func (s *Sender) Provider() notify.Provider { return notify.ProviderAlimTalk }

// MaxBatch is 50.
func (s *Sender) MaxBatch() int { return MaxBatch }

// Send sends one AlimTalk per message (MessageFrom reads it), concurrently up to
// MaxConcurrency, and returns one result per message in order. Per-message errors carry
// EUNREACHABLE (not on KakaoTalk, channel blocked: fall back to SMS/LMS), EINVALID (not a
// Korean mobile number — notify.ReasonUnsupportedAddress —, no template, an unknown app; nothing
// is sent), EREJECTED or ETOOLARGE (template mismatch, bad sender key or variables),
// ESUPPRESSED, EDEADADDRESS, ETHROTTLED, EUNAVAILABLE, EAUTH or EINTERNAL. The call itself
// fails with ETOOLARGE for more than MaxBatch messages, and with EUNAVAILABLE if ctx is done
// before anything was sent.
//
// A message Solapi accepted (2000) is sent as far as Solapi can say: its result has the message
// id and VerdictPending, since Kakao's verdict on the recipient comes later (see Verdicts).
func (s *Sender) Send(ctx context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	res, err := notify.SendEach(ctx, notify.ProviderAlimTalk, MaxBatch, s.slots, msgs, s.sendOne)
	for i := range res {
		if errors.Is(res[i].Err, errVerdictPending) {
			res[i].Err, res[i].VerdictPending = nil, true
		}
	}
	return res, err
}

// errVerdictPending is how sendOne says "accepted, verdict pending" through notify.SendEach; Send
// turns it into SendResult.VerdictPending.
var errVerdictPending = errors.New("alimtalk: accepted, verdict pending")

func (s *Sender) sendOne(ctx context.Context, m notify.OutboundMessage) (string, error) {
	app, ok := s.cfg.Apps[m.App]
	if !ok {
		return "", notify.Errorf(notify.EINVALID, "alimtalk send %s: no KakaoTalk channel configured for app %q", m.DeliveryID, m.App)
	}
	msg, err := MessageFrom(m, app.SenderKey)
	if err != nil {
		return "", fmt.Errorf("alimtalk send %s: %w", m.DeliveryID, err)
	}
	req, err := buildRequest(msg, s.cfg.From, m.DeliveryID)
	if err != nil {
		return "", fmt.Errorf("alimtalk send %s: %w", m.DeliveryID, err)
	}
	// A later attempt may follow one whose outcome is unknown (a timeout, an unreadable answer,
	// a worker that died mid-call): Solapi does not dedupe, so the message list is asked first,
	// and the message is sent only when Solapi has no record of it.
	if m.Attempt > 1 {
		id, err := s.find(ctx, m, req.Messages[0].To)
		if !errors.Is(err, errNotFound) {
			return id, err
		}
	}
	return s.post(ctx, req, m.DeliveryID, m.Address)
}

// sendResponse is the part of Solapi's answer Herald reads.
type sendResponse struct {
	GroupInfo struct {
		GroupID string `json:"groupId"`
		Count   struct {
			Total             int `json:"total"`
			RegisteredSuccess int `json:"registeredSuccess"`
			RegisteredFailed  int `json:"registeredFailed"`
		} `json:"count"`
	} `json:"groupInfo"`
	FailedMessageList []messageStatus `json:"failedMessageList"`
	MessageList       []messageStatus `json:"messageList"`
}

type messageStatus struct {
	To            string `json:"to"`
	MessageID     string `json:"messageId"`
	StatusCode    string `json:"statusCode"`
	StatusMessage string `json:"statusMessage"`
}

// maxResponse bounds what is read of an answer; one message's is a few kilobytes.
const maxResponse = 1 << 20

// post sends one request and turns the answer into the message id or a classified error.
func (s *Sender) post(ctx context.Context, body sendRequest, deliveryID, phone string) (string, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return "", notify.Wrap(notify.EINTERNAL, err, "alimtalk send %s: encode", deliveryID)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(b))
	if err != nil {
		return "", notify.Wrap(notify.EINTERNAL, err, "alimtalk send %s: request", deliveryID)
	}
	auth, err := Authorization(s.cfg.APIKey, s.cfg.APISecret, s.now())
	if err != nil {
		return "", notify.Wrap(notify.EINTERNAL, err, "alimtalk send %s: sign", deliveryID)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return "", classifyHTTP(err, 0, apiError{}, 0, deliveryID, phone)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	retryAfter := notify.ParseRetryAfter(resp.Header.Get("Retry-After"), s.now())
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e apiError
		_ = json.Unmarshal(raw, &e) // a body that is not Solapi's JSON leaves the status to decide
		return "", classifyHTTP(err, resp.StatusCode, e, retryAfter, deliveryID, phone)
	}
	var out sendResponse
	if err != nil || json.Unmarshal(raw, &out) != nil {
		// Accepted or not, nobody can tell: retried, and a duplicate is the lesser harm.
		return "", notify.Errorf(notify.EINTERNAL, "alimtalk send %s: HTTP %d with an unreadable body", deliveryID, resp.StatusCode)
	}
	if len(out.FailedMessageList) > 0 {
		f := out.FailedMessageList[0]
		return "", classifyStatus(f.StatusCode, f.StatusMessage, deliveryID, phone)
	}
	if len(out.MessageList) > 0 {
		m := out.MessageList[0]
		if code := statusCode(m.StatusCode); code != "" {
			return "", classifyStatus(m.StatusCode, m.StatusMessage, deliveryID, phone)
		}
		if m.MessageID != "" && VerdictPending(m.StatusCode) {
			return m.MessageID, errVerdictPending
		}
		if m.MessageID != "" {
			return m.MessageID, nil
		}
	}
	if out.GroupInfo.Count.RegisteredSuccess > 0 && out.GroupInfo.GroupID != "" {
		return out.GroupInfo.GroupID, nil // no message list: the group names the send
	}
	return "", notify.Errorf(notify.EINTERNAL, "alimtalk send %s: HTTP %d without an accepted or failed message", deliveryID, resp.StatusCode)
}

// MaxVerdictBatch is MaxListBatch: one list call per Verdicts call.
func (s *Sender) MaxVerdictBatch() int { return MaxListBatch }

var _ notify.VerdictChecker = (*Sender)(nil)

// Verdicts asks Solapi's message list for the current status of the messages in qs, in one
// request, and classifies each with the one status-code table: delivered (4000), still pending
// (2000, 3000, or not listed yet), or the error of a final failure — EUNREACHABLE for 3104 and
// 3107, the SMS/LMS fallback's trigger. The call fails with ETOOLARGE for more than
// MaxVerdictBatch queries, and as a send would for an answer that is not 2xx.
func (s *Sender) Verdicts(ctx context.Context, qs []notify.VerdictQuery) ([]notify.SendResult, error) {
	if len(qs) > MaxListBatch {
		return nil, notify.Errorf(notify.ETOOLARGE, "%d verdict queries; one alimtalk list call takes at most %d", len(qs), MaxListBatch)
	}
	if len(qs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(qs))
	for i, q := range qs {
		ids[i] = q.ProviderMessageID
	}
	path, err := ListQuery(ids)
	if err != nil {
		return nil, fmt.Errorf("alimtalk verdicts: %w", err)
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return nil, notify.Wrap(notify.EUNAVAILABLE, ctx.Err(), "alimtalk verdicts canceled")
	}
	listed, _, err := s.list(ctx, path, "verdicts", "")
	if err != nil {
		return nil, err
	}
	out := make([]notify.SendResult, len(qs))
	for i, q := range qs {
		st, ok := listed[q.ProviderMessageID]
		out[i] = verdictOf(st, ok, q)
	}
	return out, nil
}

// list reads one page of the message list at path; what and phone name the call in errors,
// classified as a send's are.
func (s *Sender) list(ctx context.Context, path, what, phone string) (map[string]ListedStatus, string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.cfg.BaseURL, "/")+path, nil)
	if err != nil {
		return nil, "", notify.Wrap(notify.EINTERNAL, err, "alimtalk %s: request", what)
	}
	auth, err := Authorization(s.cfg.APIKey, s.cfg.APISecret, s.now())
	if err != nil {
		return nil, "", notify.Wrap(notify.EINTERNAL, err, "alimtalk %s: sign", what)
	}
	req.Header.Set("Authorization", auth)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, "", classifyHTTP(err, 0, apiError{}, 0, what, phone)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e apiError
		_ = json.Unmarshal(raw, &e)
		return nil, "", classifyHTTP(err, resp.StatusCode, e, notify.ParseRetryAfter(resp.Header.Get("Retry-After"), s.now()), what, phone)
	}
	if err != nil {
		return nil, "", notify.Wrap(notify.EUNAVAILABLE, err, "alimtalk %s: read answer", what)
	}
	listed, next, err := ParseListPage(raw)
	if err != nil {
		return nil, "", notify.Wrap(notify.EUNAVAILABLE, err, "alimtalk %s: HTTP %d", what, resp.StatusCode)
	}
	return listed, next, nil
}

// lookBack is how far before the notification was made a look-up starts: clocks disagree.
const lookBack = 5 * time.Minute

// errNotFound is find's "Solapi has no record of the message": it may be sent.
var errNotFound = errors.New("alimtalk: no message of the delivery is listed")

// find looks the delivery up in the message list before it is sent again: the AlimTalks to phone
// (digits) since the notification was made, paged, matched on the delivery id Herald put in
// customFields. A message found is answered as its send would have been (its id, and its status:
// pending, delivered or the verdict's error), and nothing is sent; errNotFound means Solapi has
// no record of it. Any other error — the list could not be read, or held more than
// MaxFindPages pages — is the send's error: the outcome stays unknown, so the message is not
// sent blind, and the look-up is tried again with the delivery's next retry.
func (s *Sender) find(ctx context.Context, m notify.OutboundMessage, phone string) (string, error) {
	what := "look-up of " + m.DeliveryID
	since := m.Since.Add(-lookBack)
	key := ""
	for range MaxFindPages {
		listed, next, err := s.list(ctx, FindQuery(phone, since, key), what, m.Address)
		if err != nil {
			return "", err
		}
		for _, st := range listed {
			if st.DeliveryID != m.DeliveryID {
				continue
			}
			r := verdictOf(st, true, notify.VerdictQuery{DeliveryID: m.DeliveryID, ProviderMessageID: st.MessageID, Address: m.Address})
			switch {
			case r.Err != nil:
				return st.MessageID, r.Err
			case r.VerdictPending:
				return st.MessageID, errVerdictPending
			}
			return st.MessageID, nil
		}
		if next == "" || next == key {
			return "", errNotFound
		}
		key = next
	}
	return "", notify.Errorf(notify.EUNAVAILABLE, "alimtalk %s: more than %d messages to %s since %s; not sent again while the first attempt's outcome is unknown",
		what, MaxFindPages*MaxFindPage, notify.MaskPhone(m.Address), since.Format(time.RFC3339))
}

// Authorization is Solapi's HMAC-SHA256 Authorization header for a request at now: a fresh
// random salt, the date in ISO 8601 (UTC, seconds), and the hex HMAC-SHA256 of date+salt keyed
// by the API secret.
func Authorization(apiKey, apiSecret string, now time.Time) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	date := now.UTC().Format(time.RFC3339)
	s := hex.EncodeToString(salt)
	return fmt.Sprintf("HMAC-SHA256 apiKey=%s, date=%s, salt=%s, signature=%s", apiKey, date, s, Signature(apiSecret, date, s)), nil
}

// Signature is the hex HMAC-SHA256 of date+salt keyed by secret.
func Signature(secret, date, salt string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(date + salt))
	return hex.EncodeToString(mac.Sum(nil))
}
