package sandbox

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The fake Web Push service (RFC 8030) plays both sides a real one connects: the browser, whose
// subscription it mints with keys it keeps, and the push service, which takes a VAPID-signed
// (RFC 8292), aes128gcm-encrypted (RFC 8188, RFC 8291) message for that subscription. It checks
// the VAPID JWT against the key in the Authorization header, decrypts the message as the browser
// would and records what the service worker would receive.
//
//	POST /sandbox/webpush/subscriptions          {"label"?, "application_server_key"?} → 201 PushSubscription JSON
//	                                             (its endpoint on the origin the request came to)
//	POST /sandbox/webpush/push/{subscription}    a push message → 201 Created, Location /sandbox/webpush/messages/{id}
//
// A subscription's endpoint carries its own private key and auth secret (the sandbox is not a
// real push service, and so its subscriptions survive a restart of the sandbox). The label,
// first in the endpoint's last path segment, picks a failure rule (see rules.go): "gone" → 410,
// "toolarge" → 413, "throttle<N>" → 429 for the first N attempts, "unavailable<N>" → 503.

// webPushLabelRe is what a label may be: it is a path segment and names a rule.
var webPushLabelRe = regexp.MustCompile(`^[a-z0-9-]{1,40}$`)

// maxWebPushBody is the largest message body a push service must accept (RFC 8030 §7.2: 4,096
// bytes of payload, the encryption header included).
const maxWebPushBody = 4096

// vapidMaxExp is how far in the future a VAPID JWT may expire (RFC 8292 §2: at most 24 hours).
const vapidMaxExp = 24 * time.Hour

func (s *Server) webPushRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /sandbox/webpush/subscriptions", s.handleWebPushSubscribe)
	mux.HandleFunc("POST /sandbox/webpush/push/{subscription}", s.handleWebPushPush)
}

// webPushSub is a minted subscription's secret half, as its endpoint carries it.
type webPushSub struct {
	label  string
	priv   *ecdh.PrivateKey
	auth   []byte
	appKey []byte // the applicationServerKey it was made with; nil: any VAPID key is accepted
}

// encode is the endpoint's last path segment: label "." base64url(private key ‖ auth ‖ app key).
func (w webPushSub) encode() string {
	b := append(append(append([]byte{}, w.priv.Bytes()...), w.auth...), w.appKey...)
	return w.label + "." + base64.RawURLEncoding.EncodeToString(b)
}

