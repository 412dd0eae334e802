package webpush

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	webpushgo "github.com/SherClockHolmes/webpush-go"

	"herald/internal/notify"
)

func TestPayload(t *testing.T) {
	for name, tc := range map[string]struct {
		m    notify.OutboundMessage
		want string
	}{
		"title and body": {
			m:    notify.OutboundMessage{NotificationID: "n_1", Content: notify.Content{Title: "Shipped", Body: "On its way"}},
			want: `{"notification_id":"n_1","title":"Shipped","body":"On its way"}`,
		},
		"everything": {
			m: notify.OutboundMessage{NotificationID: "n_2", CollapseID: "order-7",
				Content: notify.Content{Title: "T", Body: "B", Data: map[string]string{"order": "7"}, Link: "https://shop.example/o/7", ImageURL: "https://cdn.example/i.png"}},
			want: `{"notification_id":"n_2","title":"T","body":"B","data":{"order":"7"},"link":"https://shop.example/o/7","image":"https://cdn.example/i.png","collapse_id":"order-7"}`,
		},
		"empty data is left out": {
			m:    notify.OutboundMessage{NotificationID: "n_3", Content: notify.Content{Body: "B", Data: map[string]string{}}},
			want: `{"notification_id":"n_3","body":"B"}`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(toPayload(tc.m))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("payload\n got %s\nwant %s", b, tc.want)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	for name, tc := range map[string]struct {
		m    notify.OutboundMessage
		want headers
	}{
		"transactional, no ttl": {m: notify.OutboundMessage{Category: notify.CategoryTransactional},
			want: headers{TTL: 2419200, Urgency: webpushgo.UrgencyHigh}},
		"marketing": {m: notify.OutboundMessage{Category: notify.CategoryMarketing, TTL: time.Hour},
			want: headers{TTL: 3600, Urgency: webpushgo.UrgencyNormal}},
		"remaining ttl rounds up": {m: notify.OutboundMessage{TTL: 1500 * time.Millisecond},
			want: headers{TTL: 2, Urgency: webpushgo.UrgencyHigh}},
		"collapse id is the topic": {m: notify.OutboundMessage{CollapseID: "n_abc", TTL: time.Minute},
			want: headers{TTL: 60, Urgency: webpushgo.UrgencyHigh, Topic: Topic("n_abc")}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := toHeaders(tc.m); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTopic(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	if Topic("") != "" {
		t.Error("no collapse id must give no topic")
	}
	long := strings.Repeat("x", 200) + "/é?"
	for _, id := range []string{"n_1", "c_campaign", long} {
		tp := Topic(id)
		if len(tp) != 32 || strings.Trim(tp, alphabet) != "" {
			t.Errorf("Topic(%q) = %q: want 32 URL-safe base64 characters", id, tp)
		}
		if Topic(id) != tp {
			t.Error("topic is not stable")
		}
	}
	if Topic("n_1") == Topic("n_2") {
		t.Error("different collapse ids share a topic")
	}
}

func TestClassify(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ep = "https://push.example.net/send/abcdefghijklmnop"
	for _, tc := range []struct {
		status     int
		retryAfter string
		err        error
		code       string
		wait       time.Duration
	}{
		{status: 201}, {status: 202}, {status: 200},
		{status: 404, code: notify.EDEADADDRESS},
		{status: 410, code: notify.EDEADADDRESS},
		{status: 413, code: notify.EREJECTED},
		{status: 429, retryAfter: "7", code: notify.ETHROTTLED, wait: 7 * time.Second},
		{status: 429, code: notify.ETHROTTLED},
		{status: 500, code: notify.EUNAVAILABLE},
		{status: 503, retryAfter: "3", code: notify.EUNAVAILABLE, wait: 3 * time.Second},
		{status: 400, code: notify.EREJECTED},
		{status: 401, code: notify.EREJECTED},
		{status: 403, code: notify.EREJECTED},
		{status: 422, code: notify.EREJECTED},
		{err: context.DeadlineExceeded, code: notify.EUNAVAILABLE},
		{err: fmt.Errorf("post %s: %w", ep, &timeoutErr{}), code: notify.EUNAVAILABLE},
		{err: webpushgo.ErrMaxPadExceeded, code: notify.EREJECTED},
		{err: errors.New("something odd"), code: notify.EINTERNAL},
	} {
		t.Run(fmt.Sprintf("%d %v", tc.status, tc.err), func(t *testing.T) {
			h := http.Header{}
			if tc.retryAfter != "" {
				h.Set("Retry-After", tc.retryAfter)
			}
			err := classify(tc.status, h, tc.err, ep, now)
			if got := notify.ErrorCode(err); got != tc.code {
				t.Fatalf("code %q, want %q (%v)", got, tc.code, err)
			}
			if got := notify.RetryAfter(err); got != tc.wait {
				t.Errorf("retry after %v, want %v", got, tc.wait)
			}
			if err != nil && strings.Contains(err.Error(), "abcdefghijklmnop") {
				t.Errorf("error shows the endpoint: %v", err)
			}
		})
	}
}

type timeoutErr struct{}

func (*timeoutErr) Error() string   { return "i/o timeout" }
func (*timeoutErr) Timeout() bool   { return true }
func (*timeoutErr) Temporary() bool { return true }

func TestConfigValidate(t *testing.T) {
	pub, priv, err := GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	otherPub, _, _ := GenerateKeys()
	ok := Config{VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subscriber: "mailto:ops@example.com"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Config{
		"mismatched keys":   {VAPIDPublicKey: otherPub, VAPIDPrivateKey: priv, Subscriber: "mailto:ops@example.com"},
		"bad private key":   {VAPIDPublicKey: pub, VAPIDPrivateKey: "nope", Subscriber: "mailto:ops@example.com"},
		"bare email":        {VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subscriber: "ops@example.com"},
		"http subscriber":   {VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subscriber: "http://example.com"},
		"missing everthing": {},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// subscription makes a browser-like subscription on endpoint.
func subscription(t *testing.T, endpoint string) string {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	s := notify.WebPushSubscription{Endpoint: endpoint, Keys: notify.WebPushKeys{
		P256dh: base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(auth)}}
	if err := s.Validate(true); err != nil {
		t.Fatal(err)
	}
	return s.Token()
}

type recordingLimiter struct {
	mu   sync.Mutex
	keys []string
}

func (l *recordingLimiter) Wait(_ context.Context, key string, n int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, fmt.Sprintf("%s×%d", key, n))
	return nil
}

// TestSend pushes through the library to a push service that answers by path, and checks the
// request's headers, the VAPID header's form, the per-origin rate keys and the results' order.
func TestSend(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]http.Header{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Clone()
		mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/gone"):
			w.WriteHeader(http.StatusGone)
		case strings.HasSuffix(r.URL.Path, "/busy"):
			w.Header().Set("Retry-After", "4")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.Header().Set("Location", "/m/1")
			w.WriteHeader(http.StatusCreated)
		}
	}))
	defer srv.Close()
	pub, priv, _ := GenerateKeys()
	lim := &recordingLimiter{}
	s, err := New(Config{VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subscriber: "mailto:ops@example.com", Limiter: lim, AllowLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []notify.OutboundMessage{
		{DeliveryID: "d1", Address: subscription(t, srv.URL+"/p/ok"), CollapseID: "n_1", TTL: time.Minute,
			Category: notify.CategoryMarketing, Content: notify.Content{Title: "T", Body: "B"}},
		{DeliveryID: "d2", Address: subscription(t, srv.URL+"/p/gone")},
		{DeliveryID: "d3", Address: subscription(t, srv.URL+"/p/busy")},
		{DeliveryID: "d4", Address: "fcm-token-not-a-subscription"},
	}
	res, err := s.Send(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ id, code string }{{"d1", ""}, {"d2", notify.EDEADADDRESS}, {"d3", notify.ETHROTTLED}, {"d4", notify.EREJECTED}}
	for i, w := range want {
		if res[i].DeliveryID != w.id || notify.ErrorCode(res[i].Err) != w.code {
			t.Errorf("result %d = %s %v, want %s %q", i, res[i].DeliveryID, res[i].Err, w.id, w.code)
		}
	}
	if res[0].ProviderMessageID != "/m/1" {
		t.Errorf("message id %q, want the Location", res[0].ProviderMessageID)
	}
	if got := notify.RetryAfter(res[2].Err); got != 4*time.Second {
		t.Errorf("retry after %v", got)
	}
	h := seen["/p/ok"]
	if h.Get("TTL") != "60" || h.Get("Urgency") != "normal" || h.Get("Topic") != Topic("n_1") || h.Get("Content-Encoding") != "aes128gcm" {
		t.Errorf("headers %v", h)
	}
	if a := h.Get("Authorization"); !strings.HasPrefix(a, "vapid t=") || !strings.HasSuffix(a, ", k="+pub) {
		t.Errorf("authorization %q", a)
	}
	origin := RateKeyPrefix + ":" + srv.URL + "×1"
	if !reflect.DeepEqual(lim.keys, []string{origin, origin, origin}) {
		t.Errorf("rate keys %v", lim.keys)
	}
}

// A payload over what one record holds is refused before any request.
func TestSendRefusesOversizedPayload(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { calls++; w.WriteHeader(201) }))
	defer srv.Close()
	pub, priv, _ := GenerateKeys()
	s, err := New(Config{VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subscriber: "https://example.com/ops", AllowLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	addr := subscription(t, srv.URL+"/p")
	res, err := s.Send(context.Background(), []notify.OutboundMessage{
		{DeliveryID: "big", Address: addr, Content: notify.Content{Body: strings.Repeat("x", MaxPayload)}},
		{DeliveryID: "fits", Address: addr, NotificationID: "n_1", Content: notify.Content{Body: strings.Repeat("x", MaxPayload-len(`{"notification_id":"n_1","body":""}`))}}, // exactly MaxPayload
	})
	if err != nil {
		t.Fatal(err)
	}
	if notify.ErrorCode(res[0].Err) != notify.EREJECTED || res[1].Err != nil {
		t.Fatalf("results %v / %v", res[0].Err, res[1].Err)
	}
	if calls != 1 {
		t.Fatalf("%d requests, want 1", calls)
	}
}

// TestDefaultClientRefusesPrivateAddresses: without AllowLoopback (anywhere but the sandbox), the
// sender's own client refuses to connect to this machine, as to any private address, whatever
// the subscription says.
func TestDefaultClientRefusesPrivateAddresses(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++; w.WriteHeader(http.StatusCreated) }))
	defer srv.Close()
	pub, priv, err := GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{VAPIDPublicKey: pub, VAPIDPrivateKey: priv, Subscriber: "mailto:ops@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Send(context.Background(), []notify.OutboundMessage{{DeliveryID: "d1", Address: subscription(t, srv.URL+"/push/x"),
		Content: notify.Content{Title: "T", Body: "B"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "netguard") || hits != 0 {
		t.Fatalf("results %+v, %d hits: want the connection refused by netguard", res, hits)
	}
}
