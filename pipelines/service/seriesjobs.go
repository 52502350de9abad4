package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/perpatch"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Taking a whole-series evaluation apart (issue 21, pipelines/experiments/perpatch)
// as queue work, in the "series" queue (one worker; with the service's
// measurers its jobs submit their measurements as evaluations of the
// stage graph, a waiter of each carrying the work on; the tests'
// stand-ins measure inside the job):
//
//   - per_patch follows the report of an evaluation submitted with
//     PerPatch (runner.Options.PerPatch: `submit --per-patch`, the API's
//     per_patch, a list's per_patch): it measures the series after each
//     patch, each prefix an evaluation of the stage graph of its own
//     recorded by a per_patch_measured waiter (perpatchsteps.go; a
//     measurer that is not a perpatch.Planner, the tests' stand-ins,
//     measures in the job: perpatch.Run), writes the reports again with
//     the per-patch table, and only then tells Notify the evaluation is
//     done, so that the bots' reports carry the table. The evaluation
//     stays "running" until then.

// QueueSeries runs per-patch runs and bisections inside a series.
const QueueSeries = "series"

// PerPatchArgs measures evaluation EvaluationID patch by patch.
type PerPatchArgs struct {
	EvaluationID int64 `json:"evaluation_id"`
	Gen          int64 `json:"gen"`
}

func (PerPatchArgs) Kind() string { return "per_patch" }

func perPatchJob(id, gen int64) river.InsertManyParams {
	return river.InsertManyParams{Args: PerPatchArgs{id, gen}, InsertOpts: jobOpts(QueueSeries, id, 3)}
}

// SeriesMeasurers make the series jobs' measurements (tests give fakes).
// A nil field: the runner, in the service's store and cache.
type SeriesMeasurers struct {
	// PerPatch measures the at-commit pipeline at a commit of s, its
	// reports under outDir.
	PerPatch func(s *perpatch.Series, at *pipelines.Pipeline, outDir string) perpatch.Measurer
	// Bisect measures the at-commit pipeline's variant, benchmark and
	// metric for the bisection inside s, its reports under outDir.
	Bisect func(s *perpatch.Series, at *pipelines.Pipeline, variant, benchmark, metric, outDir string) bisect.Measurer
}

// evalEnd is what decides how an evaluation ends (afterReport), read
// before the transaction that ends it: inside, that transaction holds the
// evaluation's row and its bisection's lock, and a read on another of the
// pool's connections could wait for ever (every other connection taken by
// transactions waiting for those locks).
type evalEnd struct {
	// graph says whether a per-patch run follows the report.
	graph runner.Graph
	// bisect is the automatic bisection inside the series to start
	// (Config.SeriesBisect), nil for none.
	bisect *perpatch.Bisection
}

// readEnd reads evaluation id's evalEnd (its data as stored by the
// stages before its report).
func (s *Service) readEnd(id int64) (evalEnd, error) {
	g, err := s.graph(id)
	if err != nil || g.PerPatch {
		return evalEnd{graph: g}, err
	}
	pl, err := s.autoPlan(id)
	return evalEnd{graph: g, bisect: pl}, err
}

// afterReport is what follows evaluation id's report (runner.Next): the
// per-patch run when it was asked for (the evaluation stays running until
// it ends), else the automatic bisection inside the series when the
// series regresses (Config.SeriesBisect), else the end: the evaluation is
// done and Notify is told.
func (s *Service) afterReport(ctx context.Context, tx *store.Tx, id, gen int64, end evalEnd) ([]river.InsertManyParams, error) {
	return s.follow(ctx, tx, after{id: id, gen: gen, graph: end.graph, bisect: end.bisect}, runner.Step{Stage: runner.StageReport}, runner.Found{})
}

