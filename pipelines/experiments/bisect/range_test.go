package bisect

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testgit"
)

// mainlineHistory writes with git fast-import a first-parent mainline of
// n commits with a merged topic branch (two commits) after every 7th,
// authors in several time zones, messages with and without Link:
// trailers, and tags v1.0 (mainline commit 10) and v2.0 (the tip).
// Several hundred KB of commits: more than one read-ahead window of the
// walk (gittree's objectReader.WalkObject).
func mainlineHistory(t *testing.T, n int) string {
	repo := testgit.InitBare(t, filepath.Join(t.TempDir(), "r.git"))
	var s bytes.Buffer
	mark, when := 0, int64(1760000000)
	zones := []string{"+0000", "+0530", "-0800", "+0100"}
	commit := func(ref string, i int, from int, merge int, msg string) int {
		mark++
		when += 60
		fmt.Fprintf(&s, "commit %s\nmark :%d\n", ref, mark)
		fmt.Fprintf(&s, "author Dev Eloper %d <dev%d@example.org> %d %s\n", i%13, i%13, when, zones[i%len(zones)])
		fmt.Fprintf(&s, "committer Main Tainer <maint@example.org> %d +0000\n", when+30)
		fmt.Fprintf(&s, "data %d\n%s\n", len(msg), msg)
		if from > 0 {
			fmt.Fprintf(&s, "from :%d\n", from)
		}
		if merge > 0 {
			fmt.Fprintf(&s, "merge :%d\n", merge)
		}
		content := fmt.Sprintf("change %d\n", i)
		fmt.Fprintf(&s, "M 100644 inline %s\ndata %d\n%s\n", fmt.Sprintf("dir%d/file%d.c", i%5, i%17), len(content), content)
		return mark
	}
	master, good := 0, 0
	for i := range n {
		msg := fmt.Sprintf("sub%d: change number %d\n\nWhy this change is made, in a line or two of text\nthat gives the commit a kernel commit's length.\n", i%9, i)
		switch i % 3 {
		case 0:
			msg += fmt.Sprintf("\nSigned-off-by: Dev <dev@example.org>\nLink: https://lore.kernel.org/r/%d@example.org\n", i)
		case 1:
			msg += fmt.Sprintf("\nLink:  https://lore.kernel.org/r/first-%d@example.org  \nLink: https://lore.kernel.org/r/second-%d@example.org\n", i, i)
		}
		if i%7 == 6 {
			t1 := commit("refs/heads/topic", i, master, 0, fmt.Sprintf("topic: first of merge %d\n", i))
			t2 := commit("refs/heads/topic", i, t1, 0, fmt.Sprintf("topic: second of merge %d\n", i))
			master = commit("refs/heads/master", i, master, t2, fmt.Sprintf("Merge branch 'topic' %d\n\n%s", i, msg))
		} else {
			master = commit("refs/heads/master", i, master, 0, msg)
		}
		if i == 10 {
			good = master
		}
	}
	fmt.Fprintf(&s, "reset refs/tags/v1.0\nfrom :%d\n\nreset refs/tags/v2.0\nfrom :%d\n\ndone\n", good, master)
	testgit.Git(t, nil, s.Bytes(), "--git-dir="+repo, "fast-import", "--quiet", "--done")
	return repo
}

// TestFirstParentRangeLikeGitLog lists a range of ~1,500 first-parent
// commits (merges among them) and compares every field with git log's:
// first in the pack fast-import wrote (commits among blobs and trees,
// oldest first: the walk reads the pack backwards), then after git
// repack -adf (commits together, newest first).
func TestFirstParentRangeLikeGitLog(t *testing.T) {
	repo := mainlineHistory(t, 1500)
	gd := "--git-dir=" + repo
	for _, step := range []string{"fast-import pack", "repacked"} {
		if step == "repacked" {
			testgit.Git(t, nil, nil, gd, "repack", "-adfq")
		}
		out := testgit.Git(t, nil, nil, gd, "log", "--first-parent", "--reverse", "--format=%H%x1f%s%x1f%an%x1f%ae%x1f%at%x1f%B%x1e", "v1.0..v2.0")
		var want []Commit
		for _, rec := range strings.Split(out, "\x1e") {
			f := strings.Split(strings.TrimLeft(rec, "\n"), "\x1f")
			if len(f) != 6 {
				continue
			}
			at, _ := strconv.ParseInt(f[4], 10, 64)
			c := Commit{Hash: f[0], Subject: f[1], Author: f[2], Email: f[3], Date: time.Unix(at, 0).UTC().Format(time.RFC3339), Index: len(want)}
			for _, l := range strings.Split(f[5], "\n") {
				if v, ok := strings.CutPrefix(l, "Link: "); ok {
					c.Link = strings.TrimSpace(v)
					break
				}
			}
			want = append(want, c)
		}
		if len(want) < 1400 {
			t.Fatalf("%s: git log lists %d commits", step, len(want))
		}
		good, bad, got, err := FirstParentRange(repo, "v1.0", "v2.0", len(want))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d commits, git log: %d", step, len(got), len(want))
		}
		for i := range got {
			if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
				t.Fatalf("%s: commit %d:\n got %+v\nwant %+v", step, i, got[i], want[i])
			}
		}
		if fmt.Sprint(bad) != fmt.Sprint(got[len(got)-1]) || good.Hash != testgit.Git(t, nil, nil, gd, "rev-parse", "v1.0") || good.Index != -1 {
			t.Errorf("%s: good %+v, bad %+v", step, good, bad)
		}
		if _, _, _, err := FirstParentRange(repo, "v1.0", "v2.0", len(want)-1); err == nil {
			t.Errorf("%s: a limit one short of the range was not refused", step)
		}
	}
}
