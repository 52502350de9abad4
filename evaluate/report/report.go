// Package report renders an evaluation of a patch Series: the Report
// model (series, tree, base, commits, arch, Variants with their configs,
// kernel command lines and runtime knobs, the config differences between
// compared Variants, the Target, per-Benchmark statistics, Comparisons with
// verdicts against the threshold T, grouped for a headline by Headline,
// decompositions along isolation chains, and stage timings) and
// its renderers: terminal tables (WriteText, WriteTextWith), JSON (WriteJSON), Markdown
// (WriteMarkdown), KCIDB v5.3 JSON (WriteKCIDB) and the reply Draft
// (NewDraft, WriteDraft: an RFC 5322 plain-text mail, bottom-posted, lines
// of at most 72 columns). Nothing here sends mail: pipelines/bots/mail delivers
// a Draft.
package report

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/mbox/numbers"
)

// Report is one evaluation of a Series.
type Report struct {
	// Title names the evaluation (the pipeline's title).
	Title string `json:"title"`
	// ID identifies this run; KCIDB object ids are built from it.
	ID        string    `json:"id"`
	Generated time.Time `json:"generated"`

	Series SeriesInfo `json:"series"`
	Tree   TreeInfo   `json:"tree"`
	Arch   string     `json:"arch"`
	Target TargetInfo `json:"target"`

	Variants []Variant `json:"variants"`
	// Merged says, when the base already had the series, that the
	// evaluation measured the base with the series reverted against the
	// base as it is (lore --revert-if-merged); the draft says it first.
	Merged string `json:"merged,omitempty"`
	// Confounds are the config differences between compared Variants.
	Confounds []Confound `json:"confounds,omitempty"`

	Benchmarks []Benchmark `json:"benchmarks"`
	// Tables are the thread's tables in its own shape (AddTable).
	Tables         []Table         `json:"tables,omitempty"`
	Decompositions []Decomposition `json:"decompositions,omitempty"`

	// Timings is the wall time of each stage (fetch, apply, build, boot,
	// benchmark, report).
	Timings []StageTiming `json:"timings,omitempty"`

	// Rule is the verdict rule used by every Comparison.
	Rule  string   `json:"rule"`
	Notes []string `json:"notes,omitempty"`
	// Coverage says, for every file the series changes, whether the
	// measured kernels compiled it (CoverageWarning when they did not).
	Coverage []FileCoverage `json:"coverage,omitempty"`
	// Interleaved says the runner alternated the Variants' boots
	// (A B C A B C ...) rather than running each Variant in one block.
	Interleaved bool `json:"interleaved,omitempty"`
	// PerRun asks the renderers for per-run tables (Run, value and the
	// Extra min/max of each run, like the RCU thread's table).
	PerRun bool `json:"per_run,omitempty"`
	// Thread holds the numbers the series' thread reports
	// (mbox/numbers); the renderers set the thread's changes beside the
	// Comparisons that vary the same thing with the same tool on the same
	// architecture family, and list the rest as the thread's other
	// numbers (ThreadBeside).
	Thread []numbers.Number `json:"thread_numbers,omitempty"`
	// PerPatch is the series measured patch by patch and the bisection
	// inside it (pipelines/experiments/perpatch), when asked for or when the whole
	// series regressed.
	PerPatch *PerPatch `json:"per_patch,omitempty"`
}

// SeriesInfo identifies the evaluated Series: plain data, filled by the
// caller (pipelines/runner) from the resolved series and the lore base the
// thread came from, so that rendering needs nothing of package series.
type SeriesInfo struct {
	Title     string       `json:"title"`
	Subject   string       `json:"subject,omitempty"` // cover (or lone patch) subject
	Version   int          `json:"version"`
	Author    mbox.Address `json:"author"`
	MessageID string       `json:"message_id,omitempty"`
	Link      string       `json:"link,omitempty"`
	Patches   int          `json:"patches"`
	// PatchHashes are hex sha256 sums of each patch text, in order
	// (KCIDB patchset_hash); optional.
	PatchHashes []string `json:"patch_hashes,omitempty"`
}

