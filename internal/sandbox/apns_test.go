package sandbox_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"golang.org/x/net/http2"

	"herald/internal/sandbox"
)

// apnsFixture is a sandbox trusting one key, and an HTTP/2 client for it.
type apnsFixture struct {
	sb     *sandbox.Server
	client *http.Client
	key    *ecdsa.PrivateKey
}

func newAPNsFixture(t *testing.T) *apnsFixture {
	t.Helper()
	sb := startFCMSandbox(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sb.TrustAPNsKey("KID", "TEAM", &key.PublicKey)
	tr := &http2.Transport{TLSClientConfig: sb.TLSConfig()}
	t.Cleanup(tr.CloseIdleConnections)
	return &apnsFixture{sb: sb, client: &http.Client{Transport: tr}, key: key}
}

func apnsJWT(t *testing.T, key *ecdsa.PrivateKey, kid, team string, iat time.Time) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": team, "iat": iat.Unix()})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type apnsAnswer struct {
	status int
	apnsID string
	reason string
	ts     int64
}

func (f *apnsFixture) push(t *testing.T, token string, headers map[string]string, body string) apnsAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.sb.TLSURL()+"/3/device/"+token, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := apnsAnswer{status: resp.StatusCode, apnsID: resp.Header.Get("apns-id")}
	if len(b) > 0 {
		var r struct {
			Reason    string
			Timestamp int64
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("body %q: %v", b, err)
		}
		a.reason, a.ts = r.Reason, r.Timestamp
	}
	if a.apnsID == "" {
		t.Errorf("no apns-id header (status %d)", a.status)
	}
	return a
}

func TestAPNsFakeAcceptsAndRecords(t *testing.T) {
	t.Parallel()
	f := newAPNsFixture(t)
	auth := "bearer " + apnsJWT(t, f.key, "KID", "TEAM", time.Now())
	const id = "4A4B1F0E-1C2D-4E5F-8A9B-0C1D2E3F4A5B"
	a := f.push(t, "abc123", map[string]string{"authorization": auth, "apns-topic": "com.x", "apns-id": id,
		"apns-collapse-id": "c1", "apns-priority": "10", "apns-push-type": "alert", "apns-expiration": "0"},
		`{"aps":{"alert":{"title":"T","body":"B"}},"k":"v","n":3,"o":{"a":1}}`)
	if a.status != 200 || a.apnsID != id {
		t.Fatalf("answer %+v", a)
	}
	got := f.sb.Recorder.List("apns", "abc123")
	if len(got) != 1 {
		t.Fatalf("recorded %+v", got)
	}
	d := got[0]
	if d.App != "com.x" || d.CollapseID != "c1" || d.Title != "T" || d.Body != "B" || d.MessageID != id ||
		d.Data["k"] != "v" || d.Data["n"] != "3" || d.Data["o"] != `{"a":1}` {
		t.Errorf("recorded %+v", d)
	}

	// A string alert is the body; without apns-id the fake makes one up.
	a = f.push(t, "abc124", map[string]string{"authorization": auth, "apns-topic": "com.x"}, `{"aps":{"alert":"hello"}}`)
	if a.status != 200 || len(a.apnsID) != 36 {
		t.Fatalf("answer %+v", a)
	}
	if d := f.sb.Recorder.List("apns", "abc124"); len(d) != 1 || d[0].Body != "hello" || d[0].MessageID != a.apnsID {
		t.Errorf("recorded %+v", d)
	}
}

