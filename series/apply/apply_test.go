package apply

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/mbox"
)

var (
	pinnedCommitter = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pinnedAuthor    = time.Date(2025, 12, 24, 10, 0, 0, 0, time.UTC)
)

func pinned(branch string) Options {
	return Options{Branch: branch, CommitterName: "Test Committer", CommitterEmail: "committer@example.org", CommitterDate: pinnedCommitter}
}

// diffOf commits the changes (path -> content, "" deletes, "120000:" and
// "100755:" prefixes as in writeFiles) on a throw-away branch of repo at
// from and returns `git diff` of it (binary, full index, renames and
// copies detected) as a Commit; the repository is left at its old state.
func diffOf(t *testing.T, repo, from, title string, changes map[string]string, extra ...string) Commit {
	t.Helper()
	wt := filepath.Join(t.TempDir(), "scratch")
	gitRun(t, repo, "worktree", "add", "-q", "--detach", wt, from)
	defer gitRun(t, repo, "worktree", "remove", "--force", wt)
	for p, c := range changes {
		if c == "" {
			gitRun(t, wt, "rm", "-q", p)
			continue
		}
		writeFiles(t, wt, map[string]string{p: c})
	}
	gitRun(t, wt, "add", "-A")
	args := append([]string{"diff", "--cached", "--binary", "--full-index", "-M"}, extra...)
	d := gitRun(t, wt, args...)
	return Commit{
		Label:      "1/1 " + title,
		Author:     mbox.Address{Name: "Ann Author", Email: "ann@example.org"},
		AuthorDate: pinnedAuthor,
		Message:    title + "\n\nBody of " + title + ".\n\nSigned-off-by: Ann Author <ann@example.org>\n",
		Diff:       d,
	}
}

// amRef applies commits with git am (pinned identities) on base in a
// temporary worktree of repo and returns the resulting commit.
func amRef(t *testing.T, repo, base string, commits []Commit) string {
	t.Helper()
	wt := filepath.Join(t.TempDir(), "am")
	gitRun(t, repo, "worktree", "add", "-q", "--detach", wt, base)
	defer gitRun(t, repo, "worktree", "remove", "--force", wt)
	mb := filepath.Join(t.TempDir(), "am.mbox")
	os.WriteFile(mb, amMbox(commits), 0o644)
	if _, err := gitCmd(wt, []string{"GIT_COMMITTER_DATE=2026-01-02T03:04:05Z"}, "am", "-q", "--patch-format=mboxrd", mb); err != nil {
		t.Fatalf("git am: %v", err)
	}
	return strings.TrimSpace(gitRun(t, wt, "rev-parse", "HEAD"))
}

func treeOf(t *testing.T, repo, rev string) string {
	return strings.TrimSpace(gitRun(t, repo, "rev-parse", rev+"^{tree}"))
}