// TreeInfo is the kernel tree, its base and the commits made from the
// Series.
type TreeInfo struct {
	Name string `json:"name,omitempty"` // "Debian linux-source-6.1"
	URL  string `json:"url,omitempty"`  // git URL, when the tree has one
	Path string `json:"path,omitempty"`
	// Base is the full commit hash the Series was applied to; BaseName
	// its describe name or tag (v7.2.13).
	Base     string `json:"base"`
	BaseName string `json:"base_name,omitempty"`
	// BaseRule is the rule that chose the base (--base, the series'
	// base-commit, the pipeline's [tree] base, the tree's HEAD), BaseWhy
	// the sentence that says it ("base-commit 0123456789ab given in the
	// series").
	BaseRule string   `json:"base_rule,omitempty"`
	BaseWhy  string   `json:"base_why,omitempty"`
	Commits  []Commit `json:"commits,omitempty"`
}

// Commit is one applied commit.
type Commit struct {
	Hash    string `json:"hash"`
	Subject string `json:"subject"`
}

// TargetInfo describes where the kernels ran.
type TargetInfo struct {
	Kind        string `json:"kind"` // "qemu", "ssh"
	Description string `json:"description,omitempty"`
	// Command is the QEMU command line (or the ssh destination).
	Command       []string `json:"command,omitempty"`
	Host          string   `json:"host,omitempty"`
	Deterministic bool     `json:"deterministic"`
	KVM           bool     `json:"kvm,omitempty"`
	// PerfEvents says which perf events the guest's kernel could count
	// (guest.PerfEvents: "software only (cpu-cycles: ...)" under TCG).
	PerfEvents string `json:"perf_events,omitempty"`
	// Tools are the users' tools in the guest with their Debian versions
	// ("stress-ng 0.15.06-2", "perf 6.1.192-3").
	Tools []string `json:"tools,omitempty"`
}

// Variant is one kernel configuration that was built and run.
type Variant struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Patched says the Series was applied for this Variant.
	Patched bool `json:"patched"`
	// Ref is the revision the Variant's kernel builds when it is not the
	// evaluation's base (a release A/B); Reverted the changes reverted on
	// top (commit or patch labels); Tree both for people ("v7.2.13
	// (0123456789ab) with 1 change(s) reverted ...").
	Ref      string   `json:"ref,omitempty"`
	Reverted []string `json:"reverted,omitempty"`
	Tree     string   `json:"tree,omitempty"`
	// Onto is the commit that tree starts from (the Ref's, or the base's
	// when the Variant only reverts), Head the commit its kernel builds
	// (Onto with the reverts on top, in patcheval's branch), Reverts the
	// revert commits in order. Set for a Variant with a tree of its own.
	Onto    string         `json:"onto,omitempty"`
	Head    string         `json:"head,omitempty"`
	Reverts []RevertCommit `json:"reverts,omitempty"`
	// Config lists the requested Kconfig settings ("PREEMPT_VOLUNTARY=y").
	Config  []string `json:"config,omitempty"`
	Cmdline string   `json:"cmdline,omitempty"`
	// Runtime lists runtime knobs applied after boot
	// ("/sys/kernel/debug/sched/preempt=full").
	Runtime []string             `json:"runtime,omitempty"`
	Kernel  evaluate.Kernel      `json:"kernel"`
	Env     evaluate.Environment `json:"environment"`
	// Boots is the number of boots measured; BuildSeconds the build's
	// wall time (0: cached or unknown).
	Boots        int     `json:"boots,omitempty"`
	BuildSeconds float64 `json:"build_seconds,omitempty"`
}

// RevertCommit is one change a Variant's tree reverts: its label ("1/1
// rcu: ..." or a commit's subject), the commit reverted ("" for a
// patch of a series), and the revert commit patcheval made.
type RevertCommit struct {
	Label    string `json:"label"`
	Original string `json:"original,omitempty"`
	Commit   string `json:"commit"`
}

// OwnTree says that v builds a tree other than the evaluation's base (a
// ref of its own, reverts).
func (v Variant) OwnTree() bool { return v.Ref != "" || v.Onto != "" || len(v.Reverted) > 0 }

