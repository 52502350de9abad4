package recipients

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"

	"github.com/patcheval/patcheval/internal/testgit"
)

const commitMaintainers = `SCHEDULER
M:	Sched Maintainer <sched@example.org>
L:	sched@vger.example.org
S:	Maintained
F:	kernel/sched/

RCU
M:	Rcu Maintainer <rcu@example.org>
L:	rcu@vger.example.org
S:	Maintained
F:	kernel/rcu/

KEYWORDED
M:	Key Word <kw@example.org>
L:	kw@vger.example.org
S:	Maintained
K:	\bspecial_hook\b
`

// TestForCommitWholeRelease: ForCommit answers a commit's maintainers
// from its text patch (files and K: keywords, as get_maintainer.pl does)
// while it changes at most MaxPatchFiles files; a commit that changes
// more (a whole release imported as one commit) has none of its own: bad
// input, said at once, without writing its patch or matching its paths.
func TestForCommitWholeRelease(t *testing.T) {
	repo := testgit.InitBare(t, filepath.Join(t.TempDir(), "r.git"))
	base := testgit.Commit(t, repo, "", "base", "2026-11-02T09:00:00Z", map[string]string{
		"MAINTAINERS": commitMaintainers, "kernel/sched/core.c": "int a;\n", "kernel/rcu/tree.c": "int b;\n", "lib/x.c": "int c;\n"})
	c := testgit.Commit(t, repo, base, "change three files", "2026-11-02T10:00:00Z", map[string]string{
		"kernel/sched/core.c": "int a;\nvoid special_hook(void);\n", "kernel/rcu/tree.c": "int b2;\n", "lib/x.c": "int c2;\n"})
	lists := func() []string {
		rs, err := ForCommit(repo, c)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.Email)
		}
		slices.Sort(out)
		return out
	}
	withKeyword := []string{"kw@example.org", "kw@vger.example.org", "rcu@example.org", "rcu@vger.example.org", "sched@example.org", "sched@vger.example.org"}
	if got := lists(); !slices.Equal(got, withKeyword) {
		t.Fatalf("a small commit: %v, want its files' and its keyword's sections %v", got, withKeyword)
	}
	old := MaxPatchFiles
	MaxPatchFiles = 2
	defer func() { MaxPatchFiles = old }()
	rs, err := ForCommit(repo, c)
	if fail.KindOf(err) != fail.KindInput || len(rs) != 0 || !strings.Contains(err.Error(), "changes 3 files (more than 2): a whole release or a merge") {
		t.Fatalf("a commit over MaxPatchFiles: %v %v, want bad input saying it has no maintainers of its own", rs, err)
	}
}