// applyAndCompare applies commits with Apply and with git am and checks
// that trees and commit ids agree.
func applyAndCompare(t *testing.T, repo, base string, commits ...Commit) *Result {
	t.Helper()
	opt := pinned("test/" + strings.ReplaceAll(t.Name(), "/", "-"))
	opt.Base = base
	res, err := Apply(context.Background(), repo, commits, opt)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := amRef(t, repo, base, commits)
	if got, w := treeOf(t, repo, res.Head), treeOf(t, repo, want); got != w {
		t.Errorf("tree after Apply %s, after git am %s\n%s", got, w, gitRun(t, repo, "diff", want, res.Head))
	}
	if res.Head != want {
		t.Errorf("commit after Apply %s, after git am %s:\n%s\n--- git am:\n%s", res.Head, want,
			gitRun(t, repo, "cat-file", "-p", res.Head), gitRun(t, repo, "cat-file", "-p", want))
	}
	if got := strings.TrimSpace(gitRun(t, repo, "rev-parse", "refs/heads/"+res.Branch)); got != res.Head {
		t.Errorf("branch %s at %s, want %s", res.Branch, got, res.Head)
	}
	return res
}

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func TestApplyOffsetAndKinds(t *testing.T) {
	repo := newRepo(t, map[string]string{
		"f.c":           numbered(40),
		"old/name.c":    numbered(12),
		"copy/src.c":    "static int copied(void)\n{\n\treturn 42;\n}\n" + numbered(10),
		"gone.c":        "bye\n",
		"tools/run.sh":  "#!/bin/sh\necho run\n",
		"fw/blob.bin":   "\x00\x01\x02binary\x00" + strings.Repeat("\xff\xfe", 300),
		"include/lnk.h": "120000:../f.c",
		"no-eol.txt":    "no newline at the end",
	})
	// A patch made when f.c had 5 fewer lines at the top.
	gitRun(t, repo, "checkout", "-q", "-b", "short", "base")
	writeFiles(t, repo, map[string]string{"f.c": strings.Join(strings.SplitAfter(numbered(40), "\n")[5:], "")})
	gitRun(t, repo, "commit", "-q", "-am", "short")
	gitRun(t, repo, "checkout", "-q", "master")
	short := strings.Replace(strings.Join(strings.SplitAfter(numbered(40), "\n")[5:], ""), "line 20\n", "line twenty\n", 1)
	short = strings.Replace(short, "line 35\n", "line 35\nline 35a\n", 1)
	c := diffOf(t, repo, "short", "f: change at an offset", map[string]string{"f.c": short})
	res := applyAndCompare(t, repo, "base", c)
	if n := strings.Join(res.Commits[0].Notes, "; "); !strings.Contains(n, "hunk #1 succeeded at 17 (offset 5 lines)") || !strings.Contains(n, "hunk #2") {
		t.Errorf("offset notes = %q", n)
	}

	t.Run("rename", func(t *testing.T) {
		applyAndCompare(t, repo, "base", diffOf(t, repo, "base", "rename with change", map[string]string{
			"old/name.c": "", "new/name.c": strings.Replace(numbered(12), "line 6\n", "line six\n", 1)}))
	})
	t.Run("copy", func(t *testing.T) {
		c := diffOf(t, repo, "base", "copy", map[string]string{
			"copy/dst.c": "static int copied(void)\n{\n\treturn 43;\n}\n" + numbered(10)}, "-C", "--find-copies-harder")
		if !strings.Contains(c.Diff, "copy from copy/src.c") {
			t.Fatalf("git diff made no copy patch:\n%s", c.Diff)
		}
		applyAndCompare(t, repo, "base", c)
	})
	t.Run("delete", func(t *testing.T) {
		applyAndCompare(t, repo, "base", diffOf(t, repo, "base", "delete", map[string]string{"gone.c": ""}))
	})
	t.Run("mode", func(t *testing.T) {
		c := diffOf(t, repo, "base", "mode", map[string]string{"tools/run.sh": "100755:#!/bin/sh\necho run\n"})
		if !strings.Contains(c.Diff, "new mode 100755") {
			t.Fatalf("no mode change in:\n%s", c.Diff)
		}
		applyAndCompare(t, repo, "base", c)
	})
	t.Run("binary", func(t *testing.T) {
		c := diffOf(t, repo, "base", "binary", map[string]string{
			"fw/blob.bin": "\x00\x01\x02binary\x00" + strings.Repeat("\xff\xfe", 300) + "tail\x00",
			"fw/new.bin":  "\x00new binary\x00\x01",
		})
		if !strings.Contains(c.Diff, "GIT binary patch") {
			t.Fatalf("no binary patch in:\n%s", c.Diff)
		}
		applyAndCompare(t, repo, "base", c)
	})
	t.Run("symlink-and-no-eol", func(t *testing.T) {
		applyAndCompare(t, repo, "base", diffOf(t, repo, "base", "symlink", map[string]string{
			"include/lnk.h": "120000:../old/name.c",
			"no-eol.txt":    "still no newline, changed",
			"dir/new.c":     "new\n",
		}))
	})
	t.Run("series", func(t *testing.T) {
		c1 := diffOf(t, repo, "base", "one", map[string]string{"f.c": strings.Replace(numbered(40), "line 3\n", "line three\n", 1)})
		c1.Label = "1/2 one"
		gitRun(t, repo, "checkout", "-q", "-b", "series-mid", "base")
		writeFiles(t, repo, map[string]string{"f.c": strings.Replace(numbered(40), "line 3\n", "line three\n", 1)})
		gitRun(t, repo, "commit", "-q", "-am", "mid")
		gitRun(t, repo, "checkout", "-q", "master")
		c2 := diffOf(t, repo, "series-mid", "two", map[string]string{"f.c": strings.Replace(strings.Replace(numbered(40), "line 3\n", "line three\n", 1), "line 4\n", "line four\n", 1)})
		c2.Label = "2/2 two"
		res := applyAndCompare(t, repo, "base", c1, c2)
		if len(res.Commits) != 2 || res.Commits[0].Subject != "one" || res.Commits[1].Subject != "two" {
			t.Errorf("commits (want subjects one, two; labels are not subjects): %+v", res.Commits)
		}
	})
}