// ConfigDelta is one Kconfig symbol that differs between two Variants.
type ConfigDelta struct {
	Symbol string `json:"symbol"` // without CONFIG_
	From   string `json:"from"`   // "n", "y", "m", a value; "" means unset
	To     string `json:"to"`
	// Requested is true when a Variant asked for it; false when it
	// followed from Kconfig (select, default, depends).
	Requested bool `json:"requested"`
	// Rule is the Kconfig line responsible ("default y if PREEMPT ||
	// PREEMPT_RT || PREEMPT_DYNAMIC"); Where its file:line.
	Rule  string `json:"rule,omitempty"`
	Where string `json:"where,omitempty"`
	// Via is the chain of changed symbols from a requested one to this
	// one (PREEMPT_DYNAMIC, PREEMPT_BUILD, PREEMPTION for PREEMPT_RCU).
	Via []string `json:"via,omitempty"`
	// Mechanical marks a derived value no user sets and no rule explains
	// from another change (toolchain probes, environment): listed last,
	// only counted in the reply.
	Mechanical bool `json:"mechanical,omitempty"`
	// Highlight marks a symbol the pipeline watches (PREEMPT_RCU): listed
	// first and never cut from the reply.
	Highlight bool `json:"highlight,omitempty"`
	// Release marks, across two releases (variants on different refs), a
	// change the release made by changing a Kconfig rule: the symbol's
	// own lines, or those of the symbol its chain (Via) starts at.
	// ReleaseRules are those lines in both trees ("v7.2.13
	// kernel/Kconfig.preempt:40: depends on !ARCH_HAS_PREEMPT_LAZY (line
	// added)", then the line it replaced in the other release).
	Release      bool     `json:"release,omitempty"`
	ReleaseRules []string `json:"release_rules,omitempty"`
}

// Confound lists the config differences between two compared Variants.
type Confound struct {
	Base   string        `json:"base"`
	Other  string        `json:"other"`
	Deltas []ConfigDelta `json:"deltas"`
}

// Derived returns the deltas nobody asked for.
func (c Confound) Derived() []ConfigDelta {
	var out []ConfigDelta
	for _, d := range c.Deltas {
		if !d.Requested {
			out = append(out, d)
		}
	}
	return out
}

// Benchmark holds one (benchmark, metric): per-Variant statistics, the
// individual runs and the Comparisons.
type Benchmark struct {
	Name           string `json:"name"`
	Metric         string `json:"metric"`
	Unit           string `json:"unit,omitempty"`
	HigherIsBetter bool   `json:"higher_is_better"`
	Description    string `json:"description,omitempty"`
	// Source is what measured it: "agent loop" for patcheval's own loops,
	// "stress-ng" or "perf bench" for the users' tools (guest.Source).
	// One (Name, Metric) never mixes sources: a tool's benchmark is named
	// by its command line.
	Source string `json:"source,omitempty"`

	Rows        []Row        `json:"rows"`
	Runs        []Run        `json:"runs,omitempty"`
	Comparisons []Comparison `json:"comparisons,omitempty"`
}

// Row is one Variant's summary.
type Row struct {
	Variant string `json:"variant"`
	stats.Summary
}

// Run is one Sample.
type Run struct {
	Variant   string  `json:"variant"`
	Boot      int     `json:"boot"`
	Iteration int     `json:"iteration"`
	Value     float64 `json:"value"`
	// Invalid marks a NaN or infinite measurement (Value is 0 then; the
	// statistics ignore it).
	Invalid bool               `json:"invalid,omitempty"`
	Extra   map[string]float64 `json:"extra,omitempty"`
	Time    time.Time          `json:"time,omitzero"`
	// BuildID is the GNU build-id of the kernel the sample ran on, as the
	// running kernel showed it (evaluate.Sample.BuildID).
	BuildID string `json:"build_id,omitempty"`
}

// Comparison is one Variant against its baseline.
type Comparison struct {
	Base  string `json:"base_variant"`
	Other string `json:"other_variant"`
	stats.Comparison
	// Aligned marks a layout control: the same comparison between the
	// kernels rebuilt with forced function alignment (Spec.Layout).
	Aligned bool `json:"aligned,omitempty"`
	// Layout is the layout control's verdict on a change that matters
	// (a significant regression or improvement at least the threshold):
	// LayoutStable, LayoutSensitive or LayoutUnresolved; "" when the pipeline had no layout
	// control or there was no change to check. LayoutNote says why.
	Layout     string `json:"layout,omitempty"`
	LayoutNote string `json:"layout_note,omitempty"`
}

// Layout control verdicts (Comparison.Layout).
const (
	// LayoutStable: the change survives rebuilding both kernels with
	// every function 64-byte aligned (same verdict, same direction).
	LayoutStable = "layout-stable"
	// LayoutSensitive: between the aligned rebuilds the change is gone
	// or reversed: code layout, not the code, may explain it.
	LayoutSensitive = "layout-sensitive"
	// LayoutUnresolved: the aligned rebuilds' comparison is inconclusive
	// and its interval still holds the change: the samples cannot tell
	// whether it survives (more boots would).
	LayoutUnresolved = "layout-unresolved"
)

