// Package perpatch takes a whole-series evaluation apart patch by patch.
// The applied series is a commit range base..tip; the comparisons that
// the series decides (a variant without the series against the same
// kernel with it: SeriesPairs) are measured again at every prefix of the
// range, one stored evaluation of AtCommit's pipeline per commit, so the
// report shows which patch moves each metric (a table of each patch
// against the one before it, and the decomposition chain base -> 1/n ->
// ... -> n/n). When the whole series regressed and has more than one
// patch, the regression is bisected inside the series with
// pipelines/experiments/bisect over the applied commits, and the report and the
// reply name the patch.
//
// Builds are reused: every prefix kernel is built with the evaluation's
// own recipe (the same O= directory and kcc store: a prefix recompiles
// only what its patch changed), the ends are the evaluation's own
// kernels, and the bisection's first look at a commit the evaluation or
// the per-patch run already measured takes those samples.
//
// The entry point is Run on a Series (Load reads one from the store).
package perpatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sync"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Pair is a comparison the series decides: Base's kernel lacks the
// series, Other's is the same kernel with it.
type Pair struct{ Base, Other string }

// SeriesPairs are p's comparisons whose base variant applies no series
// and whose other variant applies it to the same kernel (same symbols)
// booted the same way (command line, sched_preempt, sysctls, CPUs).
func SeriesPairs(p *pipelines.Pipeline) []Pair {
	var out []Pair
	for _, c := range p.Comparisons {
		b, o := p.Variant(c.Base), p.Variant(c.Other)
		if b == nil || o == nil {
			continue
		}
		bk, ok := p.Variant(b.Kernel), p.Variant(o.Kernel)
		if bk == nil || ok == nil || bk.ApplySeries || !ok.ApplySeries {
			continue
		}
		if !maps.Equal(bk.Symbols, ok.Symbols) || b.Cmdline != o.Cmdline || b.SchedPreempt != o.SchedPreempt ||
			!maps.Equal(b.Sysctls, o.Sysctls) || b.CPUs != o.CPUs {
			continue
		}
		out = append(out, Pair{Base: c.Base, Other: c.Other})
	}
	return out
}

// AtCommit is p cut down to measuring a commit that already holds the
// patches: the other variants of pairs (and the variants whose kernels
// they boot) with apply_series off, nothing compared, no adaptive
// sampling. Its kernels have the evaluation's build recipe (arch, config,
// fragments, symbols), so they share its O= directories and kcc store.
func AtCommit(p *pipelines.Pipeline, pairs []Pair) (*pipelines.Pipeline, error) {
	if len(pairs) == 0 {
		return nil, fail.Inputf("pipeline %s: no comparison of a variant without the series against the same kernel with it: nothing to measure patch by patch", p.Name)
	}
	c := *p
	c.Name = p.Name + ".at-commit"
	c.Variants = nil
	keep := map[string]bool{}
	for _, pr := range pairs {
		o := p.Variant(pr.Other)
		keep[o.Kernel], keep[o.Name] = true, true
	}
	for _, v := range p.Variants {
		if keep[v.Name] {
			v.ApplySeries = false
			c.Variants = append(c.Variants, v)
		}
	}
	c.Series.Apply = false
	c.Comparisons, c.Chains = nil, nil
	c.Repeats.MaxBoots = 0
	return &c, nil
}

// Series is a whole-series evaluation to take apart.
type Series struct {
	EvaluationID int64
	// Pipeline is the pipeline as evaluated.
	Pipeline *pipelines.Pipeline
	// Repo is the tree, Base the commit the series was applied to and
	// Commits the applied patches, oldest first.
	Repo, Base string
	Commits    []report.Commit
	// Samples are the evaluation's samples; Boots its boots per variant.
	Samples []evaluate.Sample
	Boots   int
	// Known are samples taken before at other commits of the series (a
	// per-patch run's prefixes), by commit, named by the series
	// variants: PlanBisection's measurer answers its first look at those
	// commits with them instead of measuring again.
	Known map[string][]evaluate.Sample
}