// autoPlan is the automatic bisection inside evaluation id's series to
// start (with Config.SeriesBisect), nil when there is nothing to bisect
// (one patch, no whole-series regression, a pipeline per-patch cannot
// use) or one was already made or is under way. It reads on the pool's
// connections: call it outside a transaction (autoBisection checks
// again inside).
func (s *Service) autoPlan(id int64) (*perpatch.Bisection, error) {
	if !s.cfg.SeriesBisect {
		return nil, nil
	}
	if st, err := s.SeriesBisection(id); err != nil || (st != nil && st.Status != SeriesBisectFailed) {
		return nil, err
	}
	ser, err := perpatch.Load(s.db.Store, id)
	if err != nil {
		if fail.KindOf(err) == fail.KindInput {
			return nil, nil // not a series applied by the runner
		}
		return nil, err
	}
	pl, _, err := perpatch.PlanBisection(ser, perpatch.Options{BisectMeasurer: func(*pipelines.Pipeline, string, string, string) bisect.Measurer { return nil }})
	if fail.KindOf(err) == fail.KindInput {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	return pl, nil
}

// autoBisection is the new state of the automatic bisection pl of
// evaluation id, to be stored in tx, nil when one was already made or
// is under way (read in tx, under the bisection's lock).
func (s *Service) autoBisection(tx *store.Tx, id int64, pl *perpatch.Bisection) (*SeriesBisectState, error) {
	if st, err := s.seriesBisectionTx(tx, id); err != nil || (st != nil && st.Status != SeriesBisectFailed) {
		return nil, err
	}
	return &SeriesBisectState{Status: SeriesBisectQueued, Gen: time.Now().UnixNano(), Variant: pl.Variant, Benchmark: pl.Benchmark,
		Metric: pl.Metric, Change: pl.Change}, nil
}

// liveEvaluation reads the evaluation a follow-up job (per-patch, series
// bisection) works for: an evaluation that is gone or was cancelled ends
// the job (river.JobCancel), a store error is retried.
func (s *Service) liveEvaluation(id int64) (*store.Evaluation, error) {
	e, err := s.db.Store.Evaluation(id)
	if err != nil {
		if fail.KindOf(err) == fail.KindInput {
			return nil, river.JobCancel(err)
		}
		return nil, err
	}
	if e.Status == StatusCancelled {
		return nil, river.JobCancel(fmt.Errorf("evaluation %d was cancelled", id))
	}
	return e, nil
}

type perPatchWorker struct {
	river.WorkerDefaults[PerPatchArgs]
	s *Service
}

func (w *perPatchWorker) Work(ctx context.Context, job *river.Job[PerPatchArgs]) error {
	s, a := w.s, job.Args
	if _, err := s.liveEvaluation(a.EvaluationID); err != nil {
		return err
	}
	s.beat.begin(job.ID, fmt.Sprintf("per-patch run of evaluation %d (attempt %d)", a.EvaluationID, job.Attempt))
	defer s.beat.end(job.ID)
	log := s.evalLog(a.EvaluationID)
	var pp *report.PerPatch
	ser, m, release, err := s.perPatchMeasurer(a.EvaluationID)
	if err == nil {
		defer release()
		if pm, ok := m.(perpatch.Planner); ok {
			// Each prefix is an evaluation of the stage graph, recorded by
			// its waiter (perpatchsteps.go).
			var w *perpatch.Walk
			if w, err = perpatch.Start(ser); err == nil && w != nil {
				return perPatchNext(ctx, s, job, a.EvaluationID, a.Gen, w, pm, nil)
			}
		} else {
			pp, err = perpatch.Run(ctx, ser, perpatch.Options{PerPatch: true, Measurer: m,
				Logf: func(format string, a ...any) { log.printf(format, a...) }})
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return err // shutdown: retried on the next start, the prefixes' evaluations resume
		}
		if fail.KindOf(err) == fail.KindInfra && job.Attempt < job.MaxAttempts {
			log.printf("per-patch: attempt %d of %d failed, will retry: %v", job.Attempt, job.MaxAttempts, err)
			return err
		}
	}
	return perPatchFinish(ctx, s, job, a.EvaluationID, a.Gen, pp, err)
}

// amendReport writes evaluation id's reports in dir again (report.json
// as the report stage wrote it, amended; the text, Markdown, KCIDB and
// the reply draft from it).
func (s *Service) amendReport(id int64, dir string, amend func(r *report.Report)) error {
	f, err := os.Open(filepath.Join(dir, "report.json"))
	if err != nil {
		return fail.Infraf("evaluation %d: the report to add the per-patch results to: %v", id, err)
	}
	r, err := report.ReadJSON(f)
	f.Close()
	if err != nil {
		return fail.Infraf("evaluation %d: %v", id, err)
	}
	amend(r)
	return runner.Rewrite(runner.Env{Store: s.db.Store}, id, r, dir, &runner.Outcome{EvaluationID: id})
}

// perPatchMeasurer is evaluation id's series and its per-patch measurer:
// AtCommit's pipeline measured by the runner in the service's store (a
// perpatch.Planner: its evaluations run as the service's stage jobs),
// its reports under the evaluation's per-patch directory, or
// Config.Series.PerPatch's; release ends what it holds.
func (s *Service) perPatchMeasurer(id int64) (*perpatch.Series, perpatch.Measurer, func(), error) {
	ser, err := perpatch.Load(s.db.Store, id)
	if err != nil {
		return nil, nil, nil, err
	}
	at, err := perpatch.AtCommit(ser.Pipeline, perpatch.SeriesPairs(ser.Pipeline))
	if err != nil {
		return nil, nil, nil, err
	}
	out := filepath.Join(s.OutDir(id), "per-patch")
	if f := s.cfg.Series.PerPatch; f != nil {
		return ser, f(ser, at, out), func() {}, nil
	}
	env := s.env(id, inProcess)
	return ser, &perpatch.RunnerMeasurer{Env: env, Pipeline: at, Repo: ser.Repo, Boots: ser.Boots, OutDir: out}, env.Progress.Done, nil
}

// The bisection inside a series (#patcheval bisect, the API's
// POST /api/v1/evaluations/{id}/bisect, Service.BisectSeries) is one
// series_bisect job per measurement, like a watch's bisection: each
// replays the bisection over the measurements recorded so far
// (perpatch.PlanBisection, bisect.Resume: the search is a function of
// them), makes the one it asks for next and, in one transaction, records
// it (store series_bisections), queues the next step and completes
// itself. With a bisect.Planner (serve's bisect.PipelineMeasurer) the
// measurement is an evaluation of the stage graph instead: the step
// submits it and ends, and series_bisect_measured, queued when it ends,
// records it and queues the next step (seriessteps.go). A serve killed
// mid-bisection resumes at the step it was on; the interrupted
// measurement is made again as the same one (the same stored
// evaluation, its finished builds and boots kept), or its evaluation's
// waiter, in the database, records it when it ends. The last step writes
// the bisection's reports, adds its sentence to the evaluation's reports,
// and queues a series_bisected job that tells Config.SeriesBisected (the
// bots: a reply in the thread of each command that asked).

// Series bisection statuses besides bisect.Found and bisect.Ambiguous.
const (
	SeriesBisectQueued  = "queued"
	SeriesBisectRunning = "running"
	// SeriesBisectNone: nothing to bisect (no whole-series regression,
	// or the ends measured again did not show it).
	SeriesBisectNone   = "none"
	SeriesBisectFailed = "failed"
)

// SeriesBisectState is a series bisection as stored.
type SeriesBisectState struct {
	Status string `json:"status"`
	// Gen names this run of the bisection (a failed one may be asked
	// for again).
	Gen     int64           `json:"gen"`
	Started time.Time       `json:"started,omitzero"`
	Records []bisect.Record `json:"records,omitempty"`
	// Next is the measurement being made (status running).
	Next *bisect.Need `json:"next,omitempty"`
	// Variant, Benchmark, Metric and Change describe the bisected
	// regression (the whole series' change, percent).
	Variant   string  `json:"variant,omitempty"`
	Benchmark string  `json:"benchmark,omitempty"`
	Metric    string  `json:"metric,omitempty"`
	Change    float64 `json:"change_pct,omitempty"`
	// Result is the finished bisection; Note says why there is none.
	Result *report.SeriesBisection `json:"result,omitempty"`
	Note   string                  `json:"note,omitempty"`
	// Requesters are who asked (opaque to the service: Config.SeriesBisected
	// is told them).
	Requesters []string `json:"requesters,omitempty"`
	// DoneGen, set on an automatic bisection (Config.SeriesBisect), is
	// the generation of the evaluation its end finishes: marked done and
	// Notify told, with the bisection in its reports.
	DoneGen int64 `json:"done_gen,omitempty"`
}

// Ended says whether the bisection is over.
func (st *SeriesBisectState) Ended() bool {
	return st.Status != SeriesBisectQueued && st.Status != SeriesBisectRunning
}

// Text is the outcome in one sentence (or why there is none).
func (st *SeriesBisectState) Text() string {
	if st.Result != nil {
		return st.Result.Sentence()
	}
	return st.Note
}

// SeriesBisectArgs makes measurement Seq (0-based) of run Gen of the
// bisection inside evaluation EvaluationID's series.
type SeriesBisectArgs struct {
	EvaluationID int64 `json:"evaluation_id"`
	Gen          int64 `json:"gen"`
	Seq          int   `json:"seq"`
}

func (SeriesBisectArgs) Kind() string { return "series_bisect" }

// SeriesBisectedArgs tells Config.SeriesBisected how run Gen ended.
type SeriesBisectedArgs struct {
	EvaluationID int64 `json:"evaluation_id"`
	Gen          int64 `json:"gen"`
}

func (SeriesBisectedArgs) Kind() string { return "series_bisected" }

func seriesBisectJob(id, gen int64, seq int) river.InsertManyParams {
	return river.InsertManyParams{Args: SeriesBisectArgs{id, gen, seq}, InsertOpts: jobOpts(QueueSeries, id, 5)}
}

// SeriesBisection is evaluation id's series bisection, nil when none
// was asked for.
func (s *Service) SeriesBisection(id int64) (*SeriesBisectState, error) {
	return seriesBisectionIn(s.db.Store, id)
}

func seriesBisectionIn(st *store.Store, id int64) (*SeriesBisectState, error) {
	b, err := st.SeriesBisection(id)
	return decodeSeriesBisection(id, b, err)
}

// seriesBisectionTx is evaluation id's series bisection read in tx for a
// change stored in it: every read-modify-write of the state goes through
// it, so that none writes back a copy without another's change
// (store.SeriesBisectionTx holds the state until tx ends).
func (s *Service) seriesBisectionTx(tx *store.Tx, id int64) (*SeriesBisectState, error) {
	b, err := s.db.Store.SeriesBisectionTx(tx, id)
	return decodeSeriesBisection(id, b, err)
}

func decodeSeriesBisection(id int64, b []byte, err error) (*SeriesBisectState, error) {
	if err != nil || b == nil {
		return nil, err
	}
	var out SeriesBisectState
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fail.Infraf("evaluation %d: the stored series bisection is unreadable: %v", id, err)
	}
	return &out, nil
}

