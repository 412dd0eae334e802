package notify

import (
	"strings"
	"testing"
)

const (
	testP256dh = "BPHndDgeUWreF-Mqpx26CbsZkBRTXA6oNuRGEru4ziQWeowoviMTrlnWNYvR-GwkWvW0WTKm9AWnlsD4sA38AEQ"
	testAuth   = "AAECAwQFBgcICQoLDA0ODw"
)

func TestWebPushSubscriptionToken(t *testing.T) {
	s := WebPushSubscription{Endpoint: "https://push.example.net/s?a=1&b=2", Keys: WebPushKeys{P256dh: testP256dh + "=", Auth: testAuth + "=="}}
	if err := s.Validate(false); err != nil {
		t.Fatal(err)
	}
	tok := s.Token()
	want := `{"endpoint":"https://push.example.net/s?a=1&b=2","keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}}`
	if tok != want {
		t.Fatalf("token\n got %s\nwant %s", tok, want)
	}
	back, ok := ParseWebPushToken(tok)
	if !ok || back.Endpoint != s.Endpoint || back.Keys != s.Keys {
		t.Fatalf("parsed back %+v", back)
	}
	for _, other := range []string{"fcm-token-123", `{"endpoint":`, "{}"} {
		if _, ok := ParseWebPushToken(other); ok {
			t.Errorf("%q parsed as a subscription", other)
		}
	}
	if m := MaskToken(tok); m != "https://push.example.net/…&b=2" || strings.Contains(m, testAuth) {
		t.Errorf("masked %q", m)
	}
	if MaskToken("abcdefghijklmnop") != "abcd…mnop" {
		t.Error("other tokens are masked as before")
	}
	if WebPushID(s.Endpoint) != WebPushID(s.Endpoint) || !strings.HasPrefix(WebPushID(s.Endpoint), "wp_") || WebPushID("x") == WebPushID("y") {
		t.Error("ids are not stable, prefixed and distinct")
	}
}

func TestWebPushSubscriptionValidate(t *testing.T) {
	for _, tc := range []struct {
		endpoint  string
		localHTTP bool
		field     string
	}{
		{"https://push.example.net/x", false, ""},
		{"http://127.0.0.1:8080/x", true, ""},
		{"http://localhost/x", true, ""},
		{"http://[::1]:9/x", true, ""},
		{"http://127.0.0.1:8080/x", false, "endpoint"},
		{"http://push.example.net/x", true, "endpoint"},
		{"https://user:pw@push.example.net/x", false, "endpoint"},
		{"https://push.example.net/x#frag", false, "endpoint"},
		{"ftp://push.example.net/x", false, "endpoint"},
		{"", false, "endpoint"},
	} {
		s := WebPushSubscription{Endpoint: tc.endpoint, Keys: WebPushKeys{P256dh: testP256dh, Auth: testAuth}}
		err := s.Validate(tc.localHTTP)
		var field string
		if e, ok := err.(*Error); ok {
			field = e.Field
		}
		if field != tc.field {
			t.Errorf("%s (local %v): error %v, want field %q", tc.endpoint, tc.localHTTP, err, tc.field)
		}
	}
}