// Load reads evaluation id as a Series.
func Load(st *store.Store, id int64) (*Series, error) {
	in, err := runner.Load(st, id)
	if err != nil {
		return nil, err
	}
	a, err := st.AppliedOf(id)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, fail.Inputf("evaluation %d: the series is not applied", id)
	}
	s := &Series{EvaluationID: id, Pipeline: in.Pipeline, Repo: in.Options.Tree, Base: in.BaseHash, Boots: in.Options.Boots}
	for _, c := range a.Commits {
		s.Commits = append(s.Commits, report.Commit{Hash: c.Hash, Subject: c.Subject})
	}
	if s.Boots == 0 {
		s.Boots = in.Pipeline.Repeats.Boots
	}
	if s.Samples, err = st.Samples(id); err != nil {
		return nil, err
	}
	return s, nil
}

// Measurer measures AtCommit's pipeline at one commit of the series and
// returns the samples (variants named as in the evaluation) and the
// stored evaluation that holds them. An error of kind failed means the
// commit's kernel does not build or boot.
type Measurer interface {
	Measure(ctx context.Context, commit string) (samples []evaluate.Sample, evaluationID int64, err error)
}

// Options steer Run.
type Options struct {
	// PerPatch measures every prefix (Measurer) and fills the tables.
	PerPatch bool
	Measurer Measurer
	// Bisect bisects the largest whole-series regression inside the
	// series (a series of more than one patch, pipelines of one arch).
	// BisectMeasurer makes the bisection's measurer of a variant,
	// benchmark and metric of the AtCommit pipeline.
	Bisect         bool
	BisectMeasurer func(atCommit *pipelines.Pipeline, variant, benchmark, metric string) bisect.Measurer
	// BisectDir receives the bisection's reports (none when "").
	BisectDir string
	Context   bisect.Context
	Logf      func(format string, a ...any)
}

func (o Options) logf(format string, a ...any) {
	if o.Logf != nil {
		o.Logf(format, a...)
	}
}

// Run takes s apart as o asks. The result is nil when there is nothing
// to do (no per-patch run asked for and no regression to bisect).
func Run(ctx context.Context, s *Series, o Options) (*report.PerPatch, error) {
	w, err := start(s, o.PerPatch)
	if err != nil || w == nil {
		return nil, err
	}
	if o.PerPatch {
		if o.Measurer == nil {
			return nil, fail.Inputf("per-patch: no measurer")
		}
		for k, st, ok := w.Next(); ok; k, st, ok = w.Next() {
			o.logf("per-patch: measuring %s %s", st.Label, st.Subject)
			samples, id, err := o.Measurer.Measure(ctx, st.Commit)
			if err != nil && ctx.Err() != nil {
				w.pp.Steps[k].EvaluationID = id
				return w.pp, err
			}
			if _, err := w.Record(k, samples, id, err); err != nil {
				return w.pp, err
			}
		}
		if _, err := w.Tables(); err != nil {
			return w.pp, err
		}
	}
	pp := w.pp
	if o.Bisect && w.n > 1 {
		if err := bisectSeries(ctx, s, w.at, w.labels, w.byStep, w.measured, pp, o); err != nil {
			return pp, err
		}
	}
	if !o.PerPatch && pp.Bisection == nil {
		return nil, nil
	}
	return pp, nil
}

// Walk is a per-patch run of a series taken one prefix at a time (Run's
// loop, in parts): Next names the prefix to measure next, Record records
// its measurement, Tables fills the tables once every prefix is
// recorded. A driver that runs runner's stage graph itself
// (pipelines/service) measures each prefix as an evaluation of its own
// (Planner) between its jobs, and each job starts the Walk again and
// replays the records of the prefixes measured before (Resume).
type Walk struct {
	pp       *report.PerPatch
	at       *pipelines.Pipeline
	p        *pipelines.Pipeline
	labels   []Pair
	n, next  int
	byStep   [][]evaluate.Sample
	measured []bool
}

