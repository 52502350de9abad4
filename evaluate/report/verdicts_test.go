package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/stats"
)

func samplesOf(bench, metric string, perBoot int, vals map[string][]float64) []evaluate.Sample {
	var out []evaluate.Sample
	for v, xs := range vals {
		for i, x := range xs {
			out = append(out, evaluate.Sample{Variant: v, Benchmark: bench, Metric: metric, Unit: "ns", Value: x,
				Boot: i / perBoot, Iteration: i % perBoot, Time: gen})
		}
	}
	return out
}

// rcuSeriesReport is the two-boot rcu evaluation: base vs patched,
// -4.00% with a 95% CI of -55.3% .. +57.3%.
func rcuSeriesReport(t *testing.T) *Report {
	t.Helper()
	r := &Report{Title: "rcu-series", Generated: gen, Arch: "x86_64",
		Series:   SeriesInfo{Title: "rcu: speed up synchronize_rcu()", Version: 2, Patches: 3},
		Variants: []Variant{{Name: "base", Boots: 2}, {Name: "patched", Patched: true, Boots: 2}},
		Target:   TargetInfo{Kind: "qemu"}}
	ss := samplesOf("rcu", "ns/op", 1, map[string][]float64{
		"base": {9442596, 10057404}, "patched": {8664689, 10055311}})
	if err := r.AddResults(ss, Spec{Comparisons: []Pair{{"base", "patched"}}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRCUSeriesInconclusive: the draft that said "no significant change"
// now says inconclusive, what the run could not see and what would settle
// it, everywhere a verdict is printed.
func TestRCUSeriesInconclusive(t *testing.T) {
	r := rcuSeriesReport(t)
	c := r.Benchmarks[0].Comparisons[0]
	if c.Verdict != stats.Inconclusive || Pct(c.Change) != "-4.00%" || ciText(c.Comparison) != "-55.3% .. +57.3%" {
		t.Fatalf("%s %s %s", c.Verdict, Pct(c.Change), ciText(c.Comparison))
	}
	const want = "rcu ns/op: base -> patched -4.00% (95% CI -55.3% .. +57.3%): inconclusive: this run could not " +
		"tell a change smaller than about ±56.3% from none; about 1,845 more boots per variant would resolve ±1% at this noise"
	if v := Verdicts(r); len(v) != 1 || v[0] != want {
		t.Errorf("verdict line\n%q\nwant\n%q", v, want)
	}
	d, err := NewDraft(r, patchMsg(t), DraftOptions{From: me, Now: gen, Rand: bytes.NewReader(make([]byte, 8))})
	if err != nil {
		t.Fatal(err)
	}
	var txt, md, kc, js bytes.Buffer
	for _, err := range []error{WriteText(&txt, r), WriteMarkdown(&md, r), WriteKCIDB(&kc, r), WriteJSON(&js, r)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for name, out := range map[string]string{"draft": d.Body, "text": txt.String(), "markdown": md.String(), "kcidb": kc.String(), "json": js.String()} {
		if strings.Contains(out, "no significant change:") || strings.Contains(out, `"no significant change"`) {
			t.Errorf("%s still says no significant change", name)
		}
		if !strings.Contains(flat(out), "about 1,845 more boots per variant would resolve ±1% at this noise") {
			t.Errorf("%s lacks the boots that would settle it:\n%s", name, out)
		}
	}
	if !strings.Contains(flat(d.Body), "Inconclusive (not significant, and the CI reaches past ±1%): - rcu ns/op: base -> patched -4.00%") {
		t.Errorf("draft headline:\n%s", d.Body)
	}
	var kd kcidbData
	if err := json.Unmarshal(kc.Bytes(), &kd); err != nil {
		t.Fatal(err)
	}
	last := kd.Tests[len(kd.Tests)-1]
	if last.Status != "DONE" || last.Misc["verdict"] != "inconclusive" || last.Misc["more_boots"].(float64) != 1845 {
		t.Errorf("kcidb comparison test: %s %v", last.Status, last.Misc)
	}
}

// TestHeadlineFourOutcomes: one report with all four outcomes; the
// headline separates significant changes above T from those below it, and
// KCIDB fails only the regression above T.
func TestHeadlineFourOutcomes(t *testing.T) {
	ss := samplesOf("kill", "ns/op", 1, map[string][]float64{
		"a":     {1192.4, 1191.8, 1193.1},
		"big":   {1490.5, 1489.9, 1491.0}, // +25%: regression above T
		"small": {1205.3, 1204.2, 1205.9}, // +1.07%: regression below T = 2%
		"same":  {1192.5, 1191.7, 1193.1}, // CI inside ±2%: equivalent
		"noisy": {1100, 1300, 1250},       // CI past ±2%: inconclusive
		"fast":  {954.6, 955.1, 955.9},    // -20%: improvement
	})
	r := &Report{Title: "four", Generated: gen, Variants: []Variant{{Name: "a"}, {Name: "big"}, {Name: "small"},
		{Name: "same"}, {Name: "noisy"}, {Name: "fast"}}}
	pairs := []Pair{{"a", "big"}, {"a", "small"}, {"a", "same"}, {"a", "noisy"}, {"a", "fast"}}
	if err := r.AddResults(ss, Spec{Comparisons: pairs, Stats: stats.Options{Threshold: 2}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range r.Benchmarks[0].Comparisons {
		got[c.Other] = c.Label()
	}
	want := map[string]string{"big": "regression", "small": "regression, below ±2%", "same": "equivalent within ±2%",
		"noisy": "inconclusive", "fast": "improvement"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	h := r.Headline()
	var keys []string
	for _, g := range h {
		keys = append(keys, g.Key+":"+string(rune('0'+len(g.Lines))))
	}
	if strings.Join(keys, " ") != "significant:2 below_threshold:1 equivalent:1 inconclusive:1" {
		t.Errorf("headline groups %v", keys)
	}
	if h[1].Title != "Significant but below ±2%" || !strings.Contains(h[1].Lines[0], "a -> small +1.07%") {
		t.Errorf("below: %+v", h[1])
	}
	if regs := r.Regressions(); len(regs) != 1 || !strings.Contains(regs[0], "a -> big") {
		t.Errorf("regressions above T: %q", regs)
	}
	var txt bytes.Buffer
	if err := WriteText(&txt, r); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Verdicts (threshold ±2%):", "  Significant and above ±2%:", "  Significant but below ±2%:",
		"  Equivalent (the CI lies inside ±2%):", "  Inconclusive (not significant, and the CI reaches past ±2%):",
		"regression, below ±2%", "what would settle it: about"} {
		if !strings.Contains(txt.String(), s) {
			t.Errorf("text lacks %q:\n%s", s, txt.String())
		}
	}
	var kc bytes.Buffer
	if err := WriteKCIDB(&kc, r); err != nil {
		t.Fatal(err)
	}
	var kd kcidbData
	if err := json.Unmarshal(kc.Bytes(), &kd); err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, tt := range kd.Tests {
		if strings.Contains(tt.Path, ".vs_") {
			status[tt.Misc["other"].(string)] = tt.Status
		}
	}
	if status["big"] != "FAIL" || status["small"] != "PASS" || status["same"] != "PASS" || status["noisy"] != "DONE" || status["fast"] != "PASS" {
		t.Errorf("kcidb statuses %v", status)
	}
	// The narrow draft table still fits 72 columns with the qualifier.
	d, err := NewDraft(r, patchMsg(t), DraftOptions{From: me, Now: gen})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Body, "regression <2%") {
		t.Errorf("draft table:\n%s", d.Body)
	}
}

// TestPerRunIntegers: counts in the per-run table (run numbers, calls)
// print as integers, measured values with decimals.
func TestPerRunIntegers(t *testing.T) {
	var ss []evaluate.Sample
	for i, v := range []float64{9.750, 9.612} {
		ss = append(ss, evaluate.Sample{Variant: "base", Benchmark: "rcu", Metric: "mean_ms", Value: v, Boot: 0,
			Extra: map[string]float64{"run": float64(i), "calls": 100, "min_ms": 5.915, "max_ms": 18.848}, Time: gen.Add(time.Duration(i))})
	}
	r := &Report{Title: "ints", PerRun: true, Generated: gen}
	if err := r.AddResults(ss, Spec{}); err != nil {
		t.Fatal(err)
	}
	lines := runTable(r.Benchmarks[0], "base").lines("", 0)
	out := strings.Join(lines, "\n")
	if !strings.Contains(lines[0], "calls") || !strings.Contains(out, "    100  ") || strings.Contains(out, "100.0") ||
		strings.Contains(out, "0.000") || !strings.Contains(out, "  9.750") || !strings.Contains(out, "  5.915") ||
		!strings.HasSuffix(lines[3], "  1") {
		t.Errorf("per-run table:\n%s", out)
	}
}

// TestConfoundTable: watched symbols first, consequences and toolchain
// values counted, --verbose lists them with the full rule, the JSON
// carries the same kinds.
func TestConfoundTable(t *testing.T) {
	r := seedReport(t)
	c := &r.Confounds[0]
	for _, s := range []string{"INLINE_SPIN_UNLOCK_IRQ", "INLINE_READ_UNLOCK", "UNINLINE_SPIN_UNLOCK"} {
		c.Deltas = append(c.Deltas, ConfigDelta{Symbol: s, From: "y", To: "n", Where: "kernel/Kconfig.locks:100",
			Rule: "depends on !PREEMPTION (" + strings.Repeat("x", 60) + ")", Via: []string{"PREEMPTION"}})
	}
	var short, long bytes.Buffer
	if err := WriteText(&short, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteTextWith(&long, r, TextOptions{Verbose: true}); err != nil {
		t.Fatal(err)
	}
	section := func(s string) string {
		i := strings.Index(s, "Config differences")
		j := strings.Index(s[i:], "\n\n")
		return s[i : i+j]
	}
	ss, ls := section(short.String()), section(long.String())
	lines := strings.Split(ss, "\n")
	if !strings.HasPrefix(strings.TrimSpace(lines[5]), "PREEMPT_RCU      n -> y  derived, watched  kernel/rcu/Kconfig:21") ||
		!strings.HasSuffix(lines[5], "PREEMPT_DYNAMIC > PREEMPT_BUILD > PREEMPTION") {
		t.Errorf("PREEMPT_RCU is not the first row:\n%s", ss)
	}
	for _, s := range []string{"INLINE_SPIN", "INLINE_READ", "PREEMPT_BUILD  ", "CC_HAS_SOMETHING"} {
		if strings.Contains(ss, s) {
			t.Errorf("folded %s listed:\n%s", s, ss)
		}
	}
	if !strings.Contains(ss, "+ 4 mechanical consequence(s) (INLINE_*, *_BUILD) not listed") ||
		!strings.Contains(ss, "+ 1 toolchain/environment value(s) not listed") || !strings.Contains(ss, "--verbose") {
		t.Errorf("fold counts:\n%s", ss)
	}
	for _, s := range []string{"INLINE_SPIN_UNLOCK_IRQ", "UNINLINE_SPIN_UNLOCK", "PREEMPT_BUILD  ", "CC_HAS_SOMETHING        n -> y  toolchain",
		strings.Repeat("x", 60) + ")"} {
		if !strings.Contains(ls, s) {
			t.Errorf("verbose lacks %q:\n%s", s, ls)
		}
	}
	if strings.Contains(ls, "not listed") {
		t.Errorf("verbose still folds:\n%s", ls)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Confounds []struct {
			Deltas []struct {
				Symbol string   `json:"symbol"`
				Kind   string   `json:"kind"`
				Folded bool     `json:"folded"`
				Via    []string `json:"via"`
			} `json:"deltas"`
		} `json:"confounds"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, d := range back.Confounds[0].Deltas {
		kinds[d.Symbol] = d.Kind
		if d.Folded != (d.Kind == KindConsequence || d.Kind == KindToolchain) {
			t.Errorf("%s: kind %s folded %v", d.Symbol, d.Kind, d.Folded)
		}
	}
	if kinds["PREEMPT_RCU"] != "derived" || kinds["PREEMPT_DYNAMIC"] != "requested" || kinds["INLINE_READ_UNLOCK"] != "consequence" ||
		kinds["PREEMPT_BUILD"] != "consequence" || kinds["CC_HAS_SOMETHING"] != "toolchain" {
		t.Errorf("kinds %v", kinds)
	}
	// The draft keeps its compact form.
	d, err := NewDraft(r, patchMsg(t), DraftOptions{From: me, Now: gen})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(d.Body), " "), "voluntary vs voluntary-dyn: requested PREEMPT_DYNAMIC n->y; also differ in: PREEMPT_RCU n->y") {
		t.Errorf("draft confounds:\n%s", d.Body)
	}
}
