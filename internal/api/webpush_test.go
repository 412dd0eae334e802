package api

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"herald/internal/notify"
)

const testVAPIDKey = "BPHndDgeUWreF-Mqpx26CbsZkBRTXA6oNuRGEru4ziQWeowoviMTrlnWNYvR-GwkWvW0WTKm9AWnlsD4sA38AEQ"

func webPushEnv(t *testing.T, local bool) *env {
	return setup(t, func(o *Options) {
		o.VAPIDPublicKey, o.LocalPushEndpoints = testVAPIDKey, local
		o.ResolveHost = fakeDNS
	})
}

// fakeDNS answers for the tests' names without the network: rebind.example.com points at the
// metadata address, every other name at a public one.
func fakeDNS(_ context.Context, host string) ([]netip.Addr, error) {
	if host == "rebind.example.com" {
		return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("142.250.72.10")}, nil
}

// TestWebPushEndpointsArePublic: an endpoint is a URL Herald will POST to, chosen by whoever
// registers it: a private, loopback, link-local or metadata host — in any notation, or by a name
// resolving there — is a 400 naming endpoint; the sandbox admits its loopback, and only that.
func TestWebPushEndpointsArePublic(t *testing.T) {
	for _, local := range []bool{false, true} {
		e := webPushEnv(t, local)
		for _, ep := range []string{"https://169.254.169.254/x", "https://[::ffff:a9fe:a9fe]/x", "https://2852039166/x", "https://10.0.0.1/x",
			"https://0xa9fea9fe/x", "https://[fd00:ec2::254]/x", "https://100.64.1.1/x", "https://rebind.example.com/x"} {
			rec := e.do(t, "PUT", "/v1/users/u1/web-push-subscriptions", ordersKey, browserSubscription(t, ep))
			wantStatus(t, rec, http.StatusBadRequest)
			if !strings.Contains(rec.Body.String(), `"field":"endpoint"`) {
				t.Errorf("sandbox %v, %s: %s, want the field endpoint", local, ep, rec.Body.String())
			}
		}
		rec := e.do(t, "PUT", "/v1/users/u1/web-push-subscriptions", ordersKey, browserSubscription(t, "https://127.0.0.1:8443/push/x"))
		want := http.StatusBadRequest
		if local {
			want = http.StatusOK
		}
		wantStatus(t, rec, want)
	}
}

// browserSubscription is a PushSubscription JSON as a browser makes it.
func browserSubscription(t *testing.T, endpoint string) map[string]any {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	return map[string]any{"endpoint": endpoint, "expirationTime": nil, "keys": map[string]any{
		"p256dh": base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()), "auth": base64.RawURLEncoding.EncodeToString(auth)}}
}

