package bisect

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// PipelineMeasurer measures a commit with one variant of a pipeline: the
// variant's kernel is built at the commit (build.Build with the same
// recipe as every evaluation of that pipeline: the same O= directory and
// kcc store, so a step recompiles only what changed) and booted with
// only the bisected benchmark. Each measurement is a stored evaluation.
type PipelineMeasurer struct {
	Pipeline *pipelines.Pipeline
	// Variant is the measured variant (default: the first).
	Variant string
	// Benchmark and Metric select the values.
	Benchmark, Metric string
	Repo              string
	// OutDir receives one directory of reports per measurement.
	OutDir    string
	StorePath string
	// Store, when set, is used instead of opening StorePath (a service's
	// own store, SQLite or Postgres).
	Store    *store.Store
	CacheDir string
	Jobs     int
	// CompilerCache is the builds' compiler cache: "kcc" (""), "ccache"
	// or "none" (runner.Env.CompilerCache).
	CompilerCache string
	// Budget and Slot, when set, are the -j budget and build and boot
	// slots of the process the measurements run in (runner.Env).
	Budget   *build.Budget
	Slot     func(ctx context.Context, kind string) (release func(), err error)
	Progress *progress.Reporter

	mu  sync.Mutex
	seq map[string]int
}

// Single returns p cut down to one variant (and the variant whose kernel
// it boots) and one benchmark, without comparisons or adaptive sampling,
// and without applying a series: what one bisection step builds and boots
// at the commit under test.
func Single(p *pipelines.Pipeline, variant, benchmark string) (*pipelines.Pipeline, error) {
	c := *p
	if variant == "" {
		variant = p.Variants[0].Name
	}
	v := p.Variant(variant)
	if v == nil {
		return nil, fail.Inputf("pipeline %s has no variant %q", p.Name, variant)
	}
	c.Variants = []pipelines.Variant{*v}
	if v.Kernel != "" && v.Kernel != v.Name {
		k := p.Variant(v.Kernel)
		if k == nil {
			return nil, fail.Inputf("pipeline %s: variant %s boots the kernel of %s, which does not exist", p.Name, v.Name, v.Kernel)
		}
		c.Variants = []pipelines.Variant{*k, *v}
	}
	// A bisection step measures the commit as it is: the patches of a
	// series, if the pipeline applies one, are what the history under
	// bisection holds or lacks, and a step has no series to apply (the
	// runner would refuse the step).
	for i := range c.Variants {
		c.Variants[i].ApplySeries = false
	}
	c.Series.Apply = false
	c.Benchmarks = nil
	for _, b := range p.Benchmarks {
		if b.Name == benchmark {
			c.Benchmarks = append(c.Benchmarks, b)
		}
	}
	if len(c.Benchmarks) == 0 {
		var names []string
		for _, b := range p.Benchmarks {
			names = append(names, b.Name)
		}
		return nil, fail.Inputf("pipeline %s has no benchmark %q (it runs %v)", p.Name, benchmark, names)
	}
	c.Comparisons, c.Chains = nil, nil
	c.Repeats.MaxBoots = 0
	return &c, nil
}

// run evaluates p in the measurer's store, whole, in this process (the
// local loop: lore --pipeline's series bisection, the bisect command). A
// driver that runs runner's stage graph itself submits Plan instead
// (Planner).
func (m *PipelineMeasurer) run(ctx context.Context, p *pipelines.Pipeline, o runner.Options) (*runner.Outcome, error) {
	st, done, err := m.open()
	if err != nil {
		return nil, err
	}
	defer done()
	return runner.Run(ctx, runner.Env{Store: st, CacheDir: m.CacheDir, Jobs: m.Jobs, CompilerCache: m.CompilerCache, Budget: m.Budget,
		Slot: m.Slot, Progress: m.Progress}, p, o)
}

// Measure implements Measurer: the nth call for a commit is its nth
// measurement (MeasureNth).
func (m *PipelineMeasurer) Measure(ctx context.Context, commit string, boots int) (*Measurement, error) {
	m.mu.Lock()
	if m.seq == nil {
		m.seq = map[string]int{}
	}
	n := m.seq[commit]
	m.seq[commit]++
	m.mu.Unlock()
	return m.MeasureNth(ctx, commit, boots, n)
}

