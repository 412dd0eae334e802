package sandbox

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	webpushgo "github.com/SherClockHolmes/webpush-go"
)

// capture is an HTTP client that keeps the request the library would send.
type capture struct{ req *http.Request }

func (c *capture) Do(r *http.Request) (*http.Response, error) {
	c.req = r
	return &http.Response{StatusCode: 201, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}}, nil
}

func vapidKeys(t *testing.T) (pub, priv string) {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()), base64.RawURLEncoding.EncodeToString(k.Bytes())
}

// TestDecryptWebPushOpensTheLibrarysEncryption encrypts with webpush-go (RFC 8291 aes128gcm, one
// padded 4 KiB record) and decrypts with the sandbox's own implementation.
func TestDecryptWebPushOpensTheLibrarysEncryption(t *testing.T) {
	ua, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	pub, priv := vapidKeys(t)
	sub := &webpushgo.Subscription{Endpoint: "https://push.example/x", Keys: webpushgo.Keys{
		P256dh: base64.RawURLEncoding.EncodeToString(ua.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(auth)}}
	for _, msg := range [][]byte{[]byte(`{"title":"Hi","body":"there"}`), bytes.Repeat([]byte("é"), 1990), {}} {
		c := &capture{}
		if _, err := webpushgo.SendNotification(msg, sub, &webpushgo.Options{HTTPClient: c, Subscriber: "ops@example.com",
			VAPIDPublicKey: pub, VAPIDPrivateKey: priv, TTL: 60}); err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(c.req.Body)
		got, err := DecryptWebPush(body, ua, auth)
		if err != nil {
			t.Fatalf("decrypt %d-byte message: %v", len(msg), err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("decrypted %q, want %q", got, msg)
		}
		// Another subscription's secret, or a flipped bit, does not open it.
		other := make([]byte, 16)
		if _, err := DecryptWebPush(body, ua, other); err == nil {
			t.Error("opened with the wrong auth secret")
		}
		body[len(body)-1] ^= 1
		if _, err := DecryptWebPush(body, ua, auth); err == nil {
			t.Error("opened a tampered record")
		}
	}
}

func startWebPushSandbox(t *testing.T) *Server {
	t.Helper()
	sb, err := Start(Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb
}

func mint(t *testing.T, sb *Server, body string) *webpushgo.Subscription {
	t.Helper()
	resp, err := http.Post(sb.URL()+"/sandbox/webpush/subscriptions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("mint: %d %s", resp.StatusCode, b)
	}
	var s webpushgo.Subscription
	if err := json.Unmarshal(b, &s); err != nil || !strings.HasPrefix(s.Endpoint, sb.URL()+"/sandbox/webpush/push/") {
		t.Fatalf("mint: %s (%v)", b, err)
	}
	if !bytes.Contains(b, []byte(`"expirationTime":null`)) {
		t.Errorf("not a PushSubscription JSON: %s", b)
	}
	return &s
}

func push(t *testing.T, s *webpushgo.Subscription, msg string, o webpushgo.Options) (int, http.Header) {
	t.Helper()
	if o.TTL == 0 {
		o.TTL = 60
	}
	resp, err := webpushgo.SendNotificationWithContext(context.Background(), []byte(msg), s, &o)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func TestWebPushServiceDeliversAndRecordsThePlaintext(t *testing.T) {
	sb := startWebPushSandbox(t)
	pub, priv := vapidKeys(t)
	o := webpushgo.Options{Subscriber: "ops@example.com", VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Topic: "n_1", Urgency: webpushgo.UrgencyHigh}
	s := mint(t, sb, "")
	status, h := push(t, s, `{"notification_id":"n_1","title":"Shipped","body":"On its way","data":{"k":"v"},"collapse_id":"n_1"}`, o)
	if status != http.StatusCreated || !strings.HasPrefix(h.Get("Location"), "/sandbox/webpush/messages/") {
		t.Fatalf("status %d, location %q", status, h.Get("Location"))
	}
	got := sb.Recorder.List("webpush", s.Endpoint)
	if len(got) != 1 || got[0].Title != "Shipped" || got[0].Body != "On its way" || got[0].Data["k"] != "v" || got[0].CollapseID != "n_1" {
		t.Fatalf("recorded %+v", got)
	}
}

func TestWebPushServiceRules(t *testing.T) {
	sb := startWebPushSandbox(t)
	pub, priv := vapidKeys(t)
	o := webpushgo.Options{Subscriber: "ops@example.com", VAPIDPublicKey: pub, VAPIDPrivateKey: priv}

	if st, _ := push(t, mint(t, sb, `{"label":"gone"}`), "{}", o); st != http.StatusGone {
		t.Errorf("gone: %d", st)
	}
	if st, _ := push(t, mint(t, sb, `{"label":"toolarge"}`), "{}", o); st != http.StatusRequestEntityTooLarge {
		t.Errorf("toolarge: %d", st)
	}
	thr := mint(t, sb, `{"label":"throttle2"}`)
	for i, want := range []int{429, 429, 201} {
		st, h := push(t, thr, `{"title":"x"}`, o)
		if st != want {
			t.Fatalf("throttle2 attempt %d: %d, want %d", i+1, st, want)
		}
		if st == 429 && h.Get("Retry-After") != "1" {
			t.Errorf("no Retry-After: %v", h)
		}
	}

	// A subscription made for one application server key refuses another's VAPID.
	bound := mint(t, sb, `{"application_server_key":"`+pub+`"}`)
	if st, _ := push(t, bound, "{}", o); st != http.StatusCreated {
		t.Errorf("own key: %d", st)
	}
	pub2, priv2 := vapidKeys(t)
	if st, _ := push(t, bound, "{}", webpushgo.Options{Subscriber: "ops@example.com", VAPIDPublicKey: pub2, VAPIDPrivateKey: priv2}); st != http.StatusForbidden {
		t.Errorf("other key: %d, want 403", st)
	}
	// A JWT signed by another key than k is refused.
	mixed := webpushgo.Options{Subscriber: "ops@example.com", VAPIDPublicKey: pub2, VAPIDPrivateKey: priv}
	if st, _ := push(t, mint(t, sb, ""), "{}", mixed); st != http.StatusUnauthorized {
		t.Errorf("mismatched k: %d, want 401", st)
	}
	// "mailto:" given to the library twice makes a sub the sandbox refuses.
	twice := webpushgo.Options{Subscriber: "mailto:ops@example.com", VAPIDPublicKey: pub, VAPIDPrivateKey: priv}
	if st, _ := push(t, mint(t, sb, ""), "{}", twice); st != http.StatusUnauthorized {
		t.Errorf("mailto:mailto: sub: %d, want 401", st)
	}
	// An unknown subscription is 404.
	ghost := *mint(t, sb, "")
	ghost.Endpoint = sb.URL() + "/sandbox/webpush/push/sub.AAAA"
	if st, _ := push(t, &ghost, "{}", o); st != http.StatusNotFound {
		t.Errorf("unknown subscription: %d", st)
	}
	if n := len(sb.Recorder.List("webpush", "")); n != 2 {
		t.Errorf("%d recorded, want 2 (throttle2's third attempt and the bound subscription)", n)
	}
}

func TestCheckVAPIDExpiry(t *testing.T) {
	sb := startWebPushSandbox(t)
	pub, priv := vapidKeys(t)
	s := mint(t, sb, "")
	c := &capture{}
	if _, err := webpushgo.SendNotification([]byte("{}"), s, &webpushgo.Options{HTTPClient: c, Subscriber: "ops@example.com",
		VAPIDPublicKey: pub, VAPIDPrivateKey: priv, TTL: 1}); err != nil {
		t.Fatal(err)
	}
	a := c.req.Header.Get("Authorization")
	origin := sb.URL()
	if st, msg := checkVAPID(a, origin, nil, time.Now()); st != 0 {
		t.Fatalf("fresh token refused: %d %s", st, msg)
	}
	if st, _ := checkVAPID(a, origin, nil, time.Now().Add(13*time.Hour)); st != http.StatusUnauthorized {
		t.Error("expired token accepted")
	}
	if st, _ := checkVAPID(a, "http://127.0.0.1:1", nil, time.Now()); st != http.StatusUnauthorized {
		t.Error("token for another origin accepted")
	}
	if st, _ := checkVAPID("WebPush "+a, origin, nil, time.Now()); st != http.StatusUnauthorized {
		t.Error("another scheme accepted")
	}
}

func TestCheckWebPushHeaders(t *testing.T) {
	ok := http.Header{"Ttl": {"60"}, "Content-Encoding": {"aes128gcm"}}
	if msg := checkWebPushHeaders(ok); msg != "" {
		t.Fatal(msg)
	}
	for name, mutate := range map[string]func(h http.Header){
		"no TTL":          func(h http.Header) { h.Del("TTL") },
		"negative TTL":    func(h http.Header) { h.Set("TTL", "-1") },
		"old encoding":    func(h http.Header) { h.Set("Content-Encoding", "aesgcm") },
		"unknown urgency": func(h http.Header) { h.Set("Urgency", "urgent") },
		"long topic":      func(h http.Header) { h.Set("Topic", strings.Repeat("a", 33)) },
		"topic alphabet":  func(h http.Header) { h.Set("Topic", "n_1/2") },
	} {
		h := ok.Clone()
		mutate(h)
		if checkWebPushHeaders(h) == "" {
			t.Errorf("%s: accepted", name)
		}
	}
}