// Start is the per-patch run of s before any prefix is measured, as Run
// with Options.PerPatch starts it: a bad-input error when its pipeline
// compares no variant without the series against the same kernel with
// it, nil (as Run's result) when s has no patch.
func Start(s *Series) (*Walk, error) { return start(s, true) }

// start is Run before its measurements: nil when s has nothing to take
// apart (perPatch: the per-patch run was asked for).
func start(s *Series, perPatch bool) (*Walk, error) {
	p := s.Pipeline
	pairs := SeriesPairs(p)
	if perPatch && len(pairs) == 0 {
		return nil, fail.Inputf("--per-patch: pipeline %s compares no variant without the series against the same kernel with it (e.g. the default pipeline's base -> patched)", p.Name)
	}
	if len(pairs) == 0 || len(s.Commits) == 0 {
		return nil, nil
	}
	at, err := AtCommit(p, pairs)
	if err != nil {
		return nil, err
	}
	n := len(s.Commits)
	pp := &report.PerPatch{Steps: []report.PatchStep{{Label: "base", Commit: s.Base, EvaluationID: s.EvaluationID}}}
	for i, c := range s.Commits {
		pp.Steps = append(pp.Steps, report.PatchStep{Label: fmt.Sprintf("%d/%d", i+1, n), Commit: c.Hash, Subject: c.Subject})
	}
	pp.Steps[n].EvaluationID = s.EvaluationID
	labels := labelPairs(p, pairs)
	// byStep[k] are the series variants' samples after patch k (0: the
	// base variants'), named by the series variant.
	byStep := make([][]evaluate.Sample, n+1)
	measured := make([]bool, n+1)
	measured[0], measured[n] = true, true
	for _, sm := range s.Samples {
		for _, lp := range labels {
			switch sm.Variant {
			case lp.Base:
				sm.Variant = lp.Other
				byStep[0] = append(byStep[0], sm)
			case lp.Other:
				byStep[n] = append(byStep[n], sm)
			}
		}
	}
	return &Walk{pp: pp, at: at, p: p, labels: labels, n: n, next: 1, byStep: byStep, measured: measured}, nil
}

// Next is the prefix to measure next: k (patch k of the series applied)
// and its step; ok is false when every prefix is recorded (the ends are
// the evaluation's own).
func (w *Walk) Next() (k int, step report.PatchStep, ok bool) {
	if w.next >= w.n {
		return 0, report.PatchStep{}, false
	}
	return w.next, w.pp.Steps[w.next], true
}

// Prefix is the record of a prefix's measurement, what a per-patch run
// made one prefix at a time keeps between its steps (Resume replays
// them).
type Prefix struct {
	// K is the prefix (patch K applied), Commit its commit.
	K      int    `json:"k"`
	Commit string `json:"commit"`
	// EvaluationID is the stored evaluation that measured it.
	EvaluationID int64 `json:"evaluation_id,omitempty"`
	// Failed is why its kernel does not build or boot (its error of
	// kind failed); "" when it was measured.
	Failed string `json:"failed,omitempty"`
}

// Record records prefix k's measurement, Next's: its samples (named as
// in the evaluation) and the evaluation id that took them, or the error
// it failed with. An error of kind failed (the prefix's kernel does not
// build or boot) leaves the prefix out of the tables with a note; any
// other is returned (the run is not done).
func (w *Walk) Record(k int, samples []evaluate.Sample, id int64, err error) (Prefix, error) {
	if k != w.next || k >= w.n {
		return Prefix{}, fail.Inputf("per-patch: prefix %d recorded where %d is next", k, w.next)
	}
	st := &w.pp.Steps[k]
	st.EvaluationID = id
	rec := Prefix{K: k, Commit: st.Commit, EvaluationID: id}
	if err != nil {
		if fail.KindOf(err) != fail.KindFailed {
			return rec, err
		}
		rec.Failed = err.Error()
		w.pp.Notes = append(w.pp.Notes, fmt.Sprintf("%s %s does not build or boot, left out of the tables: %s", st.Label, short(st.Commit), firstLine(err.Error())))
	} else {
		w.byStep[k], w.measured[k] = samples, true
	}
	w.next = k + 1
	return rec, nil
}

