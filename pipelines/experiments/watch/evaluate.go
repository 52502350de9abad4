package watch

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// PipelineEvaluator evaluates a watch's pipeline on a tag with the
// evaluation runner: the tree alone, or the watch's series re-applied on
// the tag (a series that no longer applies is a failed result naming the
// tag and the hunk).
type PipelineEvaluator struct {
	// OutDir receives <watch>/<tag>/report.* (default <state>/watches).
	OutDir    string
	StorePath string
	// Store, when set, is used instead of opening StorePath (a service's
	// own store, SQLite or Postgres).
	Store    *store.Store
	CacheDir string
	Jobs     int
	// CompilerCache is the builds' compiler cache: "kcc" (""), "ccache"
	// or "none" (runner.Env.CompilerCache), the bisection's too.
	CompilerCache string
	// Budget and Slot, when set, are the -j budget and the build and boot
	// slots of the process the evaluations run in (a service's: see
	// runner.Env), shared with the bisection's measurements.
	Budget   *build.Budget
	Slot     func(ctx context.Context, kind string) (release func(), err error)
	Lore     string
	Progress *progress.Reporter
}

// env is the runner environment of an evaluation on st.
func (e *PipelineEvaluator) env(st *store.Store) runner.Env {
	return runner.Env{Store: st, CacheDir: e.CacheDir, Jobs: e.Jobs, CompilerCache: e.CompilerCache, Budget: e.Budget, Slot: e.Slot, Progress: e.Progress}
}

// open is the evaluator's store and what to call when done with it.
func (e *PipelineEvaluator) open() (*store.Store, func(), error) {
	if e.Store != nil {
		return e.Store, func() {}, nil
	}
	st, err := store.Open(e.StorePath)
	if err != nil {
		return nil, nil, err
	}
	return st, func() { st.Close() }, nil
}

// Planner is an Evaluator that says what it evaluates: a driver that
// runs runner's stage graph itself (pipelines/service, whose jobs never
// run an evaluation whole) submits the plan and records its end
// (Watcher.Begin, Watcher.Ended) instead of calling Evaluate.
type Planner interface {
	Evaluator
	// Plan is the pipeline and the runner's options of the evaluation
	// of w's pipeline on tag at commit (its series fetched and resolved
	// when the watch has one). Its errors are the evaluation's (of kind
	// failed or input: the entry's result).
	Plan(ctx context.Context, w *store.Watch, tag, commit string) (*pipelines.Pipeline, runner.Options, error)
}

// Plan implements Planner: the inputs Evaluate runs.
func (e *PipelineEvaluator) Plan(ctx context.Context, w *store.Watch, tag, commit string) (*pipelines.Pipeline, runner.Options, error) {
	o := runner.Options{AM: series.DefaultAMOptions(), Tree: w.Tree, Base: commit,
		Branch: "patcheval/watch/" + w.Name + "/" + tag, OutDir: filepath.Join(e.OutDir, w.Name, tag), Lore: mbox.LoreBase(e.Lore)}
	var se *series.Series
	if w.SeriesID != "" {
		src, err := mbox.ParseSource(w.SeriesID)
		if err != nil {
			return nil, o, err
		}
		t, err := mbox.Fetch(ctx, src, mbox.FetchOptions{Lore: mbox.LoreBase(e.Lore), Progress: e.Progress})
		if err != nil {
			return nil, o, err
		}
		o.Mbox, o.ThreadSource = runner.ThreadMbox(t), t.Source
		// Resolved once, as Submit would from the thread it stores:
		// Submit (Run) takes this series (Options.Resolved) instead of
		// resolving the thread again.
		if o.Resolved, err = runner.Resolve(ctx, o); err != nil {
			return nil, o, err
		}
		se = o.Resolved.Series()
	}
	// default is generated for the series (its arches), as lore does.
	p, err := pipelines.Named(w.Pipeline, se, nil)
	if err != nil {
		return nil, o, err
	}
	if p.NeedsSeries() && o.Mbox == nil {
		return nil, o, fail.Inputf("watch %s: pipeline %s applies a series: add one with --series MSGID", w.Name, p.Name)
	}
	return p, o, nil
}

// Evaluate implements Evaluator: Plan, run by runner.Run in this
// process.
func (e *PipelineEvaluator) Evaluate(ctx context.Context, w *store.Watch, tag, commit string) (int64, error) {
	p, o, err := e.Plan(ctx, w, tag, commit)
	if err != nil {
		return 0, err
	}
	st, done, err := e.open()
	if err != nil {
		return 0, err
	}
	defer done()
	res, err := runner.Run(ctx, e.env(st), p, o)
	var id int64
	if res != nil {
		id = res.EvaluationID
	}
	return id, EvalError(o.Mbox != nil, tag, err)
}

// EvalError is how a re-test records err, the error an evaluation on tag
// ended with (applying the watch's series when series): a series that
// does not apply is a failed result that names the tag.
func EvalError(series bool, tag string, err error) error {
	if err != nil && series && fail.KindOf(err) == fail.KindFailed && strings.Contains(err.Error(), "apply") {
		return fail.Failedf("does not apply on %s: %w", tag, err)
	}
	return err
}

