package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
)

// expTree is a small release history: v6.12 (root) -> v7.2 (c1, the
// series' change) -> v7.3 (c2), and a side commit "moved" on v7.3 that
// changes c1's line again.
type expTree struct {
	dir, root, c1, c2, moved string
}

func lines(set map[int]string) string {
	var b strings.Builder
	for i := 1; i <= 20; i++ {
		if s, ok := set[i]; ok {
			b.WriteString(s + "\n")
		} else {
			fmt.Fprintf(&b, "line %d\n", i)
		}
	}
	return b.String()
}

func newExpTree(t *testing.T) expTree {
	t.Helper()
	e := expTree{dir: testgit.InitBare(t, filepath.Join(t.TempDir(), "linux.git"))}
	e.root = testgit.Commit(t, e.dir, "", "Linux 6.12", "2026-01-01T00:00:00Z", map[string]string{"kernel/rcu/tree.c": lines(nil), "Makefile": "VERSION = 6\n"})
	e.c1 = testgit.Commit(t, e.dir, e.root, "rcu: Reduce synchronize_rcu() latency", "2026-01-02T00:00:00Z",
		map[string]string{"kernel/rcu/tree.c": lines(map[int]string{5: "fast"})})
	e.c2 = testgit.Commit(t, e.dir, e.c1, "Linux 7.3", "2026-01-03T00:00:00Z",
		map[string]string{"kernel/rcu/tree.c": lines(map[int]string{5: "fast", 15: "seven"}), "Makefile": "VERSION = 7\n"})
	e.moved = testgit.Commit(t, e.dir, e.c2, "rcu: rework", "2026-01-04T00:00:00Z",
		map[string]string{"kernel/rcu/tree.c": lines(map[int]string{5: "faster", 15: "seven"})})
	testgit.Tag(t, e.dir, "v6.12", e.root)
	testgit.Tag(t, e.dir, "v7.2", e.c1)
	testgit.Tag(t, e.dir, "v7.3", e.c2)
	return e
}

// seriesMbox is the thread of the series that became c1: one patch.
func (e expTree) seriesMbox(t *testing.T) []byte {
	diff := testgit.Git(t, nil, nil, "--git-dir="+e.dir, "diff", e.root, e.c1)
	return []byte("From mboxrd@z Thu Jan  1 00:00:00 1970\n" +
		"From: Ann Author <ann@example.org>\n" +
		"To: rcu@vger.kernel.org\n" +
		"Subject: [PATCH] rcu: Reduce synchronize_rcu() latency\n" +
		"Date: Fri, 02 Jan 2026 00:00:00 +0000\n" +
		"Message-ID: <rcu1@example.org>\n\n" +
		"Faster.\n\nSigned-off-by: Ann Author <ann@example.org>\n---\n" + diff + "\n-- \n2.47.0\n\n")
}

const expPipeline = `name = "exp"
[series]
apply = false
[build]
arch = "ppc64le"
fragments = ["ppc64le-pseries"]

[[variant]]
name = "base"

[[variant]]
name = "reverted"
revert = ["msgid:rcu1@example.org"]

[[variant]]
name = "old"
ref = "v6.12"

[[benchmark]]
name = "kill"
`

// TestSubmitVariantTrees: a variant's ref and reverts are resolved and
// written when the evaluation is submitted, recorded in its inputs and
// key, and its kernel builds that tree.
func TestSubmitVariantTrees(t *testing.T) {
	e := newExpTree(t)
	p, err := pipelines.Parse([]byte(expPipeline), "exp.toml")
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Store: openStore(t, filepath.Join(t.TempDir(), "db"))}
	o := Options{Mbox: e.seriesMbox(t), Tree: e.dir, Base: "v7.3"}
	id, _, err := Submit(context.Background(), env, p, o)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := load(env, id)
	if err != nil {
		t.Fatal(err)
	}
	rev, old := ev.in.Trees["reverted"], ev.in.Trees["old"]
	if _, ok := ev.in.Trees["base"]; ok || len(ev.in.Trees) != 2 {
		t.Fatalf("trees %+v", ev.in.Trees)
	}
	// The revert is git revert's tree, on the base.
	wantTree := revertedTree(t, e.dir, e.c2, e.c1)
	if got := testgit.Git(t, nil, nil, "--git-dir="+e.dir, "rev-parse", rev.Head+"^{tree}"); got != wantTree || rev.Onto != e.c2 ||
		len(rev.Reverted) != 1 || rev.Reverted[0].Label != "1/1 rcu: Reduce synchronize_rcu() latency" || rev.Branch != "patcheval/exp-revert-reverted" {
		t.Fatalf("reverted tree %+v (tree %s, want %s)", rev, got, wantTree)
	}
	if old.Ref != "v6.12" || old.Head != e.root || old.Onto != e.root {
		t.Fatalf("old %+v, want v6.12 = %s", old, e.root)
	}
	// Each kernel builds its own tree.
	for _, s := range ev.p.Builds() {
		req, err := buildRequest(context.Background(), env, ev, s)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"base": e.c2, "reverted": rev.Head, "old": e.root}[s.Variant]
		if req.Commit != want {
			t.Errorf("%s builds %s, want %s", s.Variant, req.Commit, want)
		}
	}
	if d := rev.Describe("v7.3"); !strings.HasPrefix(d, "v7.3 ("+e.c2[:12]+") with 1 change(s) reverted") {
		t.Errorf("describe: %q", d)
	}
	// Submitted again: the same evaluation (the revert commits are the
	// same).
	again, resumed, err := Submit(context.Background(), env, p, o)
	if err != nil || again != id || !resumed {
		t.Fatalf("again: %d %v %v, want %d resumed", again, resumed, err, id)
	}
	// The reproducer's view.
	st, err := Load(env.Store, id)
	if err != nil || st.Trees["reverted"].Head != rev.Head {
		t.Fatalf("Load: %v %+v", err, st)
	}
}

