// Package netguard keeps Herald's outbound requests to addresses its users choose (Web Push
// endpoints, Slack webhooks) on the public internet: a request to a private, loopback,
// link-local, CGNAT, multicast, reserved or cloud metadata address is refused, whether the URL
// names the address literally — in any notation an address parser accepts — or through a name
// that resolves there, at registration and again at connect time, so DNS rebinding fails too.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// nonPublic are the ranges no push service or webhook lives in (IANA special-purpose registries).
var nonPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range []string{
		"0.0.0.0/8",       // "this network"
		"10.0.0.0/8",      // private
		"100.64.0.0/10",   // CGNAT
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local, cloud metadata (169.254.169.254)
		"172.16.0.0/12",   // private
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation
		"192.88.99.0/24",  // 6to4 relay anycast
		"192.168.0.0/16",  // private
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, broadcast
		"::/128",          // unspecified
		"::1/128",         // loopback
		"100::/64",        // discard
		"2001:db8::/32",   // documentation
		"fc00::/7",        // unique local (AWS's IPv6 metadata, fd00:ec2::254)
		"fe80::/10",       // link-local
		"ff00::/8",        // multicast
	} {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}()

// embedding are IPv6 prefixes that carry an IPv4 address in their low bits (IPv4-mapped,
// IPv4-compatible, NAT64, 6to4): the IPv4 address inside decides.
var embedding = []struct {
	prefix netip.Prefix
	offset int // byte offset of the embedded IPv4 address
}{
	{netip.MustParsePrefix("::ffff:0:0/96"), 12},
	{netip.MustParsePrefix("::/96"), 12},
	{netip.MustParsePrefix("64:ff9b::/96"), 12},
	{netip.MustParsePrefix("64:ff9b:1::/48"), 12},
	{netip.MustParsePrefix("2002::/16"), 2},
}

// Public reports whether ip is a public unicast address.
func Public(ip netip.Addr) bool {
	if !ip.IsValid() {
		return false
	}
	ip = ip.WithZone("")
	if ip.Is6() {
		for _, e := range embedding {
			if e.prefix.Contains(ip) {
				b := ip.As16()
				v4 := netip.AddrFrom4([4]byte{b[e.offset], b[e.offset+1], b[e.offset+2], b[e.offset+3]})
				if !Public(v4) {
					return false
				}
			}
		}
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// loopback reports whether ip is a loopback address (IPv4-mapped included).
func loopback(ip netip.Addr) bool { return ip.Unmap().IsLoopback() }

// LiteralIP reads host as an IP address in every notation an address parser of some client
// accepts: dotted quads, IPv6 (bracketed or not, with a zone), and inet_aton's forms — a single
// decimal, octal or hex number ("2852039166", "0xa9fea9fe"), and dotted forms with fewer parts
// or octal and hex parts ("169.254.43518", "0251.0376.0251.0376"). ok is false for a name.
func LiteralIP(host string) (netip.Addr, bool) {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip, true
	}
	parts := strings.Split(strings.TrimSuffix(h, "."), ".")
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums []uint64
	for _, p := range parts {
		n, err := strconv.ParseUint(p, 0, 32) // base prefix: 0x hex, 0 octal
		if err != nil || p == "" {
			return netip.Addr{}, false
		}
		nums = append(nums, n)
	}
	// inet_aton: the last part fills the remaining bytes.
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(4-len(nums)+1)) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// ErrNotPublic is what a refused address wraps.
var ErrNotPublic = errors.New("not a public internet address")

// Policy says which addresses a request may reach.
type Policy struct {
	// AllowLoopback admits 127.0.0.0/8, ::1 and localhost: the sandbox's providers on this
	// machine, and only there.
	AllowLoopback bool
}

func (p Policy) allowed(ip netip.Addr) bool {
	return Public(ip) || p.AllowLoopback && loopback(ip)
}

// CheckHost refuses a host that is a literal address outside the public internet (in any
// notation), and a name that resolves to one (resolve may be nil: names are then left to
// the dialer). A name that does not resolve is not refused here: the dialer checks every
// address it connects to.
func (p Policy) CheckHost(ctx context.Context, host string, resolve func(ctx context.Context, host string) ([]netip.Addr, error)) error {
	if host == "" {
		return fmt.Errorf("no host: %w", ErrNotPublic)
	}
	if ip, ok := LiteralIP(host); ok {
		if !p.allowed(ip) {
			return fmt.Errorf("%s: %w", ip, ErrNotPublic)
		}
		return nil
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		if p.AllowLoopback {
			return nil
		}
		return fmt.Errorf("%s: %w", host, ErrNotPublic)
	}
	if resolve == nil {
		return nil
	}
	ips, err := resolve(ctx, host)
	if err != nil {
		return nil
	}
	for _, ip := range ips {
		if !p.allowed(ip) {
			return fmt.Errorf("%s resolves to %s: %w", host, ip, ErrNotPublic)
		}
	}
	return nil
}

// Resolve looks host up with the default resolver, within a few seconds.
func Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// Dialer is a net.Dialer that refuses, after the name is resolved and before it connects, any
// address p does not allow: the address connected to is the one checked, so a name that
// resolved to a public address at registration and to a private one now is still refused.
func (p Policy) Dialer() *net.Dialer {
	return &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("netguard: %s: %w", address, ErrNotPublic)
			}
			if !p.allowed(ap.Addr()) {
				return fmt.Errorf("netguard: refused to connect to %s: %w", ap.Addr(), ErrNotPublic)
			}
			return nil
		},
	}
}

// Transport is http.DefaultTransport's settings with p's dialer and no proxy (a proxy would
// connect on the client's behalf, past the check).
func (p Policy) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = p.Dialer().DialContext
	return t
}
