package service

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/redact"
)

// hostList is the Host allow-list: the names a request may address this
// server by. A browser sends the name it resolved in Host, so a page on
// attacker.example whose DNS later points at 127.0.0.1 (DNS rebinding)
// reaches the server as "Host: attacker.example:PORT" with a matching
// Origin, which the cross-site check alone would let through.
//
// Always allowed: the address the connection arrived on (IP:port, so an
// IP literal of the listening interface) and localhost, 127.0.0.1 and
// [::1] with that port. Configured: --public-url's host (its port, or the
// scheme's default) and every --allow-host NAME[:PORT] (no port: any).
type hostList struct {
	exact map[string]bool // "host:port", normalised
	any   map[string]bool // host, any port
}

// newHostList reads --public-url and --allow-host values.
func newHostList(publicURL string, allow []string) (hostList, error) {
	h := hostList{exact: map[string]bool{}, any: map[string]bool{}}
	if publicURL != "" {
		u, err := url.Parse(publicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return h, fail.Inputf("--public-url %s: want http(s)://HOST[:PORT]/...", redact.URL(publicURL))
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		h.exact[normHost(u.Hostname())+":"+port] = true
	}
	for _, a := range allow {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			host, port = strings.Trim(a, "[]"), ""
		}
		if host == "" || strings.ContainsAny(host, "/@ ") {
			return h, fail.Inputf("--allow-host %q: want a host name or address, optionally with :PORT", a)
		}
		if port == "" {
			h.any[normHost(host)] = true
		} else {
			h.exact[normHost(host)+":"+port] = true
		}
	}
	return h, nil
}

// normHost lowercases a host name without its trailing dot; an IP
// address in its canonical form.
func normHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return h
}

// allowed reports whether r's Host names this server.
func (h hostList) allowed(r *http.Request) bool {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		// No port: the scheme's default (a proxy in front on 80/443).
		host, port = r.Host, ""
	}
	host = normHost(host)
	if host == "" {
		return false
	}
	if h.any[host] {
		return true
	}
	if port == "" {
		return h.exact[host+":80"] || h.exact[host+":443"]
	}
	if h.exact[host+":"+port] {
		return true
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	lhost, lport, err := net.SplitHostPort(local.String())
	if err != nil || lport != port {
		return false
	}
	switch host {
	case "localhost", "127.0.0.1", "::1", normHost(lhost):
		return true
	}
	return false
}
