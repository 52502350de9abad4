package build

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/gittree/gittest"
	"github.com/patcheval/patcheval/internal/progress"
)

// An O= directory is reused by a build of the commit that last built
// there or of a descendant, and emptied for any other commit: what a
// hostile series left in it (an object with a future mtime, a trojaned
// host program) never reaches the next evaluation's base build.
func TestClaimWorkspaceFollowsLineage(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, "out", "vmlinux.o")
	plant := func() {
		os.MkdirAll(filepath.Join(dir, "out"), 0o755)
		os.WriteFile(left, []byte("left by the last build"), 0o644)
	}
	claim := func(commit string, lineage ...string) bool {
		t.Helper()
		j := &job{commit: commit}
		emptied, err := j.claimWorkspace(dir, append([]string{commit}, lineage...))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(left); (err == nil) == emptied {
			t.Fatalf("%s: emptied=%v but the planted file exists=%v", commit, emptied, err == nil)
		}
		return emptied
	}
	plant()
	if !claim("base") {
		t.Error("a workspace without a record of its last commit was reused")
	}
	plant()
	if claim("base") {
		t.Error("the same commit again: emptied")
	}
	plant()
	if claim("patched", "base") {
		t.Error("a descendant of the last commit (base -> patched): emptied")
	}
	plant()
	if !claim("base") {
		t.Error("base after patched reused what the patched (untrusted) build left")
	}
	plant()
	if !claim("other", "base2") {
		t.Error("an unrelated commit reused the workspace")
	}
}

// A build waits for the build of its ancestor running beside it (the
// patched kernel for its base), and not for anything else.
func TestWaitForAncestors(t *testing.T) {
	a, _ := arch.Lookup("x86_64")
	mk := func(commit string, anc ...string) *job {
		return &job{req: Request{Repo: "/r"}, arch: a, commit: commit, ancestry: append([]string{commit}, anc...),
			opts: Options{Progress: progress.Discard()}}
	}
	base := mk("base")
	done := base.register()
	other := mk("other", "elsewhere")
	if err := other.waitForAncestors(context.Background()); err != nil {
		t.Fatal(err)
	}
	patched := mk("patched", "base")
	waited := make(chan error, 1)
	go func() { waited <- patched.waitForAncestors(context.Background()) }()
	select {
	case <-waited:
		t.Fatal("the patched build did not wait for its base's")
	case <-time.After(200 * time.Millisecond):
	}
	done()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the patched build still waits after its base's ended")
	}
}

// A build reads the kcc layers of its ancestors and of the commits with
// the tree of one of them (a release relinked onto another parent by
// internal/linuxtree: same code, new commit id), never an unrelated
// commit's or a descendant's.
func TestKccLayersFollowTrees(t *testing.T) {
	repo := gittest.NewRepo(t, map[string]string{"Makefile": "all:\n"})
	rev := func(r string) string { return strings.TrimSpace(gittest.Run(t, repo, "rev-parse", r)) }
	base := rev("HEAD")
	gittest.WriteFiles(t, repo, map[string]string{"Makefile": "all:\n\ttrue\n"})
	gittest.Run(t, repo, "commit", "-q", "-am", "release")
	release := rev("HEAD")
	gittest.WriteFiles(t, repo, map[string]string{"x.c": "int x;\n"})
	gittest.Run(t, repo, "add", "x.c")
	gittest.Run(t, repo, "commit", "-q", "-m", "patched")
	patched := rev("HEAD")
	// The release again, relinked onto nothing: same tree, other id.
	relinked := strings.TrimSpace(gittest.Run(t, repo, "commit-tree", "-m", "release, relinked", rev(release+"^{tree}")))
	gittest.WriteFiles(t, repo, map[string]string{"y.c": "int y;\n"})
	gittest.Run(t, repo, "add", "y.c")
	gittest.Run(t, repo, "commit", "-q", "-m", "a descendant")
	other := rev("HEAD")

	cache := t.TempDir()
	root := filepath.Join(cache, "kcc", "layers")
	for _, c := range []string{base, release, patched, other} {
		os.MkdirAll(filepath.Join(root, c), 0o755)
	}
	j := &job{commit: relinked, req: Request{Repo: repo + "/.git"}, opts: Options{CacheDir: cache}}
	own, read := j.kccLayers([]string{relinked})
	if own != filepath.Join(root, relinked) {
		t.Errorf("own layer %s", own)
	}
	if len(read) != 1 || read[0] != filepath.Join(root, release) {
		t.Errorf("relinked release reads %v, want only the layer of %s (same tree)", read, release)
	}
	// The patched commit reads its ancestors' layers, not its
	// descendant's (other tree).
	j = &job{commit: patched, req: Request{Repo: repo + "/.git"}, opts: Options{CacheDir: cache}}
	_, read = j.kccLayers([]string{patched, release, base})
	if strings.Join(read, " ") != filepath.Join(root, release)+" "+filepath.Join(root, base) {
		t.Errorf("patched reads %v, want the layers of its two ancestors", read)
	}
}
