package main

import (
	"flag"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestLoreChecksBeforeFetch: lore refuses a bad --pipeline, --arch or
// --tree before it asks lore for anything (it used to fetch first).
func TestLoreChecksBeforeFetch(t *testing.T) {
	t.Setenv("PATCHEVAL_CACHE_DIR", t.TempDir())
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	repo := filepath.Join(t.TempDir(), "linux")
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	notGit := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pipeline", "nope", "--tree", repo}, "nope"},
		{[]string{"--pipeline", "default"}, "needs --tree"},
		{[]string{"--pipeline", "default", "--arch", "vax", "--tree", repo}, "vax"},
		{[]string{"--pipeline", "selinux-tax", "--arch", "arm64", "--tree", repo}, "--arch goes with --pipeline default"},
		{[]string{"--pipeline", "default", "--tree", notGit}, notGit},
		{[]string{"--tree", filepath.Join(notGit, "gone")}, "gone"},
	} {
		args := append([]string{"lore", "--lore", srv.URL, "--no-cache", "someone@example.org"}, c.args...)
		_, errOut, code := runsCLI(t, args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, %q; want 2 naming %q", c.args, code, errOut, c.want)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("lore was asked %d time(s) before the flags were checked", n)
	}
}

// TestTreeStoredAbsolute: --tree is kept absolute (a relative one ended
// in a reproducer as TREE=trees/fake).
func TestTreeStoredAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, name := range []string{"lore", "apply", "bisect", "build"} {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		commands[name].setup(fs)
		if err := fs.Parse([]string{"--tree", "trees/fake"}); err != nil {
			t.Fatal(err)
		}
		if got := fs.Lookup("tree").Value.String(); got != filepath.Join(dir, "trees", "fake") {
			t.Errorf("%s --tree trees/fake: kept as %q, want %s", name, got, filepath.Join(dir, "trees", "fake"))
		}
	}
}
