package pipelines

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/mbox"
)

func TestDefaultPipelineShape(t *testing.T) {
	s := backportSeries(t)
	files := SeriesFiles(s)
	if len(files) == 0 || !strings.HasPrefix(files[0], "arch/powerpc/") {
		t.Fatalf("series files %v", files)
	}
	if got := strings.Join(TouchedArches(files), ","); got != "ppc64le" {
		t.Errorf("TouchedArches = %s", got)
	}
	for in, want := range map[string]string{"arch/arm64/kernel/entry.S arch/x86/entry/common.c": "arm64,x86_64",
		"kernel/sched/core.c": "x86_64", "arch/mips/kernel/x.c": "x86_64"} {
		if got := strings.Join(TouchedArches(strings.Fields(in)), ","); got != want {
			t.Errorf("TouchedArches(%s) = %s, want %s", in, got, want)
		}
	}
	p, err := Default(s, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Arches, ",") != "ppc64le" || len(p.Variants) != 2 || p.Variants[0].ApplySeries || !p.Variants[1].ApplySeries ||
		!p.Deterministic || len(p.Comparisons) != 1 || p.Repeats.Boots != 3 {
		t.Errorf("default pipeline: %+v", p)
	}
	if strings.Join(p.Tools(), ",") != "perf" {
		t.Errorf("tools %v", p.Tools())
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "base-commit b3bb56f2e4c9 is not in the tree") {
		t.Errorf("warnings %v", p.Warnings)
	}
	x, err := Default(s, []string{"amd64"}, "")
	if err != nil || strings.Join(x.Arches, ",") != "x86_64" {
		t.Fatalf("--arch amd64: %v %v", x, err)
	}
	if w := x.SeriesWarnings(files); len(w) != 1 || !strings.Contains(w[0], "measures nothing the series touches") {
		t.Errorf("x86_64 pipeline on a powerpc series: warnings %v", w)
	}
	if w := p.SeriesWarnings(files); len(w) != 0 {
		t.Errorf("ppc64le pipeline on a powerpc series warned: %v", w)
	}
	if _, err := Default(s, []string{"mips"}, ""); err == nil {
		t.Error("--arch mips accepted")
	}
}

// TestRunDefaultBackport runs `--pipeline default` for real on the v6.1
// backport (shared kernel builds: base and patched voluntary ppc64le),
// two boots per variant, Debian's ppc64el perf in the guest, and checks
// the coverage lines: the series' powerpc Kconfig change is no code, its
// C/header changes were compiled into the patched kernel or named with
// the symbol that would build them.
func TestRunDefaultBackport(t *testing.T) {
	repo := buildtest.Repo(t)
	s := backportSeries(t)
	p, err := Default(s, nil, repo)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	res, err := Run(context.Background(), p, RunOptions{
		Series: s, Repo: repo, Base: buildtest.BaseCommit, OutDir: out, StorePath: filepath.Join(t.TempDir(), "db"), Boots: 2,
		CacheDir: buildtest.Options(t).CacheDir, From: mbox.Address{Name: "Kernel Tester", Email: "tester@example.org"},
		Progress: progress.New(os.Stderr),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Report
	if len(r.Coverage) == 0 {
		t.Fatalf("no coverage lines; notes %v", r.Notes)
	}
	for _, l := range r.CoverageLines() {
		t.Log("coverage: " + l)
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
	txt, _ := os.ReadFile(res.Text)
	if !strings.Contains(string(txt), "Build coverage of the series:") || !strings.Contains(string(txt), "perf events the guest counts") {
		t.Errorf("report text lacks coverage or perf events:\n%s", txt)
	}
	for _, tm := range r.Timings {
		t.Logf("stage %s: %s %s", tm.Stage, tm.Duration, tm.Note)
	}
}
