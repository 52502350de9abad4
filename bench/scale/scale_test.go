package scale

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/gittree/gittest"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/series"
	"github.com/patcheval/patcheval/series/apply"
)

// bigTree is the test's repository: made once per size, cached.
func bigTree(t *testing.T) string {
	t.Helper()
	if os.Getenv("PATCHEVAL_SCALE_TESTS") != "1" {
		t.Skip("PATCHEVAL_SCALE_TESTS=1 runs the scale test (makes a ~10^5-commit tree once: tens of minutes)")
	}
	testenv.SkipIfSlow(t, "a generated linux.git-shaped tree")
	if p := os.Getenv("PATCHEVAL_SCALE_TREE"); p != "" {
		// An existing tree of the same shape (a real linux.git clone).
		t.Logf("tree %s (PATCHEVAL_SCALE_TREE)", p)
		return p
	}
	n := 100000
	if s := os.Getenv("PATCHEVAL_SCALE_COMMITS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("PATCHEVAL_SCALE_COMMITS=%q: want a positive number", s)
		}
		n = v
	}
	p, err := BigTree(testenv.ModuleRoot(), n)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(p, "bigtree.json"))
	t.Logf("tree %s:\n%s", p, b)
	return p
}

func git(t *testing.T, gitDir string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(gittest.Run(t, "", append([]string{"--git-dir=" + gitDir}, args...)...))
}

// versionTags lists the repository's version tags in git's version order
// (release candidates before their release).
func versionTags(t *testing.T, gitDir string) []string {
	out := git(t, gitDir, "-c", "versionsort.suffix=-rc", "tag", "-l", "--sort=version:refname")
	var tags []string
	for _, tag := range strings.Fields(out) {
		if _, ok := watch.ParseVersion(tag); ok {
			tags = append(tags, tag)
		}
	}
	return tags
}

func timed(t *testing.T, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	t.Logf("%-44s %8.3f s", what, time.Since(start).Seconds())
}