// Resume replays recs, the records of the prefixes measured so far, in
// order: samples reads a measured prefix's samples (its evaluation's,
// as the Measurer returned them).
func (w *Walk) Resume(recs []Prefix, samples func(Prefix) ([]evaluate.Sample, error)) error {
	for _, r := range recs {
		k, st, ok := w.Next()
		if !ok || k != r.K || st.Commit != r.Commit {
			return fail.Inputf("per-patch: the record of prefix %d (%s) is not of this series' prefix %d (%s)", r.K, short(r.Commit), k, short(st.Commit))
		}
		var ss []evaluate.Sample
		var err error
		if r.Failed != "" {
			err = fail.Failed(errors.New(r.Failed))
		} else if ss, err = samples(r); err != nil {
			return err
		}
		if _, err := w.Record(k, ss, r.EvaluationID, err); err != nil {
			return err
		}
	}
	return nil
}

// PerPatch is the run's account so far (the steps' evaluations and the
// notes; the tables once Tables has filled them).
func (w *Walk) PerPatch() *report.PerPatch { return w.pp }

// Tables compares every measured step with the one before it (every
// prefix recorded) and returns the run's account with the tables.
func (w *Walk) Tables() (*report.PerPatch, error) {
	return w.pp, tables(w.pp, w.p, w.labels, w.byStep, w.measured)
}

// labelPairs are pairs as the samples name the variants ("name/arch"
// when the pipeline has several arches).
func labelPairs(p *pipelines.Pipeline, pairs []Pair) []Pair {
	if len(p.Arches) < 2 {
		return pairs
	}
	var out []Pair
	for _, a := range p.Arches {
		for _, pr := range pairs {
			out = append(out, Pair{Base: pr.Base + "/" + a, Other: pr.Other + "/" + a})
		}
	}
	return out
}

// tables compares every measured step with the measured step before it
// and decomposes the whole change along the steps, per series variant,
// benchmark and metric.
func tables(pp *report.PerPatch, p *pipelines.Pipeline, labels []Pair, byStep [][]evaluate.Sample, measured []bool) error {
	for _, lp := range labels {
		var samples []evaluate.Sample
		var order []report.Variant
		var chain []string
		for k, ss := range byStep {
			if !measured[k] {
				continue
			}
			label := pp.Steps[k].Label
			order = append(order, report.Variant{Name: label})
			chain = append(chain, label)
			for _, sm := range ss {
				if sm.Variant == lp.Other {
					sm.Variant = label
					samples = append(samples, sm)
				}
			}
		}
		var pairs []report.Pair
		for i := 1; i < len(chain); i++ {
			pairs = append(pairs, report.Pair{Base: chain[i-1], Other: chain[i]})
		}
		r := &report.Report{Variants: order}
		if err := r.AddResults(stats.Primary(samples), report.Spec{Comparisons: pairs, Chains: [][]string{chain},
			Stats: stats.Options{Threshold: p.Threshold()}}); err != nil {
			return err
		}
		for _, b := range r.Benchmarks {
			t := report.PatchTable{Variant: lp.Other, Base: lp.Base, Benchmark: b}
			for i := range r.Decompositions {
				if d := &r.Decompositions[i]; d.Benchmark == b.Name && d.Metric == b.Metric {
					t.Chain = d
				}
			}
			pp.Tables = append(pp.Tables, t)
		}
		pp.Notes = append(pp.Notes, r.Notes...)
	}
	return nil
}

// regression is the whole series' worst regression of a series pair.
type regression struct {
	pair              Pair
	benchmark, metric string
	unit              string
	higher            bool
	change            float64
}

