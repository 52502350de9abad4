package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/series"
)

// TestRunDefaultBackport runs `--pipeline default` for real on the v6.1
// backport (shared kernel builds: base and patched voluntary ppc64le),
// two boots per variant, Debian's ppc64el perf in the guest, and checks
// the coverage lines: the series' powerpc Kconfig change is no code, its
// C/header changes were compiled into the patched kernel or named with
// the symbol that would build them.
func TestRunDefaultBackport(t *testing.T) {
	repo := buildtest.Repo(t)
	data := backportMbox(t)
	msgs, err := mbox.ParseBytes(data, "backport.mbox")
	if err != nil {
		t.Fatal(err)
	}
	s, err := series.Resolve(mbox.NewThread(msgs, "backport.mbox"), series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipelines.Default(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Store: openStore(t, filepath.Join(t.TempDir(), "db")), CacheDir: buildtest.Options(t).CacheDir, Progress: progress.New(os.Stderr)}
	// Run takes the caller's slots around every build and boot (a
	// service's, for a watch re-test run in one job): count them, and the
	// most held at once per kind.
	var mu sync.Mutex
	taken, held, most := map[string]int{}, map[string]int{}, map[string]int{}
	env.Slot = func(ctx context.Context, kind string) (func(), error) {
		mu.Lock()
		defer mu.Unlock()
		taken[kind]++
		held[kind]++
		most[kind] = max(most[kind], held[kind])
		return func() { mu.Lock(); held[kind]--; mu.Unlock() }, nil
	}
	res, err := Run(context.Background(), env, p, Options{
		Mbox: data, Tree: repo, Base: buildtest.BaseCommit, OutDir: t.TempDir(), Boots: 2,
		From: mbox.Address{Name: "Kernel Tester", Email: "tester@example.org"},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Report
	boots := 0
	for _, v := range r.Variants {
		boots += v.Boots
	}
	if taken["build"] != len(p.Builds()) || taken["boot"] < boots || boots == 0 || most["boot"] != 1 || held["build"]+held["boot"] != 0 {
		t.Errorf("slots taken %v (most at once %v, still held %v), want one build slot per kernel (%d) and one boot slot per boot (%d), one boot at a time",
			taken, most, held, len(p.Builds()), boots)
	}
	if len(r.Coverage) == 0 {
		t.Fatalf("no coverage lines; notes %v", r.Notes)
	}
	for _, l := range r.CoverageLines() {
		t.Log("coverage: " + l)
	}
	want := map[string]string{
		"arch/powerpc/Kconfig":               "no-code",
		"arch/powerpc/include/asm/preempt.h": "included",
		"arch/powerpc/kernel/interrupt.c":    "compiled",
		"arch/powerpc/lib/vmx-helper.c":      "compiled", // obj64-$(CONFIG_ALTIVEC); the pseries fragment sets ALTIVEC
	}
	for _, c := range r.Coverage {
		if w, ok := want[c.Path]; ok {
			if c.Status != w || (w != "no-code" && len(c.Kernels) == 0) {
				t.Errorf("coverage of %s: %+v, want %s", c.Path, c, w)
			}
			delete(want, c.Path)
		}
	}
	if len(want) > 0 {
		t.Errorf("no coverage line for %v", want)
	}
	if w := r.CoverageWarning(); w != "" {
		t.Errorf("the backport's code was built, yet: %s", w)
	}
	var sawPerf, sawLoop bool
	for _, b := range r.Benchmarks {
		if strings.HasPrefix(b.Name, "perf bench syscall basic") && b.Unit == "usec/op" {
			sawPerf = true
		}
		if b.Name == "kill" && b.Source == "agent loop" {
			sawLoop = true
		}
	}
	if !sawPerf || !sawLoop {
		t.Errorf("benchmarks: perf bench usec/op %v, agent loop kill %v", sawPerf, sawLoop)
	}
	// Seed 002's perf bench syscall table: base vs test, usec/op and
	// ops/sec from the guest's real perf, change %.
	if len(r.Tables) != 1 || r.Tables[0].Name != "perf bench syscall" {
		t.Fatalf("tables %+v", r.Tables)
	}
	perfRows := map[string]bool{}
	for _, row := range r.Tables[0].Rows {
		t.Logf("perf bench syscall table: %-40s %-10s base %.4f patched %.4f (n=%v) change %+.2f%%", row.Benchmark, row.Metric,
			row.Means[0], row.Means[1], row.N, row.Change.Change)
		if strings.HasPrefix(row.Benchmark, "perf bench syscall basic") && row.N[0] == 2 && row.N[1] == 2 && row.Change != nil {
			perfRows[row.Metric] = true
		}
		if row.Benchmark == "kill" {
			t.Errorf("the perf bench table has a kill row")
		}
	}
	if !perfRows["usec/op"] || !perfRows["ops/sec"] {
		t.Errorf("perf bench table rows: %+v", r.Tables[0].Rows)
	}
	txt, _ := os.ReadFile(res.Text)
	// The text report wraps long lines: compare with whitespace folded.
	flat := strings.Join(strings.Fields(string(txt)), " ")
	if !strings.Contains(flat, "Build coverage of the series:") || !strings.Contains(flat, "perf events the guest counts") {
		t.Errorf("report text lacks coverage or perf events:\n%s", txt)
	}
	for _, tm := range r.Timings {
		t.Logf("stage %s: %s %s", tm.Stage, tm.Duration, tm.Note)
	}
}
