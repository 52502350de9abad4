package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/evaluate/stats"
)

// Shared building blocks of the text, Markdown and mail renderers.

// unitLabel is "ns/op" or the metric when there is no unit.
func (b Benchmark) unitLabel() string {
	if b.Unit != "" && b.Unit != b.Metric {
		return b.Metric + ", " + b.Unit
	}
	return b.Metric
}

// heading is "kill [agent loop] (ns/op, lower is better)" or
// "stress-ng --kill 1 -t 23 (bogo-ops/s (real time), higher is better)".
func (b Benchmark) heading() string {
	name := b.Name
	if b.Source == "agent loop" {
		name += " [agent loop]"
	}
	return fmt.Sprintf("%s (%s, %s)", name, b.unitLabel(), direction(b.HigherIsBetter))
}

// statsTable is the per-Variant summary table. wide adds median and the
// coefficient of variation.
func statsTable(b Benchmark, wide bool) *table {
	var vals []float64
	for _, r := range b.Rows {
		vals = append(vals, r.Mean, r.Min, r.Max, r.Median)
	}
	dec := decimalsFor(vals...)
	t := &table{}
	if wide {
		t.head = []string{"Variant", "n", "mean", "median", "stddev", "cv", "min", "max"}
		t.right = []bool{false, true, true, true, true, true, true, true}
	} else {
		t.head = []string{"Variant", "n", "mean", "stddev", "min", "max"}
		t.right = []bool{false, true, true, true, true, true}
	}
	for _, r := range b.Rows {
		sd := Num(r.StdDev, dec+1)
		if r.N < 2 {
			sd = "-"
		}
		if wide {
			t.rows = append(t.rows, []string{r.Variant, fmt.Sprint(r.N), Num(r.Mean, dec), Num(r.Median, dec),
				sd, fmt.Sprintf("%.2f%%", r.CV()), Num(r.Min, dec), Num(r.Max, dec)})
		} else {
			t.rows = append(t.rows, []string{r.Variant, fmt.Sprint(r.N), Num(r.Mean, dec), sd,
				Num(r.Min, dec), Num(r.Max, dec)})
		}
	}
	return t
}

func ciText(c stats.Comparison) string {
	if !c.CIBounded {
		return "unbounded"
	}
	if c.Exact {
		return "exact"
	}
	return Pct(c.CILow) + " .. " + Pct(c.CIHigh)
}

func pText(c stats.Comparison) string {
	if !c.Tested {
		return "-"
	}
	if c.Exact {
		return "exact"
	}
	return stats.FormatP(c.WelchP)
}

func uText(c stats.Comparison) string {
	if !c.UTested {
		return "-"
	}
	return stats.FormatP(c.UP)
}

// compTable lists the Comparisons of b. wide adds the difference in the
// metric's unit and the Mann-Whitney p-value.
func compTable(b Benchmark, wide bool) *table {
	t := &table{}
	conf := "95% CI"
	if len(b.Comparisons) > 0 {
		conf = stats.FormatConf(b.Comparisons[0].Confidence) + " CI"
	}
	if wide {
		t.head = []string{"Comparison", "diff", "change", conf, "Welch p", "U-test p", "verdict"}
		t.right = []bool{false, true, true, false, true, true, false}
	} else {
		t.head = []string{"Comparison", "change", conf, "p", "verdict"}
		t.right = []bool{false, true, false, true, false}
	}
	var diffs []float64
	for _, c := range b.Comparisons {
		diffs = append(diffs, c.Diff)
	}
	dec := decimalsFor(diffs...)
	for _, c := range b.Comparisons {
		name := c.Base + " -> " + c.Other
		if wide {
			d := Num(c.Diff, dec)
			if c.Diff > 0 {
				d = "+" + d
			}
			t.rows = append(t.rows, []string{name, d, Pct(c.Change), ciText(c.Comparison), pText(c.Comparison),
				uText(c.Comparison), c.Label()})
		} else {
			t.rows = append(t.rows, []string{name, Pct(c.Change), ciText(c.Comparison), pText(c.Comparison),
				c.Short()})
		}
	}
	return t
}

