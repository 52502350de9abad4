package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// loadThread parses the bundled backport thread (copied from the shared
// fixtures): the cover letter and patch 1/1.
func loadThread(t *testing.T) []*mbox.Message {
	t.Helper()
	data, err := os.ReadFile(testenv.BackportMbox())
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := mbox.ParseBytes(data, "backport.mbox")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 {
		t.Fatalf("%d messages", len(msgs))
	}
	return msgs
}

func patchMsg(t *testing.T) *mbox.Message {
	for _, m := range loadThread(t) {
		if strings.Contains(m.Subject, "1/1") {
			return m
		}
	}
	t.Fatal("no patch 1/1")
	return nil
}

var gen = time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)

// seedSamples are a real run's samples (ns/op; the ops/s twins left
// out, as before), not typed by hand: `patcheval run --deterministic
// --boots 3 --bench kill,getppid --json` with --kernel
// voluntary=<base-voluntary vmlinux>, voluntary-dyn=<patched-dynamic
// vmlinux>,preempt=voluntary and full=<patched-dynamic
// vmlinux>,preempt=full (the suite's cached ppc64le kernels of
// build/buildtest; its PREEMPT=y patched-full kernel was not in the cache,
// so "full" is full preemption switched on at run time), main 3d24f79,
// 2026-12-07 04:34:44-04:38:30 UTC, load 32-40 on 2 cores (nice 10;
// deterministic QEMU: the values do not depend on the load). Values,
// build-ids and boot numbers as the run printed them; the times are the
// fixture's (gen + one minute a boot). testdata/golden/README.md says
// which golden files come from here.
func seedSamples() []evaluate.Sample {
	const (
		base = "267c749de607ad4a7e4eade41d1f0682f2b2cf12" // base-voluntary
		dyn  = "9aaff907b5c5757e373de8e9a0fe124ed0943039" // patched-dynamic
	)
	data := []struct {
		variant, bench, buildID string
		vals                    []float64
	}{
		{"voluntary", "kill", base, []float64{983.63054, 983.6442, 983.662275}},
		{"voluntary-dyn", "kill", dyn, []float64{1225.842785, 1225.825695, 1225.82491}},
		{"full", "kill", dyn, []float64{1225.71557, 1225.71078, 1225.67711}},
		{"voluntary", "getppid", base, []float64{457.332605, 457.340065, 457.33749}},
		{"voluntary-dyn", "getppid", dyn, []float64{543.40709, 543.38011, 543.39585}},
		{"full", "getppid", dyn, []float64{543.361065, 543.371875, 543.37578}},
	}
	var out []evaluate.Sample
	for boot := 0; boot < 3; boot++ {
		for _, d := range data {
			out = append(out, evaluate.Sample{Variant: d.variant, Benchmark: d.bench, Metric: "ns/op", Unit: "ns/op",
				Value: d.vals[boot], Boot: boot, Time: gen.Add(time.Duration(boot) * time.Minute), BuildID: d.buildID,
				Deterministic: true})
		}
	}
	return out
}