// MeasureNth implements NthMeasurer: measurement n of a commit is one
// stored evaluation, so measuring it again after a crash resumes that
// evaluation (finished builds and boots are kept) instead of starting
// over. It runs Plan with runner.Run in this process and reads the
// measurement back (Measured).
func (m *PipelineMeasurer) MeasureNth(ctx context.Context, commit string, boots, n int) (*Measurement, error) {
	p, o, err := m.Plan(commit, boots, n)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	out, err := m.run(ctx, p, o)
	var id int64
	var rep *report.Report
	if out != nil {
		id, rep = out.EvaluationID, out.Report
	}
	st, done, oerr := m.open()
	if oerr != nil {
		return nil, oerr
	}
	defer done()
	return m.Measured(st, p, commit, id, rep, err, time.Since(start))
}

// Plan is the pipeline and the runner's options of measurement n of
// commit with boots boots: the measured variant alone (Single), named
// so that the nth measurement of a commit is its own evaluation.
func (m *PipelineMeasurer) Plan(commit string, boots, n int) (*pipelines.Pipeline, runner.Options, error) {
	p, err := Single(m.Pipeline, m.Variant, m.Benchmark)
	if err != nil {
		return nil, runner.Options{}, err
	}
	// The name is part of the evaluation key: the nth measurement of a
	// commit is a new evaluation with fresh boots, not the stored one.
	p.Name = fmt.Sprintf("%s.bisect", m.Pipeline.Name)
	if n > 0 {
		p.Name += fmt.Sprintf(".%d", n)
	}
	out := filepath.Join(m.OutDir, fmt.Sprintf("%s-%d", short(commit), n))
	return p, runner.Options{Tree: m.Repo, Base: commit, OutDir: out, Boots: boots}, nil
}

// Measured is the measurement that evaluation id of Plan's pipeline p
// at commit, in st, made: its report rep (nil when it has none), runErr
// how it failed, took how long it ran.
func (m *PipelineMeasurer) Measured(st *store.Store, p *pipelines.Pipeline, commit string, id int64, rep *report.Report, runErr error,
	took time.Duration) (*Measurement, error) {
	variant := m.Variant
	if variant == "" {
		variant = m.Pipeline.Variants[0].Name
	}
	meas := &Measurement{}
	if rep != nil {
		for _, t := range rep.Timings {
			switch t.Stage {
			case "build":
				meas.BuildTime = t.Duration
			case "boot", "benchmark":
				meas.BootTime += t.Duration
			}
		}
		for _, v := range rep.Variants {
			if v.BuildSeconds > 0 {
				meas.Built = true
				meas.Note = fmt.Sprintf("%s built in %.0fs", v.Name, v.BuildSeconds)
			}
		}
	}
	if runErr != nil {
		if rep == nil {
			// A build failure stops Run before its report: count it.
			meas.Built, meas.BuildTime = true, took
		}
		return meas, runErr
	}
	samples, err := st.Samples(id)
	if err != nil {
		return meas, err
	}
	set := stats.Find(stats.Sets(samples), m.Benchmark, m.Metric, variant)
	if set == nil {
		return meas, fail.Inputf("evaluation %d of %s at %s has no %s %s samples for %s", id, p.Name, short(commit),
			m.Benchmark, m.Metric, variant)
	}
	meas.Values, meas.Unit = set.Values, set.Unit
	return meas, nil
}

// open is the measurer's store and what to call when done with it.
func (m *PipelineMeasurer) open() (*store.Store, func(), error) {
	if m.Store != nil {
		return m.Store, func() {}, nil
	}
	st, err := store.Open(m.StorePath)
	if err != nil {
		return nil, nil, err
	}
	return st, func() { st.Close() }, nil
}

// Planner is a Measurer whose measurements are evaluations: a driver
// that runs runner's stage graph itself (pipelines/service, whose jobs
// never run an evaluation whole) submits Plan's evaluation and reads the
// measurement back with Measured when it has ended, instead of calling
// MeasureNth.
type Planner interface {
	NthMeasurer
	Plan(commit string, boots, n int) (*pipelines.Pipeline, runner.Options, error)
	Measured(st *store.Store, p *pipelines.Pipeline, commit string, id int64, rep *report.Report, runErr error, took time.Duration) (*Measurement, error)
}