func TestWebPushSubscriptionLifecycle(t *testing.T) {
	e := webPushEnv(t, false)
	const ep = "https://fcm.googleapis.com/fcm/send/abc123:APA91bHsecretpart"
	sub := browserSubscription(t, ep)
	rec := e.do(t, "PUT", "/v1/users/u1/web-push-subscriptions", ordersKey, sub)
	wantStatus(t, rec, http.StatusOK)
	v := decodeBody[webPushView](t, rec)
	if v.ID != notify.WebPushID(ep) || v.Endpoint != "https://fcm.googleapis.com/…part" || strings.Contains(rec.Body.String(), "secret") {
		t.Fatalf("view %+v (%s)", v, rec.Body)
	}
	// The device store holds it as a webpush device whose token carries the keys.
	ds, err := e.store.ListDevices(context.Background(), []string{"u1"})
	if err != nil || len(ds["u1"]) != 1 || ds["u1"][0].Platform != notify.PlatformWebPush {
		t.Fatalf("devices %+v, %v", ds, err)
	}
	stored, ok := notify.ParseWebPushToken(ds["u1"][0].Token)
	if !ok || stored.Endpoint != ep || stored.Keys.Auth != sub["keys"].(map[string]any)["auth"] {
		t.Fatalf("stored token %q", ds["u1"][0].Token)
	}

	// Again, and again with rotated keys: still one subscription, with the new keys.
	wantStatus(t, e.do(t, "PUT", "/v1/users/u1/web-push-subscriptions", ordersKey, sub), http.StatusOK)
	rotated := browserSubscription(t, ep)
	wantStatus(t, e.do(t, "PUT", "/v1/users/u1/web-push-subscriptions", ordersKey, rotated), http.StatusOK)
	wantStatus(t, e.do(t, "PUT", "/v1/users/u1/web-push-subscriptions", ordersKey, browserSubscription(t, "https://updates.push.services.mozilla.com/wpush/v2/other")), http.StatusOK)
	list := decodeBody[webPushList](t, e.do(t, "GET", "/v1/users/u1/web-push-subscriptions", ordersKey, nil))
	if len(list.Subscriptions) != 2 {
		t.Fatalf("listed %+v", list)
	}
	ds, _ = e.store.ListDevices(context.Background(), []string{"u1"})
	for _, d := range ds["u1"] {
		if s, _ := notify.ParseWebPushToken(d.Token); s.Endpoint == ep && s.Keys.Auth != rotated["keys"].(map[string]any)["auth"] {
			t.Errorf("the rotated keys did not replace the old ones")
		}
	}
	// The device listing masks the token the same way.
	if b := e.do(t, "GET", "/v1/users/u1/devices", ordersKey, nil).Body.String(); strings.Contains(b, "p256dh") || strings.Contains(b, "secret") {
		t.Errorf("device listing shows the subscription: %s", b)
	}

	// Delete by endpoint, then by id.
	wantStatus(t, e.do(t, "DELETE", "/v1/users/u1/web-push-subscriptions?endpoint="+url.QueryEscape(ep), ordersKey, nil), http.StatusNoContent)
	wantError(t, e.do(t, "DELETE", "/v1/users/u1/web-push-subscriptions?endpoint="+url.QueryEscape(ep), ordersKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")
	other := notify.WebPushID("https://updates.push.services.mozilla.com/wpush/v2/other")
	wantError(t, e.do(t, "DELETE", "/v1/users/u2/web-push-subscriptions?id="+other, ordersKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")
	wantStatus(t, e.do(t, "DELETE", "/v1/users/u1/web-push-subscriptions?id="+other, ordersKey, nil), http.StatusNoContent)
	wantError(t, e.do(t, "DELETE", "/v1/users/u1/web-push-subscriptions", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "endpoint")
	if l := decodeBody[webPushList](t, e.do(t, "GET", "/v1/users/u1/web-push-subscriptions", ordersKey, nil)); len(l.Subscriptions) != 0 {
		t.Fatalf("left %+v", l)
	}
}

func TestWebPushSubscriptionValidation(t *testing.T) {
	e := webPushEnv(t, false)
	good := func() map[string]any { return browserSubscription(t, "https://push.example.net/s/1") }
	with := func(f func(m map[string]any)) map[string]any { m := good(); f(m); return m }
	keys := func(m map[string]any) map[string]any { return m["keys"].(map[string]any) }
	notOnCurve := append([]byte{4}, make([]byte, 64)...)
	for name, tc := range map[string]struct {
		body  any
		field string
	}{
		"no endpoint":                {with(func(m map[string]any) { delete(m, "endpoint") }), "endpoint"},
		"http endpoint":              {with(func(m map[string]any) { m["endpoint"] = "http://push.example.net/s/1" }), "endpoint"},
		"local http outside sandbox": {with(func(m map[string]any) { m["endpoint"] = "http://127.0.0.1:9/s/1" }), "endpoint"},
		"relative endpoint":          {with(func(m map[string]any) { m["endpoint"] = "/s/1" }), "endpoint"},
		"endpoint too long":          {with(func(m map[string]any) { m["endpoint"] = "https://p.example/" + strings.Repeat("a", 800) }), "endpoint"},
		"no keys":                    {with(func(m map[string]any) { delete(m, "keys") }), "keys"},
		"p256dh not base64":          {with(func(m map[string]any) { keys(m)["p256dh"] = "!!!" }), "keys.p256dh"},
		"p256dh compressed": {with(func(m map[string]any) {
			keys(m)["p256dh"] = base64.RawURLEncoding.EncodeToString(append([]byte{2}, make([]byte, 32)...))
		}), "keys.p256dh"},
		"p256dh off curve": {with(func(m map[string]any) { keys(m)["p256dh"] = base64.RawURLEncoding.EncodeToString(notOnCurve) }), "keys.p256dh"},
		"auth too short":   {with(func(m map[string]any) { keys(m)["auth"] = base64.RawURLEncoding.EncodeToString(make([]byte, 8)) }), "keys.auth"},
		"auth missing":     {with(func(m map[string]any) { delete(keys(m), "auth") }), "keys.auth"},
		"unknown field":    {with(func(m map[string]any) { m["extra"] = 1 }), "extra"},
		"keys wrong type":  {with(func(m map[string]any) { m["keys"] = "x" }), "keys"},
		"bad time zone":    {with(func(m map[string]any) { m["time_zone"] = "Mars/Base" }), "time_zone"},
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, e.do(t, "PUT", "/v1/users/u1/web-push-subscriptions", ordersKey, tc.body), http.StatusBadRequest, notify.EINVALID, tc.field)
		})
	}
	// Padded base64url keys are accepted and stored canonical.
	m := good()
	keys(m)["auth"] = keys(m)["auth"].(string) + "=="
	wantStatus(t, e.do(t, "PUT", "/v1/users/u1/web-push-subscriptions", ordersKey, m), http.StatusOK)
	// The device route does not take web push.
	wantError(t, e.do(t, "PUT", "/v1/users/u1/devices/tok-1", ordersKey, map[string]any{"platform": "webpush"}), http.StatusBadRequest, notify.EINVALID, "platform")
}

func TestWebPushSandboxEndpointsAndVAPIDKey(t *testing.T) {
	e := webPushEnv(t, true)
	for _, ep := range []string{"http://127.0.0.1:41234/sandbox/webpush/push/x", "http://localhost:1/p", "https://push.example.net/p"} {
		wantStatus(t, e.do(t, "PUT", "/v1/users/u1/web-push-subscriptions", ordersKey, browserSubscription(t, ep)), http.StatusOK)
	}
	wantError(t, e.do(t, "PUT", "/v1/users/u1/web-push-subscriptions", ordersKey, browserSubscription(t, "http://push.example.net/p")),
		http.StatusBadRequest, notify.EINVALID, "endpoint")

	rec := e.do(t, "GET", "/v1/web-push/vapid-public-key", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	if k := decodeBody[map[string]string](t, rec)["public_key"]; k != testVAPIDKey {
		t.Fatalf("key %q", k)
	}
	wantStatus(t, e.do(t, "GET", "/v1/web-push/vapid-public-key", "", nil), http.StatusUnauthorized)

	// Without web push configured, both answer 501.
	off := setup(t)
	wantStatus(t, off.do(t, "GET", "/v1/web-push/vapid-public-key", ordersKey, nil), http.StatusNotImplemented)
	wantStatus(t, off.do(t, "PUT", "/v1/users/u1/web-push-subscriptions", ordersKey, browserSubscription(t, "https://push.example.net/p")), http.StatusNotImplemented)
}