func seedReport(t *testing.T) *Report {
	t.Helper()
	qemu := []string{"qemu-system-ppc64", "-M", "pseries", "-cpu", "POWER9", "-smp", "1", "-m", "512",
		"-nographic", "-vga", "none", "-icount", "shift=0,sleep=off", "-no-reboot"}
	env := evaluate.Environment{Target: "qemu", QEMUArgs: qemu, Deterministic: true, Cmdline: "console=hvc0"}
	r := &Report{
		Title:       "ppc-preempt-dynamic",
		ID:          "run-20261130-0700",
		Interleaved: true,
		Generated:   gen,
		Series: SeriesInfo{Title: "powerpc: Enable dynamic preemption (v6.1 backport)",
			Subject: "[PATCH 6.1 v4 0/1] powerpc: Enable dynamic preemption (v6.1 backport)",
			Version: 4, Author: mbox.Address{Name: "Kernel Tester", Email: "tester@example.org"},
			MessageID: "20261102093000.4121-0-tester@example.org", Patches: 1,
			PatchHashes: []string{sha256Hex("diff")}},
		Tree: TreeInfo{Name: "Debian linux-source-6.1", Path: "/var/cache/patcheval/linux.git",
			Base: "0123456789abcdef0123456789abcdef01234567", BaseName: "v6.1-debian",
			Commits: []Commit{{Hash: "89abcdef0123456789abcdef0123456789abcdef", Subject: "powerpc: enable dynamic preemption"}}},
		Arch: "ppc64le",
		Target: TargetInfo{Kind: "qemu", Description: "QEMU pseries, POWER9, TCG, 1 vCPU, 512 MiB",
			Command: qemu, Deterministic: true},
		Variants: []Variant{
			{Name: "voluntary", Config: []string{"PREEMPT_VOLUNTARY=y"}, Cmdline: "console=hvc0", Env: env, Boots: 3, BuildSeconds: 301},
			{Name: "voluntary-dyn", Description: "the Config B the thread asked for", Patched: true,
				Config: []string{"PREEMPT_VOLUNTARY=y", "PREEMPT_DYNAMIC=y"}, Cmdline: "console=hvc0",
				Runtime: []string{"/sys/kernel/debug/sched/preempt: voluntary"}, Env: env, Boots: 3, BuildSeconds: 315},
			{Name: "full", Description: "the voluntary-dyn kernel switched to full preemption at run time", Patched: true,
				Config: []string{"PREEMPT_VOLUNTARY=y", "PREEMPT_DYNAMIC=y"}, Cmdline: "console=hvc0",
				Runtime: []string{"/sys/kernel/debug/sched/preempt: full"}, Env: env, Boots: 3},
		},
		Confounds: []Confound{{Base: "voluntary", Other: "voluntary-dyn", Deltas: []ConfigDelta{
			{Symbol: "PREEMPT_DYNAMIC", From: "n", To: "y", Requested: true},
			{Symbol: "PREEMPT_BUILD", From: "n", To: "y", Rule: "select PREEMPT_BUILD (PREEMPT_DYNAMIC)", Where: "kernel/Kconfig.preempt:100",
				Via: []string{"PREEMPT_DYNAMIC"}},
			{Symbol: "PREEMPTION", From: "n", To: "y", Rule: "select PREEMPTION (PREEMPT_BUILD)", Where: "kernel/Kconfig.preempt:11",
				Via: []string{"PREEMPT_DYNAMIC", "PREEMPT_BUILD"}},
			{Symbol: "PREEMPT_RCU", From: "n", To: "y", Rule: "default y if PREEMPTION", Where: "kernel/rcu/Kconfig:21", Highlight: true,
				Via: []string{"PREEMPT_DYNAMIC", "PREEMPT_BUILD", "PREEMPTION"}},
			{Symbol: "CC_HAS_SOMETHING", From: "n", To: "y", Mechanical: true},
		}}},
		Notes: []string{"SELinux: no policy loaded (selinux=1 without a policy: the hooks run, every check is allowed)"},
		Timings: []StageTiming{
			{Stage: "fetch", Duration: 400 * time.Millisecond},
			{Stage: "apply", Duration: 1100 * time.Millisecond},
			{Stage: "build", Duration: 14*time.Minute + 12*time.Second, Note: "3 kernels, ccache cold"},
			{Stage: "boot", Duration: 63 * time.Second},
			{Stage: "benchmark", Duration: 3*time.Minute + 5*time.Second},
			{Stage: "report", Duration: 120 * time.Millisecond},
		},
	}
	err := r.AddResults(seedSamples(), Spec{
		Comparisons: []Pair{{"voluntary", "voluntary-dyn"}, {"voluntary-dyn", "full"}},
		Chains:      [][]string{{"voluntary", "voluntary-dyn", "full"}},
		Stats:       stats.Options{Alpha: 0.05},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// golden compares got with testdata/golden/name (rewritten with -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update to accept):\n--- got\n%s", name, got)
	}
}

func TestAddResults(t *testing.T) {
	r := seedReport(t)
	if len(r.Benchmarks) != 2 || r.Benchmarks[0].Name != "kill" || r.Benchmarks[1].Name != "getppid" {
		t.Fatalf("benchmarks %+v", r.Benchmarks)
	}
	kill := r.Benchmarks[0]
	if kill.HigherIsBetter {
		t.Errorf("ns/op must be lower-is-better")
	}
	if kill.Rows[0].Variant != "voluntary" || kill.Rows[1].Variant != "voluntary-dyn" || kill.Rows[2].Variant != "full" {
		t.Errorf("row order %+v", kill.Rows)
	}
	c := kill.Comparisons[0]
	if c.Verdict != stats.Regression || c.Change < 24.5 || c.Change > 24.7 {
		t.Errorf("voluntary -> voluntary-dyn: %s %+.2f%%", c.Verdict, c.Change)
	}
	if len(r.Regressions()) != 2 {
		t.Errorf("regressions %q", r.Regressions())
	}
	if len(r.Decompositions) != 2 || r.Decompositions[0].Steps[0].Share < 90 {
		t.Errorf("decompositions %+v", r.Decompositions)
	}
	if len(kill.Runs) != 9 {
		t.Errorf("runs %d", len(kill.Runs))
	}
	if err := (&Report{}).AddResults(seedSamples(), Spec{Comparisons: []Pair{{"voluntary", "lazy"}}}); err == nil ||
		!strings.Contains(err.Error(), `"lazy"`) {
		t.Errorf("unknown variant: %v", err)
	}
}

func TestRenderGolden(t *testing.T) {
	r := seedReport(t)
	for _, c := range []struct {
		name  string
		write func(*bytes.Buffer, *Report) error
	}{
		{"ppc.txt", func(b *bytes.Buffer, r *Report) error { return WriteText(b, r) }},
		{"ppc.json", func(b *bytes.Buffer, r *Report) error { return WriteJSON(b, r) }},
		{"ppc.md", func(b *bytes.Buffer, r *Report) error { return WriteMarkdown(b, r) }},
		{"ppc.kcidb.json", func(b *bytes.Buffer, r *Report) error { return WriteKCIDB(b, r) }},
	} {
		var b bytes.Buffer
		if err := c.write(&b, r); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		golden(t, c.name, b.Bytes())
	}
}

func TestJSONRoundTrip(t *testing.T) {
	r := seedReport(t)
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Benchmarks[0].Comparisons[0].Verdict != stats.Regression || back.Benchmarks[0].Comparisons[0].Base != "voluntary" ||
		back.Benchmarks[0].Rows[1].Mean != r.Benchmarks[0].Rows[1].Mean {
		t.Fatalf("round trip lost data: %+v", back.Benchmarks[0].Comparisons[0])
	}
}

// TestRCUPerRun renders the RCU thread's per-run table (mean/min/max per
// run, 10 runs of 100 synchronize_rcu() calls).
func TestRCUPerRun(t *testing.T) {
	base := [][3]float64{{10.088, 9.989, 18.848}, {10.064, 9.982, 16.470}, {10.051, 9.988, 15.113},
		{10.125, 9.929, 22.411}, {8.695, 5.996, 15.471}, {10.157, 9.977, 25.723}, {10.102, 9.990, 20.224},
		{8.050, 5.985, 10.007}, {10.059, 9.978, 15.934}, {10.077, 9.984, 17.703}}
	fix := [][3]float64{{6.027, 5.915, 8.589}, {6.032, 5.984, 9.241}, {6.010, 5.986, 7.004},
		{6.076, 5.993, 10.001}, {6.084, 5.893, 10.250}, {6.034, 5.908, 9.456}, {6.051, 5.993, 10.000},
		{6.057, 5.941, 10.001}, {6.016, 5.927, 7.540}, {6.036, 5.993, 9.579}}
	var ss []evaluate.Sample
	for i := range base {
		ss = append(ss, evaluate.Sample{Variant: "baseline", Benchmark: "synchronize_rcu", Metric: "latency_ms", Unit: "ms",
			Value: base[i][0], Boot: i, Extra: map[string]float64{"min": base[i][1], "max": base[i][2]}})
		ss = append(ss, evaluate.Sample{Variant: "with-fix", Benchmark: "synchronize_rcu", Metric: "latency_ms", Unit: "ms",
			Value: fix[i][0], Boot: i, Extra: map[string]float64{"min": fix[i][1], "max": fix[i][2]}})
	}
	r := &Report{Title: "rcu-sync-latency", Generated: gen, Arch: "ppc64le", PerRun: true,
		Variants: []Variant{{Name: "baseline"}, {Name: "with-fix", Patched: true}},
		Target:   TargetInfo{Kind: "qemu"}}
	if err := r.AddResults(ss, Spec{Comparisons: []Pair{{"baseline", "with-fix"}}}); err != nil {
		t.Fatal(err)
	}
	b := r.Benchmarks[0]
	if b.HigherIsBetter || b.Comparisons[0].Verdict != stats.Improvement {
		t.Fatalf("rcu: %v %s", b.HigherIsBetter, b.Comparisons[0].Verdict)
	}
	// Mean of the run means: 9.75 ms -> 6.04 ms, the thread's summary.
	if m := b.Rows[0].Mean; m < 9.746 || m > 9.748 {
		t.Errorf("baseline mean %.4f", m)
	}
	var txt bytes.Buffer
	if err := WriteText(&txt, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Run  latency_ms    min     max", "  6      10.157  9.977  25.723", "improvement"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, txt.String())
		}
	}
	golden(t, "rcu.txt", txt.Bytes())
	d, err := NewDraft(r, patchMsg(t), DraftOptions{From: mbox.Address{Name: "Tester", Email: "t@example.org"}, Now: gen,
		Rand: bytes.NewReader(make([]byte, 8))})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckBody(d.Body); err != nil {
		t.Fatal(err)
	}
}