// LayoutVerdict judges comparison c by its layout control aligned (the
// same comparison between the function-aligned rebuilds).
func LayoutVerdict(c, aligned stats.Comparison) (verdict, note string) {
	matters := func(x stats.Comparison) bool {
		return (x.Verdict == stats.Regression || x.Verdict == stats.Improvement) && !x.BelowThreshold
	}
	if !matters(c) {
		return "", ""
	}
	between := fmt.Sprintf("%s between the aligned rebuilds (%s, %s)", Pct(aligned.Change), ciText(aligned), aligned.Label())
	if matters(aligned) && aligned.Verdict == c.Verdict {
		return LayoutStable, fmt.Sprintf("%s: the %s survives forced function alignment: %s", LayoutStable, c.Verdict, between)
	}
	if aligned.Verdict == stats.Inconclusive && (!aligned.CIBounded || aligned.CILow <= c.Change && c.Change <= aligned.CIHigh) {
		// Not seen is not gone: the aligned samples are too noisy to
		// tell the change from none, and from the change itself.
		return LayoutUnresolved, fmt.Sprintf("%s: whether the %s survives forced function alignment is not decided: %s, an interval that holds the %s itself; more boots would decide",
			LayoutUnresolved, c.Verdict, between, Pct(c.Change))
	}
	return LayoutSensitive, fmt.Sprintf("%s: the %s does not survive forced function alignment: %s; code layout, not the code, may explain it",
		LayoutSensitive, c.Verdict, between)
}

// Decomposition is stats.Decomposition for one (benchmark, metric).
type Decomposition struct {
	Benchmark string `json:"benchmark"`
	Metric    string `json:"metric"`
	stats.Decomposition
}

// StageTiming is a stage's wall time.
type StageTiming struct {
	Stage    string        `json:"stage"` // fetch, apply, build, boot, benchmark, report
	Duration time.Duration `json:"duration_ns"`
	Note     string        `json:"note,omitempty"`
}

// Pair names a comparison: Other against Base.
type Pair struct{ Base, Other string }

// Spec says what AddResults compares.
type Spec struct {
	Comparisons []Pair
	// Chains are ordered isolation chains to decompose (A -> B -> C).
	Chains [][]string
	// Stats are the comparison options (Alpha, Threshold); the direction
	// and the samples per boot come from the samples.
	Stats stats.Options
	// Layout maps a comparison to its layout control, the same
	// comparison between function-aligned rebuilds (also in
	// Comparisons): its verdict becomes the comparison's Layout.
	Layout map[Pair]Pair
}

// AddResults summarises samples per (benchmark, metric, variant), compares
// the Spec's pairs and decomposes its chains, appending to r.Benchmarks and
// r.Decompositions and setting r.Rule. Variants are listed in r.Variants'
// order, then in order of appearance. A pair or chain naming a Variant
// without samples for a benchmark is skipped for that benchmark with a
// note; one naming a Variant that is in no sample at all is an error.
func (r *Report) AddResults(samples []evaluate.Sample, spec Spec) error {
	if err := checkSpec(samples, spec); err != nil {
		return err
	}
	order := map[string]int{}
	for i, v := range r.Variants {
		order[v.Name] = i
	}
	sets := stats.Sets(samples)
	opts := spec.Stats
	for _, k := range benchmarkKeys(sets) {
		b, vs := newBenchmark(k, sets, order)
		b.Runs = benchmarkRuns(samples, k, b.Rows)
		o := opts
		o.HigherIsBetter = b.HigherIsBetter
		o.SamplesPerBoot = samplesPerBoot(samples, k.name, k.metric)
		r.compare(&b, k, vs, spec.Comparisons, o)
		addLayout(&b, spec.Layout)
		r.decompose(k, vs, spec.Chains, o)
		r.Benchmarks = append(r.Benchmarks, b)
	}
	r.Rule = stats.Rule(opts)
	return nil
}