// Deterministic says whether a watch's pipeline runs in deterministic
// QEMU (unknown pipelines: no).
func Deterministic(w *store.Watch) bool {
	p, err := pipelines.Named(w.Pipeline, nil, nil)
	return err == nil && p.Deterministic
}

// Bisection bisects a watch's regression events with the pipeline and
// writes the reports (report.txt/.md/.json, kcidb.json, culprit.eml)
// next to the tags' reports.
type Bisection struct {
	Eval *PipelineEvaluator
	From mbox.Address
	Logf func(format string, a ...any)
	// NewMeasurer, when set, makes the measurer of a plan (default: a
	// bisect.PipelineMeasurer building and booting the pipeline's
	// variant); tests set it to measure without kernels.
	NewMeasurer func(p *pipelines.Pipeline, w *store.Watch, ev *store.WatchEvent, dir string) (bisect.Measurer, error)
}

// BisectPlan is how one event is bisected: the options (with the
// measurer), the report context and the report directory.
type BisectPlan struct {
	Options bisect.Options
	Context bisect.Context
	Dir     string
	// Good and Bad are the tags.
	Good, Bad string
}

// Plan plans the bisection of ev between the good and bad tags.
func (b *Bisection) Plan(w *store.Watch, ev *store.WatchEvent, good, bad *store.WatchTag) (*BisectPlan, error) {
	p, err := pipelines.Named(w.Pipeline, nil, nil)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(b.Eval.OutDir, w.Name, "bisect-"+good.Tag+".."+bad.Tag+"-"+ev.Benchmark+"-"+strings.ReplaceAll(ev.Metric, "/", "_"))
	var m bisect.Measurer
	if b.NewMeasurer != nil {
		if m, err = b.NewMeasurer(p, w, ev, dir); err != nil {
			return nil, err
		}
	} else {
		m = &bisect.PipelineMeasurer{Pipeline: p, Variant: ev.Variant, Benchmark: ev.Benchmark, Metric: ev.Metric, Repo: w.Tree,
			OutDir: filepath.Join(dir, "steps"), StorePath: b.Eval.StorePath, Store: b.Eval.Store, CacheDir: b.Eval.CacheDir,
			Jobs: b.Eval.Jobs, CompilerCache: b.Eval.CompilerCache, Budget: b.Eval.Budget, Slot: b.Eval.Slot, Progress: b.Eval.Progress}
	}
	higher, _ := stats.HigherIsBetter(ev.Metric)
	return &BisectPlan{
		Options: bisect.Options{Repo: w.Tree, Good: good.Commit, Bad: bad.Commit, Measurer: m,
			Benchmark: ev.Benchmark, Metric: ev.Metric, HigherIsBetter: higher, Deterministic: p.Deterministic,
			Threshold: max(0.5, abs(ev.Change)/4), Logf: b.Logf},
		Context: bisect.Context{Tree: w.Remote, Pipeline: p.Name, Variant: ev.Variant, Arch: strings.Join(p.Arches, ","), Regzbot: w.Regzbot},
		Dir:     dir, Good: good.Tag, Bad: bad.Tag,
	}, nil
}

// BisectState is what a watch event stores of its bisection (JSON): the
// result so far or in the end, the report's path, why it failed, and, for
// a bisection run as jobs (pipelines/service), its run, the measurements
// recorded so far and the one being made.
type BisectState struct {
	bisect.Result
	Report string `json:"report,omitempty"`
	Error  string `json:"error,omitempty"`
	Kind   string `json:"kind,omitempty"`
	// Gen names the run of a bisection run as jobs (its steps' jobs carry
	// it): a bisection carried on from its records after its state and its
	// jobs disagreed is a new run. 0: the first run of a bisection queued
	// before runs were named.
	Gen int64 `json:"gen,omitempty"`
	// Records are the measurements made, oldest first (bisect.Resume
	// replays them); Next is the one being made.
	Records []bisect.Record `json:"records,omitempty"`
	Next    *bisect.Need    `json:"next,omitempty"`
}

// Statuses of a BisectState besides bisect.Found and bisect.Ambiguous.
const (
	BisectQueued  = "queued"
	BisectRunning = "running"
	BisectFailed  = "failed"
)

// Ended says the bisection is over (found, ambiguous or failed).
func (s *BisectState) Ended() bool {
	return s.Status == bisect.Found || s.Status == bisect.Ambiguous || s.Status == BisectFailed
}

// Finish writes a finished bisection's reports into the plan's directory
// and returns the state stored on the event.
func (b *Bisection) Finish(pl *BisectPlan, res *bisect.Result) (*BisectState, error) {
	res.GoodRef, res.BadRef = pl.Good, pl.Bad
	files, err := bisect.WriteReports(pl.Dir, res, pl.Context, b.From)
	if err != nil {
		return nil, err
	}
	return &BisectState{Result: *res, Report: files[0]}, nil
}

// Bisect implements Bisector, in this process (`watch run-now`, `watch
// daemon`); `patcheval serve` bisects step by step as jobs.
func (b *Bisection) Bisect(ctx context.Context, w *store.Watch, ev *store.WatchEvent, good, bad *store.WatchTag) (any, error) {
	pl, err := b.Plan(w, ev, good, bad)
	if err != nil {
		return nil, err
	}
	res, err := bisect.Run(ctx, pl.Options)
	if err != nil {
		return nil, err
	}
	return b.Finish(pl, res)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