func TestScale(t *testing.T) {
	big := bigTree(t)
	// A private clone: its packs are hard links to the cached tree's.
	local := gittest.CloneBare(t, big)
	tags := versionTags(t, local)
	if len(tags) < 100 {
		t.Fatalf("only %d version tags in %s", len(tags), big)
	}
	var releases []string // vX.Y
	for _, tag := range tags {
		if v, _ := watch.ParseVersion(tag); v.RC == 0 && len(v.Nums) == 2 {
			releases = append(releases, tag)
		}
	}
	deep := releases[len(releases)-1] // the most history below it
	ctx := context.Background()

	t.Run("resolve", func(t *testing.T) {
		for _, tag := range []string{tags[0], tags[len(tags)/2], tags[len(tags)-1], deep, "master"} {
			want := git(t, local, "rev-parse", tag+"^{commit}")
			var c string
			timed(t, "resolve "+tag, func() {
				got, err := gittree.Resolve(local, tag)
				if err != nil {
					t.Fatal(err)
				}
				c = got.Hash.String()
			})
			if c != want {
				t.Errorf("Resolve(%s) = %s, git rev-parse: %s", tag, c, want)
			}
		}
		// An abbreviated hash: a search of the pack index, not a walk.
		mid := git(t, local, "rev-parse", tags[len(tags)/2]+"~3")
		got, err := gittree.Resolve(local, mid[:12])
		if err != nil || got.Hash.String() != mid {
			t.Errorf("Resolve(%s) = %v, %v; want %s", mid[:12], got, err, mid)
		}
	})

	t.Run("apply", func(t *testing.T) {
		s := backportSeries(t)
		head := git(t, local, "rev-parse", "HEAD")
		var res *apply.Result
		timed(t, "apply the seed backport on "+deep, func() {
			var err error
			res, err = apply.Apply(ctx, local, apply.FromSeries(s, series.DefaultAMOptions()), apply.Options{
				Base: deep, Branch: "scale/backport", CommitterName: "Test Committer",
				CommitterEmail: "committer@example.org", CommitterDate: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
			})
			if err != nil {
				t.Fatal(err)
			}
		})
		// git: the same diff applied to the tag's tree in a scratch index.
		var am bytes.Buffer
		if err := s.WriteAM(&am, series.DefaultAMOptions()); err != nil {
			t.Fatal(err)
		}
		patch := filepath.Join(t.TempDir(), "backport.mbx")
		os.WriteFile(patch, am.Bytes(), 0o644)
		idx := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
		var wantTree string
		timed(t, "git read-tree + apply --cached + write-tree", func() {
			testgit.Git(t, idx, nil, "--git-dir="+local, "read-tree", deep)
			testgit.Git(t, idx, nil, "--git-dir="+local, "apply", "--cached", patch)
			wantTree = testgit.Git(t, idx, nil, "--git-dir="+local, "write-tree")
		})
		if len(res.Commits) != 1 || res.Commits[0].Tree != wantTree {
			t.Errorf("Apply on %s: commits %+v; git apply --cached gives tree %s", deep, res.Commits, wantTree)
		}
		if res.Base != git(t, local, "rev-parse", deep+"^{commit}") {
			t.Errorf("Apply's base %s is not %s", res.Base, deep)
		}
		if got := git(t, local, "rev-parse", "HEAD"); got != head {
			t.Errorf("HEAD moved from %s to %s", head, got)
		}
		if got := git(t, local, "rev-parse", "refs/heads/scale/backport^"); got != res.Base {
			t.Errorf("the branch's parent is %s, not the base %s", got, res.Base)
		}
	})

	t.Run("checkout", func(t *testing.T) {
		// Adjacent mainline tags: a release and the next -rc1.
		a, b := releases[len(releases)-2], ""
		for _, tag := range tags[indexOf(tags, a)+1:] {
			if v, _ := watch.ParseVersion(tag); v.RC > 0 {
				b = tag
				break
			}
		}
		dir := filepath.Join(t.TempDir(), "src")
		var st *gittree.CheckoutStats
		timed(t, "checkout fresh "+a, func() {
			var err error
			if st, err = gittree.Checkout(ctx, local, a, dir); err != nil {
				t.Fatal(err)
			}
		})
		if d := gittest.DiffLists(gittest.LsTree(t, local, a), gittest.DirListing(t, dir)); d != "" {
			t.Fatalf("fresh checkout of %s differs from git ls-tree:\n%s", a, d)
		}
		checkTreeID(t, local, a, dir)
		timed(t, "checkout incremental "+a+" -> "+b, func() {
			var err error
			if st, err = gittree.Checkout(ctx, local, b, dir); err != nil {
				t.Fatal(err)
			}
		})
		changed := strings.Fields(git(t, local, "diff", "--name-only", a, b))
		paths := append([]string(nil), st.Paths...)
		sort.Strings(paths)
		sort.Strings(changed)
		if strings.Join(paths, "\n") != strings.Join(changed, "\n") {
			t.Errorf("incremental checkout %s -> %s touched %d paths, git diff --name-only lists %d", a, b, len(paths), len(changed))
		}
		t.Logf("%s -> %s: %d files changed, %d written", a, b, len(changed), st.Written)
		if d := gittest.DiffLists(gittest.LsTree(t, local, b), gittest.DirListing(t, dir)); d != "" {
			t.Fatalf("incremental checkout to %s differs from git ls-tree:\n%s", b, d)
		}
		checkTreeID(t, local, b, dir)
	})

	t.Run("range", func(t *testing.T) {
		for _, r := range [][2]string{{tags[len(tags)-2], tags[len(tags)-1]}, {tags[0], deep}} {
			want := strings.Fields(git(t, local, "rev-list", "--first-parent", "--reverse", r[0]+".."+r[1]))
			var got []bisect.Commit
			timed(t, "first-parent range "+r[0]+".."+r[1], func() {
				var err error
				_, _, got, err = bisect.FirstParentRange(local, r[0], r[1], 10000000)
				if err != nil {
					t.Fatal(err)
				}
			})
			if len(got) != len(want) {
				t.Fatalf("range %s..%s: %d commits, git rev-list --first-parent: %d", r[0], r[1], len(got), len(want))
			}
			for i := range got {
				if got[i].Hash != want[i] {
					t.Fatalf("range %s..%s: commit %d is %s, git says %s", r[0], r[1], i, got[i].Hash, want[i])
				}
			}
			t.Logf("range %s..%s: %d first-parent commits", r[0], r[1], len(got))
		}
	})

	t.Run("remote", func(t *testing.T) {
		// The remote: the same history plus one new release candidate.
		root := t.TempDir()
		remote := filepath.Join(root, "linux.git")
		testgit.Git(t, nil, nil, "clone", "-q", "--bare", local, remote)
		last := git(t, remote, "rev-parse", "master")
		next := testgit.Commit(t, remote, last, "Linux 99.0-rc1", "2026-11-02T10:00:00Z", map[string]string{"Makefile": "VERSION = 99\n"})
		testgit.Git(t, nil, nil, "--git-dir="+remote, "update-ref", "refs/heads/master", next)
		testgit.Tag(t, remote, "v99.0-rc1", next)
		srv := testgit.Serve(t, root)
		url := srv.URL() + "/linux.git"

		var listed []watch.RemoteTag
		timed(t, "ls-remote (ListTags)", func() {
			var err error
			if listed, err = watch.ListTags(ctx, url, "v*"); err != nil {
				t.Fatal(err)
			}
		})
		var names []string
		for _, tag := range listed {
			if _, ok := watch.ParseVersion(tag.Name); ok {
				names = append(names, tag.Name)
			}
		}
		want := versionTags(t, remote)
		if strings.Join(names, " ") != strings.Join(want, " ") {
			t.Errorf("ListTags order differs from git tag --sort=version:refname (%d vs %d tags)", len(names), len(want))
		}
		peeled := map[string]string{}
		for _, l := range strings.Split(testgit.Git(t, nil, nil, "ls-remote", "--tags", url), "\n") {
			h, ref, _ := strings.Cut(l, "\t")
			peeled[strings.TrimSuffix(strings.TrimPrefix(ref, "refs/tags/"), "^{}")] = h // the peeled line comes last
		}
		for _, tag := range listed {
			if peeled[tag.Name] != tag.Commit {
				t.Errorf("ListTags: %s is %s, git ls-remote: %s", tag.Name, tag.Commit, peeled[tag.Name])
				break
			}
		}

		var got string
		timed(t, "fetch v99.0-rc1 (FetchTag)", func() {
			var err error
			if got, err = watch.FetchTag(ctx, local, url, "v99.0-rc1"); err != nil {
				t.Fatal(err)
			}
		})
		if got != next {
			t.Errorf("FetchTag = %s, want %s", got, next)
		}
		if h := git(t, local, "rev-parse", "v99.0-rc1^{commit}"); h != next {
			t.Errorf("local v99.0-rc1 is %s, want %s", h, next)
		}
		// Every object of the new commit is there: git reads its whole tree.
		if n := len(strings.Split(git(t, local, "ls-tree", "-r", "--name-only", "v99.0-rc1"), "\n")); n < 70000 {
			t.Errorf("ls-tree of the fetched tag lists %d files", n)
		}
		if out := git(t, local, "rev-list", "--objects", "--missing=print", "-n", "1", "v99.0-rc1"); strings.Contains(out, "?") {
			t.Errorf("missing objects after the fetch:\n%s", out)
		}

		// The GitHub reporter's push: the applied backport to a new branch.
		testgit.Git(t, nil, nil, "--git-dir="+remote, "config", "http.receivepack", "true")
		// The clone copied the branch: the remote must not know it.
		testgit.Git(t, nil, nil, "--git-dir="+remote, "update-ref", "-d", "refs/heads/scale/backport")
		r, st, _, err := gittree.Open(local, 64)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		pushed := git(t, local, "rev-parse", "refs/heads/scale/backport")
		var ps gittree.PushStats
		timed(t, "push the backport (gittree.Push)", func() {
			if ps, err = gittree.Push(ctx, r, url, nil, plumbing.NewHash(pushed), "refs/heads/patcheval/backport"); err != nil {
				t.Fatal(err)
			}
		})
		if h := git(t, remote, "rev-parse", "refs/heads/patcheval/backport"); h != pushed {
			t.Errorf("remote patcheval/backport is %s, want %s", h, pushed)
		}
		if out := git(t, remote, "rev-list", "--objects", "--missing=print", "-n", "1", pushed); strings.Contains(out, "?") {
			t.Errorf("missing objects on the remote after the push:\n%s", out)
		}
		wantObjs := strings.Count(git(t, local, "rev-list", "--objects", pushed, "^"+deep)+"\n", "\n")
		t.Logf("push: %+v; git rev-list --objects %s ^%s lists %d", ps, pushed[:12], deep, wantObjs)
		if ps.Commits != 1 || ps.Objects != wantObjs || ps.Walked > 100 {
			t.Errorf("push sent %d commits, %d objects after walking %d commits; want 1 commit and git's %d objects", ps.Commits, ps.Objects, ps.Walked, wantObjs)
		}
	})
}

// checkTreeID hashes the checkout dir into a scratch index with git
// (add -A -f: the kernel tracks files its .gitignore matches; the
// checkout's state files left out) and compares the tree id
// with rev's.
func checkTreeID(t *testing.T, gitDir, rev, dir string) {
	t.Helper()
	idx := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
	testgit.Git(t, idx, nil, "--git-dir="+gitDir, "--work-tree="+dir, "add", "-A", "-f", "--", ".",
		":(exclude)"+gittree.StateFile, ":(exclude)"+gittree.LockName)
	got := testgit.Git(t, idx, nil, "--git-dir="+gitDir, "write-tree")
	if want := git(t, gitDir, "rev-parse", rev+"^{tree}"); got != want {
		t.Errorf("checkout of %s hashes to tree %s, git's %s^{tree} is %s", rev, got, rev, want)
	}
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

func backportSeries(t *testing.T) *series.Series {
	t.Helper()
	p := testenv.BackportMbox()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	msgs, err := mbox.Parse(f, p)
	if err != nil {
		t.Fatal(err)
	}
	s, err := series.Resolve(mbox.NewThread(msgs, p), series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