// BisectSeries queues the bisection inside evaluation id's series of its
// worst whole-series regression, for requester (told through
// Config.SeriesBisected when it ends; "" for nobody). It returns a note
// for people: queued, already running (requester is added), or the
// outcome of the one that ended. A bisection that never ended and has no
// job left (cancelled) is started again, as the evaluation's automatic
// one (DoneGen) when it was that and the evaluation still waits for it.
// Nothing to bisect (one patch, no
// regression, no comparison per-patch can use) is a bad-input error.
func (s *Service) BisectSeries(ctx context.Context, id int64, requester string) (string, error) {
	ser, err := perpatch.Load(s.db.Store, id)
	if err != nil {
		return "", err
	}
	pl, note, err := perpatch.PlanBisection(ser, perpatch.Options{BisectMeasurer: func(*pipelines.Pipeline, string, string, string) bisect.Measurer { return nil }})
	if err != nil {
		return "", err
	}
	if pl == nil {
		return "", fail.Inputf("evaluation %d: nothing to bisect inside the series: %s", id, note)
	}
	var out string
	err = s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		var doneGen int64
		// Read, changed and written back in this transaction: the job
		// making a measurement writes its record in its own (the
		// state is one document).
		st, err := s.seriesBisectionTx(tx, id)
		if err != nil {
			return err
		}
		if st != nil && !st.Ended() {
			// A bisection whose jobs were cancelled with the evaluation
			// never ended: with no job of the evaluation left to carry it
			// on, it is started again.
			jobs, err := s.engine.jobsTx(ctx, tx, id, 1, unfinished...)
			if err != nil {
				return err
			}
			left := len(jobs) > 0
			var status string
			if !left {
				if status, err = s.db.Store.EvaluationStatusTx(tx, id); err != nil {
					return err
				}
				// A step waiting for its measurement's evaluation
				// (seriessteps.go) carries it on, unless the evaluation
				// was cancelled (its job then does nothing).
				if status != StatusCancelled {
					if left, err = s.seriesStepWaitingTx(tx, id, st.Gen); err != nil {
						return err
					}
				}
			}
			if !left {
				st.Status, st.Note = SeriesBisectFailed, "interrupted: its jobs were cancelled"
				// An automatic one the evaluation still waits for: the
				// new run's end finishes the evaluation instead.
				if status == "running" {
					doneGen = st.DoneGen
				}
			}
		}
		if st != nil && !st.Ended() {
			if requester != "" && !slices.Contains(st.Requesters, requester) {
				st.Requesters = append(st.Requesters, requester)
			}
			out = fmt.Sprintf("the bisection inside the series of evaluation %d is already %s (%d measurement(s) made); the result follows", id, st.Status, len(st.Records))
			return s.db.Store.SetSeriesBisectionTx(tx, id, st)
		}
		if st != nil && st.Status != SeriesBisectFailed {
			out = st.Text()
			return nil
		}
		st = &SeriesBisectState{Status: SeriesBisectQueued, Gen: time.Now().UnixNano(), Variant: pl.Variant, Benchmark: pl.Benchmark,
			Metric: pl.Metric, Change: pl.Change, DoneGen: doneGen}
		if requester != "" {
			st.Requesters = []string{requester}
		}
		if err := s.db.Store.SetSeriesBisectionTx(tx, id, st); err != nil {
			return err
		}
		if err := s.engine.insertManyTx(ctx, tx, []river.InsertManyParams{seriesBisectJob(id, st.Gen, 0)}); err != nil {
			return fail.Infraf("river: queueing the bisection of evaluation %d: %w", id, err)
		}
		out = fmt.Sprintf("bisection inside the series of evaluation %d queued: %s %s %+.1f%% over %d patches; the result follows",
			id, pl.Benchmark, pl.Metric, pl.Change, len(ser.Commits))
		return nil
	})
	if err == nil {
		s.evalLog(id).printf("%s", out)
	}
	return out, err
}

