package gittree

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/netguard"
)

// A remote named by a stranger (#patcheval test <git URL> <branch>) is
// listed and fetched under a netguard.Policy carried by the context
// (WithGuard): go-git's http and https transport, installed here for the
// whole process, then connects only to addresses the policy just checked
// (netguard.Policy.Dial: no proxy, every A/AAAA record checked, the
// connect re-checked), refuses a redirect to another host, and keeps no
// idle connection a later fetch could reuse; git:// is dialled at the
// checked address itself (guardURL). Without a guard in the context
// fetches behave as go-git's default client.

type guardKey struct{}

// WithGuard returns ctx carrying p: ListRefs and Fetch with it reach only
// what p allows.
func WithGuard(ctx context.Context, p *netguard.Policy) context.Context {
	return context.WithValue(ctx, guardKey{}, p)
}

func guardOf(ctx context.Context) *netguard.Policy {
	p, _ := ctx.Value(guardKey{}).(*netguard.Policy)
	return p
}

func init() {
	base := http.DefaultTransport.(*http.Transport).Clone()
	plain := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	base.DisableKeepAlives = true // a guarded fetch never reuses an unchecked connection
	base.Proxy = func(r *http.Request) (*url.URL, error) {
		if guardOf(r.Context()) != nil {
			return nil, nil // direct: the address dialled is the one checked
		}
		return http.ProxyFromEnvironment(r)
	}
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p := guardOf(ctx); p != nil {
			return p.Dial(ctx, network, addr)
		}
		return plain.DialContext(ctx, network, addr)
	}
	c := &http.Client{Transport: base, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if guardOf(r.Context()) != nil && len(via) > 0 && r.URL.Host != via[0].URL.Host {
			return &netguard.Refused{Reason: fmt.Sprintf("redirect from %s to another host (%s): refused", via[0].URL.Host, r.URL.Host)}
		}
		return nil
	}}
	t := githttp.NewClient(c)
	client.InstallProtocol("http", t)
	client.InstallProtocol("https", t)
}

// guardURL checks rawURL against the context's guard (none: rawURL as
// is). A git:// URL comes back naming the checked address instead of the
// host (go-git's git transport resolves and dials by itself).
func guardURL(ctx context.Context, rawURL string) (string, error) {
	p := guardOf(ctx)
	if p == nil {
		return rawURL, nil
	}
	u, err := p.CheckURL(rawURL)
	if err != nil {
		return "", fail.Input(err)
	}
	addrs, err := p.Resolve(ctx, u.Hostname())
	if err != nil {
		return "", fail.Input(err)
	}
	if u.Scheme != "git" {
		return rawURL, nil
	}
	if u.Port() != "" {
		u.Host = net.JoinHostPort(addrs[0].String(), u.Port())
	} else if addrs[0].Is6() {
		u.Host = "[" + addrs[0].String() + "]"
	} else {
		u.Host = addrs[0].String()
	}
	return u.String(), nil
}