// worstRegression compares the series pairs on the whole evaluation's
// samples as its report does and returns the largest regression of at
// least the pipeline's threshold (nil: none).
func worstRegression(p *pipelines.Pipeline, labels []Pair, samples []evaluate.Sample) *regression {
	sets := stats.Sets(stats.Primary(samples))
	var worst *regression
	for _, lp := range labels {
		for _, b := range sets {
			if b.Variant != lp.Base {
				continue
			}
			other := stats.Find(sets, b.Benchmark, b.Metric, lp.Other)
			if other == nil {
				continue
			}
			c := stats.CompareWith(b.Values, other.Values, stats.Options{HigherIsBetter: b.HigherIsBetter, Threshold: p.Threshold()})
			if c.Verdict != stats.Regression || c.BelowThreshold {
				continue
			}
			if worst == nil || math.Abs(c.Change) > math.Abs(worst.change) {
				worst = &regression{pair: lp, benchmark: b.Benchmark, metric: b.Metric, unit: b.Unit, higher: b.HigherIsBetter, change: c.Change}
			}
		}
	}
	return worst
}

// bisectSeries bisects the worst whole-series regression over the
// applied commits.
func bisectSeries(ctx context.Context, s *Series, at *pipelines.Pipeline, labels []Pair, byStep [][]evaluate.Sample, measured []bool, pp *report.PerPatch, o Options) error {
	known := map[string][]evaluate.Sample{}
	for k, ss := range byStep {
		if measured[k] {
			known[pp.Steps[k].Commit] = append(known[pp.Steps[k].Commit], ss...)
		}
	}
	pl, note, err := planBisection(s, at, labels, known, o)
	if err != nil || pl == nil {
		if note != "" {
			pp.Notes = append(pp.Notes, note)
		}
		return err
	}
	res, err := bisect.Run(ctx, pl.Options)
	if err != nil {
		if fail.KindOf(err) == fail.KindInput && res != nil {
			// The ends measured again did not show it (noise): say so.
			pp.Notes = append(pp.Notes, "series bisection not done: "+err.Error())
			return nil
		}
		return err
	}
	b, err := pl.Finish(res, o.BisectDir, o.Context)
	if err != nil {
		return err
	}
	pp.Bisection = b
	return nil
}

// Bisection is the bisection inside a series of its worst whole-series
// regression, planned (PlanBisection) so that it can also run one
// measurement at a time: bisect.Resume with Options over the
// measurements recorded so far, bisect.Measure with Options.Measurer
// for the next one, Finish at the end (pipelines/service runs it as jobs
// that survive a restart).
type Bisection struct {
	// Options are bisect.Run's; their Measurer answers a commit's first
	// measurement with the samples the evaluation or the per-patch run
	// took, and is a bisect.NthMeasurer.
	Options bisect.Options
	// Variant (the series variant), Benchmark, Metric and Change (the
	// whole series' change, percent) describe the regression.
	Variant, Benchmark, Metric string
	Change                     float64

	s *Series
}

// PlanBisection plans the bisection inside s of its worst whole-series
// regression, with o.BisectMeasurer and o.Logf. It returns nil and a note
// saying why when there is nothing to bisect (no regression of at least
// the pipeline's threshold, one patch, several arches); an error when s
// cannot be taken apart at all.
func PlanBisection(s *Series, o Options) (*Bisection, string, error) {
	p := s.Pipeline
	pairs := SeriesPairs(p)
	if len(pairs) == 0 {
		return nil, "", fail.Inputf("pipeline %s compares no variant without the series against the same kernel with it: nothing to bisect inside the series", p.Name)
	}
	if len(s.Commits) < 2 {
		return nil, fmt.Sprintf("the series has %d patch: nothing to bisect inside it", len(s.Commits)), nil
	}
	at, err := AtCommit(p, pairs)
	if err != nil {
		return nil, "", err
	}
	labels := labelPairs(p, pairs)
	known := map[string][]evaluate.Sample{}
	for c, ss := range s.Known {
		known[c] = append(known[c], ss...)
	}
	for _, sm := range s.Samples {
		for _, lp := range labels {
			switch sm.Variant {
			case lp.Base:
				sm.Variant = lp.Other
				known[s.Base] = append(known[s.Base], sm)
			case lp.Other:
				tip := s.Commits[len(s.Commits)-1].Hash
				known[tip] = append(known[tip], sm)
			}
		}
	}
	b, note, err := planBisection(s, at, labels, known, o)
	if b == nil && note == "" && err == nil {
		note = "no whole-series regression of at least the pipeline's threshold to bisect"
	}
	return b, note, err
}