// bisectMeasurer is the series bisection's measurer of evaluation id:
// the at-commit pipeline's variant built and booted in this service's
// store, its reports under dir. It is a bisect.Planner: the steps submit
// its measurements as evaluations of the stage graph (seriessteps.go);
// its runner settings (cache, budget, slots) are those a measurement made
// in the job would use.
func (s *Service) bisectMeasurer(id int64, ser *perpatch.Series, dir string) func(*pipelines.Pipeline, string, string, string) bisect.Measurer {
	return func(at *pipelines.Pipeline, variant, benchmark, metric string) bisect.Measurer {
		if f := s.cfg.Series.Bisect; f != nil {
			return f(ser, at, variant, benchmark, metric, dir)
		}
		env := s.env(id, inProcess)
		return &bisect.PipelineMeasurer{Pipeline: at, Variant: variant, Benchmark: benchmark, Metric: metric, Repo: ser.Repo,
			OutDir: dir, Store: s.db.Store, CacheDir: env.CacheDir, Jobs: env.Jobs, CompilerCache: env.CompilerCache, Budget: env.Budget,
			Slot: env.Slot, Progress: env.Progress}
	}
}

type seriesBisectWorker struct {
	river.WorkerDefaults[SeriesBisectArgs]
	s *Service
}

func (w *seriesBisectWorker) Work(ctx context.Context, job *river.Job[SeriesBisectArgs]) error {
	s, a := w.s, job.Args
	// A snapshot to plan the step with: what this job writes it writes
	// in a transaction that reads the state again (seriesBisectTx), so a
	// requester added meanwhile stays and a step recorded twice is not.
	st, err := s.SeriesBisection(a.EvaluationID)
	if err != nil {
		return err
	}
	if r := st.run(); !r.isStep(a.Gen, a.Seq) {
		if r.ahead(a.Gen, a.Seq) {
			return s.seriesBisectCatchUp(ctx, job)
		}
		return nil // another run, finished, or this step was recorded and a later job carries on
	}
	s.beat.begin(job.ID, fmt.Sprintf("bisection inside the series of evaluation %d, measurement %d (attempt %d)", a.EvaluationID, a.Seq+1, job.Attempt))
	defer s.beat.end(job.ID)
	log := s.evalLog(a.EvaluationID)
	dir := filepath.Join(s.OutDir(a.EvaluationID), "series-bisect")
	// retry returns an infrastructure error for River to retry; the last
	// attempt ends the bisection as failed instead (an automatic one
	// would otherwise leave its evaluation running).
	retry := func(err error) error {
		if ctx.Err() == nil && job.Attempt >= job.MaxAttempts {
			return s.seriesBisectEnd(ctx, job, SeriesBisectFailed, nil, err.Error())
		}
		return err
	}
	ser, err := s.loadSeries(a.EvaluationID)
	if err != nil {
		if fail.KindOf(err) == fail.KindInfra {
			return retry(err)
		}
		return s.seriesBisectEnd(ctx, job, SeriesBisectFailed, nil, err.Error())
	}
	pl, note, err := perpatch.PlanBisection(ser, perpatch.Options{BisectMeasurer: s.bisectMeasurer(a.EvaluationID, ser, filepath.Join(dir, "steps"))})
	if err != nil {
		return s.seriesBisectEnd(ctx, job, SeriesBisectFailed, nil, err.Error())
	}
	if pl == nil {
		return s.seriesBisectEnd(ctx, job, SeriesBisectNone, nil, note)
	}
	started := st.Started
	if started.IsZero() {
		started = time.Now().UTC()
	}
	measurer := pl.Options.Measurer
	res, need, err := bisect.Resume(ctx, pl.Options, st.Records, started)
	if err != nil {
		if ctx.Err() != nil || fail.KindOf(err) == fail.KindInfra {
			return retry(err)
		}
		status := SeriesBisectFailed
		if res != nil {
			status = SeriesBisectNone // the ends measured again did not show it
		}
		return s.seriesBisectEnd(ctx, job, status, nil, "series bisection not done: "+err.Error())
	}
	if need == nil {
		b, err := pl.Finish(res, dir, bisect.Context{Tree: ser.Repo, Arch: strings.Join(ser.Pipeline.Arches, ",")})
		if err != nil {
			return retry(err)
		}
		return s.seriesBisectEnd(ctx, job, res.Status, b, "")
	}
	// Show the step being measured, then measure it.
	mine, err := s.seriesBisectTx(ctx, nil, a, func(tx *store.Tx, st *SeriesBisectState) ([]river.InsertManyParams, error) {
		st.Status, st.Next, st.Started = SeriesBisectRunning, need, started
		return nil, nil
	})
	if err != nil {
		return retry(err)
	}
	if !mine {
		return nil
	}
	log.printf("series bisection: measuring %.12s (%d boot(s), measurement %d)", need.Commit, need.Boots, a.Seq+1)
	if pm := pl.Planner(); pm != nil && !pl.Known(*need) {
		// An evaluation of the stage graph, recorded when it ends
		// (seriessteps.go).
		return s.submitSeriesStep(ctx, job, need, pm, retry)
	}
	rec, err := bisect.Measure(ctx, measurer, *need)
	if err != nil {
		return retry(err) // shutdown or infrastructure: retried, the same measurement again
	}
	return recordSeriesStep(ctx, s, job, a, rec, retry)
}

