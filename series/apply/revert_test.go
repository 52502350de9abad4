package apply

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testgit"
)

// lines20 is a file of n lines "line i", with the lines in set replaced.
func lines20(n int, set map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if s, ok := set[i]; ok {
			b.WriteString(s + "\n")
			continue
		}
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// revertRepo is a bare repository with a linear history:
// root (a.txt, b.txt) -> c1 (a.txt line 5, new.txt) -> c2 (a.txt line 15)
// -> c3 (b.txt) and a side commit x on c2 that changes a.txt line 5 again.
type revertRepo struct {
	dir                   string
	root, c1, c2, c3, xc5 string
}

func newRevertRepo(t *testing.T) revertRepo {
	t.Helper()
	r := revertRepo{dir: testgit.InitBare(t, filepath.Join(t.TempDir(), "r.git"))}
	r.root = testgit.Commit(t, r.dir, "", "root", "2026-01-01T00:00:00Z", map[string]string{"a.txt": lines20(20, nil), "b.txt": "b\n"})
	r.c1 = testgit.Commit(t, r.dir, r.root, "c1: five", "2026-01-02T00:00:00Z", map[string]string{"a.txt": lines20(20, map[int]string{5: "FIVE"}), "new.txt": "new\n"})
	r.c2 = testgit.Commit(t, r.dir, r.c1, "c2: fifteen", "2026-01-03T00:00:00Z", map[string]string{"a.txt": lines20(20, map[int]string{5: "FIVE", 15: "FIFTEEN"})})
	r.c3 = testgit.Commit(t, r.dir, r.c2, "c3: b", "2026-01-04T00:00:00Z", map[string]string{"b.txt": "bb\n"})
	r.xc5 = testgit.Commit(t, r.dir, r.c2, "x: five again", "2026-01-05T00:00:00Z", map[string]string{"a.txt": lines20(20, map[int]string{5: "5!", 15: "FIFTEEN"})})
	testgit.Tag(t, r.dir, "v2", r.c2)
	return r
}

// gitRevertTree is the tree git revert makes of commits (newest first) on onto.
func gitRevertTree(t *testing.T, repo, onto string, commits ...string) string {
	t.Helper()
	wt := filepath.Join(t.TempDir(), "wt")
	testgit.Git(t, nil, nil, "--git-dir="+repo, "worktree", "add", "-q", "--detach", wt, onto)
	defer testgit.Git(t, nil, nil, "--git-dir="+repo, "worktree", "remove", "--force", wt)
	for _, c := range commits {
		testgit.Git(t, testgit.Identity("2026-02-01T00:00:00Z"), nil, "-C", wt, "revert", "--no-edit", c)
	}
	return testgit.Git(t, nil, nil, "-C", wt, "rev-parse", "HEAD^{tree}")
}

func objectCount(t *testing.T, repo string) string {
	return testgit.Git(t, nil, nil, "--git-dir="+repo, "count-objects")
}

func TestRevertCommitLikeGitRevert(t *testing.T) {
	r := newRevertRepo(t)
	// c1 on c3: a.txt changed since (textual undo), new.txt unchanged
	// since (exact undo: deleted again).
	undo, err := ResolveRevert(r.dir, []string{r.c1[:10]})
	if err != nil {
		t.Fatal(err)
	}
	if len(undo) != 1 || undo[0].Commit != r.c1 || undo[0].Subject != "c1: five" {
		t.Fatalf("resolved %+v", undo)
	}
	res, err := Revert(context.Background(), r.dir, r.c3, undo, RevertOptions{Branch: "exp/reverted"})
	if err != nil {
		t.Fatal(err)
	}
	if want := gitRevertTree(t, r.dir, r.c3, r.c1); res.Commits[0].Tree != want {
		t.Fatalf("tree %s, git revert gives %s", res.Commits[0].Tree, want)
	}
	if got := testgit.Git(t, nil, nil, "--git-dir="+r.dir, "rev-parse", "exp/reverted"); got != res.Head {
		t.Fatalf("branch at %s, head %s", got, res.Head)
	}
	msg := testgit.Git(t, nil, nil, "--git-dir="+r.dir, "log", "-1", "--format=%B", res.Head)
	if !strings.Contains(msg, `Revert "c1: five"`) || !strings.Contains(msg, "This reverts commit "+r.c1) {
		t.Fatalf("message %q", msg)
	}
	// Deterministic: the same revert gives the same commit.
	again, err := Revert(context.Background(), r.dir, r.c3, undo, RevertOptions{})
	if err != nil || again.Head != res.Head {
		t.Fatalf("again: %v %v, want %s", again, err, res.Head)
	}
	testgit.Git(t, nil, nil, "--git-dir="+r.dir, "fsck", "--no-dangling")
}

func TestRevertRange(t *testing.T) {
	r := newRevertRepo(t)
	undo, err := ResolveRevert(r.dir, []string{r.root + ".." + "v2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(undo) != 2 || undo[0].Commit != r.c2 || undo[1].Commit != r.c1 {
		t.Fatalf("range resolved to %+v, want c2 then c1", undo)
	}
	res, err := Revert(context.Background(), r.dir, r.c3, undo, RevertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := gitRevertTree(t, r.dir, r.c3, r.c2, r.c1); res.Commits[1].Tree != want {
		t.Fatalf("tree %s, git revert gives %s", res.Commits[1].Tree, want)
	}
	if len(res.Commits) != 2 || res.Commits[0].Original != r.c2 {
		t.Fatalf("commits %+v", res.Commits)
	}
}

func TestRevertConflictWritesNothing(t *testing.T) {
	r := newRevertRepo(t)
	undo, err := ResolveRevert(r.dir, []string{r.c1})
	if err != nil {
		t.Fatal(err)
	}
	before := objectCount(t, r.dir)
	_, err = Revert(context.Background(), r.dir, r.xc5, undo, RevertOptions{Branch: "exp/conflict", OntoName: "x"})
	var rc *RevertConflict
	if !errors.As(err, &rc) {
		t.Fatalf("want a RevertConflict, got %v", err)
	}
	if fail.KindOf(err) != fail.KindInput {
		t.Fatalf("kind %v, want bad input", fail.KindOf(err))
	}
	line := err.Error()
	if strings.Contains(line, "\n") || !strings.Contains(line, "revert of "+r.c1[:12]+" c1: five conflicts on x: a.txt hunk #1 @@") ||
		!strings.HasSuffix(line, "nothing written") {
		t.Fatalf("error line %q", line)
	}
	if len(rc.Conflicts) != 1 || rc.Conflicts[0].File != "a.txt" || rc.Conflicts[0].Hunk != 1 || !strings.Contains(rc.Conflicts[0].Reason, "5!") {
		t.Fatalf("conflicts %+v", rc.Conflicts)
	}
	if after := objectCount(t, r.dir); after != before {
		t.Fatalf("objects written on a conflict: %s -> %s", before, after)
	}
	if _, err := testgit.Run(nil, nil, "--git-dir="+r.dir, "rev-parse", "--verify", "-q", "exp/conflict"); err == nil {
		t.Fatal("the branch was written on a conflict")
	}
}

func TestRevertPatchDiff(t *testing.T) {
	r := newRevertRepo(t)
	// The series patch that became c2, as mailed: a diff, no commit.
	diff := testgit.Git(t, nil, nil, "--git-dir="+r.dir, "diff", r.c1, r.c2)
	u := Undo{Label: "1/1 c2: fifteen", Subject: "c2: fifteen", Diff: diff + "\n", MessageID: "c2@example.org"}
	res, err := Revert(context.Background(), r.dir, r.c3, []Undo{u}, RevertOptions{OntoName: "v3"})
	if err != nil {
		t.Fatal(err)
	}
	if want := gitRevertTree(t, r.dir, r.c3, r.c2); res.Commits[0].Tree != want {
		t.Fatalf("tree %s, git revert gives %s", res.Commits[0].Tree, want)
	}
	msg := testgit.Git(t, nil, nil, "--git-dir="+r.dir, "log", "-1", "--format=%B", res.Head)
	if !strings.Contains(msg, "This reverts patch 1/1 <c2@example.org>, which v3 already has.") {
		t.Fatalf("message %q", msg)
	}
}

func TestResolveRevertBadSpecs(t *testing.T) {
	r := newRevertRepo(t)
	merge := testgit.Git(t, testgit.Identity("2026-01-06T00:00:00Z"), []byte("merge\n"), "--git-dir="+r.dir, "commit-tree",
		r.c3+"^{tree}", "-p", r.c3, "-p", r.xc5)
	for spec, want := range map[string]string{
		"v9.9":                    `revert "v9.9": "v9.9" is not in the tree`,
		r.root:                    "is a root commit",
		merge:                     "is a merge commit; name the commits it merged (A..B)",
		r.c2 + ".." + r.c2:        "the range is empty",
		r.xc5 + ".." + r.c3:       "is not an ancestor of",
		"..v2":                    "want A..B with both ends",
		r.root + "..nosuchbranch": `"nosuchbranch" is not in the tree`,
	} {
		_, err := ResolveRevert(r.dir, []string{spec})
		if err == nil || !strings.Contains(err.Error(), want) || fail.KindOf(err) != fail.KindInput {
			t.Errorf("%s: %v, want bad input with %q", spec, err, want)
		}
	}
}