func TestAPNsFakeAuth(t *testing.T) {
	t.Parallel()
	f := newAPNsFixture(t)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	body := `{"aps":{"alert":"x"}}`
	tests := []struct {
		name   string
		auth   string
		reason string
	}{
		{"missing", "", "MissingProviderToken"},
		{"not bearer", "basic abc", "MissingProviderToken"},
		{"garbage", "bearer abc", "InvalidProviderToken"},
		{"unknown key id", "bearer " + apnsJWT(t, f.key, "OTHER", "TEAM", time.Now()), "InvalidProviderToken"},
		{"wrong key", "bearer " + apnsJWT(t, other, "KID", "TEAM", time.Now()), "InvalidProviderToken"},
		{"wrong team", "bearer " + apnsJWT(t, f.key, "KID", "NOTTEAM", time.Now()), "InvalidProviderToken"},
		{"too old", "bearer " + apnsJWT(t, f.key, "KID", "TEAM", time.Now().Add(-2*time.Hour)), "ExpiredProviderToken"},
	}
	for _, tt := range tests {
		a := f.push(t, "abc", map[string]string{"authorization": tt.auth, "apns-topic": "com.x"}, body)
		if a.status != http.StatusForbidden || a.reason != tt.reason {
			t.Errorf("%s: %+v, want 403 %s", tt.name, a, tt.reason)
		}
	}
	if n := f.sb.Recorder.Len(); n != 0 {
		t.Errorf("recorded %d unauthenticated pushes", n)
	}
}

func TestAPNsFakeRetrustForgetsTokens(t *testing.T) {
	t.Parallel()
	f := newAPNsFixture(t)
	hdr := map[string]string{"authorization": "bearer " + apnsJWT(t, f.key, "KID", "TEAM", time.Now()), "apns-topic": "com.x"}
	if a := f.push(t, "abc", hdr, `{"aps":{}}`); a.status != 200 {
		t.Fatalf("answer %+v", a)
	}
	rotated, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	f.sb.TrustAPNsKey("KID", "TEAM", &rotated.PublicKey)
	if a := f.push(t, "abc", hdr, `{"aps":{}}`); a.status != http.StatusForbidden || a.reason != "InvalidProviderToken" {
		t.Fatalf("a token of the replaced key still accepted: %+v", a)
	}
}

func TestAPNsFakeFailures(t *testing.T) {
	t.Parallel()
	f := newAPNsFixture(t)
	auth := "bearer " + apnsJWT(t, f.key, "KID", "TEAM", time.Now())
	ok := `{"aps":{"alert":"x"}}`
	tests := []struct {
		name    string
		token   string
		headers map[string]string
		body    string
		status  int
		reason  string
	}{
		{"missing topic", "abc", map[string]string{"apns-topic": ""}, ok, 400, "MissingTopic"},
		{"unregistered", "x-unregistered", nil, ok, 410, "Unregistered"},
		{"bad device token", "x-invalid", nil, ok, 400, "BadDeviceToken"},
		{"throttled", "x-throttle1", nil, ok, 429, "TooManyRequests"},
		{"throttle over", "x-throttle1", nil, ok, 200, ""},
		{"unavailable", "x-unavailable1", nil, ok, 503, "ServiceUnavailable"},
		{"unavailable over", "x-unavailable1", nil, ok, 200, ""},
		{"bad priority", "abc", map[string]string{"apns-priority": "7"}, ok, 400, "BadPriority"},
		{"bad expiration", "abc", map[string]string{"apns-expiration": "soon"}, ok, 400, "BadExpirationDate"},
		{"bad collapse id", "abc", map[string]string{"apns-collapse-id": strings.Repeat("c", 65)}, ok, 400, "BadCollapseId"},
		{"bad push type", "abc", map[string]string{"apns-push-type": "shout"}, ok, 400, "InvalidPushType"},
		{"bad apns-id", "abc", map[string]string{"apns-id": "nope"}, ok, 400, "BadMessageId"},
		{"empty payload", "abc", nil, "", 400, "PayloadEmpty"},
		{"payload too large", "abc", nil, `{"aps":{"alert":"` + strings.Repeat("x", 4096) + `"}}`, 413, "PayloadTooLarge"},
	}
	for _, tt := range tests { // in order: attempts count
		h := map[string]string{"authorization": auth, "apns-topic": "com.x"}
		for k, v := range tt.headers {
			h[k] = v
		}
		a := f.push(t, tt.token, h, tt.body)
		if a.status != tt.status || a.reason != tt.reason {
			t.Errorf("%s: %+v, want %d %s", tt.name, a, tt.status, tt.reason)
		}
		if tt.reason == "Unregistered" && time.Since(time.UnixMilli(a.ts)) > time.Hour {
			t.Errorf("%s: timestamp %d is not milliseconds of now", tt.name, a.ts)
		}
	}
}
