package series

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Patcheval Test", "GIT_AUTHOR_EMAIL=test@patcheval.invalid",
		"GIT_COMMITTER_NAME=Patcheval Test", "GIT_COMMITTER_EMAIL=test@patcheval.invalid")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// TestGitAMOntoLinux61 applies patcheval's am mbox of the v6.1 backport
// with the real `git am` onto Debian's linux-source 6.1 imported into git,
// and checks the commit git makes: the author from the in-body From:, the
// commit message equal to Patch.CommitMessage (which series/apply uses).
func TestGitAMOntoLinux61(t *testing.T) {
	bare := testenv.LinuxTree(t)
	s := resolve(t, Options{}, "ppc-dynamic-preempt-v6.1-backport.mbox")
	dir := t.TempDir()
	am := filepath.Join(dir, s.Slug()+".mbx")
	var b bytes.Buffer
	if err := s.WriteAM(&b, DefaultAMOptions()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(am, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(dir, "linux")
	// A shared clone of the real tree, checked out sparsely (the top
	// level plus the directories the series touches): git am works the
	// same and the test does not write 75,000 files.
	git(t, dir, "clone", "-q", "--shared", "--no-checkout", bare, wt)
	git(t, wt, append([]string{"sparse-checkout", "set"}, touchedDirs(s)...)...)
	git(t, wt, "checkout", "-q", "master")
	base := strings.TrimSpace(git(t, wt, "rev-parse", "HEAD"))
	git(t, wt, "am", "--patch-format=mboxrd", am)
	if n := strings.TrimSpace(git(t, wt, "rev-list", "--count", base+"..HEAD")); n != "1" {
		t.Fatalf("git am made %s commits, want 1", n)
	}
	if got := git(t, wt, "log", "-1", "--format=%an <%ae>"); strings.TrimSpace(got) != "Shrikanth Hegde <sshegde@linux.ibm.com>" {
		t.Errorf("author %q", got)
	}
	msg := git(t, wt, "log", "-1", "--format=%B")
	if want := s.Patches[0].CommitMessage(DefaultAMOptions()); strings.TrimRight(msg, "\n") != strings.TrimRight(want, "\n") {
		t.Errorf("git am commit message:\n%s\nPatch.CommitMessage:\n%s", msg, want)
	}
	if !strings.Contains(msg, "Link: https://patch.msgid.link/20261102093000.4121-1-tester@example.org") {
		t.Errorf("no Link: trailer:\n%s", msg)
	}
	if out := git(t, wt, "show", "HEAD:arch/powerpc/Kconfig"); !strings.Contains(out, "select HAVE_PREEMPT_DYNAMIC_KEY") {
		t.Error("arch/powerpc/Kconfig does not select HAVE_PREEMPT_DYNAMIC_KEY after git am")
	}
}

// touchedDirs lists the directories of the files the series' diffs touch.
func touchedDirs(s *Series) []string {
	seen := map[string]bool{}
	var dirs []string
	for _, p := range s.Patches {
		for _, l := range strings.Split(p.Diff, "\n") {
			if !strings.HasPrefix(l, "diff --git a/") {
				continue
			}
			f := strings.Fields(l)
			d := filepath.Dir(strings.TrimPrefix(f[len(f)-1], "b/"))
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}
