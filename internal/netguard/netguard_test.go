package netguard

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestLiteralIP(t *testing.T) {
	for host, want := range map[string]string{
		"169.254.169.254":     "169.254.169.254",
		"2852039166":          "169.254.169.254",
		"0xa9fea9fe":          "169.254.169.254",
		"0251.0376.0251.0376": "169.254.169.254",
		"169.254.43518":       "169.254.169.254",
		"127.1":               "127.0.0.1",
		"[::ffff:a9fe:a9fe]":  "::ffff:169.254.169.254",
		"::1":                 "::1",
		"10.0.0.1":            "10.0.0.1",
		"0x7f.1":              "127.0.0.1",
	} {
		ip, ok := LiteralIP(host)
		if !ok || ip.String() != want {
			t.Errorf("LiteralIP(%q) = %v, %v; want %s", host, ip, ok, want)
		}
	}
	for _, host := range []string{"fcm.googleapis.com", "updates.push.services.mozilla.com", "1.2.3.4.5", "256.1.1.1", "example", "0x", "1..2", ""} {
		if ip, ok := LiteralIP(host); ok {
			t.Errorf("LiteralIP(%q) = %v, want a name", host, ip)
		}
	}
}

func TestPublic(t *testing.T) {
	for _, s := range []string{"142.250.72.10", "8.8.8.8", "2607:f8b0:4004:c07::5f", "::ffff:8.8.8.8", "64:ff9b::808:808"} {
		if !Public(netip.MustParseAddr(s)) {
			t.Errorf("%s is public", s)
		}
	}
	for _, s := range []string{"10.0.0.1", "172.16.5.4", "192.168.1.1", "127.0.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
		"224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fd00:ec2::254", "::ffff:a9fe:a9fe", "::ffff:10.0.0.1",
		"64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1", "::127.0.0.1", "ff02::1", "198.18.0.1"} {
		if Public(netip.MustParseAddr(s)) {
			t.Errorf("%s is not public", s)
		}
	}
}

func TestCheckHost(t *testing.T) {
	ctx := context.Background()
	strict, sandbox := Policy{}, Policy{AllowLoopback: true}
	for _, host := range []string{"169.254.169.254", "[::ffff:a9fe:a9fe]", "2852039166", "10.0.0.1", "localhost", "127.0.0.1", "api.localhost"} {
		if err := strict.CheckHost(ctx, host, nil); !errors.Is(err, ErrNotPublic) {
			t.Errorf("CheckHost(%q) = %v, want refused", host, err)
		}
	}
	for _, host := range []string{"127.0.0.1", "localhost", "[::1]"} {
		if err := sandbox.CheckHost(ctx, host, nil); err != nil {
			t.Errorf("sandbox CheckHost(%q) = %v, want allowed", host, err)
		}
	}
	if err := sandbox.CheckHost(ctx, "10.0.0.1", nil); err == nil {
		t.Error("the sandbox allows 10.0.0.1: only loopback is its")
	}
	// A name is judged by what it resolves to.
	resolve := func(addrs ...string) func(context.Context, string) ([]netip.Addr, error) {
		return func(context.Context, string) ([]netip.Addr, error) {
			var out []netip.Addr
			for _, a := range addrs {
				out = append(out, netip.MustParseAddr(a))
			}
			return out, nil
		}
	}
	if err := strict.CheckHost(ctx, "push.example.com", resolve("142.250.72.10")); err != nil {
		t.Errorf("a public name refused: %v", err)
	}
	if err := strict.CheckHost(ctx, "rebind.example.com", resolve("142.250.72.10", "169.254.169.254")); !errors.Is(err, ErrNotPublic) {
		t.Errorf("a name resolving to the metadata address: %v", err)
	}
}

// TestDialerRefusesAtConnect: whatever the URL said, the connection to a loopback server is
// refused by the strict policy's transport and allowed by the sandbox's.
func TestDialerRefusesAtConnect(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	_, err := (&http.Client{Transport: Policy{}.Transport()}).Get(srv.URL)
	if !errors.Is(err, ErrNotPublic) || !strings.Contains(err.Error(), "refused to connect to 127.0.0.1") {
		t.Fatalf("strict GET %s: %v, want refused", srv.URL, err)
	}
	// localhost resolves to loopback: refused at connect time too.
	_, err = (&http.Client{Transport: Policy{}.Transport()}).Get(strings.Replace(srv.URL, "127.0.0.1", "localhost", 1))
	if !errors.Is(err, ErrNotPublic) {
		t.Fatalf("strict GET via localhost: %v, want refused", err)
	}
	resp, err := (&http.Client{Transport: Policy{AllowLoopback: true}.Transport()}).Get(srv.URL)
	if err != nil {
		t.Fatalf("sandbox GET: %v", err)
	}
	resp.Body.Close()
}