func decodeWebPushSub(seg string) (webPushSub, bool) {
	label, enc, ok := strings.Cut(seg, ".")
	if !ok || !webPushLabelRe.MatchString(label) {
		return webPushSub{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || (len(b) != 48 && len(b) != 48+65) {
		return webPushSub{}, false
	}
	priv, err := ecdh.P256().NewPrivateKey(b[:32])
	if err != nil {
		return webPushSub{}, false
	}
	w := webPushSub{label: label, priv: priv, auth: b[32:48]}
	if len(b) > 48 {
		w.appKey = b[48:]
	}
	return w, true
}

// webPushSubscription is the W3C PushSubscription JSON the browser would hand the page.
type webPushSubscription struct {
	Endpoint       string `json:"endpoint"`
	ExpirationTime *int64 `json:"expirationTime"`
	Keys           struct {
		P256dh string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
}

// MintWebPushSubscription makes a subscription on the sandbox's push service, as a browser's
// pushManager.subscribe would, and returns its PushSubscription JSON. label picks a failure rule
// ("" for none); appKey, when set, is the only VAPID public key (base64url) it accepts.
func (s *Server) MintWebPushSubscription(label, appKey string) ([]byte, error) {
	return mintWebPush(s.URL(), label, appKey)
}

// mintWebPush makes a subscription whose endpoint is on base.
func mintWebPush(base, label, appKey string) ([]byte, error) {
	if label == "" {
		label = "sub"
	}
	if !webPushLabelRe.MatchString(label) {
		return nil, fmt.Errorf("label %q: want 1–40 lower-case letters, digits and dashes", label)
	}
	w := webPushSub{label: label, auth: make([]byte, 16)}
	if appKey != "" {
		k, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(appKey, "="))
		if err != nil || len(k) != 65 || k[0] != 4 {
			return nil, errors.New("application_server_key: want base64url of a 65-byte uncompressed P-256 point")
		}
		w.appKey = k
	}
	var err error
	if w.priv, err = ecdh.P256().GenerateKey(rand.Reader); err != nil {
		return nil, err
	}
	_, _ = rand.Read(w.auth)
	var sub webPushSubscription
	sub.Endpoint = base + "/sandbox/webpush/push/" + w.encode()
	sub.Keys.P256dh = base64.RawURLEncoding.EncodeToString(w.priv.PublicKey().Bytes())
	sub.Keys.Auth = base64.RawURLEncoding.EncodeToString(w.auth)
	return json.Marshal(sub)
}

func (s *Server) handleWebPushSubscribe(w http.ResponseWriter, req *http.Request) {
	var in struct {
		Label                string `json:"label"`
		ApplicationServerKey string `json:"application_server_key"`
	}
	b, _ := io.ReadAll(io.LimitReader(req.Body, 4096))
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &in); err != nil {
			webPushError(w, http.StatusBadRequest, "body: "+err.Error())
			return
		}
	}
	// The endpoint is on the origin the request came to: minted through the local runtime's API
	// (which mounts these routes), it stays valid across restarts on the same --addr, while the
	// sandbox's own port may change.
	out, err := mintWebPush(requestOrigin(req), in.Label, in.ApplicationServerKey)
	if err != nil {
		webPushError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(out)
}

// webPushPayload is the JSON Herald's sender encrypts (internal/webpush.Payload).
type webPushPayload struct {
	NotificationID string            `json:"notification_id"`
	Title          string            `json:"title"`
	Body           string            `json:"body"`
	Data           map[string]string `json:"data"`
	CollapseID     string            `json:"collapse_id"`
}

func (s *Server) handleWebPushPush(w http.ResponseWriter, req *http.Request) {
	sub, ok := decodeWebPushSub(req.PathValue("subscription"))
	if !ok {
		webPushError(w, http.StatusNotFound, "no such subscription")
		return
	}
	origin := requestOrigin(req)
	endpoint := origin + req.URL.EscapedPath()

	if status, msg := checkVAPID(req.Header.Get("Authorization"), origin, sub.appKey, time.Now()); status != 0 {
		webPushError(w, status, msg)
		return
	}
	if msg := checkWebPushHeaders(req.Header); msg != "" {
		webPushError(w, http.StatusBadRequest, msg)
		return
	}
	switch {
	case sub.label == "gone":
		webPushError(w, http.StatusGone, "push subscription has unsubscribed or expired (sandbox gone rule)")
		return
	case sub.label == "toolarge":
		webPushError(w, http.StatusRequestEntityTooLarge, "payload too large (sandbox toolarge rule)")
		return
	}
	if kind, fail := s.failNow(endpoint); fail {
		if kind == "throttle" {
			w.Header().Set("Retry-After", "1")
			webPushError(w, http.StatusTooManyRequests, "too many requests (sandbox throttle rule)")
		} else {
			webPushError(w, http.StatusServiceUnavailable, "service unavailable (sandbox unavailable rule)")
		}
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxWebPushBody+1))
	if err != nil {
		webPushError(w, http.StatusBadRequest, "could not read the body")
		return
	}
	if len(body) > maxWebPushBody {
		webPushError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", maxWebPushBody))
		return
	}
	plain, err := DecryptWebPush(body, sub.priv, sub.auth)
	if err != nil {
		webPushError(w, http.StatusBadRequest, "cannot decrypt the payload: "+err.Error())
		return
	}
	d := Delivery{Provider: "webpush", Address: endpoint, App: origin, MessageID: nextMessageID()}
	var p webPushPayload
	if json.Unmarshal(plain, &p) == nil {
		d.Title, d.Body, d.Data, d.CollapseID = p.Title, p.Body, p.Data, p.CollapseID
	} else {
		d.Body = string(plain) // a message that is not Herald's JSON: what the service worker gets
	}
	if err := s.Recorder.Add(d); err != nil {
		s.log.Error("webpush record", "err", err)
		webPushError(w, http.StatusInternalServerError, "internal error")
		return
	}
	w.Header().Set("Location", "/sandbox/webpush/messages/"+strings.NewReplacer(":", "", "%", "-").Replace(d.MessageID))
	w.Header().Set("TTL", req.Header.Get("TTL"))
	w.WriteHeader(http.StatusCreated)
}

// requestOrigin is the scheme and host req was sent to.
func requestOrigin(req *http.Request) string {
	if req.TLS != nil {
		return "https://" + req.Host
	}
	return "http://" + req.Host
}

// checkVAPID verifies "vapid t=<JWT>, k=<public key>" (RFC 8292 §3): an ES256 JWT signed by k,
// whose aud is the push service's origin, whose exp is in the future but within 24 hours, and
// whose sub is a mailto: or https: URL. appKey, when set, must be k (403 otherwise, as a push
// service answers for a subscription made with another applicationServerKey). It returns 0 or
// the status and why.
func checkVAPID(header, origin string, appKey []byte, now time.Time) (int, string) {
	scheme, params, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "vapid") {
		return http.StatusUnauthorized, "Authorization: want vapid t=…, k=…"
	}
	var t, k string
	for p := range strings.SplitSeq(params, ",") {
		name, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch name {
		case "t":
			t = v
		case "k":
			k = v
		}
	}
	kb, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(k, "="))
	if err != nil {
		return http.StatusUnauthorized, "vapid k: not base64url"
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), kb)
	if err != nil {
		return http.StatusUnauthorized, "vapid k: not an uncompressed P-256 public key"
	}
	tok, err := jwt.NewParser(jwt.WithValidMethods([]string{"ES256"}), jwt.WithAudience(origin),
		jwt.WithExpirationRequired(), jwt.WithTimeFunc(func() time.Time { return now })).
		Parse(t, func(*jwt.Token) (any, error) { return pub, nil })
	if err != nil || !tok.Valid {
		return http.StatusUnauthorized, "vapid t: " + fmt.Sprint(err)
	}
	exp, _ := tok.Claims.GetExpirationTime()
	if exp.Sub(now) > vapidMaxExp {
		return http.StatusUnauthorized, "vapid t: exp more than 24 hours ahead"
	}
	sub, _ := tok.Claims.GetSubject()
	if rest, ok := strings.CutPrefix(sub, "mailto:"); !(ok && strings.Contains(rest, "@") && !strings.HasPrefix(rest, "mailto:")) &&
		!strings.HasPrefix(sub, "https://") {
		return http.StatusUnauthorized, fmt.Sprintf("vapid t: sub %q is not a mailto: or https: URL", sub)
	}
	if appKey != nil && !bytes.Equal(appKey, kb) {
		return http.StatusForbidden, "vapid k is not the key this subscription was made with"
	}
	return 0, ""
}