// run is where the series bisection st is (bisectsteps.go).
func (st *SeriesBisectState) run() bisectRun {
	if st == nil {
		return bisectRun{}
	}
	return bisectRun{exists: true, gen: st.Gen, recorded: len(st.Records), ended: st.Ended()}
}

// seriesBisectJobs is the bisection inside evaluation id's series as step
// jobs.
func (s *Service) seriesBisectJobs(id int64) bisectJobs[*SeriesBisectState] {
	return bisectJobs[*SeriesBisectState]{
		read:   func(tx *store.Tx) (*SeriesBisectState, error) { return s.seriesBisectionTx(tx, id) },
		write:  func(tx *store.Tx, st *SeriesBisectState) error { return s.db.Store.SetSeriesBisectionTx(tx, id, st) },
		run:    (*SeriesBisectState).run,
		newRun: func(st *SeriesBisectState, gen int64) { st.Gen = gen },
		step:   func(gen int64, seq int) river.InsertManyParams { return seriesBisectJob(id, gen, seq) },
	}
}

// seriesBisectCatchUp ends step job, which is ahead of its bisection's
// records, so that the bisection goes on from them as a new run
// (catchUpTx); its requesters and DoneGen stay.
func (s *Service) seriesBisectCatchUp(ctx context.Context, job *river.Job[SeriesBisectArgs]) error {
	a := job.Args
	mine, at, err := catchUpTx(ctx, s, job, s.seriesBisectJobs(a.EvaluationID), a.Gen, a.Seq)
	if err == nil && mine {
		s.evalLog(a.EvaluationID).printf("series bisection: step %d was queued with only %d measurement(s) recorded: carrying on from the records (measurement %d next)",
			a.Seq+1, at, at+1)
	}
	return err
}