// planBisection plans it with the samples known per commit (named by
// the series variants); nil and no note when nothing regressed.
func planBisection(s *Series, at *pipelines.Pipeline, labels []Pair, known map[string][]evaluate.Sample, o Options) (*Bisection, string, error) {
	reg := worstRegression(s.Pipeline, labels, s.Samples)
	if reg == nil {
		return nil, "", nil
	}
	if len(s.Pipeline.Arches) > 1 {
		return nil, fmt.Sprintf("the series regresses %s %s (%+.1f%%); it is not bisected inside the series: the pipeline has several arches",
			reg.benchmark, reg.metric, reg.change), nil
	}
	if o.BisectMeasurer == nil {
		return nil, "", fail.Inputf("series bisection: no measurer")
	}
	values := map[string][]float64{}
	for c, ss := range known {
		for _, sm := range ss {
			if sm.Variant == reg.pair.Other && sm.Benchmark == reg.benchmark && sm.Metric == reg.metric {
				values[c] = append(values[c], sm.Value)
			}
		}
	}
	m := &knownMeasurer{m: o.BisectMeasurer(at, reg.pair.Other, reg.benchmark, reg.metric), known: values, unit: reg.unit}
	o.logf("series bisection: %s %s %+.1f%% (%s -> %s) over %d patches", reg.benchmark, reg.metric, reg.change, reg.pair.Base, reg.pair.Other, len(s.Commits))
	return &Bisection{s: s, Variant: reg.pair.Other, Benchmark: reg.benchmark, Metric: reg.metric, Change: reg.change,
		Options: bisect.Options{Repo: s.Repo, Good: s.Base, Bad: s.Commits[len(s.Commits)-1].Hash, Measurer: m,
			Benchmark: reg.benchmark, Metric: reg.metric, HigherIsBetter: reg.higher, Deterministic: s.Pipeline.Deterministic,
			Threshold: s.Pipeline.Threshold(), Logf: o.Logf}}, "", nil
}

// Finish is the report's account of a finished bisection res, its
// reports written into dir (none when dir is "").
func (b *Bisection) Finish(res *bisect.Result, dir string, c bisect.Context) (*report.SeriesBisection, error) {
	s := b.s
	out := &report.SeriesBisection{Status: res.Status, Variant: b.Variant, Benchmark: b.Benchmark, Metric: b.Metric,
		Patches: len(s.Commits), Change: res.Change, CILow: res.CILow, CIHigh: res.CIHigh, Confirmed: res.Confirmed,
		Builds: res.Builds, Bound: res.Bound}
	if res.Culprit != nil {
		out.Commit, out.Subject, out.Patch = res.Culprit.Hash, res.Culprit.Subject, res.Culprit.Index+1
	}
	for _, cand := range res.Candidates {
		out.Candidates = append(out.Candidates, fmt.Sprintf("%d/%d %s", cand.Index+1, len(s.Commits), cand.Subject))
	}
	if dir != "" {
		c.Pipeline, c.Variant = s.Pipeline.Name, b.Variant
		files, err := bisect.WriteReports(dir, res, c, mbox.Address{})
		if err != nil {
			return nil, err
		}
		out.Report = files[0]
	}
	return out, nil
}

// Planner is the bisection's measurer as a bisect.Planner, nil when it
// is not one: with a Planner (such as bisect.PipelineMeasurer), a driver
// that runs runner's stage graph itself (pipelines/service) submits a
// measurement's Plan as an evaluation and reads it back with Measured,
// for each measurement that is not Known.
func (b *Bisection) Planner() bisect.Planner {
	m := b.Options.Measurer
	if k, ok := m.(*knownMeasurer); ok {
		m = k.m
	}
	pm, _ := m.(bisect.Planner)
	return pm
}