// checkSpec refuses a comparison or chain naming a variant that is in no
// sample, and a chain of fewer than 2 variants.
func checkSpec(samples []evaluate.Sample, spec Spec) error {
	seen := map[string]bool{}
	for _, s := range samples {
		seen[s.Variant] = true
	}
	for _, p := range spec.Comparisons {
		for _, v := range []string{p.Base, p.Other} {
			if !seen[v] {
				return fail.Inputf("report: comparison %s -> %s: variant %q has no samples", p.Base, p.Other, v)
			}
		}
	}
	for _, ch := range spec.Chains {
		if len(ch) < 2 {
			return fail.Inputf("report: chain %q needs at least 2 variants", ch)
		}
		for _, v := range ch {
			if !seen[v] {
				return fail.Inputf("report: chain %q: variant %q has no samples", ch, v)
			}
		}
	}
	return nil
}

// metricKey is a (benchmark, metric) of the samples.
type metricKey struct{ name, metric string }

// benchmarkKeys are the (benchmark, metric)s of sets in order of
// appearance.
func benchmarkKeys(sets []stats.SampleSet) []metricKey {
	var bms []metricKey
	bset := map[metricKey]bool{}
	for _, s := range sets {
		k := metricKey{s.Benchmark, s.Metric}
		if !bset[k] {
			bset[k] = true
			bms = append(bms, k)
		}
	}
	return bms
}

// newBenchmark is k's Benchmark: its unit, direction (the samples', else
// the metric's) and a row per variant (in order, then in order of
// appearance), with k's sample sets in the rows' order.
func newBenchmark(k metricKey, sets []stats.SampleSet, order map[string]int) (Benchmark, []stats.SampleSet) {
	b := Benchmark{Name: k.name, Metric: k.metric, Source: guest.Source(k.name), Description: guest.Describe(k.name)}
	var vs []stats.SampleSet
	higher, anyHigher := false, false
	for _, s := range sets {
		if s.Benchmark == k.name && s.Metric == k.metric {
			vs = append(vs, s)
			if s.Unit != "" && b.Unit == "" {
				b.Unit = s.Unit
			}
			if s.HigherIsBetter {
				anyHigher = true
			}
		}
	}
	higher = anyHigher
	if !anyHigher {
		if h, known := stats.HigherIsBetter(k.metric); known {
			higher = h
		}
	}
	b.HigherIsBetter = higher
	sort.SliceStable(vs, func(i, j int) bool {
		oi, iok := order[vs[i].Variant]
		oj, jok := order[vs[j].Variant]
		if iok != jok {
			return iok
		}
		return iok && oi < oj
	})
	for _, s := range vs {
		b.Rows = append(b.Rows, Row{Variant: s.Variant, Summary: s.Summary})
	}
	return b, vs
}

// benchmarkRuns are k's samples as Runs (a non-finite value marked
// Invalid, non-finite extras left out) in the order of rows.
func benchmarkRuns(samples []evaluate.Sample, k metricKey, rows []Row) []Run {
	var runs []Run
	for _, s := range samples {
		if s.Benchmark == k.name && s.Metric == k.metric {
			run := Run{Variant: s.Variant, Boot: s.Boot, Iteration: s.Iteration, Value: s.Value, Time: s.Time, BuildID: s.BuildID}
			if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
				run.Value, run.Invalid = 0, true
			}
			for k, v := range s.Extra {
				if !math.IsNaN(v) && !math.IsInf(v, 0) {
					if run.Extra == nil {
						run.Extra = map[string]float64{}
					}
					run.Extra[k] = v
				}
			}
			runs = append(runs, run)
		}
	}
	rowIdx := map[string]int{}
	for i, row := range rows {
		rowIdx[row.Variant] = i
	}
	sort.SliceStable(runs, func(i, j int) bool {
		return rowIdx[runs[i].Variant] < rowIdx[runs[j].Variant]
	})
	return runs
}

// compare adds b's comparisons of pairs (one without samples on a side
// skipped with a note).
func (r *Report) compare(b *Benchmark, k metricKey, vs []stats.SampleSet, pairs []Pair, o stats.Options) {
	for _, p := range pairs {
		bs, os := find(vs, p.Base), find(vs, p.Other)
		if bs == nil || os == nil {
			r.Notes = append(r.Notes, fmt.Sprintf("%s %s: no samples for %s -> %s, comparison skipped",
				k.name, k.metric, p.Base, p.Other))
			continue
		}
		b.Comparisons = append(b.Comparisons, Comparison{Base: p.Base, Other: p.Other,
			Comparison: stats.CompareWith(bs.Values, os.Values, o)})
	}
}

