package pipelines

import (
	"os"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series"
)

// backportSeries resolves the bundled v6.1 backport thread.
func backportSeries(t *testing.T) *series.Series {
	t.Helper()
	f, err := os.Open(testenv.BackportMbox())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	msgs, err := mbox.Parse(f, f.Name())
	if err != nil {
		t.Fatal(err)
	}
	s, err := series.Resolve(mbox.NewThread(msgs, f.Name()), series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

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
		"kernel/sched/core.c": "x86_64", "arch/mips/kernel/x.c": "x86_64", "arch/riscv/kernel/entry.S mm/memory.c": "riscv64"} {
		if got := strings.Join(TouchedArches(strings.Fields(in)), ","); got != want {
			t.Errorf("TouchedArches(%s) = %s, want %s", in, got, want)
		}
	}
	p, err := Default(s, nil)
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
	// Seed 002's perf bench syscall table: base vs test, change %.
	if len(p.Tables) != 1 || p.Tables[0].Name != "perf bench syscall" || strings.Join(p.Tables[0].Columns, ",") != "base,patched" ||
		p.Tables[0].Change == nil || p.Tables[0].Change.Name != "change %" || p.Tables[0].Benchmarks[0] != "perf bench syscall" {
		t.Errorf("default pipeline tables %+v", p.Tables)
	}
	if p.Tree.Base != "" || len(p.Warnings) != 0 {
		t.Errorf("the default pipeline pins base %q (warnings %v): the run's base rule chooses it", p.Tree.Base, p.Warnings)
	}
	x, err := Default(s, []string{"amd64"})
	if err != nil || strings.Join(x.Arches, ",") != "x86_64" {
		t.Fatalf("--arch amd64: %v %v", x, err)
	}
	if w := x.SeriesWarnings(files); len(w) != 1 || !strings.Contains(w[0], "measures nothing the series touches") {
		t.Errorf("x86_64 pipeline on a powerpc series: warnings %v", w)
	}
	if w := p.SeriesWarnings(files); len(w) != 0 {
		t.Errorf("ppc64le pipeline on a powerpc series warned: %v", w)
	}
	if _, err := Default(s, []string{"mips"}); err == nil {
		t.Error("--arch mips accepted")
	}
}