// seriesBisectTx changes the state of the bisection step a belongs to
// (changeTx): change is not called when a is no longer the step the
// bisection is at (a new run, ended, or the step recorded: a step the
// same job would otherwise record twice); mine says whether it was.
func (s *Service) seriesBisectTx(ctx context.Context, job *river.Job[SeriesBisectArgs], a SeriesBisectArgs,
	change func(tx *store.Tx, st *SeriesBisectState) ([]river.InsertManyParams, error)) (mine bool, err error) {
	return seriesBisectTxOf(ctx, s, job, a, change)
}

// seriesBisectTxOf is seriesBisectTx for job, which takes step a
// (series_bisect, series_bisect_measured).
func seriesBisectTxOf[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], a SeriesBisectArgs,
	change func(tx *store.Tx, st *SeriesBisectState) ([]river.InsertManyParams, error)) (mine bool, err error) {
	return changeTx(ctx, s, job, s.seriesBisectJobs(a.EvaluationID), a.Gen, a.Seq, bisectRun.isStep, change)
}

// loadSeries is evaluation id taken apart as perpatch.Load does, with the
// samples its per-patch run took at the prefixes (the steps' stored
// evaluations its report names) as Known: the bisection does not
// measure those commits again.
func (s *Service) loadSeries(id int64) (*perpatch.Series, error) {
	ser, err := perpatch.Load(s.db.Store, id)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(s.OutDir(id), "report.json"))
	if err != nil {
		return ser, nil // no report (yet): nothing measured per patch
	}
	r, err := report.ReadJSON(f)
	f.Close()
	if err != nil || r.PerPatch == nil {
		return ser, nil
	}
	for _, step := range r.PerPatch.Steps {
		if step.EvaluationID == 0 || step.EvaluationID == id || step.Commit == "" {
			continue
		}
		ss, err := s.db.Store.Samples(step.EvaluationID)
		if err != nil {
			return nil, err
		}
		if ser.Known == nil {
			ser.Known = map[string][]evaluate.Sample{}
		}
		ser.Known[step.Commit] = append(ser.Known[step.Commit], ss...)
	}
	return ser, nil
}