func TestNum(t *testing.T) {
	for _, c := range []struct {
		v    float64
		dec  int
		want string
	}{{105014, 0, "105,014"}, {-73317.4, 0, "-73,317"}, {955.06, 1, "955.1"}, {1234567.891, 2, "1,234,567.89"},
		{0.0004, 3, "0.000"}, {-0.0004, 3, "0.000"}, {999, 0, "999"}} {
		if got := Num(c.v, c.dec); got != c.want {
			t.Errorf("Num(%v,%d) = %q, want %q", c.v, c.dec, got, c.want)
		}
	}
	if Pct(24.8) != "+24.8%" || Pct(-30.18) != "-30.2%" || Pct(0.123) != "+0.12%" {
		t.Errorf("Pct: %s %s %s", Pct(24.8), Pct(-30.18), Pct(0.123))
	}
}

func TestWrapAndTableFit(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, l := range Wrap("a "+long+" b", 72, "- ", "  ") {
		if Width(l) > 72 {
			t.Errorf("wrapped line %d wide: %q", Width(l), l)
		}
	}
	// Very long variant names force the block layout, which fits.
	tb := &table{head: []string{"Variant", "n", "mean", "stddev", "min", "max"}, right: []bool{false, true, true, true, true, true}}
	tb.rows = append(tb.rows, []string{"voluntary+PREEMPT_DYNAMIC+PREEMPT_RCU+selinux=0+some-more-knobs", "3", "1,192.4", "0.65", "1,191.8", "1,193.1"})
	lines := tb.lines("  ", 72)
	if !fits(lines, 72) {
		t.Errorf("table does not fit:\n%s", strings.Join(lines, "\n"))
	}
	if !strings.Contains(strings.Join(lines, "\n"), "mean:   1,192.4") {
		t.Errorf("block layout:\n%s", strings.Join(lines, "\n"))
	}
	if Width("日本語") != 6 || Width("café") != 4 {
		t.Errorf("width: %d %d", Width("日本語"), Width("café"))
	}
}

