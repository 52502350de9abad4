package gittree

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/netguard"
	"github.com/patcheval/patcheval/internal/testgit"
)

// Under a guard, go-git's fetches reach only what the policy allows:
// a loopback remote is refused unless a configured network holds it, a
// redirect to another host is refused (the same listing follows it
// without a guard), and a git:// URL is dialled at the checked address.
func TestGuardedRemote(t *testing.T) {
	root := t.TempDir()
	served := filepath.Join(root, "linux.git")
	testgit.Git(t, nil, nil, "init", "-q", "--bare", "-b", "master", served)
	tip := testgit.Commit(t, served, "", "base", "2026-11-02T10:00:00Z", map[string]string{"f": "x\n"})
	testgit.Git(t, nil, nil, "--git-dir="+served, "update-ref", "refs/heads/master", tip)
	srv := testgit.ServeOn(t, root, "127.0.0.2")
	url := srv.URL() + "/linux.git"

	open := &netguard.Policy{Schemes: []string{"http"}, Hosts: []string{"*"}, Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	if refs, err := ListRefs(WithGuard(context.Background(), open), url); err != nil || len(refs) == 0 {
		t.Fatalf("guarded listing of an allowed remote: %d refs, %v", len(refs), err)
	}
	strict := &netguard.Policy{Schemes: []string{"http"}, Hosts: []string{"*"}}
	_, err := ListRefs(WithGuard(context.Background(), strict), url)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.2 is a loopback address: refused") || fail.KindOf(err) != fail.KindInput {
		t.Errorf("guarded listing of a loopback remote: %v (%v), want a refusal (bad input)", err, fail.KindOf(err))
	}

	// A server on 127.0.0.3 redirects to the one on 127.0.0.2.
	var hits atomic.Int64
	redir := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, srv.URL()+r.URL.RequestURI(), http.StatusFound)
	}))
	ln, err := netListen("127.0.0.3")
	if err != nil {
		t.Fatal(err)
	}
	redir.Listener = ln
	redir.Start()
	defer redir.Close()
	if _, err := ListRefs(context.Background(), redir.URL+"/linux.git"); err != nil {
		t.Fatalf("unguarded listing through the redirect: %v", err)
	}
	before := srv.Requests
	_, err = ListRefs(WithGuard(context.Background(), open), redir.URL+"/linux.git")
	if err == nil || !strings.Contains(err.Error(), "to another host (127.0.0.2:") {
		t.Errorf("guarded listing redirected to another host: %v, want a refusal", err)
	}
	if srv.Requests != before {
		t.Errorf("the redirect's target served %d request(s) to a guarded listing", srv.Requests-before)
	}

	// git:// is dialled at the address the guard resolved and checked.
	g := &netguard.Policy{Schemes: []string{"git"}, Hosts: []string{"git.example.org"}, Networks: open.Networks,
		Lookup: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.4")}, nil
		}}
	if u, err := guardURL(WithGuard(context.Background(), g), "git://git.example.org/linux.git"); err != nil || u != "git://127.0.0.4/linux.git" {
		t.Errorf("git:// under a guard: %q, %v; want git://127.0.0.4/linux.git", u, err)
	}
	if u, err := guardURL(WithGuard(context.Background(), g), "git://git.example.org:9419/linux.git"); err != nil || u != "git://127.0.0.4:9419/linux.git" {
		t.Errorf("git:// with a port under a guard: %q, %v", u, err)
	}
}

func netListen(ip string) (net.Listener, error) { return net.Listen("tcp", ip+":0") }