// seriesBisectEnd ends the series bisection job is a step of with
// status: b is the found (or ambiguous) result, note why there is none.
// The evaluation's reports gain b; the requesters (as stored when it
// ends) are told by a series_bisected job queued with the state.
func (s *Service) seriesBisectEnd(ctx context.Context, job *river.Job[SeriesBisectArgs], status string, b *report.SeriesBisection, note string) error {
	return seriesBisectEndOf(ctx, s, job, job.Args, status, b, note)
}

// seriesBisectEndOf is seriesBisectEnd for job, which takes step a
// (series_bisect, series_bisect_measured).
func seriesBisectEndOf[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], a SeriesBisectArgs, status string,
	b *report.SeriesBisection, note string) error {
	id := a.EvaluationID
	if b != nil {
		if err := s.amendBisection(id, b); err != nil {
			return err
		}
	}
	var text string
	mine, err := seriesBisectTxOf(ctx, s, job, a, func(tx *store.Tx, st *SeriesBisectState) ([]river.InsertManyParams, error) {
		st.Status, st.Result, st.Note, st.Next = status, b, note, nil
		text = st.Text()
		var next []river.InsertManyParams
		if len(st.Requesters) > 0 {
			next = append(next, river.InsertManyParams{Args: SeriesBisectedArgs{id, st.Gen},
				InsertOpts: &river.InsertOpts{Queue: QueueReport, MaxAttempts: 10, UniqueOpts: river.UniqueOpts{ByArgs: true}}})
		}
		if st.DoneGen != 0 {
			// An automatic bisection: the end of its evaluation's graph.
			end, err := s.follow(ctx, tx, after{id: id, gen: st.DoneGen}, runner.Step{Stage: runner.StageSeriesBisect}, runner.Found{})
			if err != nil {
				return nil, err
			}
			next = append(next, end...)
		}
		return next, nil
	})
	if err == nil && mine {
		s.evalLog(id).printf("series bisection %s: %s", status, text)
	}
	return err
}