// decompose adds the decompositions of k along chains (one with a
// variant without samples, or that cannot be decomposed, skipped with a
// note).
func (r *Report) decompose(k metricKey, vs []stats.SampleSet, chains [][]string, o stats.Options) {
	for _, ch := range chains {
		m := map[string][]float64{}
		ok := true
		for _, v := range ch {
			s := find(vs, v)
			if s == nil {
				ok = false
				break
			}
			m[v] = s.Values
		}
		if !ok {
			r.Notes = append(r.Notes, fmt.Sprintf("%s %s: chain %v incomplete, not decomposed", k.name, k.metric, ch))
			continue
		}
		d, err := stats.DecomposeSamples(ch, m, 1-o.Alpha)
		if err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("%s %s: %v", k.name, k.metric, err))
			continue
		}
		r.Decompositions = append(r.Decompositions, Decomposition{Benchmark: k.name, Metric: k.metric, Decomposition: d})
	}
}

// samplesPerBoot is the fewest samples one boot of a variant gave for
// (benchmark, metric): what one more boot adds.
func samplesPerBoot(samples []evaluate.Sample, bench, metric string) int {
	type key struct {
		variant string
		boot    int
	}
	n := map[key]int{}
	for _, s := range samples {
		if s.Benchmark == bench && s.Metric == metric {
			n[key{s.Variant, s.Boot}]++
		}
	}
	least := 0
	for _, c := range n {
		if least == 0 || c < least {
			least = c
		}
	}
	return max(least, 1)
}

func find(sets []stats.SampleSet, v string) *stats.SampleSet {
	for i := range sets {
		if sets[i].Variant == v {
			return &sets[i]
		}
	}
	return nil
}

// Regressions lists the comparisons whose verdict is a regression of at
// least the threshold (the ones that leave out a Tested-by and fail
// --fail-on-regression); significant regressions below it are in the
// headline, not here.
func (r *Report) Regressions() []string {
	var out []string
	for _, b := range r.Benchmarks {
		for _, c := range b.Comparisons {
			if c.Verdict == stats.Regression && !c.BelowThreshold && !c.Aligned {
				out = append(out, fmt.Sprintf("%s %s: %s -> %s %+.1f%%", b.Name, b.Metric, c.Base, c.Other, c.Change))
			}
		}
	}
	return out
}

// Variant returns the named Variant or nil.
func (r *Report) Variant(name string) *Variant {
	for i := range r.Variants {
		if r.Variants[i].Name == name {
			return &r.Variants[i]
		}
	}
	return nil
}

// Samples per variant n: the smallest and largest n over all rows.
func (r *Report) nRange() (lo, hi int) {
	lo = -1
	for _, b := range r.Benchmarks {
		for _, row := range b.Rows {
			if lo < 0 || row.N < lo {
				lo = row.N
			}
			if row.N > hi {
				hi = row.N
			}
		}
	}
	if lo < 0 {
		lo = 0
	}
	return lo, hi
}

// TotalTime sums the stage timings.
func (r *Report) TotalTime() time.Duration {
	var t time.Duration
	for _, s := range r.Timings {
		t += s.Duration
	}
	return t
}

// TargetFromEnv fills a TargetInfo from a run's Environment.
func TargetFromEnv(env evaluate.Environment) TargetInfo {
	t := TargetInfo{Kind: env.Target, Command: env.QEMUArgs, Host: env.Host,
		Deterministic: env.Deterministic, KVM: env.KVM}
	if strings.HasPrefix(env.Target, "ssh://") {
		t.Kind, t.Host = "ssh", strings.TrimPrefix(env.Target, "ssh://")
	}
	return t
}

// addLayout marks b's layout controls and gives each comparison that has
// one its verdict (LayoutVerdict).
func addLayout(b *Benchmark, layout map[Pair]Pair) {
	if len(layout) == 0 {
		return
	}
	idx := map[Pair]int{}
	for i, c := range b.Comparisons {
		idx[Pair{c.Base, c.Other}] = i
	}
	for orig, ctl := range layout {
		j, ok := idx[ctl]
		if !ok {
			continue
		}
		b.Comparisons[j].Aligned = true
		if i, ok := idx[orig]; ok {
			c := &b.Comparisons[i]
			c.Layout, c.LayoutNote = LayoutVerdict(c.Comparison, b.Comparisons[j].Comparison)
		}
	}
}
