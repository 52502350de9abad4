package build

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/arch"
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
