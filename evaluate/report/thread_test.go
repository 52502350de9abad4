package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// The seed report with the seed thread's numbers: the thread's kill
// changes (bogo-ops/s) beside the agent's kill loop (ns/op, converted to
// a rate), the thread's perf bench syscall basic beside the getppid loop
// when the thread has one. Only the new section differs from ppc.txt and
// ppc.eml.
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
		"- patcheval (deterministic QEMU, agent loop) voluntary ->",
	} {
		if !strings.Contains(eml.String(), want) {
			t.Errorf("draft lacks %q", want)
		}
	}

	// Without thread numbers the renderers give what they gave.
	r.Thread = nil
	txt.Reset()
	WriteText(&txt, r)
	golden(t, "ppc.txt", txt.Bytes())
}

// A stress-ng benchmark beside the thread's stress-ng kill table: same
// metric, no conversion; the form the issue asks for.
func TestThreadBesideStressNG(t *testing.T) {
	r := &Report{Target: TargetInfo{Kind: "qemu", Deterministic: true}, Thread: threadNumbers(t, "ppc-dynamic-preempt-v4.mbox")}
	b := Benchmark{Name: "stress-ng --kill 1 -t 23", Metric: "bogo-ops/s (real time)", Unit: "bogo-ops/s", HigherIsBetter: true, Source: "stress-ng",
		Comparisons: []Comparison{{Base: "voluntary", Other: "voluntary+dyn", Comparison: stats.Comparison{Change: -20.1, CILow: -20.6, CIHigh: -19.6, CIBounded: true, Confidence: 0.95}}}}
	got := strings.Join(threadLines(r, b, 0, "", 0), "\n")
	for _, want := range []string{
		"- thread (POWER10, stress-ng) 6.16 (eln150): -32% bogo-ops/s (Jirka Hladky, <20260727000300.40b5a8af-2-jhladky@redhat.com> line 14)",
		"- thread (POWER10, stress-ng) 6.18 (eln154): -30% bogo-ops/s",
		"- thread (x86_64, stress-ng) 7.2 x86_64: -2.8% bogo-ops/s",
		"- thread (POWER10, stress-ng) voluntary -> full+PREEMPT_RCU: -30.2% bogo-ops/s",
		"- patcheval (deterministic QEMU, stress-ng) voluntary -> voluntary+dyn: -20.1% bogo-ops/s (95% CI -20.6% .. -19.6%)\n",
	} {
		if !strings.Contains(got+"\n", want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "as time per op") || strings.Contains(got, "avc_lookup") {
		t.Errorf("converted, or a profile share set beside a rate:\n%s", got)
	}
	// Nothing beside a benchmark the thread does not report.
	b.Name = "stress-ng --fork 1"
	if l := threadLines(r, b, 0, "", 0); l != nil {
		t.Errorf("fork: %q", l)
	}
	// perf bench's own label matches the thread's perf bench table.
	r.Thread = threadNumbers(t, "generic-entry-v5-report.mbox")
	b = Benchmark{Name: "perf bench syscall getpgid", Metric: "usec/op", Unit: "usec/op", Source: "perf bench",
		Comparisons: []Comparison{{Base: "base", Other: "patched", Comparison: stats.Comparison{Change: 1.5, Exact: true, CIBounded: true, Confidence: 0.95}}}}
	got = strings.Join(threadLines(r, b, 0, "", 0), "\n")
	for _, want := range []string{
		"- thread (ppc64le, perf bench) getpgid [test]: -5.11% us/op vs Base (Mukesh Kumar Chaurasiya (IBM), quoted,",
		"- thread (ppc64le, perf bench) getpgid [New]: +5.38% ops/s vs Base",
		"- patcheval (deterministic QEMU, perf bench) base -> patched: +1.50% usec/op (exact), as a rate -1.48%",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
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
// beside the synchronize_rcu latency; its Max latency (another statistic)
// and task-clock (not a latency) are not.
func TestThreadBesideRCU(t *testing.T) {
	r := &Report{Target: TargetInfo{Kind: "qemu"}, Thread: threadNumbers(t, "rcu-gp-qs-v2.mbox")}
	b := Benchmark{Name: "rcu", Metric: "latency_ms", Unit: "ms", Source: "agent loop",
		Comparisons: []Comparison{{Base: "baseline", Other: "with-fix", Comparison: stats.Comparison{Change: -38.0, CILow: -41.2, CIHigh: -34.4, CIBounded: true, Confidence: 0.95}}}}
	got := strings.Join(threadLines(r, b, 0, "", 0), "\n")
	want := "Reported in the thread for the same benchmark and metric (other machines and kernels; compare directions and sizes, not values):\n" +
		"- thread Mean latency: -38% ms vs 9.75 ms (Joel Fernandes, <20251222224629.856aa18b-0-joelagnelf@nvidia.com> line 49)\n" +
		"- patcheval (QEMU, agent loop) baseline -> with-fix: -38.0% ms (95% CI -41.2% .. -34.4%)"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
