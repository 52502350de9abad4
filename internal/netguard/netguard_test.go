package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every kind of non-public address is refused, named; public ones pass;
// an IPv4-mapped IPv6 address is judged as its IPv4 address.
func TestCheckAddr(t *testing.T) {
	p := Policy{}
	refused := map[string]string{
		"127.0.0.1":        "loopback",
		"127.9.9.9":        "loopback",
		"::1":              "loopback",
		"::ffff:127.0.0.1": "loopback",
		"10.1.2.3":         "private",
		"172.16.0.1":       "private",
		"172.31.255.255":   "private",
		"192.168.1.1":      "private",
		"fc00::1":          "unique local",
		"fd12:3456::1":     "unique local",
		"169.254.169.254":  "link-local",
		"fe80::1":          "link-local",
		"0.0.0.0":          "unspecified",
		"::":               "unspecified",
		"224.0.0.1":        "multicast",
		"239.1.2.3":        "multicast",
		"ff02::1":          "multicast",
		"100.64.0.1":       "CGNAT",
		"100.127.255.254":  "CGNAT",
		"255.255.255.255":  "broadcast",
		"::ffff:10.0.0.1":  "private",
	}
	for s, kind := range refused {
		err := p.CheckAddr("h.example", netip.MustParseAddr(s))
		var r *Refused
		if !errors.As(err, &r) || !strings.Contains(err.Error(), kind) || !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %v, want a refusal naming it and %q", s, err, kind)
		}
	}
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "172.32.0.1", "139.178.84.217", "2604:1380:4641:c500::1"} {
		if err := p.CheckAddr("h.example", netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s (public): %v", s, err)
		}
	}
	// A configured network lets its addresses through, and only them.
	p.Networks, _ = ParseNetworks([]string{"10.1.0.0/16", "127.0.0.2"})
	for _, s := range []string{"10.1.2.3", "127.0.0.2", "::ffff:10.1.0.9"} {
		if err := p.CheckAddr("h", netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s inside git_networks: %v", s, err)
		}
	}
	for _, s := range []string{"10.2.0.1", "127.0.0.1"} {
		if err := p.CheckAddr("h", netip.MustParseAddr(s)); err == nil {
			t.Errorf("%s outside git_networks: allowed", s)
		}
	}
	if _, err := ParseNetworks([]string{"10.0.0.0/33"}); err == nil || !strings.Contains(err.Error(), "10.0.0.0/33") {
		t.Errorf("a bad network: %v", err)
	}
}

// Only allowed schemes and hosts, no credentials, no local or command
// transports.
func TestCheckURL(t *testing.T) {
	p := Policy{Schemes: []string{"https", "http", "git"}, Hosts: []string{"git.kernel.org", "*.example.org"}}
	for _, ok := range []string{"https://git.kernel.org/pub/scm/linux.git", "git://git.kernel.org/x.git", "http://a.example.org/x", "https://GIT.KERNEL.ORG/x"} {
		if _, err := p.CheckURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for raw, why := range map[string]string{
		"file:///srv/linux.git":            "not a URL with a host",
		"ssh://git.kernel.org/linux.git":   "scheme ssh:// is not allowed",
		"ext::sh -c touch% /tmp/pwned":     "not a URL with a host",
		"https://u:pw@git.kernel.org/x":    "credentials",
		"https://evil.example.com/x.git":   "host evil.example.com is not among the allowed hosts",
		"https://example.org.evil.com/x":   "not among the allowed hosts",
		"https://127.0.0.1/x.git":          "host 127.0.0.1 is not among",
		"git+ssh://git.kernel.org/x.git":   "scheme git+ssh:// is not allowed",
		"https://git.kernel.org@evil.com/": "credentials",
	} {
		if _, err := p.CheckURL(raw); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v, want %q", raw, err, why)
		}
	}
}

// Every resolved address is checked: one private record among public ones
// refuses the host.
func TestResolveChecksEveryAddress(t *testing.T) {
	p := Policy{Lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("139.178.84.217"), netip.MustParseAddr("fd00::5")}, nil
	}}
	_, err := p.Resolve(context.Background(), "mixed.example")
	if err == nil || !strings.Contains(err.Error(), "mixed.example resolves to fd00::5, a unique local") {
		t.Errorf("a host with a private AAAA record: %v", err)
	}
}

// DNS rebinding: a name that resolves to an allowed address when checked
// and to 127.0.0.1 a moment later never reaches 127.0.0.1: Dial connects
// to the address it has just checked, and a later dial checks again.
func TestDialRebinding(t *testing.T) {
	allowed := listen(t, "127.0.0.2")
	internal := listen(t, "127.0.0.1")
	var mu sync.Mutex
	calls := 0
	p := Policy{Hosts: []string{"*"}, Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")},
		Lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls == 1 {
				return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
			}
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}}
	// Both servers listen on the same port number where possible: the
	// rebound name would reach the internal one by port too.
	_, port, _ := net.SplitHostPort(allowed.ln.Addr().String())
	internal2 := listenPort(t, "127.0.0.1", port)
	c, err := p.Dial(context.Background(), "tcp", net.JoinHostPort("rebind.example", port))
	if err != nil {
		t.Fatalf("first dial (127.0.0.2, allowed): %v", err)
	}
	c.Close()
	_, err = p.Dial(context.Background(), "tcp", net.JoinHostPort("rebind.example", port))
	var r *Refused
	if !errors.As(err, &r) || !strings.Contains(err.Error(), "rebind.example resolves to 127.0.0.1, a loopback address") {
		t.Errorf("second dial (rebound to 127.0.0.1): %v, want a refusal naming it", err)
	}
	if n := internal.accepted.Load() + internal2.accepted.Load(); n != 0 {
		t.Errorf("the internal server (127.0.0.1) accepted %d connection(s)", n)
	}
	// The first dial completed in the kernel's accept queue; the server's
	// Accept goroutine counts it when it is scheduled, which under load can
	// be after Dial returned.
	if !allowed.waitAccepted(1, 10*time.Second) {
		t.Errorf("the allowed server saw no connection in 10 s")
	}
}

// waitAccepted reports whether the server has accepted at least n
// connections within d.
func (s *server) waitAccepted(n int64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for s.accepted.Load() < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

type server struct {
	ln       net.Listener
	accepted atomic.Int64
}

func listen(t *testing.T, ip string) *server { return listenPort(t, ip, "0") }

func listenPort(t *testing.T, ip, port string) *server {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, port))
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	s := &server{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}