func TestApplyFailure(t *testing.T) {
	repo := newRepo(t, map[string]string{"drivers/x.c": numbered(30)})
	gitRun(t, repo, "checkout", "-q", "-b", "other", "base")
	writeFiles(t, repo, map[string]string{"drivers/x.c": strings.Replace(numbered(30), "line 9\n", "line NINE\n", 1)})
	gitRun(t, repo, "commit", "-q", "-am", "other")
	gitRun(t, repo, "checkout", "-q", "master")
	c := diffOf(t, repo, "other", "drivers: change ten", map[string]string{
		"drivers/x.c": strings.Replace(strings.Replace(numbered(30), "line 9\n", "line NINE\n", 1), "line 10\n", "line ten\n", 1)})
	c.Label = "2/3 drivers: change ten"
	opt := pinned("test/fail")
	opt.Base = "base"
	_, err := Apply(context.Background(), repo, []Commit{c}, opt)
	if err == nil {
		t.Fatal("a hunk whose context is not in the file applied")
	}
	msg := err.Error()
	for _, want := range []string{
		"patch 2/3 drivers: change ten: drivers/x.c: hunk #1 @@ -7,7 +7,7 @@ line 6 does not apply at line 7 or anywhere near",
		"the patch expects:\n    |line 7\n    |line 8\n    |line NINE\n    |line 10",
		"the file has at line 7:\n    |line 7\n    |line 8\n    |line 9\n    |line 10",
		"nothing written",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if fail.KindOf(err) != fail.KindFailed {
		t.Errorf("error kind %v, want failed", fail.KindOf(err))
	}
	// The same, as data to store and report.
	var f *Failure
	baseHash, _ := gitCmd(repo, nil, "rev-parse", "base")
	if !errors.As(err, &f) {
		t.Fatalf("error %T is no *Failure", err)
	}
	if f.Patch != 1 || f.Label != "2/3 drivers: change ten" || f.File != "drivers/x.c" || f.Hunk != 1 ||
		f.HunkHeader != "@@ -7,7 +7,7 @@ line 6" || f.Base != strings.TrimSpace(baseHash) || f.BaseReason != "--base base" ||
		f.BaseSubject == "" || f.Applied != 0 || !strings.HasPrefix(f.Reason, "hunk #1 @@ -7,7 +7,7 @@ line 6 does not apply") {
		t.Errorf("failure %+v", f)
	}
	if _, err := gitCmd(repo, nil, "rev-parse", "--verify", "-q", "refs/heads/test/fail"); err == nil {
		t.Error("the branch was written although the patch failed")
	}

	// A patch whose first context line differs applies with fuzz 1.
	c2 := diffOf(t, repo, "other", "drivers: change seven", map[string]string{
		"drivers/x.c": strings.Replace(strings.Replace(numbered(30), "line 9\n", "line NINE\n", 1), "line 12\n", "line twelve\n", 1)})
	if _, err := Apply(context.Background(), repo, []Commit{c2}, opt); err == nil {
		t.Fatal("applied without fuzz although the leading context differs")
	}
	opt.Fuzz = 1
	opt.Branch = "test/fuzz"
	res, err := Apply(context.Background(), repo, []Commit{c2}, opt)
	if err != nil {
		t.Fatalf("with fuzz 1: %v", err)
	}
	if n := strings.Join(res.Commits[0].Notes, "; "); !strings.Contains(n, "hunk #1 applied with fuzz 1") {
		t.Errorf("fuzz notes = %q", n)
	}
	got := gitRun(t, repo, "show", res.Head+":drivers/x.c")
	if want := strings.Replace(numbered(30), "line 12\n", "line twelve\n", 1); got != want {
		t.Errorf("fuzzed result:\n%s\nwant:\n%s", got, want)
	}

	// --3way: git am -3 merges with the blob named in the index line.
	opt.Fuzz = 0
	opt.ThreeWay = true
	opt.Branch = "test/3way"
	res, err = Apply(context.Background(), repo, []Commit{c2}, opt)
	if err != nil {
		t.Fatalf("--3way: %v", err)
	}
	if !res.ThreeWay || len(res.Commits) != 1 {
		t.Errorf("--3way result %+v", res)
	}
	got = gitRun(t, repo, "show", "refs/heads/test/3way:drivers/x.c")
	if want := strings.Replace(numbered(30), "line 12\n", "line twelve\n", 1); got != want {
		t.Errorf("3-way result:\n%s\nwant:\n%s", got, want)
	}
}

func TestApplyBaseChoice(t *testing.T) {
	repo := newRepo(t, map[string]string{"a.c": "a\n"})
	c := diffOf(t, repo, "base", "a: b", map[string]string{"a.c": "b\n"})
	opt := pinned("test/base")
	opt.Base = "v9.9-nonexistent"
	_, err := Apply(context.Background(), repo, []Commit{c}, opt)
	if err == nil || fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), `--base "v9.9-nonexistent": not found`) {
		t.Fatalf("--base not in the tree: %v", err)
	}
	opt.Base = ""
	opt.SeriesBase = "0123456789abcdef0123456789abcdef01234567"
	res, err := Apply(context.Background(), repo, []Commit{c}, opt)
	if err != nil {
		t.Fatal(err)
	}
	head := strings.TrimSpace(gitRun(t, repo, "rev-parse", "HEAD"))
	if res.Base != head || res.BaseReason != "the series' base-commit 0123456789ab is not in the tree: using HEAD (master)" {
		t.Errorf("base %s (%s), want HEAD %s with the reason", res.Base, res.BaseReason, head)
	}
	opt.SeriesBase = head
	res, err = Apply(context.Background(), repo, []Commit{c}, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.BaseReason, "base-commit "+head[:12]) || res.BranchUpdated {
		t.Errorf("series base: %+v", res)
	}
	// Idempotent: same inputs, same commit, branch untouched; a new
	// committer date keeps the existing commits too.
	opt.CommitterDate = pinnedCommitter.Add(time.Hour)
	res2, err := Apply(context.Background(), repo, []Commit{c}, opt)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Head != res.Head || res2.BranchUpdated {
		t.Errorf("re-run moved the branch: %+v vs %+v", res2, res)
	}
	// The checked-out branch is refused.
	opt.Branch = "master"
	if _, err := Apply(context.Background(), repo, []Commit{c}, opt); err == nil || !strings.Contains(err.Error(), "checked out") {
		t.Errorf("writing the checked-out branch: %v", err)
	}
	// HEAD, worktree and index untouched.
	if st := gitRun(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("worktree changed:\n%s", st)
	}
	if h := strings.TrimSpace(gitRun(t, repo, "rev-parse", "HEAD")); h != head {
		t.Errorf("HEAD moved to %s", h)
	}
}

