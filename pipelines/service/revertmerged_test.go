package service

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// mergedTree is a bare repository whose v7.3 already has the one-patch
// series rcuMbox returns: Linux 6.12 (root), the patch (c1), Linux 7.3
// (c2, tagged v7.3).
type mergedTree struct{ dir, root, c1, c2 string }

func newMergedTree(t *testing.T, dir string) mergedTree {
	t.Helper()
	text := func(change map[int]string) string {
		var b strings.Builder
		for i := 1; i <= 20; i++ {
			if s, ok := change[i]; ok {
				fmt.Fprintf(&b, "%s\n", s)
			} else {
				fmt.Fprintf(&b, "line %d\n", i)
			}
		}
		return b.String()
	}
	m := mergedTree{dir: testgit.InitBare(t, dir)}
	m.root = testgit.Commit(t, m.dir, "", "Linux 6.12", "2026-01-01T00:00:00Z", map[string]string{"kernel/rcu/tree.c": text(nil), "Makefile": "VERSION = 6\n"})
	m.c1 = testgit.Commit(t, m.dir, m.root, "rcu: Reduce synchronize_rcu() latency", "2026-01-02T00:00:00Z",
		map[string]string{"kernel/rcu/tree.c": text(map[int]string{5: "fast"})})
	m.c2 = testgit.Commit(t, m.dir, m.c1, "Linux 7.3", "2026-01-03T00:00:00Z",
		map[string]string{"kernel/rcu/tree.c": text(map[int]string{5: "fast", 15: "seven"}), "Makefile": "VERSION = 7\n"})
	testgit.Tag(t, m.dir, "v7.3", m.c2)
	return m
}

// rcuMbox is the thread of the series that became c1.
func (m mergedTree) rcuMbox(t *testing.T) string {
	diff := testgit.Git(t, nil, nil, "--git-dir="+m.dir, "diff", m.root, m.c1)
	return "From mboxrd@z Thu Jan  1 00:00:00 1970\n" +
		"From: Ann Author <ann@example.org>\n" +
		"To: rcu@vger.kernel.org\n" +
		"Subject: [PATCH] rcu: Reduce synchronize_rcu() latency\n" +
		"Date: Fri, 02 Jan 2026 00:00:00 +0000\n" +
		"Message-ID: <rcu1@example.org>\n\n" +
		"Faster.\n\nSigned-off-by: Ann Author <ann@example.org>\n---\n" + diff + "\n-- \n2.47.0\n\n"
}

