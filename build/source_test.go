package build

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/gittree/gittest"
	"github.com/patcheval/patcheval/internal/progress"
)

// acquireSource holds the sources at the job's commit: a fresh checkout
// (seeded by hard links from the config sources when they exist), then
// nothing to do at the same commit, then an incremental move to another
// commit. Which commit the directory holds is the checkout's own record.
func TestAcquireSourceFollowsTheCommit(t *testing.T) {
	repo := gittest.NewRepo(t, map[string]string{"Makefile": "all:\n", "kernel/a.c": "a\n"})
	base := strings.TrimSpace(gittest.Run(t, repo, "rev-parse", "HEAD"))
	gittest.WriteFiles(t, repo, map[string]string{"kernel/a.c": "a2\n", "kernel/b.c": "b\n"})
	gittest.Run(t, repo, "add", "-A")
	gittest.Run(t, repo, "commit", "-q", "-m", "second")
	second := strings.TrimSpace(gittest.Run(t, repo, "rev-parse", "HEAD"))

	root := t.TempDir()
	j := &job{req: Request{Repo: repo}, opts: Options{Progress: progress.Discard()}, label: "test",
		cfgSrc: filepath.Join(root, "cfg-src"), arch: tableArch(t, "x86_64")}
	if _, err := gittree.Checkout(context.Background(), repo, base, j.cfgSrc); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "src")
	acquire := func(commit, want string) {
		t.Helper()
		j.commit = commit
		summary, release, err := j.acquireSource(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		release()
		if !strings.Contains(summary, want) {
			t.Errorf("at %s: summary %q, want %q", commit[:8], summary, want)
		}
		if got := gittree.CheckedOut(dir); got != commit {
			t.Errorf("sources hold %q, want %s", got, commit)
		}
	}
	acquire(base, "hard-linked 2 files")
	acquire(base, "already at commit")
	acquire(second, "incremental checkout")
	if b, err := os.ReadFile(filepath.Join(dir, "kernel/a.c")); err != nil || string(b) != "a2\n" {
		t.Errorf("kernel/a.c = %q, %v", b, err)
	}
	// The seed is untouched by the move (hard links are replaced, not written).
	if b, _ := os.ReadFile(filepath.Join(j.cfgSrc, "kernel/a.c")); string(b) != "a\n" {
		t.Errorf("config sources changed: kernel/a.c = %q", b)
	}
}