// runTable is the per-run table (Run, value, and the runs' Extra columns,
// e.g. min and max of an inner loop) for one Variant.
func runTable(b Benchmark, variant string) *table {
	var runs []Run
	extraSet := map[string]bool{}
	for _, r := range b.Runs {
		if r.Variant != variant {
			continue
		}
		runs = append(runs, r)
		for k := range r.Extra {
			extraSet[k] = true
		}
	}
	var extras []string
	for k := range extraSet {
		extras = append(extras, k)
	}
	sort.Slice(extras, func(i, j int) bool {
		return extraRank(extras[i]) < extraRank(extras[j]) || extraRank(extras[i]) == extraRank(extras[j]) && extras[i] < extras[j]
	})
	// Counts (calls, run numbers, iterations) stay integers; the
	// measured columns share their decimals so they line up.
	intCol := map[string]bool{}
	var measured []float64
	for _, k := range extras {
		intCol[k] = true
		for _, r := range runs {
			if v, ok := r.Extra[k]; ok && v != math.Trunc(v) {
				intCol[k] = false
			}
		}
	}
	valueInt := true
	for _, r := range runs {
		if !r.Invalid && r.Value != math.Trunc(r.Value) {
			valueInt = false
		}
	}
	for _, r := range runs {
		if !valueInt {
			measured = append(measured, r.Value)
		}
		for k, v := range r.Extra {
			if !intCol[k] {
				measured = append(measured, v)
			}
		}
	}
	dec := decimalsFor(measured...)
	decOf := func(integer bool) int {
		if integer {
			return 0
		}
		return dec
	}
	t := &table{head: append([]string{"Run", b.Metric}, extras...)}
	for range t.head {
		t.right = append(t.right, true)
	}
	for i, r := range runs {
		val := Num(r.Value, decOf(valueInt))
		if r.Invalid {
			val = "invalid"
		}
		row := []string{fmt.Sprint(i + 1), val}
		for _, k := range extras {
			if v, ok := r.Extra[k]; ok {
				row = append(row, Num(v, decOf(intCol[k])))
			} else {
				row = append(row, "-")
			}
		}
		t.rows = append(t.rows, row)
	}
	return t
}

func extraRank(k string) int {
	switch k {
	case "min":
		return 0
	case "max":
		return 1
	}
	return 2
}

// decompLines describes one Decomposition.
func decompLines(d Decomposition, width int, indent string) []string {
	var out []string
	out = append(out, Wrap(fmt.Sprintf("%s %s, %s: %s in total", d.Benchmark, d.Metric,
		strings.Join(d.Chain, " -> "), Pct(d.Total)), width, indent, indent+"  ")...)
	if !d.Defined {
		return append(out, Wrap(d.Reason, width, indent+"  ", indent+"  ")...)
	}
	t := &table{head: []string{"Step", "change", "share", "CI"}, right: []bool{false, true, true, false}}
	for _, s := range d.Steps {
		ci := ""
		if s.ShareCI {
			ci = fmt.Sprintf("%.0f%% .. %.0f%%", s.ShareLow, s.ShareHigh)
		}
		t.rows = append(t.rows, []string{s.From + " -> " + s.To, Pct(s.Change), fmt.Sprintf("%.0f%%", s.Share), ci})
	}
	out = append(out, t.lines(indent+"  ", width)...)
	var parts []string
	for _, s := range d.Steps {
		parts = append(parts, fmt.Sprintf("%.0f", s.Share))
	}
	out = append(out, Wrap(fmt.Sprintf("The change splits %s between the steps (shares of the log change; "+
		"linear: %s).", strings.Join(parts, "/"), linearParts(d)), width, indent+"  ", indent+"  ")...)
	return out
}

func linearParts(d Decomposition) string {
	var parts []string
	for _, s := range d.Steps {
		parts = append(parts, fmt.Sprintf("%.0f", s.LinearShare))
	}
	return strings.Join(parts, "/")
}

func deltaText(d ConfigDelta) string {
	from, to := d.From, d.To
	if from == "" {
		from = "unset"
	}
	if to == "" {
		to = "unset"
	}
	return fmt.Sprintf("%s %s->%s", d.Symbol, from, to)
}

// confoundLines summarises a Confound: what the Variants asked for and
// what else differs, with the Kconfig rule. Highlighted symbols come
// first, mechanical ones (toolchain, environment) are only counted. limit
// caps the other derived symbols listed (0: no cap).
func confoundLines(c Confound, width int, indent, hang string, limit int) []string {
	var req, der []string
	var hi, plain []ConfigDelta
	mech := 0
	for _, d := range c.Deltas {
		switch {
		case d.Requested:
			req = append(req, deltaText(d))
		case d.Highlight:
			hi = append(hi, d)
		case d.Mechanical:
			mech++
		default:
			plain = append(plain, d)
		}
	}
	describe := func(d ConfigDelta) string {
		s := deltaText(d)
		var why []string
		if d.Where != "" {
			why = append(why, oneLine(d.Where))
		}
		if d.Rule != "" {
			why = append(why, oneLine(d.Rule))
		}
		if len(why) > 0 {
			return s + " (derived: " + strings.Join(why, " ") + ")"
		}
		return s + " (derived)"
	}
	for _, d := range hi {
		der = append(der, describe(d))
	}
	for i, d := range plain {
		if limit > 0 && i == limit {
			der = append(der, fmt.Sprintf("and %d more", len(plain)-limit))
			break
		}
		der = append(der, describe(d))
	}
	if mech > 0 {
		der = append(der, fmt.Sprintf("%d toolchain/environment value(s)", mech))
	}
	text := c.Base + " vs " + c.Other + ": "
	switch {
	case len(req) > 0 && len(der) > 0:
		text += "requested " + strings.Join(req, ", ") + "; also differ in: " + strings.Join(der, "; ")
	case len(req) > 0:
		text += "requested " + strings.Join(req, ", ") + "; nothing else differs"
	case len(der) > 0:
		text += "differ in: " + strings.Join(der, "; ")
	default:
		text += "same configuration"
	}
	return Wrap(text, width, indent, hang)
}