func TestApplyRefusesEscapes(t *testing.T) {
	repo := newRepo(t, map[string]string{"a.c": "a\n", "lnk": "120000:/tmp", "dirlnk": "120000:drivers", "drivers/x.c": "x\n"})
	newFile := func(path string) string {
		return fmt.Sprintf("diff --git a/%[1]s b/%[1]s\nnew file mode 100644\nindex 0000000..587be6b\n--- /dev/null\n+++ b/%[1]s\n@@ -0,0 +1 @@\n+x\n", path)
	}
	cases := map[string]struct{ diff, want string }{
		"dotdot":       {newFile("../evil"), `has a ".." component`},
		"dotdot-inner": {newFile("drivers/../../evil"), `has a ".." component`},
		"git":          {newFile(".git/hooks/pre-commit"), "touches .git/"},
		"git-case":     {newFile("sub/.GIT/config"), "touches .git/"},
		"symlink":      {newFile("lnk/evil"), "through the symlink lnk"},
		"symlink-dir":  {newFile("dirlnk/x2.c"), "through the symlink dirlnk"},
		"absolute":     {"--- /dev/null\n+++ /etc/evil\n@@ -0,0 +1 @@\n+x\n", "is absolute"},
		// git's own header strips a/ and b/: "a//etc/evil" names etc/evil.
		"git-absolute": {"diff --git /etc/evil /etc/evil\nnew file mode 100644\n--- /dev/null\n+++ /etc/evil\n@@ -0,0 +1 @@\n+x\n", ""},
		"rename-out":   {"diff --git a/a.c b/../a.c\nsimilarity index 100%\nrename from a.c\nrename to ../a.c\n", `has a ".." component`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := Commit{Label: "1/1 evil", Author: mbox.Address{Name: "E", Email: "e@example.org"}, AuthorDate: pinnedAuthor, Message: "evil\n", Diff: tc.diff}
			res, err := Apply(context.Background(), repo, []Commit{c}, pinned("test/evil-"+name))
			if tc.want == "" {
				// The parser strips the leading component: whatever it
				// makes of the name must stay inside the tree.
				if err != nil {
					if fail.KindOf(err) != fail.KindInput {
						t.Fatalf("err %v", err)
					}
					return
				}
				for _, l := range strings.Split(gitRun(t, repo, "ls-tree", "-r", "--name-only", res.Head), "\n") {
					if strings.HasPrefix(l, "/") || strings.Contains(l, "..") {
						t.Errorf("escaping path %q in the tree", l)
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("applied: %+v", res)
			}
			if fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v (%v), want bad input with %q", err, fail.KindOf(err), tc.want)
			}
		})
	}
}
