package apply

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series"
)

// TestApplyRCUAlreadyIn72: the rcu-gp-qs series ("[PATCH v2] rcu: Reduce
// synchronize_rcu() latency ...") was merged before 7.2: on Debian's
// 7.2.13 apply says so, patch by patch, instead of "does not apply".
func TestApplyRCUAlreadyIn72(t *testing.T) {
	repo := cloneBare(t, testenv.LinuxRelease(t, "7.2.13"))
	data, err := os.ReadFile(filepath.Join(testenv.ThreadsDir(), "rcu-gp-qs-v2.mbox"))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := mbox.ParseBytes(data, "rcu-gp-qs-v2.mbox")
	if err != nil {
		t.Fatal(err)
	}
	s, err := series.Resolve(mbox.NewThread(msgs, "rcu-gp-qs-v2.mbox"), series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opt := pinned("patcheval/rcu-gp-qs")
	opt.Base = "v7.2.13"
	_, err = Apply(context.Background(), repo, FromSeries(s, series.DefaultAMOptions()), opt)
	t.Logf("%v", err)
	var ae *AlreadyError
	if !errors.As(err, &ae) || len(ae.Patches) != len(s.Patches) ||
		!strings.HasPrefix(err.Error(), "1/1 is already in v7.2.13: the reverse applies cleanly (") {
		t.Fatalf("Apply on v7.2.13: %v, want every patch already in", err)
	}
	// --revert-if-merged's detection and its revert, at object level on
	// the real tree.
	commits := FromSeries(s, series.DefaultAMOptions())
	ib, err := InBase(context.Background(), repo, "v7.2.13", commits)
	if err != nil || ib == nil || ib.Error() != err2str(ae) {
		t.Fatalf("InBase: %v %v", ib, err)
	}
	var undo []Undo
	for i := len(commits) - 1; i >= 0; i-- {
		undo = append(undo, Undo{Label: commits[i].Label, Subject: s.Patches[i].Subject.Title, Diff: commits[i].Diff})
	}
	res, err := Revert(context.Background(), repo, "v7.2.13", undo, RevertOptions{OntoName: "v7.2.13"})
	if err != nil {
		t.Fatalf("revert on v7.2.13: %v", err)
	}
	// Reverted, the series applies again, giving back v7.2.13's tree.
	back, err := Apply(context.Background(), repo, commits, Options{Base: res.Head, Branch: "patcheval/back"})
	if err != nil {
		t.Fatalf("the series on v7.2.13 with it reverted: %v", err)
	}
	if want := treeOf(t, repo, "v7.2.13"); back.Commits[len(back.Commits)-1].Tree != want {
		t.Errorf("revert then apply: tree %s, v7.2.13 has %s", back.Commits[len(back.Commits)-1].Tree, want)
	}
}

func err2str(e error) string { return e.Error() }