// TestNaNSample: a NaN measurement is ignored by the statistics, marked
// in the runs, and every renderer still works.
func TestNaNSample(t *testing.T) {
	ss := seedSamples()
	nan := 0.0
	nan /= nan
	ss = append(ss, evaluate.Sample{Variant: "full", Benchmark: "kill", Metric: "ns/op", Value: nan, Boot: 3,
		Extra: map[string]float64{"min": nan}})
	r := &Report{Title: "nan", Generated: gen, Variants: []Variant{{Name: "voluntary"}, {Name: "voluntary-dyn"}, {Name: "full"}}}
	if err := r.AddResults(ss, Spec{Comparisons: []Pair{{"voluntary", "full"}}}); err != nil {
		t.Fatal(err)
	}
	k := r.Benchmarks[0]
	if k.Rows[2].N != 3 || k.Rows[2].Dropped != 1 || len(k.Runs) != 10 || !k.Runs[9].Invalid {
		t.Fatalf("rows %+v runs %+v", k.Rows[2], k.Runs[9])
	}
	var b bytes.Buffer
	for _, w := range []func(*bytes.Buffer, *Report) error{
		func(b *bytes.Buffer, r *Report) error { return WriteJSON(b, r) },
		func(b *bytes.Buffer, r *Report) error { return WriteText(b, r) },
		func(b *bytes.Buffer, r *Report) error { return WriteMarkdown(b, r) },
		func(b *bytes.Buffer, r *Report) error { return WriteKCIDB(b, r) },
	} {
		b.Reset()
		if err := w(&b, r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTargetFromEnv(t *testing.T) {
	q := TargetFromEnv(evaluate.Environment{Target: "qemu", QEMUArgs: []string{"qemu-system-ppc64", "-icount", "shift=0"}, Deterministic: true})
	if q.Kind != "qemu" || !q.Deterministic || len(q.Command) != 3 {
		t.Errorf("%+v", q)
	}
	s := TargetFromEnv(evaluate.Environment{Target: "ssh://root@power10"})
	if s.Kind != "ssh" || s.Host != "root@power10" || s.Deterministic {
		t.Errorf("%+v", s)
	}
}

// TestBaseRule: the report says which rule chose the base, in text,
// Markdown, JSON and the draft; reports without one (stored before the
// rule, the goldens) render as before.
func TestBaseRule(t *testing.T) {
	r := seedReport(t)
	r.Tree = TreeInfo{Name: "Debian linux-source-7.2 7.2.13-1", Path: "/trees/linux-releases.git",
		Base: "0123456789abcdef0123456789abcdef01234567", BaseName: "HEAD (master)", BaseRule: "the tree's HEAD",
		BaseWhy: "no --base and no base-commit in the series: using HEAD (master)"}
	want := "base HEAD (master) (0123456789ab); base rule: no --base and no base-commit in the series: using HEAD (master)"
	var text, md, js bytes.Buffer
	if err := WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text.String(), "markdown": md.String()} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) { // the text wraps
			t.Errorf("%s report lacks %q", name, want)
		}
	}
	if !strings.Contains(js.String(), `"base_rule": "the tree's HEAD"`) || !strings.Contains(js.String(), `"base_why": "no --base`) {
		t.Errorf("JSON lacks base_rule/base_why:\n%s", js.String())
	}
}

