package notify

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/url"
	"strings"

	"herald/internal/netguard"
)

// WebPushSubscription is a browser's PushSubscription (W3C Push API) as
// PushSubscription.toJSON() gives it. Herald stores it as a Device with Platform webpush whose
// Token is Token(): the endpoint and both keys in one canonical JSON, so the device tables, the
// per-app audience index and dead-token cleanup need nothing new.
type WebPushSubscription struct {
	Endpoint string `json:"endpoint"`
	// ExpirationTime is the browser's hint (ms since the epoch) and is not stored: a push
	// service answers 404 or 410 for an expired subscription, and cleanup removes it then.
	ExpirationTime *int64      `json:"expirationTime,omitempty"`
	Keys           WebPushKeys `json:"keys"`
}

// WebPushKeys are the subscription's keys, base64url without padding once canonical.
type WebPushKeys struct {
	P256dh string `json:"p256dh"` // the user agent's P-256 public key, uncompressed (65 bytes)
	Auth   string `json:"auth"`   // the 16-byte authentication secret
}

// webPushTokenPrefix starts every canonical web push token, and nothing else a device token can be.
const webPushTokenPrefix = `{"endpoint":`

// WebPushOriginRateKey starts the rate limiter key of each push service origin
// ("webpush-origin:https://fcm.googleapis.com"): a rate configured under it (providers.webpush
// rate_per_second) applies to every origin on its own. It is not a prefix of the pipeline's
// "webpush:<app>" key, which stays unlimited: one app's subscriptions span every browser
// vendor's push service, each with its own quota.
const WebPushOriginRateKey = "webpush-origin"

// MaxWebPushEndpoint bounds an endpoint so its token fits every store's key (DynamoDB allows
// 1,024 bytes in a sort key); real push services' endpoints are a few hundred bytes.
const MaxWebPushEndpoint = 800

// Validate checks s and makes its keys canonical (base64url without padding). localHTTP allows an
// http:// endpoint on 127.0.0.1, ::1 or localhost — a sandbox push service; everything else must
// be https. Errors name the field: endpoint, keys.p256dh or keys.auth.
func (s *WebPushSubscription) Validate(localHTTP bool) error {
	if s.Endpoint == "" {
		return FieldError("endpoint", "required: the PushSubscription's endpoint URL")
	}
	if len(s.Endpoint) > MaxWebPushEndpoint {
		return FieldError("endpoint", "longer than %d bytes", MaxWebPushEndpoint)
	}
	u, err := url.Parse(s.Endpoint)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return FieldError("endpoint", "not an absolute URL without credentials or fragment")
	}
	switch {
	case u.Scheme == "https":
		// The push service is whatever host the browser gave, so the URL is a request Herald
		// makes on a user's say-so: never to a private, loopback, link-local or metadata
		// address in any notation (netguard), but on this machine's sandbox. Names are
		// resolved and checked where the API registers the subscription, and the sender's
		// dialer checks every address it connects to.
		if err := (netguard.Policy{AllowLoopback: localHTTP}).CheckHost(context.Background(), u.Hostname(), nil); err != nil {
			return FieldError("endpoint", "must be on a public host: %v", err)
		}
	case u.Scheme == "http" && localHTTP && isLoopbackHost(u.Hostname()):
	case u.Scheme == "http" && localHTTP:
		return FieldError("endpoint", "must be https (http only on 127.0.0.1 or localhost, in sandbox mode)")
	default:
		return FieldError("endpoint", "must be an https URL")
	}
	p, err := decodeB64URL(s.Keys.P256dh)
	if err != nil || len(p) != 65 || p[0] != 0x04 {
		return FieldError("keys.p256dh", "must be base64url of a 65-byte uncompressed P-256 public key (0x04 ‖ X ‖ Y)")
	}
	if _, err := ecdh.P256().NewPublicKey(p); err != nil {
		return FieldError("keys.p256dh", "not a point on the P-256 curve")
	}
	a, err := decodeB64URL(s.Keys.Auth)
	if err != nil || len(a) != 16 {
		return FieldError("keys.auth", "must be base64url of 16 bytes")
	}
	s.Keys.P256dh = base64.RawURLEncoding.EncodeToString(p)
	s.Keys.Auth = base64.RawURLEncoding.EncodeToString(a)
	return nil
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// decodeB64URL reads base64url with or without padding (browsers give it without).
func decodeB64URL(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// Token is the device token of a validated subscription: canonical JSON of the endpoint and keys
// (no expirationTime), the same bytes for the same subscription every time.
func (s WebPushSubscription) Token() string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		Endpoint string      `json:"endpoint"`
		Keys     WebPushKeys `json:"keys"`
	}{s.Endpoint, s.Keys})
	return strings.TrimSuffix(b.String(), "\n")
}

// ParseWebPushToken reads a token made by Token; ok is false for any other device token.
func ParseWebPushToken(token string) (s WebPushSubscription, ok bool) {
	if !strings.HasPrefix(token, webPushTokenPrefix) {
		return s, false
	}
	if err := json.Unmarshal([]byte(token), &s); err != nil || s.Endpoint == "" {
		return WebPushSubscription{}, false
	}
	return s, true
}

// WebPushID is a subscription's id in the API: derived from its endpoint alone, so it names the
// subscription without revealing the endpoint (a capability URL).
func WebPushID(endpoint string) string {
	h := sha256.Sum256([]byte(endpoint))
	return "wp_" + hex.EncodeToString(h[:12])
}

// MaskWebPushEndpoint keeps an endpoint's origin (which push service) and its last four
// characters: "https://fcm.googleapis.com/…x9Qz".
func MaskWebPushEndpoint(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "***"
	}
	tail := ""
	if len(endpoint) > len(u.Scheme)+3+len(u.Host)+8 {
		tail = endpoint[len(endpoint)-4:]
	}
	return u.Scheme + "://" + u.Host + "/…" + tail
}
