package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/mbox/numbers"
)

func threadNumbers(t *testing.T, name string) []numbers.Number {
	t.Helper()
	path := filepath.Join(testenv.ThreadsDir(), name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := mbox.ParseBytes(data, path)
	if err != nil {
		t.Fatal(err)
	}
	return numbers.Read(mbox.NewThread(ms, path))
}

// The seed report with the seed thread's numbers: the thread measured
// stress-ng --kill and perf bench syscall basic, the seed report has only
// the agent's kill and getppid loops, which approximate them: the
// thread's numbers are listed as its other numbers, and no figure of
// patcheval's is set beside them. Only that section differs from ppc.txt
// and ppc.eml.
func TestThreadBesideGolden(t *testing.T) {
	r := seedReport(t)
	r.Thread = append(threadNumbers(t, "ppc-dynamic-preempt-v4.mbox"), threadNumbers(t, "generic-entry-v5-report.mbox")...)
	var txt, md bytes.Buffer
	if err := WriteText(&txt, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "ppc-thread.txt", txt.Bytes())
	golden(t, "ppc-thread.md", md.Bytes())
	d, err := NewDraft(r, patchMsg(t), DraftOptions{From: me, TestedBy: true, Now: gen.Add(time.Hour), Rand: bytes.NewReader([]byte{1, 2, 3, 4, 5, 6, 7, 8})})
	if err != nil {
		t.Fatal(err)
	}
	var eml bytes.Buffer
	if err := WriteDraft(&eml, *d); err != nil {
		t.Fatal(err)
	}
	golden(t, "ppc-thread.eml", eml.Bytes())
	_, body, _ := strings.Cut(eml.String(), "\n\n")
	for _, l := range strings.Split(body, "\n") {
		if Width(l) > 72 {
			t.Errorf("draft line over 72 columns: %q", l)
		}
	}
	for _, want := range []string{
		"- thread (POWER10, stress-ng) 6.16 (eln150): -32% bogo-ops/s",
		"The thread's other numbers for kill, not set beside patcheval's\n(measured with stress-ng; patcheval's kill loop only approximates it):",
	} {
		if !strings.Contains(eml.String(), want) {
			t.Errorf("draft lacks %q", want)
		}
	}
	// The agent's loops approximate the thread's tools: nothing of
	// patcheval's is set beside the thread's numbers, nothing converted.
	if strings.Contains(eml.String(), "- patcheval (") || strings.Contains(eml.String(), "as a rate") {
		t.Errorf("the draft sets an agent loop beside the thread's tool:\n%s", eml.String())
	}

	// Without thread numbers the renderers give what they gave.
	r.Thread = nil
	txt.Reset()
	WriteText(&txt, r)
	golden(t, "ppc.txt", txt.Bytes())
}

// preemptReport is a report of ppc-preempt-dynamic's kernels (every
// variant has the series, as the pipeline builds them) with the seed
// thread's numbers.
func preemptReport(t *testing.T) *Report {
	return &Report{Target: TargetInfo{Kind: "qemu", Deterministic: true}, Arch: "ppc64le",
		Thread: threadNumbers(t, "ppc-dynamic-preempt-v4.mbox"),
		Variants: []Variant{
			{Name: "voluntary", Patched: true, Config: []string{"PREEMPT_DYNAMIC=n", "PREEMPT_VOLUNTARY=y"}, Cmdline: "console=hvc0"},
			{Name: "voluntary+dyn", Patched: true, Config: []string{"PREEMPT_DYNAMIC=y", "PREEMPT_VOLUNTARY=y"}, Cmdline: "console=hvc0"},
			{Name: "voluntary+dyn@full", Patched: true, Config: []string{"PREEMPT_DYNAMIC=y", "PREEMPT_VOLUNTARY=y"}, Cmdline: "console=hvc0",
				Runtime: []string{"/sys/kernel/debug/sched/preempt=full"}},
		}}
}

// A stress-ng --kill benchmark of a preemption-model comparison: beside it
// only the thread's stress-ng kill changes between preemption models on
// POWER, no conversion. The thread's release bisection (it changes the
// release and PREEMPT_RCU at once), its x86 numbers and its SELinux modes
// are the thread's other numbers, each saying why.
func TestThreadBesideStressNG(t *testing.T) {
	r := preemptReport(t)
	b := Benchmark{Name: "stress-ng --kill 1 -t 23", Metric: "bogo-ops/s (real time)", Unit: "bogo-ops/s", HigherIsBetter: true, Source: "stress-ng",
		Comparisons: []Comparison{{Base: "voluntary", Other: "voluntary+dyn", Comparison: stats.Comparison{Change: -20.1, CILow: -20.6, CIHigh: -19.6, CIBounded: true, Confidence: 0.95}}}}
	got := strings.Join(threadLines(r, b, 0, "", 0), "\n")
	like, others, _ := strings.Cut(got, "The thread's other numbers")
	for _, want := range []string{
		"Reported in the thread, like for like (stress-ng, kill, varying the preemption model;",
		"- thread (POWER10, stress-ng) voluntary -> full+PREEMPT_RCU: -30.2% bogo-ops/s",
		"- thread (POWER10, stress-ng) Delta (6.15-rc6-voluntary-test -> 6.15-rc6-preempt-test): -30.2% bogo-ops/s",
		"- thread (ppc64le, stress-ng) Delta (full -> lazy): ~1% bogo-ops/s",
		"- patcheval (deterministic QEMU, stress-ng) voluntary -> voluntary+dyn: -20.1% bogo-ops/s (95% CI -20.6% .. -19.6%)",
	} {
		if !strings.Contains(like, want) {
			t.Errorf("like for like lacks %q:\n%s", want, got)
		}
	}
	for _, want := range []string{
		"for kill, not set beside patcheval's (varies the kernel release; patcheval's comparisons vary the preemption model):\n" +
			"- thread (POWER10, stress-ng) 6.16 (eln150): -32% bogo-ops/s",
		"for kill, not set beside patcheval's (on x86, not powerpc):\n- thread (x86_64, stress-ng) 7.2 x86_64: -2.8% bogo-ops/s",
		"(varies the SELinux mode; patcheval's comparisons vary the preemption model):\n" +
			"- thread (ppc64le, stress-ng) Permissive: +1.6% bogo-ops/s vs enforcing",
	} {
		if !strings.Contains(others, want) {
			t.Errorf("other numbers lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "as time per op") || strings.Contains(got, "avc_lookup") || strings.Contains(others, "patcheval (") {
		t.Errorf("converted, a profile share set beside a rate, or ours beside another kind of change:\n%s", got)
	}
	// The agent's kill loop only approximates stress-ng: nothing of the
	// thread's is like for like with it, and nothing of ours is shown.
	loop := Benchmark{Name: "kill", Metric: "ns/op", Unit: "ns/op", Source: "agent loop", Comparisons: b.Comparisons}
	got = strings.Join(threadLines(r, loop, 0, "", 0), "\n")
	if strings.Contains(got, "like for like (") || strings.Contains(got, "patcheval (") || strings.Contains(got, "as a rate") ||
		!strings.Contains(got, "(measured with stress-ng; patcheval's kill loop only approximates it):") {
		t.Errorf("the agent's loop set beside the thread's stress-ng:\n%s", got)
	}
	// A comparison of two things at once (series and model) has nothing
	// like for like.
	r.Variants[0].Patched = false
	if got := strings.Join(threadLines(r, b, 0, "", 0), "\n"); strings.Contains(got, "like for like (") {
		t.Errorf("a comparison varying the series and the model got like-for-like rows:\n%s", got)
	}
	// Nothing beside a benchmark the thread does not report.
	b.Name = "stress-ng --fork 1"
	if l := threadLines(r, b, 0, "", 0); l != nil {
		t.Errorf("fork: %q", l)
	}
}

// selinux-tax's comparisons (SELinux modes, one kernel) get the thread's
// SELinux rows, not its preemption-model or release rows.
func TestThreadBesideSELinuxModes(t *testing.T) {
	r := &Report{Target: TargetInfo{Kind: "qemu", Deterministic: true}, Arch: "ppc64le", Thread: threadNumbers(t, "ppc-dynamic-preempt-v4.mbox"),
		Variants: []Variant{
			{Name: "disabled", Cmdline: "security=selinux selinux=0", Runtime: []string{"SELinux disabled"}},
			{Name: "enforcing", Cmdline: "security=selinux", Runtime: []string{"SELinux enforcing (policy p loaded through selinuxfs)"}},
		}}
	b := Benchmark{Name: "stress-ng --kill 1 -t 5", Metric: "bogo-ops/s (real time)", Unit: "bogo-ops/s", HigherIsBetter: true, Source: "stress-ng",
		Comparisons: []Comparison{{Base: "disabled", Other: "enforcing", Comparison: stats.Comparison{Change: -16.3, CILow: -16.5, CIHigh: -16.1, CIBounded: true, Confidence: 0.95}}}}
	got := strings.Join(threadLines(r, b, 0, "", 0), "\n")
	like, _, _ := strings.Cut(got, "The thread's other numbers")
	for _, want := range []string{"varying the SELinux mode", "Permissive: +1.6% bogo-ops/s vs enforcing", "Disabled: +35.4% bogo-ops/s vs enforcing",
		"patcheval (deterministic QEMU, stress-ng) disabled -> enforcing: -16.3% bogo-ops/s"} {
		if !strings.Contains(like, want) {
			t.Errorf("like for like lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(like, "lazy") || strings.Contains(like, "eln150") {
		t.Errorf("preemption-model or release rows beside SELinux modes:\n%s", like)
	}
}

// perf bench's own label matches the thread's perf bench table, both
// measuring a series (base -> patched); the conversion between its
// usec/op and ops/s is the same benchmark's.
func TestThreadBesidePerfBench(t *testing.T) {
	r := &Report{Target: TargetInfo{Kind: "qemu", Deterministic: true}, Arch: "ppc64le", Thread: threadNumbers(t, "generic-entry-v5-report.mbox"),
		Variants: []Variant{{Name: "base"}, {Name: "patched", Patched: true}}}
	b := Benchmark{Name: "perf bench syscall getpgid", Metric: "usec/op", Unit: "usec/op", Source: "perf bench",
		Comparisons: []Comparison{{Base: "base", Other: "patched", Comparison: stats.Comparison{Change: 1.5, Exact: true, CIBounded: true, Confidence: 0.95}}}}
	got := strings.Join(threadLines(r, b, 0, "", 0), "\n")
	for _, want := range []string{
		"like for like (perf bench, syscall getpgid, varying the series (without -> with);",
		"- thread (ppc64le, perf bench) getpgid [test]: -5.11% us/op vs Base (Mukesh Kumar Chaurasiya (IBM), quoted,",
		"- thread (ppc64le, perf bench) getpgid [New]: +5.38% ops/s vs Base",
		"- patcheval (deterministic QEMU, perf bench) base -> patched: +1.50% usec/op (exact), as a rate -1.48%",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	// The agent's getpgid loop is not perf bench: no row, no conversion.
	b.Name, b.Source, b.Unit = "getpgid", "agent loop", "ns/op"
	got = strings.Join(threadLines(r, b, 0, "", 0), "\n")
	if strings.Contains(got, "patcheval (") || !strings.Contains(got, "measured with perf bench; patcheval's getpgid loop only approximates it") {
		t.Errorf("the getpgid loop beside perf bench:\n%s", got)
	}
}

func TestReciprocal(t *testing.T) {
	for _, c := range [][2]float64{{24.8, -19.87}, {-50, 100}, {0, 0}} {
		if got := reciprocal(c[0]); got < c[1]-0.01 || got > c[1]+0.01 {
			t.Errorf("reciprocal(%v) = %v, want %v", c[0], got, c[1])
		}
	}
}

// The RCU thread's "Mean latency: 9.75 ms -> 6.04 ms (38% improvement)"
// is about synchronize_rcu latency, but measured with the thread's own
// instrumentation, between a kernel with and without the fix; patcheval's
// rcu loop (membarrier) approximates it: the thread's other numbers, with
// nothing of patcheval's beside it. Its Max latency (another statistic)
// and task-clock (not a latency) are not listed at all.
func TestThreadBesideRCU(t *testing.T) {
	r := &Report{Target: TargetInfo{Kind: "qemu"}, Thread: threadNumbers(t, "rcu-gp-qs-v2.mbox")}
	b := Benchmark{Name: "rcu", Metric: "latency_ms", Unit: "ms", Source: "agent loop",
		Comparisons: []Comparison{{Base: "baseline", Other: "with-fix", Comparison: stats.Comparison{Change: -38.0, CILow: -41.2, CIHigh: -34.4, CIBounded: true, Confidence: 0.95}}}}
	got := strings.Join(threadLines(r, b, 0, "", 0), "\n")
	want := "The thread's other numbers for synchronize_rcu, not set beside patcheval's (measured with a tool the thread does not name; patcheval's rcu loop only approximates it):\n" +
		"- thread Mean latency: -38% ms vs 9.75 ms (Joel Fernandes, <20251222224629.856aa18b-0-joelagnelf@nvidia.com> line 49)"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// mainJobSamples are a real run's samples of ppc-preempt-dynamic with
// stress-ng --kill beside the loops: bench/seed-stressng.sh --boots 1
// (stress-ng --kill 1 -t 5), 2026-12-02 06:17 UTC, the PERF_EVENTS
// pseries kernels, one deterministic boot per variant
// (bench/seed-results.md, "stress-ng per seed variant").
func mainJobSamples() []evaluate.Sample {
	rows := []struct {
		variant               string
		kill, getppid, sr, su float64
	}{
		{"voluntary", 983.66, 457.34, 15159.32, 15431.68},
		{"voluntary+dyn", 1225.84, 543.38, 12629.18, 12840.00},
		{"voluntary+dyn@full", 1225.68, 543.38, 12688.13, 12903.85},
		{"full", 1233.82, 551.39, 12571.92, 12777.57},
	}
	var out []evaluate.Sample
	for i, r := range rows {
		at := gen.Add(time.Duration(i) * time.Minute)
		s := func(bench, metric, unit string, v float64, higher bool) evaluate.Sample {
			return evaluate.Sample{Variant: r.variant, Benchmark: bench, Metric: metric, Unit: unit, Value: v, HigherIsBetter: higher,
				Time: at, Deterministic: true}
		}
		out = append(out,
			s("stress-ng --kill 1 -t 5", "bogo-ops/s (real time)", "bogo-ops/s", r.sr, true),
			s("stress-ng --kill 1 -t 5", "bogo-ops/s (usr+sys time)", "bogo-ops/s", r.su, true),
			s("kill", "ns/op", "ns/op", r.kill, false),
			s("getppid", "ns/op", "ns/op", r.getppid, false))
	}
	return out
}

// The main job's shape (scripts/main-job: the backport thread, with the
// upstream v4 thread's numbers through --thread-numbers) on a real run's
// samples: stress-ng --kill's bogo-ops/s get the thread's stress-ng
// changes between preemption models on POWER like for like; the thread's
// release bisection, its x86 numbers and its SELinux modes are its other
// numbers; the loops get no thread row.
func TestThreadMainJobGolden(t *testing.T) {
	r := seedReport(t)
	r.Variants = []Variant{
		{Name: "voluntary", Description: "Config A: voluntary preemption, no dynamic preemption", Patched: true,
			Config: []string{"PREEMPT_DYNAMIC=n", "PREEMPT_VOLUNTARY=y"}, Cmdline: "console=hvc0", Boots: 1},
		{Name: "voluntary+dyn", Description: "Config B: voluntary preemption with PREEMPT_DYNAMIC (selects PREEMPT_RCU)", Patched: true,
			Config: []string{"PREEMPT_DYNAMIC=y", "PREEMPT_VOLUNTARY=y"}, Cmdline: "console=hvc0", Boots: 1},
		{Name: "voluntary+dyn@full", Description: "Config B's kernel switched to full preemption at run time", Patched: true,
			Config: []string{"PREEMPT_DYNAMIC=y", "PREEMPT_VOLUNTARY=y"}, Cmdline: "console=hvc0",
			Runtime: []string{"/sys/kernel/debug/sched/preempt=full"}, Boots: 1},
		{Name: "full", Description: "full preemption (PREEMPT=y, which brings PREEMPT_RCU)", Patched: true,
			Config: []string{"PREEMPT=y", "PREEMPT_DYNAMIC=n", "PREEMPT_VOLUNTARY=n"}, Cmdline: "console=hvc0", Boots: 1},
	}
	r.Confounds[0].Other = "voluntary+dyn"
	r.Benchmarks, r.Decompositions, r.Timings = nil, nil, nil
	err := r.AddResults(mainJobSamples(), Spec{
		Comparisons: []Pair{{"voluntary", "voluntary+dyn"}, {"voluntary", "full"}, {"voluntary+dyn", "voluntary+dyn@full"}},
		Chains:      [][]string{{"voluntary", "voluntary+dyn", "full"}},
		Stats:       stats.Options{Alpha: 0.05},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Thread = threadNumbers(t, "ppc-dynamic-preempt-v4.mbox")
	var txt bytes.Buffer
	if err := WriteText(&txt, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "ppc-mainjob-thread.txt", txt.Bytes())
	d, err := NewDraft(r, patchMsg(t), DraftOptions{From: me, Now: gen.Add(time.Hour), Rand: bytes.NewReader([]byte{1, 2, 3, 4, 5, 6, 7, 8})})
	if err != nil {
		t.Fatal(err)
	}
	var eml bytes.Buffer
	if err := WriteDraft(&eml, *d); err != nil {
		t.Fatal(err)
	}
	golden(t, "ppc-mainjob-thread.eml", eml.Bytes())
	for _, want := range []string{
		"- thread (POWER10, stress-ng) voluntary -> full+PREEMPT_RCU: -30.2%",
		"- patcheval (deterministic QEMU, stress-ng) voluntary -> voluntary+dyn:\n  -16.7% bogo-ops/s",
	} {
		if !strings.Contains(eml.String(), want) {
			t.Errorf("draft lacks %q", want)
		}
	}
	// Only under the real-time rate: the thread's bogo-ops/sec is not the
	// usr+sys one.
	if n := strings.Count(eml.String(), "Reported in the thread, like for like"); n != 1 {
		t.Errorf("%d like-for-like sections, want 1 (stress-ng's real-time rate)", n)
	}
}
