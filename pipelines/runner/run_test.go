package runner

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/store"
)

// backportMbox is the bundled v6.1 backport thread.
func backportMbox(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(testenv.BackportMbox())
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// openStore opens the state database at path for the test's life.
func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestRunPPCPreemptDynamic runs the shipped ppc-preempt-dynamic pipeline end
// to end for real (Debian's 6.1 tree, the backport series, three ppc64le
// kernels, deterministic QEMU, two boots per variant) and checks the answer
// the seed thread never got: voluntary+PREEMPT_DYNAMIC is slower than
// voluntary on kill, and the confound report names PREEMPT_RCU with the
// kernel/rcu/Kconfig rule. A second run resumes and boots nothing.
func TestRunPPCPreemptDynamic(t *testing.T) {
	repo := buildtest.Repo(t)
	p, err := pipelines.Builtin("ppc-preempt-dynamic")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	db := filepath.Join(t.TempDir(), "patcheval.db")
	opts := Options{
		Mbox: backportMbox(t), Tree: repo, OutDir: out, Boots: 2,
		From: mbox.Address{Name: "Kernel Tester", Email: "tester@example.org"},
	}
	env := Env{Store: openStore(t, db), CacheDir: buildtest.Options(t).CacheDir, Progress: progress.New(os.Stderr)}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	res, err := Run(ctx, env, p, opts)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	r := res.Report

	var kill *stats.Comparison
	for _, b := range r.Benchmarks {
		if b.Name != "kill" || b.Metric != "ns/op" {
			continue
		}
		for i := range b.Comparisons {
			c := &b.Comparisons[i]
			if c.Base == "voluntary" && c.Other == "voluntary+dyn" {
				kill = &c.Comparison
			}
		}
	}
	if kill == nil {
		t.Fatalf("no kill ns/op comparison voluntary -> voluntary+dyn in the report")
	}
	t.Logf("kill ns/op voluntary %.0f -> voluntary+dyn %.0f (%+.1f%%, %s)", kill.Base.Mean, kill.Other.Mean, kill.Change, kill.Verdict)
	if kill.Verdict != stats.Regression || kill.Change < 5 || kill.BelowThreshold {
		t.Errorf("kill: want voluntary+dyn clearly slower than voluntary, got %+.1f%% (%s)", kill.Change, kill.Label())
	}
	// A deterministic pipeline judges against its smaller default T.
	if kill.Threshold != stats.DefaultDeterministicThreshold {
		t.Errorf("kill: threshold %g%%, want the deterministic default %g%%", kill.Threshold, stats.DefaultDeterministicThreshold)
	}

	// The thread's own command ran beside the loops, in the same boots:
	// stress-ng --kill's bogo-ops/s fall with voluntary+dyn.
	var sng *stats.Comparison
	for _, b := range r.Benchmarks {
		if !strings.HasPrefix(b.Name, "stress-ng --kill") || b.Unit != "bogo-ops/s" || b.Source != "stress-ng" {
			continue
		}
		for i := range b.Comparisons {
			if c := &b.Comparisons[i]; c.Base == "voluntary" && c.Other == "voluntary+dyn" && strings.Contains(b.Metric, "real time") {
				sng = &c.Comparison
			}
		}
	}
	if sng == nil {
		t.Fatalf("no stress-ng --kill bogo-ops/s comparison voluntary -> voluntary+dyn in the report")
	}
	t.Logf("stress-ng --kill bogo-ops/s voluntary %.0f -> voluntary+dyn %.0f (%+.1f%%, %s)", sng.Base.Mean, sng.Other.Mean, sng.Change, sng.Verdict)
	if sng.Verdict != stats.Regression || sng.Change > -5 {
		t.Errorf("stress-ng --kill: want voluntary+dyn clearly fewer bogo-ops/s than voluntary, got %+.1f%% (%s)", sng.Change, sng.Label())
	}

	var rcu bool
	for _, cf := range r.Confounds {
		if cf.Base != "voluntary" || cf.Other != "voluntary+dyn" {
			continue
		}
		for _, d := range cf.Deltas {
			if d.Symbol == "PREEMPT_RCU" {
				rcu = true
				if d.Requested || !strings.Contains(d.Where, "kernel/rcu/Kconfig") || d.Kind() != report.KindDerived || !d.Highlight ||
					len(d.Via) == 0 || d.Via[0] != "PREEMPT_DYNAMIC" {
					t.Errorf("PREEMPT_RCU delta = %+v, want a watched derived change explained by kernel/rcu/Kconfig, via PREEMPT_DYNAMIC", d)
				}
			}
		}
	}
	if !rcu {
		t.Errorf("confound report voluntary vs voluntary+dyn does not name PREEMPT_RCU: %+v", r.Confounds)
	}

	draft, err := os.ReadFile(res.Draft)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PREEMPT_RCU", "In-Reply-To: <20261102093000.4121-0-tester@example.org>", "deterministic",
		"Verdicts (threshold ±0.5%):", "Significant and above ±0.5%:"} {
		if !strings.Contains(string(draft), want) {
			t.Errorf("reply draft lacks %q", want)
		}
	}
	// The terminal report: the verdicts first, the confounds as a table
	// with the watched PREEMPT_RCU in its first row.
	txt, err := os.ReadFile(res.Text)
	if err != nil {
		t.Fatal(err)
	}
	if i, j := strings.Index(string(txt), "Verdicts (threshold ±0.5%):"), strings.Index(string(txt), "Config differences"); i < 0 || j < i {
		t.Errorf("report.txt does not open with the verdicts:\n%s", txt)
	}
	if !regexp.MustCompile(`(?m)^\s+Symbol\s+change\s+kind.*\n\s+-+.*\n\s+PREEMPT_[A-Z_]+\s+n -> y\s+derived, watched`).Match(txt) {
		t.Errorf("report.txt: the confound table does not start with a watched symbol:\n%s", txt)
	}
	if strings.Contains(string(draft), "Tested-by:") {
		t.Errorf("reply draft has a Tested-by although it was not asked for")
	}
	for _, f := range []string{res.Text, res.JSON, res.Markdown, res.KCIDB} {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Errorf("output %s missing or empty (%v)", f, err)
		}
	}
	stages := map[string]bool{}
	for _, st := range r.Timings {
		stages[st.Stage] = true
	}
	for _, want := range []string{"apply", "build", "boot", "benchmark", "report"} {
		if !stages[want] {
			t.Errorf("report timings lack stage %q: %+v", want, r.Timings)
		}
	}

	// Resume: the same evaluation again finds every boot finished.
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := st.RunsOf(res.EvaluationID)
	st.Close()
	again, err := Run(ctx, env, p, opts)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if !again.Resumed || again.EvaluationID != res.EvaluationID {
		t.Errorf("second run: resumed=%v id=%d, want a resume of %d", again.Resumed, again.EvaluationID, res.EvaluationID)
	}
	st, err = store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := st.RunsOf(res.EvaluationID)
	st.Close()
	if len(after) != len(before) {
		t.Errorf("second run booted again: %d runs before, %d after", len(before), len(after))
	}
}