func revertedTree(t *testing.T, repo, onto, commit string) string {
	wt := filepath.Join(t.TempDir(), "wt")
	testgit.Git(t, nil, nil, "--git-dir="+repo, "worktree", "add", "-q", "--detach", wt, onto)
	defer testgit.Git(t, nil, nil, "--git-dir="+repo, "worktree", "remove", "--force", wt)
	testgit.Git(t, testgit.Identity("2026-02-01T00:00:00Z"), nil, "-C", wt, "revert", "--no-edit", commit)
	return testgit.Git(t, nil, nil, "-C", wt, "rev-parse", "HEAD^{tree}")
}

// TestSubmitVariantTreesBadInput: a ref the tree lacks, a revert that
// conflicts, a msgid that is not the evaluated series: one line naming
// it, exit 2, no evaluation recorded.
func TestSubmitVariantTreesBadInput(t *testing.T) {
	e := newExpTree(t)
	for name, c := range map[string]struct {
		pipeline, base, want string
	}{
		"ref the tree lacks": {strings.Replace(expPipeline, `ref = "v6.12"`, `ref = "v6.13"`, 1), "v7.3",
			`variant "old": ref "v6.13" is not in the tree ` + e.dir},
		"revert that conflicts": {expPipeline, e.moved,
			`variant "reverted": revert of 1/1 rcu: Reduce synchronize_rcu() latency conflicts on ` + e.moved + `: kernel/rcu/tree.c hunk #1 @@ -2,7 +2,7 @@`},
		"commit revert that conflicts": {strings.Replace(expPipeline, `"msgid:rcu1@example.org"`, `"v6.12..v7.2"`, 1), e.moved,
			`conflicts on ` + e.moved + `: kernel/rcu/tree.c hunk #1`},
		"msgid of another thread": {strings.Replace(expPipeline, "rcu1@example.org", "other@example.org", 1), "v7.3",
			`variant "reverted": revert "msgid:other@example.org": not the evaluated series`},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := pipelines.Parse([]byte(c.pipeline), "exp.toml")
			if err != nil {
				t.Fatal(err)
			}
			env := Env{Store: openStore(t, filepath.Join(t.TempDir(), "db"))}
			refsBefore := testgit.Git(t, nil, nil, "--git-dir="+e.dir, "for-each-ref")
			_, _, err = Submit(context.Background(), env, p, Options{Mbox: e.seriesMbox(t), Tree: e.dir, Base: c.base})
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v\nwant one line with %q", err, c.want)
			}
			if fail.KindOf(err) != fail.KindInput {
				t.Errorf("kind %v, want bad input (exit 2)", fail.KindOf(err))
			}
			if evs, _ := env.Store.ListEvaluations(); len(evs) != 0 {
				t.Errorf("%d evaluation(s) recorded", len(evs))
			}
			if after := testgit.Git(t, nil, nil, "--git-dir="+e.dir, "for-each-ref"); after != refsBefore {
				t.Errorf("refs changed:\n%s\n->\n%s", refsBefore, after)
			}
		})
	}
}

const mergedPipeline = `name = "merged"
[build]
arch = "ppc64le"
fragments = ["ppc64le-pseries"]

[[variant]]
name = "base"
apply_series = false

[[variant]]
name = "patched"

[[variant]]
name = "patched@full"
kernel = "patched"
cmdline = "preempt=full"

[[benchmark]]
name = "kill"
`

// TestRevertIfMergedNeedsAPair: --revert-if-merged with a pipeline that
// applies no series (rcu-sync-latency: its variants are knobs of one
// kernel) is one line of bad input before anything is recorded, not the
// base measured alone as if the flag had been honoured.
func TestRevertIfMergedNeedsAPair(t *testing.T) {
	e := newExpTree(t)
	p, err := pipelines.Builtin("rcu-sync-latency")
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Store: openStore(t, filepath.Join(t.TempDir(), "db"))}
	_, _, err = Submit(context.Background(), env, p, Options{Mbox: e.seriesMbox(t), Tree: e.dir, Base: "v7.3", RevertIfMerged: true})
	if fail.KindOf(err) != fail.KindInput || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "--revert-if-merged: pipeline rcu-sync-latency applies no series") {
		t.Fatalf("got %v, want one line of bad input naming the pipeline", err)
	}
	if evs, _ := env.Store.ListEvaluations(); len(evs) != 0 {
		t.Fatalf("%d evaluation(s) recorded", len(evs))
	}
}

