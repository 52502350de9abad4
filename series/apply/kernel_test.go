package apply

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series"
)

var backportMbox = testenv.BackportMbox()

// gitAm applies the patch mails in mboxPath (mboxrd, cover letters left
// out) with the git CLI's `git am` onto base in a sparse worktree of the
// bare repo (sparse: the directories the patches touch), with pinned
// committer identity and date, and returns the resulting commit.
func gitAm(t testing.TB, repo, base, mboxPath string, sparse ...string) string {
	t.Helper()
	wt := filepath.Join(t.TempDir(), "am")
	gitRun(t, "", "--git-dir="+repo, "worktree", "add", "-q", "--no-checkout", "--detach", wt, base)
	defer gitRun(t, "", "--git-dir="+repo, "worktree", "remove", "--force", wt)
	gitRun(t, wt, append([]string{"sparse-checkout", "set", "--no-cone"}, sparse...)...)
	gitRun(t, wt, "checkout", "-q")
	if _, err := gitCmd(wt, []string{"GIT_COMMITTER_NAME=Test Committer", "GIT_COMMITTER_EMAIL=committer@example.org", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z"},
		"am", "-q", "--patch-format=mboxrd", mboxPath); err != nil {
		t.Fatalf("git am %s: %v", mboxPath, err)
	}
	return strings.TrimSpace(gitRun(t, wt, "rev-parse", "HEAD"))
}

func TestCheckoutKernel(t *testing.T) {
	repo := cloneBare(t, linuxTree(t))
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "linux")
	start := time.Now()
	st, err := gittree.Checkout(ctx, repo, "v6.1-debian", dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fresh: %s (%s)", st, time.Since(start))
	want := lsTree(t, repo, "v6.1-debian")
	if st.Written != len(want) {
		t.Errorf("fresh checkout wrote %d files, the tree has %d", st.Written, len(want))
	}
	if d := diffLists(want, dirListing(t, dir)); d != "" {
		t.Fatalf("fresh checkout differs from git ls-tree v6.1-debian:\n%s", d)
	}

	// The backport commit, made by Apply.
	res := applyBackport(t, repo)
	commit := res.Head
	unchanged := filepath.Join(dir, "arch/powerpc/kernel/irq.c")
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	os.Chtimes(unchanged, old, old)
	st, err = gittree.Checkout(ctx, repo, commit, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("incremental: %s", st)
	wantPaths := []string{"arch/powerpc/Kconfig", "arch/powerpc/include/asm/preempt.h", "arch/powerpc/kernel/interrupt.c", "arch/powerpc/lib/vmx-helper.c"}
	if st.Written != 4 || st.Removed != 0 || strings.Join(st.Paths, " ") != strings.Join(wantPaths, " ") {
		t.Errorf("incremental checkout: %d written, %d removed, paths %v; want the 4 files of the patch %v", st.Written, st.Removed, st.Paths, wantPaths)
	}
	if fi, _ := os.Stat(unchanged); !fi.ModTime().Equal(old) {
		t.Errorf("unchanged %s was rewritten", unchanged)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "arch/powerpc/include/asm/preempt.h"))
	if !strings.Contains(string(b), "need_irq_preemption") {
		t.Errorf("preempt.h not written by the incremental checkout")
	}
}

// backportSeries resolves the v6.1 backport fixture.
func backportSeries(t testing.TB) *series.Series {
	t.Helper()
	f, err := os.Open(backportMbox)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	msgs, err := mbox.Parse(f, backportMbox)
	if err != nil {
		t.Fatal(err)
	}
	s, err := series.Resolve(mbox.NewThread(msgs, backportMbox), series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func applyBackport(t testing.TB, repo string) *Result {
	t.Helper()
	s := backportSeries(t)
	res, err := Apply(context.Background(), repo, FromSeries(s, series.DefaultAMOptions()), Options{
		SeriesBase:     s.Base.Commit,
		Branch:         "patcheval/backport-v4",
		CommitterName:  "Test Committer",
		CommitterEmail: "committer@example.org",
		CommitterDate:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestApplyKernelBackport applies the v6.1 backport of "powerpc: enable
// dynamic preemption" to the real 6.1 tree and compares with git am.
func TestApplyKernelBackport(t *testing.T) {
	repo := cloneBare(t, linuxTree(t))
	start := time.Now()
	res := applyBackport(t, repo)
	t.Logf("Apply: %s", time.Since(start))
	// The fixture's base-commit comes from another import of the tarball.
	head := strings.TrimSpace(gitRun(t, "", "--git-dir="+repo, "rev-parse", "HEAD"))
	if res.Base != head || !strings.Contains(res.BaseReason, "base-commit b3bb56f2e4c9 is not in the tree: using HEAD (master)") {
		t.Errorf("base %s (%s), want HEAD with the reason", res.Base, res.BaseReason)
	}
	if len(res.Commits) != 1 || res.Commits[0].Label != "1/1 powerpc: enable dynamic preemption" || len(res.Commits[0].Notes) != 0 {
		t.Errorf("commits %+v", res.Commits)
	}

	// git am of the same series (b4-style am mbox with the Link: trailer).
	var am bytes.Buffer
	if err := backportSeries(t).WriteAM(&am, series.DefaultAMOptions()); err != nil {
		t.Fatal(err)
	}
	amPath := filepath.Join(t.TempDir(), "backport.mbx")
	os.WriteFile(amPath, am.Bytes(), 0o644)
	start = time.Now()
	want := gitAm(t, repo, "v6.1-debian", amPath, "/arch/powerpc/")
	t.Logf("git am (sparse worktree): %s", time.Since(start))
	wantTree := strings.TrimSpace(gitRun(t, "", "--git-dir="+repo, "rev-parse", want+"^{tree}"))
	if res.Commits[0].Tree != wantTree {
		t.Errorf("tree after Apply %s, after git am %s", res.Commits[0].Tree, wantTree)
	}
	if wantTree != "cdd8ba4da0582fe12355c063b546ce5c9a9ddf89" {
		t.Errorf("git am gave tree %s, the known result is cdd8ba4da058...", wantTree)
	}
	if res.Head != want {
		t.Errorf("commit after Apply %s, after git am %s:\n%s\n--- git am:\n%s", res.Head, want,
			gitRun(t, "", "--git-dir="+repo, "cat-file", "-p", res.Head), gitRun(t, "", "--git-dir="+repo, "cat-file", "-p", want))
	}
	// Re-running changes nothing.
	again := applyBackport(t, repo)
	if again.Head != res.Head || again.BranchUpdated {
		t.Errorf("re-run: %+v", again)
	}
}
