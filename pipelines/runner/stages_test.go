package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/store"
)

// stageEnv opens the database at db afresh, as a stage running in its own
// process would.
func stageEnv(t *testing.T, db string) Env {
	t.Helper()
	return Env{Store: openStore(t, db), CacheDir: buildtest.Options(t).CacheDir, Progress: progress.New(os.Stderr)}
}

func builtin(t *testing.T, name string) *pipelines.Pipeline {
	t.Helper()
	p, err := pipelines.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSubmitKey: the same inputs resume the same evaluation (also when
// only the draft's signer changes); other boots or apply options are a new
// one; a stage that needs an earlier one says so.
func TestSubmitKey(t *testing.T) {
	repo := buildtest.Repo(t)
	p := builtin(t, "ppc-preempt-dynamic")
	db := filepath.Join(t.TempDir(), "patcheval.db")
	env := stageEnv(t, db)
	ctx := context.Background()
	o := Options{Mbox: backportMbox(t), Tree: repo, Boots: 2}
	id, resumed, err := Submit(ctx, env, p, o)
	if err != nil || resumed {
		t.Fatalf("first submit: id %d resumed %v err %v", id, resumed, err)
	}
	o2 := o
	o2.From = mbox.Address{Name: "Other", Email: "other@example.org"}
	if id2, resumed, err := Submit(ctx, env, p, o2); err != nil || !resumed || id2 != id {
		t.Errorf("same inputs, other signer: id %d resumed %v err %v; want a resume of %d", id2, resumed, err, id)
	}
	for name, o3 := range map[string]Options{
		"boots": {Mbox: o.Mbox, Tree: repo, Boots: 3},
		"fuzz":  {Mbox: o.Mbox, Tree: repo, Boots: 2, Fuzz: 1},
	} {
		if id3, resumed, err := Submit(ctx, env, p, o3); err != nil || resumed || id3 == id {
			t.Errorf("%s: id %d resumed %v err %v; want a new evaluation", name, id3, resumed, err)
		}
	}
	if _, err := Boots(ctx, env, id); err != nil {
		t.Errorf("boots: %v", err)
	}
	// Under a queue (Env.Queued) a failing stage leaves the evaluation's
	// status to the queue (which retries infrastructure errors: no
	// "failed" between two attempts); on its own it marks it failed.
	queued := env
	queued.Queued = true
	if err := Build(ctx, queued, id, p.Builds()[1].Key); err == nil {
		t.Fatal("build before apply succeeded")
	}
	if e, _ := env.Store.Evaluation(id); e.Status != store.StatusRunning {
		t.Errorf("a queued stage's failure left the evaluation %s, want it left running for the queue to decide", e.Status)
	}
	err = Build(ctx, env, id, p.Builds()[1].Key)
	if fail.KindOf(err) != fail.KindInput || !bytes.Contains([]byte(err.Error()), []byte("not applied yet")) {
		t.Errorf("build before apply: %v, want an input error saying the series is not applied yet", err)
	}
	if e, _ := env.Store.Evaluation(id); e.Status != store.StatusFailed {
		t.Errorf("a stage's failure left the evaluation %s, want failed", e.Status)
	}
	if _, _, err := Submit(ctx, env, p, Options{Tree: repo}); fail.KindOf(err) != fail.KindInput {
		t.Errorf("no series: %v, want an input error", err)
	}
}

// TestApplyStageFuzz: a series whose first context line differs from the
// tree applies only with Fuzz, which reaches apply through Options (lore
// --pipeline --fuzz used to drop it).
func TestApplyStageFuzz(t *testing.T) {
	repo := buildtest.Repo(t)
	p := builtin(t, "ppc-preempt-dynamic")
	env := stageEnv(t, filepath.Join(t.TempDir(), "patcheval.db"))
	ctx := context.Background()
	fuzzed := bytes.Replace(backportMbox(t), []byte("\n \tselect HAVE_PERF_EVENTS_NMI\t\tif PPC64\n"),
		[]byte("\n \tselect HAVE_PERF_EVENTS_NMI\t\tif PPC32\n"), 1)
	if bytes.Equal(fuzzed, backportMbox(t)) {
		t.Fatal("the context line to change is not in the backport mbox")
	}
	exact, _, err := Submit(ctx, env, p, Options{Mbox: fuzzed, Tree: repo, Branch: "patcheval/test-fuzz"})
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, env, exact); fail.KindOf(err) != fail.KindFailed {
		t.Fatalf("apply without fuzz: %v (kind %v), want the patch not to apply", err, fail.KindOf(err))
	}
	if ev, _ := env.Store.Evaluation(exact); ev.Status != store.StatusFailed {
		t.Errorf("evaluation %d status %q after a failed apply, want failed", exact, ev.Status)
	}
	id, _, err := Submit(ctx, env, p, Options{Mbox: fuzzed, Tree: repo, Branch: "patcheval/test-fuzz", Fuzz: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, env, id); err != nil {
		t.Fatalf("apply with fuzz 1: %v", err)
	}
	a, err := env.Store.AppliedOf(id)
	if err != nil || a == nil || len(a.Commits) != 1 || a.Head == "" || a.Tree == "" {
		t.Fatalf("applied: %+v, %v", a, err)
	}
	// Apply again: nothing to do, nothing changes.
	if err := Apply(ctx, env, id); err != nil {
		t.Fatal(err)
	}
	if b, _ := env.Store.AppliedOf(id); !reflect.DeepEqual(a, b) {
		t.Errorf("second apply changed the record: %+v -> %+v", a, b)
	}
}

// TestStagesEqualRun runs the stages one by one, each with the database
// opened afresh (as separate queue jobs would), on the shipped
// ppc-preempt-dynamic pipeline with real kernels and QEMU (one boot per
// variant); then Run with the same inputs resumes that evaluation, boots
// nothing and reports the same.
func TestStagesEqualRun(t *testing.T) {
	repo := buildtest.Repo(t)
	p := builtin(t, "ppc-preempt-dynamic")
	// The stages' bookkeeping is what is compared here, not the tools:
	// the agent's loops only (stress-ng's boots are TestRunPPCPreemptDynamic's).
	var loops []pipelines.Benchmark
	for _, b := range p.Benchmarks {
		if !guest.IsTool(b.Name) {
			loops = append(loops, b)
		}
	}
	p.Benchmarks = loops
	db := filepath.Join(t.TempDir(), "patcheval.db")
	now := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	o := Options{Mbox: backportMbox(t), Tree: repo, Boots: 1, Now: now,
		From: mbox.Address{Name: "Kernel Tester", Email: "tester@example.org"}}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()

	id, _, err := Submit(ctx, stageEnv(t, db), p, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, stageEnv(t, db), id); err != nil {
		t.Fatalf("apply: %v", err)
	}
	keys, err := Builds(ctx, stageEnv(t, db), id)
	if err != nil || len(keys) != 3 {
		t.Fatalf("builds: %v %v, want 3 kernels", keys, err)
	}
	for _, k := range keys {
		if err := Build(ctx, stageEnv(t, db), id, k); err != nil {
			t.Fatalf("build %s: %v", k, err)
		}
	}
	boots, err := Boots(ctx, stageEnv(t, db), id)
	if err != nil || len(boots) != len(p.Variants) {
		t.Fatalf("boots: %v %v, want one per variant", boots, err)
	}
	for _, b := range boots {
		if err := Boot(ctx, stageEnv(t, db), id, b); err != nil {
			t.Fatalf("boot %v: %v", b, err)
		}
	}
	env := stageEnv(t, db)
	runs, _ := env.Store.RunsOf(id)
	// A finished boot is never redone.
	if err := Boot(ctx, stageEnv(t, db), id, boots[0]); err != nil {
		t.Fatal(err)
	}
	if again, _ := env.Store.RunsOf(id); len(again) != len(runs) || len(runs) != len(boots) {
		t.Errorf("runs: %d after the boots, %d after booting %v again; want %d", len(runs), len(again), boots[0], len(boots))
	}
	if more, err := More(ctx, env, id); err != nil || len(more) != 0 {
		t.Errorf("more: %v %v; the pipeline has no adaptive sampling", more, err)
	}
	staged, err := Report(ctx, stageEnv(t, db), id, t.TempDir())
	if err != nil {
		t.Fatalf("report: %v", err)
	}

	o.OutDir = t.TempDir()
	run, err := Run(ctx, env, p, o)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !run.Resumed || run.EvaluationID != id {
		t.Errorf("run: resumed %v id %d, want a resume of %d", run.Resumed, run.EvaluationID, id)
	}
	if after, _ := env.Store.RunsOf(id); len(after) != len(runs) {
		t.Errorf("run booted again: %d runs, want %d", len(after), len(runs))
	}
	if a, b := comparable(t, staged.Report), comparable(t, run.Report); a != b {
		t.Errorf("the staged report differs from Run's:\n%s\nvs\n%s", a, b)
	}
}

// comparable is r rendered as text and JSON with the report stage's own
// duration (the only thing that differs between two reports of the same
// evaluation) zeroed.
func comparable(t *testing.T, r *report.Report) string {
	t.Helper()
	c := *r
	c.Timings = append([]report.StageTiming(nil), r.Timings...)
	for i := range c.Timings {
		if c.Timings[i].Stage == "report" {
			c.Timings[i].Duration = 0
		}
	}
	var buf bytes.Buffer
	if err := report.WriteText(&buf, &c); err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return buf.String() + string(data)
}

// TestCheckBoots: --boots is bounded like repeats.boots (an unbounded
// count allocated the whole plan).
func TestCheckBoots(t *testing.T) {
	p := builtin(t, "ppc-preempt-dynamic")
	for _, n := range []int{-1, pipelines.MaxBoots + 1, 1 << 40} {
		err := Check(p, Options{Boots: n, Tree: t.TempDir()})
		if fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), fmt.Sprintf("--boots %d: want 1 to 1000", n)) {
			t.Errorf("--boots %d: %v, want an input error", n, err)
		}
	}
	// 21 variants: --boots 1000 would plan 21000 boots.
	src := "name = \"many\"\n[build]\narch = \"ppc64le\"\nfragments = [\"ppc64le-pseries\"]\n[[benchmark]]\nname = \"kill\"\n"
	for i := range 21 {
		src += fmt.Sprintf("[[variant]]\nname = \"v%d\"\n", i)
	}
	many, err := pipelines.Parse([]byte(src), "many.toml")
	if err != nil {
		t.Fatal(err)
	}
	err = Check(many, Options{Boots: pipelines.MaxBoots, Tree: t.TempDir()})
	if fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "--boots 1000: many.toml: 1000 boot(s) x 21 variant(s) x 1 arch(es) = 21000 boots: at most 20000") {
		t.Errorf("--boots 1000 with 21 variants: %v, want an input error", err)
	}
}