// amendBisection adds b to evaluation id's reports (when it has any).
func (s *Service) amendBisection(id int64, b *report.SeriesBisection) error {
	dir := s.OutDir(id)
	if _, err := os.Stat(filepath.Join(dir, "report.json")); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return s.amendReport(id, dir, func(r *report.Report) {
		if r.PerPatch == nil {
			r.PerPatch = &report.PerPatch{}
		}
		r.PerPatch.Bisection = b
	})
}

type seriesBisectedWorker struct {
	river.WorkerDefaults[SeriesBisectedArgs]
	s *Service
}

func (w *seriesBisectedWorker) Work(ctx context.Context, job *river.Job[SeriesBisectedArgs]) error {
	s, a := w.s, job.Args
	if s.cfg.SeriesBisected == nil {
		return nil
	}
	st, err := s.SeriesBisection(a.EvaluationID)
	if err != nil {
		return err
	}
	if st == nil || st.Gen != a.Gen || !st.Ended() {
		return nil
	}
	if err := s.cfg.SeriesBisected(ctx, a.EvaluationID, st.Requesters, st.Text()); err != nil {
		s.evalLog(a.EvaluationID).printf("telling who asked for the bisection (attempt %d): %v", job.Attempt, err)
		if fail.KindOf(err) == fail.KindInput {
			return river.JobCancel(err)
		}
		return err
	}
	return nil
}
