package service

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/secretfile"
)

// IsLoopback reports whether a --listen address only accepts connections
// from this machine (127.0.0.0/8, ::1, localhost). An empty host (":8080")
// listens everywhere: not loopback.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ReadToken reads a token file: its first line, trimmed. An empty,
// unreadable or group/world-readable file (internal/secretfile) is a
// bad-input error naming the flag (never the token).
func ReadToken(path string) ([]byte, error) {
	tok, err := secretfile.Read("--token-file", path)
	if err != nil {
		return nil, err
	}
	if len(tok) < 16 {
		return nil, fail.Inputf("--token-file %s: the token must be at least 16 characters", path)
	}
	return []byte(tok), nil
}

// auth wraps h: with a token configured, mutating requests (and reads
// unless PublicRead) need "Authorization: Bearer <token>" (or HTTP Basic
// with the token as password, which browsers can send for the
// dashboard's buttons), compared in constant time; 401 otherwise. Without
// a token (loopback only), a mutating request from another site's page
// (Sec-Fetch-Site cross-site, or an Origin that is not this host) is
// refused with 403, so that a web page cannot drive the local service.
//
// Before any of that, the request's Host must be one this server answers
// to (hostAllowed): a page on another name that its DNS points at this
// machine (DNS rebinding) gets 421, whatever its Origin says.
func (s *Service) auth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts.allowed(r) {
			apiError(w, http.StatusMisdirectedRequest, "Host", fmt.Sprintf(
				"Host %q is not a name this server answers to (its listen address, localhost, --public-url or --allow-host)", r.Host))
			return
		}
		mutating := r.Method != http.MethodGet && r.Method != http.MethodHead
		if len(s.cfg.Token) > 0 && (mutating || !s.cfg.PublicRead) && !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="patcheval", Basic realm="patcheval"`)
			apiError(w, http.StatusUnauthorized, "Authorization", "missing or wrong token: send Authorization: Bearer <the --token-file token>")
			return
		}
		if mutating && crossSite(r) {
			apiError(w, http.StatusForbidden, "Origin", "cross-site request refused")
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Service) authorized(r *http.Request) bool {
	var got string
	h := r.Header.Get("Authorization")
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		got = strings.TrimSpace(t)
	} else if _, pw, ok := r.BasicAuth(); ok {
		got = pw
	}
	if got == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), s.cfg.Token) == 1
}

func crossSite(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return true
	}
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return o == "null"
	}
	u, err := url.Parse(o)
	return err != nil || u.Host != r.Host
}