// TestRevertIfMerged: a series the base already has is refused before
// anything is recorded, offering --revert-if-merged; with it the
// evaluation measures the base with the series reverted against the base
// as it is, and the report and the draft say so first.
func TestRevertIfMerged(t *testing.T) {
	e := newExpTree(t)
	p, err := pipelines.Parse([]byte(mergedPipeline), "merged.toml")
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Store: openStore(t, filepath.Join(t.TempDir(), "db"))}
	o := Options{Mbox: e.seriesMbox(t), Tree: e.dir, Base: "v7.3"}
	_, _, err = Submit(context.Background(), env, p, o)
	if fail.KindOf(err) != fail.KindInput || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "1/1 is already in v7.3: the reverse applies cleanly (rcu: Reduce synchronize_rcu() latency)") ||
		!strings.Contains(err.Error(), "--revert-if-merged") {
		t.Fatalf("without the flag: %v, want one line of bad input offering --revert-if-merged", err)
	}
	if evs, _ := env.Store.ListEvaluations(); len(evs) != 0 {
		t.Fatalf("%d evaluation(s) recorded for a refused series", len(evs))
	}

	o.RevertIfMerged = true
	id, _, err := Submit(context.Background(), env, p, o)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := load(env, id)
	if err != nil {
		t.Fatal(err)
	}
	if b, pt := ev.p.Variant("base"), ev.p.Variant("patched@full"); len(b.Revert) != 1 || b.Revert[0] != "msgid:rcu1@example.org" || pt.ApplySeries || len(pt.Revert) != 0 {
		t.Fatalf("variants: base %+v, patched@full %+v", b, pt)
	}
	wantTree := revertedTree(t, e.dir, e.c2, e.c1)
	rev := ev.in.Trees["base"]
	if got := testgit.Git(t, nil, nil, "--git-dir="+e.dir, "rev-parse", rev.Head+"^{tree}"); got != wantTree {
		t.Fatalf("base builds %s (tree %s), want git revert's tree %s", rev.Head, got, wantTree)
	}
	for _, s := range ev.p.Builds() {
		req, err := buildRequest(context.Background(), env, ev, s)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"base": rev.Head, "patched": e.c2}[s.Variant]; req.Commit != want {
			t.Errorf("%s builds %s, want %s", s.Variant, req.Commit, want)
		}
	}
	// The apply stage applies nothing: the series is in the base.
	if err := Apply(context.Background(), env, id); err != nil {
		t.Fatalf("apply stage: %v", err)
	}
	const want = "The series is already in v7.3 (1/1 is already in v7.3: the reverse applies cleanly (rcu: Reduce synchronize_rcu() latency)), so patcheval measured v7.3 with the series reverted (base) against v7.3 as it is (patched): --revert-if-merged."
	if ev.in.Merged != want {
		t.Fatalf("merged:\n%s\nwant\n%s", ev.in.Merged, want)
	}
	var samples []evaluate.Sample
	for i, v := range []string{"base", "patched", "patched@full"} {
		for boot := 0; boot < 2; boot++ {
			samples = append(samples, evaluate.Sample{Variant: v, Benchmark: "kill", Metric: "ns/op", Unit: "ns/op", Value: float64(100 + 10*i + boot), Boot: boot})
		}
	}
	r, err := buildReport(ev, report.TreeInfo{}, map[string]*build.Artifact{}, nil, samples, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Merged != want {
		t.Errorf("report: merged %q", r.Merged)
	}
	if after, err := load(env, id); err != nil || !strings.Contains(strings.Join(after.in.Notes, "\n"), want) {
		t.Errorf("the report's notes after the apply stage: %v %q", err, after.in.Notes)
	}
	if v := r.Variants[0]; v.Name != "base" || len(v.Reverted) != 1 || !strings.Contains(v.Tree, "with 1 change(s) reverted") {
		t.Errorf("report variant %+v", v)
	}
	// What the KCIDB checkout of the reverted tree is made of: the
	// commit the revert was made on, the revert commit, the head.
	if v := r.Variants[0]; v.Onto != e.c2 || v.Head != rev.Head || len(v.Reverts) != 1 || v.Reverts[0].Commit != rev.Head ||
		v.Reverts[0].Label != v.Reverted[0] {
		t.Errorf("report variant's tree: onto %s head %s reverts %+v; want onto %s, head and revert %s", v.Onto, v.Head, v.Reverts, e.c2, rev.Head)
	}
	d, err := report.NewDraft(r, ev.series.First(), report.DraftOptions{From: mbox.Address{Name: "T", Email: "t@example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(d.Body), " "), want) {
		t.Errorf("the draft does not say it:\n%s", d.Body)
	}
	// Submitted again with the flag: the same evaluation.
	if again, resumed, err := Submit(context.Background(), env, p, o); err != nil || again != id || !resumed {
		t.Errorf("again: %d %v %v", again, resumed, err)
	}
}