// checkWebPushHeaders returns what a push service refuses in h, or "": TTL is required (RFC 8030
// §5.2), the body must be aes128gcm (RFC 8291 §4), Urgency one of the four values, and Topic at
// most 32 characters of the URL-safe base64 alphabet (RFC 8030 §5.4).
func checkWebPushHeaders(h http.Header) string {
	if ttl, err := strconv.Atoi(h.Get("TTL")); err != nil || ttl < 0 {
		return "TTL: required, a non-negative number of seconds"
	}
	if ce := h.Get("Content-Encoding"); ce != "aes128gcm" {
		return fmt.Sprintf("Content-Encoding %q: want aes128gcm", ce)
	}
	switch h.Get("Urgency") {
	case "", "very-low", "low", "normal", "high":
	default:
		return fmt.Sprintf("Urgency %q: want very-low, low, normal or high", h.Get("Urgency"))
	}
	if t := h.Get("Topic"); len(t) > 32 || strings.Trim(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		return fmt.Sprintf("Topic %q: at most 32 characters of the URL-safe base64 alphabet", t)
	}
	return ""
}

// DecryptWebPush opens an aes128gcm message (RFC 8188) encrypted for the user agent key priv and
// authentication secret auth by RFC 8291's key derivation, and returns its plaintext without
// padding:
//
//	header   salt (16) ‖ rs (4, big-endian) ‖ idlen (1) ‖ keyid = the sender's ephemeral public key (65)
//	IKM      HKDF(salt=auth, ikm=ECDH(priv, keyid), info="WebPush: info\x00" ‖ ua_public ‖ keyid, 32)
//	CEK      HKDF(salt=salt, ikm=IKM, info="Content-Encoding: aes128gcm\x00", 16)
//	NONCE    HKDF(salt=salt, ikm=IKM, info="Content-Encoding: nonce\x00", 12), XOR record number
//
// and each record of rs bytes (the last one shorter) is AES-128-GCM, its plaintext ending in a
// delimiter (1, or 2 in the last record) followed by zero padding.
func DecryptWebPush(body []byte, priv *ecdh.PrivateKey, auth []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("shorter than the aes128gcm header")
	}
	salt := body[:16]
	rs := int(binary.BigEndian.Uint32(body[16:20]))
	idlen := int(body[20])
	if rs < 18 {
		return nil, fmt.Errorf("record size %d under 18", rs)
	}
	if idlen != 65 || len(body) < 21+idlen {
		return nil, fmt.Errorf("key id of %d bytes: want the sender's 65-byte public key", idlen)
	}
	keyID := body[21 : 21+idlen]
	senderPub, err := ecdh.P256().NewPublicKey(keyID)
	if err != nil {
		return nil, fmt.Errorf("key id: %w", err)
	}
	shared, err := priv.ECDH(senderPub)
	if err != nil {
		return nil, fmt.Errorf("ecdh: %w", err)
	}
	info := append(append([]byte("WebPush: info\x00"), priv.PublicKey().Bytes()...), keyID...)
	ikm, err := hkdf.Key(sha256.New, shared, auth, string(info), 32)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	baseNonce, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	data := body[21+idlen:]
	if len(data) == 0 {
		return nil, errors.New("no records")
	}
	var out []byte
	for seq := uint64(0); len(data) > 0; seq++ {
		n := min(rs, len(data))
		rec := data[:n]
		data = data[n:]
		nonce := make([]byte, 12)
		copy(nonce, baseNonce)
		var ctr [8]byte
		binary.BigEndian.PutUint64(ctr[:], seq)
		for i := range 8 {
			nonce[4+i] ^= ctr[i]
		}
		plain, err := gcm.Open(nil, nonce, rec, nil)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", seq, err)
		}
		end := len(plain) - 1
		for end >= 0 && plain[end] == 0 {
			end--
		}
		if end < 0 {
			return nil, fmt.Errorf("record %d: no padding delimiter", seq)
		}
		want := byte(1)
		if len(data) == 0 {
			want = 2 // the last record
		}
		if plain[end] != want {
			return nil, fmt.Errorf("record %d: padding delimiter %d, want %d", seq, plain[end], want)
		}
		out = append(out, plain[:end]...)
	}
	return out, nil
}

// webPushError answers as push services commonly do: a status and a small JSON body.
func webPushError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]any{"code": status, "message": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