// variantLines describes a Variant's kernel: config, series, cmdline,
// runtime knobs.
func variantLines(v Variant, width int, indent string) []string {
	var parts []string
	if len(v.Config) > 0 {
		parts = append(parts, strings.Join(v.Config, " "))
	} else {
		parts = append(parts, "base config")
	}
	if v.Patched {
		parts = append(parts, "series applied")
	} else {
		parts = append(parts, "series not applied")
	}
	if v.Tree != "" {
		parts = append(parts, "tree "+v.Tree)
	}
	text := v.Name + ": " + strings.Join(parts, ", ")
	if v.Description != "" {
		text += " (" + oneLine(v.Description) + ")"
	}
	out := Wrap(text, width, indent, indent+"  ")
	cmd := v.Cmdline
	if cmd == "" {
		cmd = v.Env.Cmdline
	}
	if cmd != "" {
		out = append(out, Wrap("cmdline: "+cmd, width, indent+"  ", indent+"    ")...)
	}
	if len(v.Runtime) > 0 {
		out = append(out, Wrap("runtime: "+strings.Join(v.Runtime, "; "), width, indent+"  ", indent+"    ")...)
	}
	if v.Env.KernelRelease != "" || v.Kernel.ConfigHash != "" {
		var k []string
		if v.Env.KernelRelease != "" {
			k = append(k, "uname -r "+v.Env.KernelRelease)
		}
		if v.Kernel.ConfigHash != "" {
			k = append(k, ".config "+short(v.Kernel.ConfigHash, 12))
		}
		out = append(out, Wrap(strings.Join(k, ", "), width, indent+"  ", indent+"    ")...)
	}
	return out
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// targetText describes the Target in one paragraph.
func targetText(t TargetInfo) string {
	var parts []string
	if t.Description != "" {
		parts = append(parts, oneLine(t.Description))
	} else if t.Kind != "" {
		parts = append(parts, t.Kind)
	}
	if t.Host != "" {
		parts = append(parts, "on "+oneLine(t.Host))
	}
	s := strings.Join(parts, " ")
	if len(t.Command) > 0 {
		s += "; command: " + oneLine(strings.Join(t.Command, " "))
	}
	if len(t.Tools) > 0 {
		s += "; guest tools (Debian packages): " + oneLine(strings.Join(t.Tools, ", "))
	}
	if t.PerfEvents != "" {
		s += "; perf events the guest counts: " + oneLine(t.PerfEvents)
	}
	if t.Deterministic {
		s += ". Deterministic: instruction counting (QEMU -icount), so " +
			"repeated boots give near-identical numbers; they measure " +
			"instructions executed, not real hardware time"
	} else {
		s += ". Not deterministic: timings include host noise"
	}
	if t.KVM {
		s += "; KVM"
	}
	return s + "."
}

func nText(r *Report) string {
	lo, hi := r.nRange()
	// Adaptive sampling boots the variants of an undecided comparison
	// more often: give the range, not the largest count as if all had it.
	minBoots, boots := 0, 0
	for _, v := range r.Variants {
		if v.Boots > boots {
			boots = v.Boots
		}
		if v.Boots > 0 && (minBoots == 0 || v.Boots < minBoots) {
			minBoots = v.Boots
		}
	}
	n := fmt.Sprintf("n=%d", lo)
	if hi != lo {
		n = fmt.Sprintf("n=%d..%d", lo, hi)
	}
	n += " samples per variant and benchmark"
	if minBoots > 0 && minBoots != boots {
		n += fmt.Sprintf(", from %d..%d boot(s) per variant", minBoots, boots)
	} else if boots > 0 {
		n += fmt.Sprintf(", from %d boot(s) per variant", boots)
	}
	if r.Interleaved {
		n += "; variants interleaved"
	}
	return n
}

func treeText(t TreeInfo) string {
	var s []string
	if t.Name != "" {
		s = append(s, oneLine(t.Name))
	}
	if t.URL != "" {
		s = append(s, oneLine(t.URL))
	} else if t.Path != "" && t.Name == "" {
		s = append(s, oneLine(t.Path))
	}
	base := short(t.Base, 12)
	if t.BaseName != "" {
		base = oneLine(t.BaseName) + " (" + short(t.Base, 12) + ")"
	}
	if base != "" {
		s = append(s, "base "+base)
	}
	out := strings.Join(s, ", ")
	if t.BaseWhy != "" {
		out += "; base rule: " + oneLine(t.BaseWhy)
	}
	return out
}

func timingText(r *Report) string {
	var parts []string
	for _, t := range r.Timings {
		p := t.Stage + " " + Dur(t.Duration)
		if t.Note != "" {
			p += " (" + oneLine(t.Note) + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ") + "; total " + Dur(r.TotalTime())
}