// TestLayoutVerdictUnresolved: an aligned comparison too noisy to tell
// the change from none, whose interval still holds the change, leaves the
// layout question open (it used to say layout-sensitive: "does not
// survive", of a +17% regression whose aligned rebuilds showed +17%
// inconclusive); one whose interval excludes the change, or that is
// equivalent, is layout-sensitive.
func TestLayoutVerdictUnresolved(t *testing.T) {
	reg := stats.Comparison{Verdict: stats.Regression, Change: 17.6, CILow: 0.8, CIHigh: 37.8, CIBounded: true}
	for _, c := range []struct {
		name    string
		aligned stats.Comparison
		want    string
	}{
		{"noisy, holds the change", stats.Comparison{Verdict: stats.Inconclusive, Change: 17.0, CILow: -11.8, CIHigh: 58.1, CIBounded: true}, LayoutUnresolved},
		{"unbounded", stats.Comparison{Verdict: stats.Inconclusive, Change: 5}, LayoutUnresolved},
		{"shrunk below the change", stats.Comparison{Verdict: stats.Inconclusive, Change: 2, CILow: -1, CIHigh: 6, CIBounded: true}, LayoutSensitive},
		{"gone", stats.Comparison{Verdict: stats.Equivalent, Change: 0.1, CILow: -0.4, CIHigh: 0.6, CIBounded: true}, LayoutSensitive},
		{"reversed", stats.Comparison{Verdict: stats.Improvement, Change: -9, CILow: -14, CIHigh: -4, CIBounded: true}, LayoutSensitive},
		{"survives", stats.Comparison{Verdict: stats.Regression, Change: 15, CILow: 5, CIHigh: 25, CIBounded: true}, LayoutStable},
	} {
		got, note := LayoutVerdict(reg, c.aligned)
		if got != c.want || !strings.HasPrefix(note, c.want+": ") {
			t.Errorf("%s: %q (%s), want %s", c.name, got, note, c.want)
		}
	}
	got, note := LayoutVerdict(reg, stats.Comparison{Verdict: stats.Inconclusive, Change: 17.0, CILow: -11.8, CIHigh: 58.1, CIBounded: true})
	if got != LayoutUnresolved || !strings.Contains(note, "+17.6%") || !strings.Contains(note, "more boots would decide") {
		t.Errorf("unresolved note %q", note)
	}
}

