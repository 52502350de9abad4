package gittree_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/testgit"
)

// pushHistory writes with git fast-import a history of 200 commits on
// master (each appends a line to one of 35 files in nested directories),
// an annotated tag v1 at commit 150, and a topic of 5 commits from commit
// 160 merged as master's last commit.
func pushHistory(t *testing.T, gitDir string) {
	var b strings.Builder
	date := 1700000000
	content := map[string]string{}
	commit := func(ref string, mark int, from string, merge string, file string) {
		date += 60
		content[file] += fmt.Sprintf("line %d\n", mark)
		fmt.Fprintf(&b, "commit %s\nmark :%d\ncommitter T <t@example.org> %d +0000\ndata <<EOF\nc%d\nEOF\n", ref, mark, date, mark)
		if from != "" {
			fmt.Fprintf(&b, "from %s\n", from)
		}
		if merge != "" {
			fmt.Fprintf(&b, "merge %s\n", merge)
		}
		fmt.Fprintf(&b, "M 100644 inline %s\ndata %d\n%s\n", file, len(content[file]), content[file])
	}
	file := func(i int) string { return fmt.Sprintf("d%d/s%d/f%d.c", i%5, i%3, i%7) }
	for i := 1; i <= 200; i++ {
		commit("refs/heads/master", i, "", "", file(i))
		if i == 150 {
			fmt.Fprintf(&b, "tag v1\nfrom :150\ntagger T <t@example.org> %d +0000\ndata 3\nv1\n", date)
		}
		if i == 160 {
			for j := 1; j <= 5; j++ {
				from := ""
				if j == 1 {
					from = ":160"
				}
				commit("refs/heads/topic", 1000+j, from, "", fmt.Sprintf("topic/t%d.c", j))
			}
		}
	}
	commit("refs/heads/master", 201, "", ":1005", "d0/merged.c")
	b.WriteString("done\n")
	testgit.Git(t, nil, []byte(b.String()), "--git-dir="+gitDir, "fast-import", "--done", "--quiet")
}

func TestPushSendsOnlyWhatTheRemoteLacks(t *testing.T) {
	root := t.TempDir()
	local := testgit.InitBare(t, filepath.Join(root, "local.git"))
	pushHistory(t, local)
	head := testgit.Git(t, nil, nil, "--git-dir="+local, "rev-parse", "master")
	srv := filepath.Join(root, "srv")
	remote := testgit.InitBare(t, filepath.Join(srv, "mirror.git"))
	testgit.Git(t, nil, nil, "--git-dir="+remote, "config", "http.receivepack", "true")
	empty := testgit.InitBare(t, filepath.Join(srv, "empty.git"))
	testgit.Git(t, nil, nil, "--git-dir="+empty, "config", "http.receivepack", "true")
	// The mirror has v1 (an annotated tag: its commit comes peeled in the
	// advertisement) and a branch at v1.
	testgit.Git(t, nil, nil, "--git-dir="+local, "push", "-q", remote, "refs/tags/v1:refs/tags/v1")
	url := testgit.Serve(t, srv).URL()

	r, st, _, err := gittree.Open(local, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	ref := plumbing.ReferenceName("refs/heads/patcheval/x")
	ps, err := gittree.Push(ctx, r, url+"/mirror.git", nil, plumbing.NewHash(head), ref)
	if err != nil {
		t.Fatal(err)
	}
	if got := testgit.Git(t, nil, nil, "--git-dir="+remote, "rev-parse", ref.String()); got != head {
		t.Fatalf("mirror's %s = %s, want %s", ref, got, head)
	}
	testgit.Git(t, nil, nil, "--git-dir="+remote, "fsck", "--no-progress")
	// What git itself would send: the objects of master not reachable from v1.
	want := strings.Count(testgit.Git(t, nil, nil, "--git-dir="+local, "rev-list", "--objects", "master", "^v1")+"\n", "\n")
	if ps.Objects != want || ps.Commits != 56 {
		t.Errorf("push sent %d objects in %d commits, git rev-list --objects master ^v1 lists %d (56 commits)", ps.Objects, ps.Commits, want)
	}
	t.Logf("push: %+v (git lists %d objects)", ps, want)
	// The walk stops where the remote's refs are: v1 is commit 150 of 205.
	if ps.Walked > 70 {
		t.Errorf("push walked %d commits for 56 new ones: it went past the remote's refs", ps.Walked)
	}

	again, err := gittree.Push(ctx, r, url+"/mirror.git", nil, plumbing.NewHash(head), ref)
	if err != nil || !again.UpToDate || again.Objects != 0 {
		t.Errorf("second push: %+v, %v; want up to date", again, err)
	}
	// The remote has the commit (under patcheval/x): a new branch on it
	// needs no object.
	other, err := gittree.Push(ctx, r, url+"/mirror.git", nil, plumbing.NewHash(head), "refs/heads/patcheval/y")
	if err != nil || other.Objects != 0 {
		t.Errorf("push of a commit the remote has: %+v, %v; want no object sent", other, err)
	}
	if got := testgit.Git(t, nil, nil, "--git-dir="+remote, "rev-parse", "refs/heads/patcheval/y"); got != head {
		t.Errorf("mirror's patcheval/y = %s, want %s", got, head)
	}

	// A remote whose ref is master's first parent: its side of the walk
	// passes the topic's commits (older than most of master's), and only
	// the merge and the topic are sent.
	ahead := testgit.InitBare(t, filepath.Join(srv, "ahead.git"))
	testgit.Git(t, nil, nil, "--git-dir="+ahead, "config", "http.receivepack", "true")
	testgit.Git(t, nil, nil, "--git-dir="+local, "push", "-q", ahead, "master^1:refs/heads/master")
	mp, err := gittree.Push(ctx, r, url+"/ahead.git", nil, plumbing.NewHash(head), ref)
	if err != nil {
		t.Fatal(err)
	}
	testgit.Git(t, nil, nil, "--git-dir="+ahead, "fsck", "--no-progress")
	want = strings.Count(testgit.Git(t, nil, nil, "--git-dir="+local, "rev-list", "--objects", "master", "^master^1")+"\n", "\n")
	if mp.Commits != 6 || mp.Objects != want {
		t.Errorf("push over master^1 sent %d commits, %d objects; want the merge and 5 topic commits, %d objects", mp.Commits, mp.Objects, want)
	}

	// An empty remote gets everything.
	all, err := gittree.Push(ctx, r, url+"/empty.git", nil, plumbing.NewHash(head), ref)
	if err != nil {
		t.Fatal(err)
	}
	testgit.Git(t, nil, nil, "--git-dir="+empty, "fsck", "--no-progress")
	want = strings.Count(testgit.Git(t, nil, nil, "--git-dir="+local, "rev-list", "--objects", "master")+"\n", "\n")
	if all.Objects != want || testgit.Git(t, nil, nil, "--git-dir="+empty, "rev-parse", ref.String()) != head {
		t.Errorf("push to an empty remote sent %d objects, git lists %d", all.Objects, want)
	}
	// Nothing was written to the local repository.
	if refs := testgit.Git(t, nil, nil, "--git-dir="+local, "for-each-ref", "--format=%(refname)"); refs != "refs/heads/master\nrefs/heads/topic\nrefs/tags/v1" {
		t.Errorf("local refs after the pushes:\n%s", refs)
	}
	if ents, _ := os.ReadDir(filepath.Join(local, "objects", "pack")); len(ents) != 2 {
		t.Errorf("local packs after the pushes: %d files, want the one pack and its index", len(ents))
	}
}