// Known says whether measurement need is answered with the samples the
// evaluation or its per-patch run took already (a commit's first
// measurement): Options.Measurer gives them, nothing is measured.
func (b *Bisection) Known(need bisect.Need) bool {
	k, ok := b.Options.Measurer.(*knownMeasurer)
	return ok && need.N == 0 && len(k.known[need.Commit]) > 0
}

// knownMeasurer answers a commit's first measurement with the samples
// the evaluation or the per-patch run already took; later ones (the
// confirmation) measure again. The nth measurement of a commit is the
// same one however often it is asked for (bisect.NthMeasurer), so that a
// bisection resumed over its records repeats an interrupted measurement.
type knownMeasurer struct {
	m     bisect.Measurer
	known map[string][]float64
	unit  string

	mu  sync.Mutex
	seq map[string]int
}

func (k *knownMeasurer) Measure(ctx context.Context, commit string, boots int) (*bisect.Measurement, error) {
	k.mu.Lock()
	if k.seq == nil {
		k.seq = map[string]int{}
	}
	n := k.seq[commit]
	k.seq[commit]++
	k.mu.Unlock()
	return k.MeasureNth(ctx, commit, boots, n)
}

// MeasureNth implements bisect.NthMeasurer.
func (k *knownMeasurer) MeasureNth(ctx context.Context, commit string, boots, n int) (*bisect.Measurement, error) {
	if v := k.known[commit]; n == 0 && len(v) > 0 {
		return &bisect.Measurement{Values: v, Unit: k.unit, Note: "measured before"}, nil
	}
	if nm, ok := k.m.(bisect.NthMeasurer); ok {
		return nm.MeasureNth(ctx, commit, boots, n)
	}
	return k.m.Measure(ctx, commit, boots)
}

// RunnerMeasurer measures AtCommit's pipeline with the runner: one
// stored evaluation per commit, in the same store and cache as the
// evaluation it takes apart.
type RunnerMeasurer struct {
	Env      runner.Env
	Pipeline *pipelines.Pipeline
	Repo     string
	Boots    int
	// OutDir receives one directory of reports per commit.
	OutDir string
}

// Measure implements Measurer: it runs Plan with runner.Run in this
// process and reads the measurement back (Measured).
func (m *RunnerMeasurer) Measure(ctx context.Context, commit string) ([]evaluate.Sample, int64, error) {
	p, o, err := m.Plan(commit)
	if err != nil {
		return nil, 0, err
	}
	out, err := runner.Run(ctx, m.Env, p, o)
	var id int64
	if out != nil {
		id = out.EvaluationID
	}
	return m.Measured(m.Env.Store, commit, id, err)
}

// Plan is the pipeline and the runner's options of the measurement at
// commit: AtCommit's pipeline at commit, its reports in OutDir's
// directory of the commit.
func (m *RunnerMeasurer) Plan(commit string) (*pipelines.Pipeline, runner.Options, error) {
	return m.Pipeline, runner.Options{Tree: m.Repo, Base: commit, Boots: m.Boots, OutDir: filepath.Join(m.OutDir, short(commit))}, nil
}

// Measured is the measurement at commit that evaluation id (of Plan's
// pipeline and options, in st) made, ended with runErr: its samples.
func (m *RunnerMeasurer) Measured(st *store.Store, commit string, id int64, runErr error) ([]evaluate.Sample, int64, error) {
	if runErr != nil {
		return nil, id, runErr
	}
	samples, err := st.Samples(id)
	return samples, id, err
}

// Planner is a Measurer whose measurements are evaluations: a driver
// that runs runner's stage graph itself (pipelines/service, whose jobs
// never run an evaluation whole) submits Plan's evaluation and, when it
// has ended, reads the measurement back with Measured instead of calling
// Measure.
type Planner interface {
	Measurer
	Plan(commit string) (*pipelines.Pipeline, runner.Options, error)
	Measured(st *store.Store, commit string, id int64, runErr error) ([]evaluate.Sample, int64, error)
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func firstLine(s string) string {
	if i := slices.Index([]byte(s), '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