// TestSubmitRevertIfMerged: the API (and so `patcheval submit`) takes
// lore's --revert-if-merged. A series the base already has is refused
// without it (400, one line naming the series and offering
// revert_if_merged, nothing stored or queued); with it the evaluation is
// the very one lore --pipeline --revert-if-merged records (same key):
// the base with the series reverted against the base as it is, and its
// apply stage runs on the service.
func TestSubmitRevertIfMerged(t *testing.T) {
	root := t.TempDir()
	m := newMergedTree(t, filepath.Join(root, "allowed", "linux.git"))
	s, base := testService(t, Config{AllowTrees: []string{filepath.Join(root, "allowed")}, Lore: closedPort(t),
		Work: &Capabilities{Coordinator: true, Cores: 1}})
	req := SubmitRequest{Mbox: m.rcuMbox(t), Pipeline: "default", Arch: "ppc64le", Tree: m.dir, Base: "v7.3"}

	code, e, raw := call(t, "POST", base+"/api/v1/evaluations", "", req)
	if code != 400 || e.Field != "msgid" || strings.Contains(e.Error, "\n") ||
		!strings.Contains(e.Error, "1/1 is already in v7.3: the reverse applies cleanly (rcu: Reduce synchronize_rcu() latency)") ||
		!strings.Contains(e.Error, "revert_if_merged") {
		t.Fatalf("a series the base has, without revert_if_merged: %d %s; want 400 naming msgid, one line offering revert_if_merged", code, raw)
	}
	if evs, err := s.Store().ListEvaluations(); err != nil || len(evs) != 0 {
		t.Fatalf("the refused series stored %d evaluation(s) (%v)", len(evs), err)
	}
	if jobs, err := s.Engine().Jobs(t.Context(), 0, 10); err != nil || len(jobs) != 0 {
		t.Fatalf("the refused series queued %d job(s) (%v)", len(jobs), err)
	}

	req.RevertIfMerged = true
	code, _, raw = call(t, "POST", base+"/api/v1/evaluations", "", req)
	var sub SubmitResponse
	if err := json.Unmarshal(raw, &sub); code != 201 || err != nil || sub.Evaluation == nil {
		t.Fatalf("with revert_if_merged: %d %s, want 201", code, raw)
	}
	id := sub.Evaluation.ID
	stored, err := runner.Load(s.Store(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !stored.Options.RevertIfMerged {
		t.Errorf("the stored options lost revert_if_merged")
	}
	b, pt := stored.Pipeline.Variant("base"), stored.Pipeline.Variant("patched")
	if b == nil || pt == nil || len(b.Revert) != 1 || b.Revert[0] != "msgid:rcu1@example.org" || pt.ApplySeries || len(pt.Revert) != 0 {
		t.Fatalf("variants: base %+v, patched %+v; want base reverting msgid:rcu1@example.org, patched the base as it is", b, pt)
	}
	rev, ok := stored.Trees["base"]
	if !ok {
		t.Fatalf("no tree recorded for the reverted base: %+v", stored.Trees)
	}
	if got, want := testgit.Git(t, nil, nil, "--git-dir="+m.dir, "rev-parse", rev.Head+"^{tree}"),
		testgit.Git(t, nil, nil, "--git-dir="+m.dir, "rev-parse", m.c2+"^{tree}"); got == want {
		t.Errorf("the reverted base builds v7.3's own tree %s", got)
	}
	if got := testgit.Git(t, nil, nil, "--git-dir="+m.dir, "show", rev.Head+":kernel/rcu/tree.c"); strings.Contains(got, "fast") || !strings.Contains(got, "seven") {
		t.Errorf("the reverted base's kernel/rcu/tree.c still has the series (or lost v7.3's own change):\n%s", got)
	}

	// The same evaluation lore --pipeline default --revert-if-merged
	// records from the same thread, tree and base.
	if got, want := sub.Evaluation.Key, loreRevertKey(t, m, req.Mbox); got != want {
		t.Errorf("key %s, lore --revert-if-merged's %s", got, want)
	}
	// Submitted again: the same evaluation, not a second one.
	if code, _, raw := call(t, "POST", base+"/api/v1/evaluations", "", req); code != 200 {
		t.Errorf("the same submission again: %d %s, want 200", code, raw)
	}

	// The service's apply stage takes it (nothing to apply: the base
	// has the series).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		done, err := s.Engine().Jobs(t.Context(), id, 10, rivertype.JobStateCompleted)
		if err != nil {
			t.Fatal(err)
		}
		if len(done) > 0 && done[0].Kind == "apply" {
			break
		}
		ev, _ := s.Store().Evaluation(id)
		if ev != nil && ev.Status == "failed" || time.Now().After(deadline) {
			all, _ := s.Engine().Jobs(t.Context(), id, 10)
			t.Fatalf("the apply stage did not complete: evaluation %+v, jobs %v", ev, jobsOf(all))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// loreRevertKey is the key `patcheval lore --pipeline default --arch
// ppc64le --base v7.3 --revert-if-merged` gives the thread in data.
func loreRevertKey(t *testing.T, m mergedTree, data string) string {
	t.Helper()
	msgs, err := mbox.ParseBytes([]byte(data), "rcu")
	if err != nil {
		t.Fatal(err)
	}
	thread := mbox.NewThread(msgs, "rcu")
	se, err := series.Resolve(thread, series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipelines.Default(se, []string{"ppc64le"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "lore.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o := runner.Options{Mbox: runner.ThreadMbox(thread), Version: se.Version, ThreadSource: thread.Source, AM: series.DefaultAMOptions(),
		Tree: m.dir, Base: "v7.3", RevertIfMerged: true}
	id, _, err := runner.Submit(context.Background(), runner.Env{Store: st}, p, o)
	if err != nil {
		t.Fatal(err)
	}
	e, err := st.Evaluation(id)
	if err != nil {
		t.Fatal(err)
	}
	return e.Key
}