// TestLayoutVerdicts: a regression that the function-aligned rebuilds
// show too is layout-stable; one they do not is layout-sensitive; the
// layout controls are marked and not counted as regressions of their own.
func TestLayoutVerdicts(t *testing.T) {
	means := map[string]map[string]float64{
		"kill":    {"a": 1000, "b": 1100, "a+align64": 1010, "b+align64": 1112}, // +10%, +10%
		"getppid": {"a": 500, "b": 550, "a+align64": 505, "b+align64": 505},     // +10%, 0%
		"execve":  {"a": 800, "b": 800, "a+align64": 790, "b+align64": 830},     // 0%: nothing to check
	}
	var ss []evaluate.Sample
	for bench, m := range means {
		for v, mean := range m {
			for boot, d := range []float64{-1, 0, 1, 0.5} {
				ss = append(ss, evaluate.Sample{Variant: v, Benchmark: bench, Metric: "ns/op", Unit: "ns/op", Value: mean * (1 + d/1000), Boot: boot})
			}
		}
	}
	r := &Report{}
	spec := Spec{Comparisons: []Pair{{"a", "b"}, {"a+align64", "b+align64"}},
		Layout: map[Pair]Pair{{"a", "b"}: {"a+align64", "b+align64"}}}
	if err := r.AddResults(ss, spec); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"kill": LayoutStable, "getppid": LayoutSensitive, "execve": ""}
	for _, b := range r.Benchmarks {
		if len(b.Comparisons) != 2 || b.Comparisons[0].Aligned || !b.Comparisons[1].Aligned {
			t.Fatalf("%s: comparisons %+v", b.Name, b.Comparisons)
		}
		c := b.Comparisons[0]
		if c.Layout != want[b.Name] || (c.Layout != "" && !strings.HasPrefix(c.LayoutNote, c.Layout+": ")) {
			t.Errorf("%s: layout %q (%s), want %q", b.Name, c.Layout, c.LayoutNote, want[b.Name])
		}
	}
	if regs := r.Regressions(); len(regs) != 2 || strings.Contains(strings.Join(regs, " "), "align64") {
		t.Errorf("regressions %q: want kill's and getppid's, not their layout controls'", regs)
	}
	var text strings.Builder
	if err := WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "layout control: layout-sensitive: the regression does not survive forced function alignment") {
		t.Errorf("the text report does not give the verdict:\n%s", text.String())
	}
}
