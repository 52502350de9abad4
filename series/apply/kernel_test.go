package apply

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const backportMbox = "testdata/ppc-dynamic-preempt-v6.1-backport.mbox"

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

// patchMails writes the messages of an mboxrd file that carry a diff (the
// cover letter left out) to a new file.
func patchMails(t testing.TB, mboxPath string) string {
	t.Helper()
	b, err := os.ReadFile(mboxPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range strings.SplitAfter(string(b), "\nFrom mboxrd@z") {
		if strings.Contains(m, "\ndiff --git ") {
			if !strings.HasPrefix(m, "From mboxrd@z") {
				m = "From mboxrd@z" + m
			}
			out = append(out, strings.TrimSuffix(m, "From mboxrd@z"))
		}
	}
	p := filepath.Join(t.TempDir(), "patches.mbox")
	if err := os.WriteFile(p, []byte(strings.Join(out, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckoutKernel(t *testing.T) {
	repo := cloneBare(t, linuxTree(t))
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "linux")
	start := time.Now()
	st, err := Checkout(ctx, repo, "v6.1-debian", dir)
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

	// The backport commit, made by git am (the reference).
	commit := gitAm(t, repo, "v6.1-debian", patchMails(t, backportMbox), "/arch/powerpc/")
	unchanged := filepath.Join(dir, "arch/powerpc/kernel/irq.c")
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	os.Chtimes(unchanged, old, old)
	st, err = Checkout(ctx, repo, commit, dir)
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
