package follow

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// #patcheval test <git URL> <branch> reaches only the list's git hosts,
// over its schemes, at public addresses or its git_networks: loopback,
// private, link-local, CGNAT... are refused with one reason, also when
// the name resolves to an allowed address first and to 127.0.0.1 on the
// fetch (DNS rebinding), and the internal server sees no request. A
// lore URL is fetched only from the list's own archive host.
func TestTestBranchRemoteGuard(t *testing.T) {
	root := t.TempDir()
	tree := filepath.Join(root, "tree")
	env := []string{"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.org", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.org"}
	testgit.Git(t, nil, nil, "init", "-q", "-b", "master", tree)
	os.MkdirAll(filepath.Join(tree, "mm"), 0o755)
	os.WriteFile(filepath.Join(tree, "mm/slab.c"), []byte("line\n"), 0o644)
	testgit.Git(t, env, nil, "-C", tree, "add", ".")
	testgit.Git(t, env, nil, "-C", tree, "commit", "-q", "-m", "base")
	served := filepath.Join(root, "served", "linux.git")
	testgit.Git(t, nil, nil, "clone", "-q", "--bare", tree, served)
	master := strings.TrimSpace(testgit.Git(t, nil, nil, "--git-dir="+served, "rev-parse", "master"))
	topic := testgit.Commit(t, served, master, "mm/slab: topic", "2026-11-02T10:00:00Z", map[string]string{"mm/slab.c": "line\ntopic\n"})
	testgit.Git(t, nil, nil, "--git-dir="+served, "update-ref", "refs/heads/topic", topic)
	// The "public" git host (127.0.0.2, made allowed by git_networks) and
	// an internal one (127.0.0.1) serving the same repository.
	public := testgit.ServeOn(t, filepath.Join(root, "served"), "127.0.0.2")
	internal := testgit.ServeOn(t, filepath.Join(root, "served"), "127.0.0.1")
	_, port, _ := strings.Cut(strings.TrimPrefix(public.URL(), "http://"), ":")
	_, iport, _ := strings.Cut(strings.TrimPrefix(internal.URL(), "http://"), ":")

	st, err := store.Open(filepath.Join(root, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := List{Name: "test", URL: "http://127.0.0.1:9/test", Pipeline: "ppc-preempt-dynamic", Tree: tree, Base: "tree",
		GitHosts: []string{"git.example.org", "rebind.example.org", "private.example.org", "127.0.0.1"}, GitSchemes: []string{"http"},
		GitNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}
	g := &gen{t0: time.Now().Add(-time.Hour)}
	raw, err := os.ReadFile(writeMbox(t, root, "series.mbox", g.series("sss", "Sam <sam@example.org>", "mm/slab: faster", 1, 1, []string{"mm/slab.c"}, "")...))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := mbox.ParseBytes(raw, "test")
	if err != nil {
		t.Fatal(err)
	}
	th := mbox.NewThread(msgs, "test")
	s, err := series.Resolve(th, series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs := &rerunService{runnerService: runnerService{st}}
	ev, err := ServiceSubmitter{Service: rs}.Submit(context.Background(), l, s, th)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	lookups := map[string]int{}
	lookup := func(ctx context.Context, host string) ([]netip.Addr, error) {
		mu.Lock()
		defer mu.Unlock()
		lookups[host]++
		switch {
		case host == "git.example.org":
			return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
		case host == "private.example.org":
			return []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("10.20.30.40")}, nil
		case host == "rebind.example.org" && lookups[host] == 1:
			return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil // checked ...
		case host == "rebind.example.org":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil // ... then rebound
		}
		return nil, fmt.Errorf("no such host")
	}
	tr := ServiceTriager{Service: rs, Store: st, GitLookup: lookup}
	cmd := func(args ...string) (string, error) {
		return tr.Triage(context.Background(), TriageRequest{List: l, Command: Command{Name: "test", Args: args}, EvaluationID: ev})
	}
	for _, c := range []struct{ url, want string }{
		{"http://127.0.0.1:" + iport + "/linux.git", "127.0.0.1 is a loopback address: refused"},
		{"http://internal.example.org:" + port + "/linux.git", "host internal.example.org is not among the allowed hosts"},
		{"https://git.example.org/linux.git", "scheme https:// is not allowed (allowed: http)"},
		{"ssh://git.example.org/linux.git", "is not a git URL"},
		{"file:///" + served, "is not a git URL"},
		{"http://private.example.org:" + port + "/linux.git", "private.example.org resolves to 10.20.30.40, a private (RFC 1918) address: refused"},
		{"http://rebind.example.org:" + iport + "/linux.git", "rebind.example.org resolves to 127.0.0.1, a loopback address: refused"},
	} {
		_, err := cmd(c.url, "topic")
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Count(err.Error(), "#patcheval test") != 1 {
			t.Errorf("#patcheval test %s topic: %v\n  want one line with %q", c.url, err, c.want)
		}
	}
	// A lore URL on another host than the list's archive is not fetched.
	if _, err := cmd("http://127.0.0.1:" + iport + "/linux/x@example.org/"); err == nil ||
		!strings.Contains(err.Error(), "a lore URL must be on the list's archive host (127.0.0.1:9)") {
		t.Errorf("#patcheval test of a lore URL on another host: %v", err)
	}
	if lookups["rebind.example.org"] < 2 {
		t.Errorf("the rebinding name was resolved %d time(s): the fetch did not check it again", lookups["rebind.example.org"])
	}
	if internal.Requests != 0 {
		t.Errorf("the internal server (127.0.0.1) served %d request(s)", internal.Requests)
	}
	// An allowed host at an allowed address: fetched and evaluated.
	note, err := cmd("http://git.example.org:"+port+"/linux.git", "topic")
	if err != nil || !strings.Contains(note, "branch topic of http://git.example.org:"+port+"/linux.git, 1 commit(s)") {
		t.Errorf("an allowed remote: %q, %v", note, err)
	}
	if public.Requests == 0 {
		t.Errorf("the allowed server served no request")
	}
}
