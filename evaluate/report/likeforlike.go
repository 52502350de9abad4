package report

import (
	"fmt"
	"strings"

	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/mbox/numbers"
)

// What a comparison (or a thread's row) varies. A thread's number is set
// beside one of patcheval's comparisons only when both vary the same one
// of these, and nothing else, on the same architecture family, measured
// with the same tool.
const (
	dimPreempt = "the preemption model"
	dimSELinux = "the SELinux mode"
	dimRelease = "the kernel release"
	dimSeries  = "the series (without -> with)"
)

// Besides is how the thread's numbers for one benchmark relate to
// patcheval's comparisons of it.
type Besides struct {
	// Like are the thread's numbers that vary Dim, as the comparisons
	// at Comparisons (indexes into the benchmark's) do, with the same
	// tool on the same architecture family.
	Groups []LikeGroup
	// Other are the rest of the thread's numbers for the benchmark,
	// each with why it is not set beside a comparison.
	Other []OtherNumber
}

// LikeGroup is one kind of change: the comparisons that make it and the
// thread's numbers that make it too.
type LikeGroup struct {
	Dim         string
	Comparisons []int
	Thread      []numbers.Number
}

// OtherNumber is a thread number that is not like for like, and why.
type OtherNumber struct {
	numbers.Number
	Why string
}

// ThreadBeside sorts the thread's numbers for b (ThreadChanges) into
// like-for-like groups and the others.
func (r *Report) ThreadBeside(b Benchmark) Besides {
	var out Besides
	ns := r.ThreadChanges(b)
	if len(ns) == 0 {
		return out
	}
	byDim := map[string]int{} // dim -> index into out.Groups
	var cmpDims []string
	for i, c := range b.Comparisons {
		d := r.comparisonDim(c.Base, c.Other)
		cmpDims = append(cmpDims, d)
		if d == "" {
			continue
		}
		if _, ok := byDim[d]; !ok {
			byDim[d] = len(out.Groups)
			out.Groups = append(out.Groups, LikeGroup{Dim: d})
		}
		g := &out.Groups[byDim[d]]
		g.Comparisons = append(g.Comparisons, i)
	}
	fam := archFamily(r.Arch)
	for _, n := range ns {
		d := threadDim(r.Thread, n)
		why := ""
		switch {
		case !sameTool(b, n):
			why = toolWhy(b, n)
		case fam == "" || archFamily(n.Platform) != fam:
			why = familyWhy(n.Platform, fam)
		case d == "":
			why = "what it varies is not written in a form patcheval reads"
		default:
			if gi, ok := byDim[d]; ok {
				out.Groups[gi].Thread = append(out.Groups[gi].Thread, n)
				continue
			}
			why = "varies " + d + "; " + cmpWhy(cmpDims)
		}
		out.Other = append(out.Other, OtherNumber{Number: n, Why: why})
	}
	// A group no thread number makes is not shown.
	var kept []LikeGroup
	for _, g := range out.Groups {
		if len(g.Thread) > 0 {
			kept = append(kept, g)
		}
	}
	out.Groups = kept
	return out
}

