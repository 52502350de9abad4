// Package netguard decides whether patcheval may connect to a remote a
// stranger named (a `#patcheval test <git URL> <branch>` in a list mail)
// and makes the connection only to an address it checked.
//
// A Policy allows URL schemes and host names (globs), and refuses every
// address that is not a public unicast one -- loopback, private (RFC
// 1918, unique local fc00::/7), link-local, unspecified, multicast,
// broadcast, shared (CGNAT 100.64.0.0/10) and the other IANA
// special-purpose ranges -- unless one of the Policy's Networks holds it.
// Names are resolved by the Policy (every A and AAAA record is checked;
// one forbidden address refuses the host) and Dial connects to the
// addresses it has just checked, re-checked in the dialer's Control hook
// at the socket's connect: a name that resolves to a public address when
// checked and to 127.0.0.1 a moment later (DNS rebinding) never reaches
// 127.0.0.1.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Policy is what a guarded connection may reach.
type Policy struct {
	// Schemes are the URL schemes allowed ("https", "http", "git").
	Schemes []string
	// Hosts are host-name globs (path.Match, case ignored) a URL may
	// name; "*" allows any host (the address checks still apply).
	Hosts []string
	// Networks hold addresses allowed although they are not public
	// (an intranet git server, a test's loopback server).
	Networks []netip.Prefix
	// Lookup resolves a host name (nil: net.DefaultResolver's
	// LookupNetIP); tests give their own.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Refused is a guard's refusal: Reason says what is wrong, in one line.
type Refused struct{ Reason string }

func (e *Refused) Error() string { return e.Reason }

// special are the ranges no guarded connection reaches unless a Policy's
// Networks hold them, with the name a refusal gives.
var special = []struct {
	p    netip.Prefix
	name string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified (\"this network\") address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private (RFC 1918) address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (CGNAT, RFC 6598) address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private (RFC 1918) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol assignment address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation (TEST-NET-1) address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private (RFC 1918) address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation (TEST-NET-2) address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation (TEST-NET-3) address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved (or broadcast) address"},
	{netip.MustParsePrefix("::/128"), "the unspecified address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a NAT64 address"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address"},
	{netip.MustParsePrefix("fc00::/7"), "a unique local (private) address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

// Classify names what kind of non-public address a is ("" for a public
// unicast one). An IPv4-mapped IPv6 address is judged as its IPv4 one.
func Classify(a netip.Addr) string {
	a = a.Unmap()
	if !a.IsValid() {
		return "an invalid address"
	}
	a = a.WithZone("")
	for _, s := range special {
		if s.p.Contains(a) {
			return s.name
		}
	}
	if a.Is6() && !netip.MustParsePrefix("2000::/3").Contains(a) {
		return "an address outside the global unicast range"
	}
	return ""
}

// CheckAddr refuses a when it is not public and no Network holds it.
func (p Policy) CheckAddr(host string, a netip.Addr) error {
	kind := Classify(a)
	if kind == "" {
		return nil
	}
	for _, n := range p.Networks {
		if n.Contains(a.Unmap()) {
			return nil
		}
	}
	what := host + " resolves to " + a.String() + ", "
	if ip, err := netip.ParseAddr(host); err == nil && ip == a {
		what = host + " is "
	}
	return &Refused{Reason: what + kind + ": refused (only public addresses, or the configured networks)"}
}

// CheckURL refuses a URL whose scheme or host the Policy does not allow,
// or that carries credentials.
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return nil, &Refused{Reason: fmt.Sprintf("%q is not a URL with a host", raw)}
	}
	if !slices.Contains(p.Schemes, u.Scheme) {
		return nil, &Refused{Reason: fmt.Sprintf("scheme %s:// is not allowed (allowed: %s)", u.Scheme, schemesText(p.Schemes))}
	}
	if u.User != nil {
		return nil, &Refused{Reason: "a URL with credentials (user@host) is not allowed"}
	}
	if !p.HostAllowed(u.Hostname()) {
		return nil, &Refused{Reason: fmt.Sprintf("host %s is not among the allowed hosts (%s)", u.Hostname(), strings.Join(p.Hosts, ", "))}
	}
	return u, nil
}

func schemesText(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// HostAllowed says whether host matches one of the Policy's Hosts.
func (p Policy) HostAllowed(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, g := range p.Hosts {
		if ok, _ := path.Match(strings.ToLower(g), host); ok {
			return true
		}
	}
	return false
}

// Resolve returns host's addresses, every one checked: one address the
// Policy refuses refuses the host (a name with a private record besides
// its public ones would otherwise reach the private one on some dial).
func (p Policy) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, p.CheckAddr(host, a)
	}
	lookup := p.Lookup
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	addrs, err := lookup(ctx, host)
	if err != nil {
		return nil, &Refused{Reason: fmt.Sprintf("cannot resolve %s: %v", host, err)}
	}
	if len(addrs) == 0 {
		return nil, &Refused{Reason: fmt.Sprintf("%s has no address", host)}
	}
	for _, a := range addrs {
		if err := p.CheckAddr(host, a); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

// Dial connects to addr (host:port) only through addresses it has just
// resolved and checked; the socket's connect is checked again (Control).
func (p Policy) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if !p.HostAllowed(host) {
		return nil, &Refused{Reason: fmt.Sprintf("host %s is not among the allowed hosts (%s)", host, strings.Join(p.Hosts, ", "))}
	}
	addrs, err := p.Resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 30 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &Refused{Reason: fmt.Sprintf("connecting to %q: not an address", address)}
		}
		return p.CheckAddr(host, ap.Addr())
	}}
	var errs []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// ParseNetworks parses CIDR prefixes (a bare address is its /32 or
// /128), naming the bad one.
func ParseNetworks(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a network (CIDR, e.g. 10.1.0.0/16) or an address", s)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