// cmpWhy names what patcheval's comparisons vary, for a thread number
// that varies something else.
func cmpWhy(dims []string) string {
	var ds []string
	seen := map[string]bool{}
	for _, d := range dims {
		if d == "" {
			d = "more than one thing, or something else"
		}
		if !seen[d] {
			seen[d] = true
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return "patcheval compared nothing here"
	}
	return "patcheval's comparisons vary " + strings.Join(ds, " / ")
}

// sameTool says whether the thread measured b with b's own tool: the
// same stress-ng stressor, the same perf bench collection and test. An
// agent loop never is: it approximates what the tool runs.
func sameTool(b Benchmark, n numbers.Number) bool {
	switch b.Source {
	case "stress-ng":
		return n.Tool == "stress-ng"
	case "perf bench":
		return n.Tool == "perf bench"
	}
	return false
}

func toolWhy(b Benchmark, n numbers.Number) string {
	tool := n.Tool
	if tool == "" {
		tool = "a tool the thread does not name"
	}
	if b.Source == "agent loop" {
		return fmt.Sprintf("measured with %s; patcheval's %s loop only approximates it", tool, b.Name)
	}
	return fmt.Sprintf("measured with %s, not %s", tool, b.Source)
}

func familyWhy(platform, fam string) string {
	pf := archFamily(platform)
	switch {
	case fam == "":
		return "patcheval's architecture is not known"
	case pf == "":
		return "the thread does not say which architecture"
	}
	return fmt.Sprintf("on %s, not %s", pf, fam)
}

var (
	powerRE = lazyre.New(`(?i)\b(power\d*|ppc\w*|powerpc|pseries)\b`)
	x86RE   = lazyre.New(`(?i)\b(x86(_64)?|amd64|i[3-6]86|epyc|xeon|intel|amd|q35)\b`)
	armRE   = lazyre.New(`(?i)\b(arm64|aarch64|ampere\w*|graviton\w*|neoverse\w*|altra)\b`)
)

// archFamily is "powerpc", "x86" or "arm64" for a machine or
// architecture name; "" when unknown or several.
func archFamily(s string) string {
	var fams []string
	for _, f := range []struct {
		re   *lazyre.Regexp
		name string
	}{{powerRE, "powerpc"}, {x86RE, "x86"}, {armRE, "arm64"}} {
		if f.re.MatchString(s) {
			fams = append(fams, f.name)
		}
	}
	if len(fams) != 1 {
		return ""
	}
	return fams[0]
}

// comparisonDim is what the comparison base -> other varies, from the
// two Variants' settings: "" when they differ in more than one of the
// dimensions, in something else, or are not known.
func (r *Report) comparisonDim(base, other string) string {
	var a, b *Variant
	for i := range r.Variants {
		switch r.Variants[i].Name {
		case base:
			a = &r.Variants[i]
		case other:
			b = &r.Variants[i]
		}
	}
	if a == nil || b == nil {
		return ""
	}
	dims := map[string]bool{}
	// A reverted series (or commit) is the series varied, not the
	// release; another ref is the release.
	revA, revB := strings.Join(a.Reverted, "\n"), strings.Join(b.Reverted, "\n")
	if a.Patched != b.Patched || revA != revB {
		dims[dimSeries] = true
	}
	if a.Kernel.Commit != "" && b.Kernel.Commit != "" && a.Kernel.Commit != b.Kernel.Commit && a.Patched == b.Patched &&
		(revA == revB || a.Ref != b.Ref) {
		dims[dimRelease] = true
	}
	for _, s := range symmetricDiff(a.Config, b.Config) {
		sym, _, _ := strings.Cut(s, "=")
		dims[settingDim(sym)] = true
	}
	for _, s := range symmetricDiff(a.Runtime, b.Runtime) {
		dims[settingDim(s)] = true
	}
	for _, s := range symmetricDiff(strings.Fields(a.Cmdline), strings.Fields(b.Cmdline)) {
		dims[settingDim(s)] = true
	}
	if len(dims) != 1 {
		return ""
	}
	for d := range dims {
		return d // "" for a setting of another kind
	}
	return ""
}

// settingDim is the dimension a config symbol, runtime knob or command
// line word belongs to; "" for any other.
func settingDim(s string) string {
	l := strings.ToLower(s)
	switch {
	case strings.HasPrefix(l, "preempt"), strings.Contains(l, "sched/preempt"):
		return dimPreempt
	case strings.Contains(l, "selinux"), strings.HasPrefix(l, "enforcing="), strings.HasPrefix(l, "security="):
		return dimSELinux
	}
	return ""
}

func symmetricDiff(a, b []string) []string {
	in := func(x string, l []string) bool {
		for _, y := range l {
			if x == y {
				return true
			}
		}
		return false
	}
	var out []string
	for _, x := range a {
		if !in(x, b) {
			out = append(out, x)
		}
	}
	for _, x := range b {
		if !in(x, a) {
			out = append(out, x)
		}
	}
	return out
}

var (
	releaseRE = lazyre.New(`\b\d+\.\d+(\.\d+)?(-rc\d+)?`)
	preemptRE = lazyre.New(`(?i)(voluntary|lazy|full|preempt_rt|preempt_dynamic|preempt(ion)?\b|dynamic|\bnone\b)`)
	selinuxRE = lazyre.New(`(?i)\b(enforcing|permissive|selinux\w*)\b`)
	seriesRE  = lazyre.New(`(?i)^(base|baseline|test|new|old|patched|unpatched|with(out)?( the)? (fix|patch(es)?|series)|before|after|vanilla)$`)
)

// threadDim is what a thread's number varies, from the two ends of its
// change: its row against the row it is relative to (a "Delta" row's
// first and last rows, the Baseline, or the table's first value row in
// the same column). A change of release wins: rows of different releases
// differ in everything else too. "" when unknown.
func threadDim(all []numbers.Number, n numbers.Number) string {
	from, to := changeEnds(all, n)
	if from == "" || to == "" {
		return ""
	}
	rf, rt := releaseRE.FindString(from), releaseRE.FindString(to)
	if rf != "" && rt != "" && rf != rt {
		return dimRelease
	}
	pf, pt := words(preemptRE, from), words(preemptRE, to)
	if (pf != "" || pt != "") && pf != pt {
		return dimPreempt
	}
	if selinuxRE.MatchString(from) || selinuxRE.MatchString(to) {
		return dimSELinux
	}
	if seriesRE.MatchString(strings.TrimSpace(from)) && seriesRE.MatchString(strings.TrimSpace(to)) {
		return dimSeries
	}
	return ""
}

func words(re *lazyre.Regexp, s string) string {
	var w []string
	for _, m := range re.FindAllString(s, -1) {
		w = append(w, strings.ToLower(m))
	}
	return strings.Join(w, "+")
}

// changeEnds are the two rows (or columns) a thread's change is between.
func changeEnds(all []numbers.Number, n numbers.Number) (from, to string) {
	if rows := deltaRows(all, n); rows != "" {
		from, to, _ = strings.Cut(rows, " -> ")
		return from, to
	}
	if f, t, ok := strings.Cut(n.Label, " -> "); ok {
		return f, t
	}
	to = n.Label
	if n.Column != "" {
		to = n.Column
	}
	if n.Baseline != "" {
		return n.Baseline, to
	}
	// Relative to the first value row of the same table and column.
	for _, m := range all {
		if m.MessageID == n.MessageID && m.Table == n.Table && m.Column == n.Column && m.Value != nil && m.Change == nil && m.Line < n.Line {
			return m.Label, n.Label
		}
	}
	return "", to
}
