package service

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/repro"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// The job kinds are runner's stages (graph.go: the service drives
// runner's stage graph). Every job names its evaluation and the
// submission generation Gen (a re-run is a new generation, so River's
// uniqueness by arguments dedupes within one run of the chain and never
// blocks a re-run).
//
// An evaluation's boots run one at a time in their interleaving order
// (each boot job carries the round's boots after it), while other
// evaluations' boots may run beside them. Where a stage records its
// result (apply, build, boot, report), the next job is inserted and the
// current one completed inside the stage's own transaction
// (runner.Env.Record, River's InsertManyTx and JobCompleteTx): a crash
// leaves either both or neither.

// ApplyArgs is the apply job.
type ApplyArgs struct {
	EvaluationID int64 `json:"evaluation_id"`
	Gen          int64 `json:"gen"`
}

func (ApplyArgs) Kind() string { return "apply" }

// ConfigureArgs is one kernel's configure job: it configures and
// verifies the kernel without compiling it (runner.ConfigureKernel), in
// the kernel's build queue, since configuring needs the arch's toolchain
// (in a farm, the build queues' workers have it; the apply job's host
// may not).
type ConfigureArgs struct {
	EvaluationID int64  `json:"evaluation_id"`
	Gen          int64  `json:"gen"`
	Key          string `json:"key"`
}

func (ConfigureArgs) Kind() string { return "configure" }

// BuildArgs is one kernel's build job.
type BuildArgs struct {
	EvaluationID int64  `json:"evaluation_id"`
	Gen          int64  `json:"gen"`
	Key          string `json:"key"`
}

func (BuildArgs) Kind() string { return "build" }

// BootArgs is one planned boot; Rest are the round's boots after it.
type BootArgs struct {
	EvaluationID int64              `json:"evaluation_id"`
	Gen          int64              `json:"gen"`
	Round        int                `json:"round"`
	Boot         evaluate.BootKey   `json:"boot"`
	Rest         []evaluate.BootKey `json:"rest,omitempty"`
}

func (BootArgs) Kind() string { return "boot" }

// MoreArgs plans the next round of boots: the planned ones (Initial), or
// an adaptive round.
type MoreArgs struct {
	EvaluationID int64 `json:"evaluation_id"`
	Gen          int64 `json:"gen"`
	Round        int   `json:"round"`
	Initial      bool  `json:"initial,omitempty"`
}

func (MoreArgs) Kind() string { return "more" }

// ReportArgs is the report job.
type ReportArgs struct {
	EvaluationID int64 `json:"evaluation_id"`
	Gen          int64 `json:"gen"`
}

func (ReportArgs) Kind() string { return "report" }

// Evaluation events Config.Notify is told about.
const (
	EventQueued = "queued"
	EventDone   = "done"
	EventFailed = "failed"
)

// NotifyArgs tells Config.Notify about an evaluation's event. Its jobs
// carry no evaluation tag: cancelling or failing the evaluation must not
// cancel the job that reports it.
type NotifyArgs struct {
	EvaluationID int64  `json:"evaluation_id"`
	Gen          int64  `json:"gen"`
	Event        string `json:"event"`
}

func (NotifyArgs) Kind() string { return "notify" }

func jobOpts(queue string, evalID int64, attempts int) *river.InsertOpts {
	return &river.InsertOpts{Queue: queue, Tags: []string{evalTag(evalID)}, MaxAttempts: attempts,
		UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

func applyJob(id, gen int64) river.InsertManyParams {
	return river.InsertManyParams{Args: ApplyArgs{id, gen}, InsertOpts: jobOpts(QueueApply, id, 3)}
}

func configureJob(id, gen int64, spec pipelines.BuildSpec) river.InsertManyParams {
	return river.InsertManyParams{Args: ConfigureArgs{id, gen, spec.Key}, InsertOpts: jobOpts(BuildQueue(spec.Arch), id, 3)}
}

func buildJob(id, gen int64, spec pipelines.BuildSpec) river.InsertManyParams {
	return river.InsertManyParams{Args: BuildArgs{id, gen, spec.Key}, InsertOpts: jobOpts(BuildQueue(spec.Arch), id, 3)}
}

func moreJob(id, gen int64, round int, initial bool) river.InsertManyParams {
	return river.InsertManyParams{Args: MoreArgs{id, gen, round, initial}, InsertOpts: jobOpts(QueueMore, id, 3)}
}

func reportJob(id, gen int64) river.InsertManyParams {
	return river.InsertManyParams{Args: ReportArgs{id, gen}, InsertOpts: jobOpts(QueueReport, id, 3)}
}

// notifyJobs is the notify job of an event, none without Config.Notify.
// A worker cannot know the coordinator's Notify: its Notify
// (notifyOnCoordinator) makes it insert every one.
func (s *Service) notifyJobs(id, gen int64, event string) []river.InsertManyParams {
	if s.cfg.Notify == nil {
		return nil
	}
	return []river.InsertManyParams{{Args: NotifyArgs{id, gen, event},
		InsertOpts: &river.InsertOpts{Queue: QueueReport, MaxAttempts: 10, UniqueOpts: river.UniqueOpts{ByArgs: true}}}}
}

// next computes the jobs that follow the current one, inside tx.
type next func(ctx context.Context, tx *store.Tx) ([]river.InsertManyParams, error)

// inProcess is env's kind for an evaluation run whole inside a series
// job (the in-process measurers of SeriesMeasurers' nil fields): not
// queued, its builds share the -j budget and its builds and boots take
// the engine's slots, as a stage job's would.
const inProcess = "in-process"

// env is the one runner.Env the service's config makes: a stage job's
// (kind: the job's kind, "plan", "submit") or, for inProcess, an
// evaluation's run inside a series job. Builds share the service's -j
// budget, so that whichever builds run keep every slot busy (a build
// running alone gets all of it).
func (s *Service) env(id int64, kind string) runner.Env {
	jobs := s.cfg.Jobs
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	e := runner.Env{Store: s.db.Store, CacheDir: s.cfg.CacheDir, Jobs: jobs, CompilerCache: s.cfg.CompilerCache, Artifacts: s.artifacts,
		Progress: progress.New(s.evalLog(id))}
	if kind == inProcess {
		e.Budget, e.Slot = s.budget, s.engine.slot
		return e
	}
	e.Queued = true
	if kind == "build" {
		e.Budget = s.budget
	}
	e.Sources = s.sources
	return e
}

// work runs one stage job: it refuses to start for a cancelled
// evaluation, runs stage with an Env whose Record inserts the next jobs
// and completes this one in the stage's transaction (or in a transaction
// of its own when the stage found its work already done and recorded
// nothing), and sorts errors: cancellation and shutdown go back to River
// (a shutdown's job is retried on restart); bad input and evaluated
// failures end the evaluation as failed and cancel its other jobs;
// infrastructure errors are retried up to the job's attempts.
func work[T river.JobArgs](s *Service, ctx context.Context, job *river.Job[T], id int64, stage func(env runner.Env) error, then next) error {
	e, err := s.db.Store.Evaluation(id)
	if err != nil {
		if fail.KindOf(err) == fail.KindInput {
			return river.JobCancel(err)
		}
		return err
	}
	if e.Status == StatusCancelled {
		return river.JobCancel(fmt.Errorf("evaluation %d was cancelled", id))
	}
	release, err := s.engine.slot(ctx, job.Kind)
	if err != nil {
		return err
	}
	defer release()
	// The status again after the wait for a slot, and "running" only from
	// "queued": the evaluation may have failed (another job's last
	// attempt) or been cancelled while this job waited, and the snapshot
	// above must not turn it back to running.
	switch status, err := s.db.Store.StartEvaluation(ctx, id); {
	case err != nil:
		if fail.KindOf(err) == fail.KindInput {
			return river.JobCancel(err)
		}
		return err
	case status == StatusCancelled:
		return river.JobCancel(fmt.Errorf("evaluation %d was cancelled", id))
	case status == "failed":
		return river.JobCancel(fmt.Errorf("evaluation %d failed while this job waited for its turn", id))
	}
	s.beat.begin(job.ID, fmt.Sprintf("%s of evaluation %d (attempt %d)", job.Kind, id, job.Attempt))
	defer s.beat.end(job.ID)
	advance := func(ctx context.Context, tx *store.Tx) error {
		var params []river.InsertManyParams
		if then != nil {
			var err error
			if params, err = then(ctx, tx); err != nil {
				return err
			}
		}
		if len(params) > 0 {
			if err := s.engine.insertManyTx(ctx, tx, params); err != nil {
				return fail.Infraf("river: enqueueing the next stage of evaluation %d: %w", id, err)
			}
		}
		if err := completeTx(ctx, tx, job); err != nil {
			return fail.Infraf("river: completing job %d: %w", job.ID, err)
		}
		return nil
	}
	recorded := false
	env := s.env(id, job.Kind)
	env.Record = func(ctx context.Context, tx *store.Tx) error {
		recorded = true
		return advance(ctx, tx)
	}
	err = stage(env)
	env.Progress.Done()
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		// Bad input and a failed evaluation are final, and so is a spent
		// budget of lost boots: another attempt would boot again on the
		// machine that is gone.
		if k := fail.KindOf(err); k == fail.KindInput || k == fail.KindFailed || errors.Is(err, runner.ErrLostBoots) {
			s.evalFailed(id, job.Kind, err)
			return river.JobCancel(err)
		}
		if job.Attempt >= job.MaxAttempts {
			s.evalFailed(id, job.Kind, err)
		} else {
			s.evalLog(id).printf("%s: attempt %d of %d failed, will retry: %v", job.Kind, job.Attempt, job.MaxAttempts, err)
		}
		return err
	}
	if !recorded {
		return s.db.Store.Tx(ctx, func(tx *store.Tx) error { return advance(ctx, tx) })
	}
	return nil
}

// evalFailed ends evaluation id as failed, tells Notify and the jobs
// waiting for it, and cancels its other jobs.
func (s *Service) evalFailed(id int64, kind string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if terr := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		// The jobs waiting for it are queued with the failure (waiters.go).
		return s.endTx(ctx, tx, id, EvalEnd{Status: store.StatusFailed, Stage: kind, Error: err.Error(), Kind: fail.KindOf(err).String()},
			s.notifyJobs(id, time.Now().UnixNano(), EventFailed))
	}); terr != nil {
		s.logf("evaluation %d: recording the failure: %v", id, terr)
	}
	s.evalLog(id).printf("%s failed: %v", kind, err)
	if _, cerr := s.engine.CancelEvaluation(ctx, id); cerr != nil {
		s.logf("evaluation %d: cancelling its other jobs: %v", id, cerr)
	}
}

type applyWorker struct {
	river.WorkerDefaults[ApplyArgs]
	s *Service
}

func (w *applyWorker) Work(ctx context.Context, job *river.Job[ApplyArgs]) error {
	a := job.Args
	at := after{id: a.EvaluationID, gen: a.Gen}
	var f runner.Found
	return work(w.s, ctx, job, a.EvaluationID, func(env runner.Env) error {
		if err := w.s.readKernels(ctx, env, &at, &f); err != nil {
			return err
		}
		return runner.Apply(ctx, env, a.EvaluationID)
	}, func(ctx context.Context, tx *store.Tx) ([]river.InsertManyParams, error) {
		return w.s.follow(ctx, tx, at, runner.Step{Stage: runner.StageApply}, f)
	})
}

type configureWorker struct {
	river.WorkerDefaults[ConfigureArgs]
	s *Service
}

func (w *configureWorker) Work(ctx context.Context, job *river.Job[ConfigureArgs]) error {
	a := job.Args
	at := after{id: a.EvaluationID, gen: a.Gen}
	var f runner.Found
	return work(w.s, ctx, job, a.EvaluationID, func(env runner.Env) error {
		if err := w.s.readKernels(ctx, env, &at, &f); err != nil {
			return err
		}
		return runner.ConfigureKernel(ctx, env, a.EvaluationID, a.Key)
	}, func(ctx context.Context, tx *store.Tx) ([]river.InsertManyParams, error) {
		var err error
		if f.Configuring, err = w.s.othersUnfinished(ctx, tx, job.ID, a.EvaluationID, ConfigureArgs{}.Kind()); err != nil {
			return nil, err
		}
		// A configure that refused failed the evaluation (the status
		// first, then its jobs: read here in the other order) and
		// cancelled the others: no build is ever queued then.
		if f.Configuring == 0 {
			switch status, err := w.s.db.Store.EvaluationStatusTx(tx, a.EvaluationID); {
			case err != nil:
				return nil, err
			case status == store.StatusFailed || status == StatusCancelled:
				return nil, nil
			}
		}
		return w.s.follow(ctx, tx, at, runner.Step{Stage: runner.StageConfigure, Key: a.Key}, f)
	})
}

// readKernels fills at's kernels and graph and f's kernel keys for the
// apply and configure steps, whose follow-ups (configures, builds) are
// one job per kernel of the evaluation.
func (s *Service) readKernels(ctx context.Context, env runner.Env, at *after, f *runner.Found) error {
	specs, err := runner.BuildSpecs(ctx, env, at.id)
	if err != nil {
		return err
	}
	at.specs = map[string]pipelines.BuildSpec{}
	for _, k := range specs {
		at.specs[k.Key] = k
		f.Kernels = append(f.Kernels, k.Key)
	}
	at.graph, err = s.graph(at.id)
	return err
}

type buildWorker struct {
	river.WorkerDefaults[BuildArgs]
	s *Service
}

func (w *buildWorker) Work(ctx context.Context, job *river.Job[BuildArgs]) error {
	a := job.Args
	at := after{id: a.EvaluationID, gen: a.Gen}
	return work(w.s, ctx, job, a.EvaluationID, func(env runner.Env) error {
		var err error
		if at.graph, err = w.s.graph(a.EvaluationID); err != nil {
			return err
		}
		return runner.Build(ctx, env, a.EvaluationID, a.Key)
	}, func(ctx context.Context, tx *store.Tx) ([]river.InsertManyParams, error) {
		building, err := w.s.othersUnfinished(ctx, tx, job.ID, a.EvaluationID, BuildArgs{}.Kind())
		if err != nil {
			return nil, err
		}
		return w.s.follow(ctx, tx, at, runner.Step{Stage: runner.StageBuild, Key: a.Key}, runner.Found{Building: building})
	})
}

// othersUnfinished is how many other jobs of kind (configure, build) of
// evaluation id than job are unfinished, read in tx. The jobs'
// transactions take turns here (tx.Lock: SQLite serialises them anyway),
// so exactly one of them sees no other unfinished and queues what
// follows the round (the builds; the boots' planning), whose jobs are
// unique by their arguments besides.
func (s *Service) othersUnfinished(ctx context.Context, tx *store.Tx, job, id int64, kind string) (int, error) {
	if err := tx.Lock(kind+"s", strconv.FormatInt(id, 10)); err != nil {
		return 0, fail.Infraf("evaluation %d: %w", id, err)
	}
	res, err := s.engine.jobListTx(ctx, tx, s.engine.evalJobs(river.NewJobListParams().Kinds(kind),
		id).States(unfinished...).First(1000))
	if err != nil {
		return 0, fail.Infraf("river: %s jobs of evaluation %d: %w", kind, id, err)
	}
	n := 0
	for _, j := range res.Jobs {
		if j.ID != job {
			n++
		}
	}
	return n, nil
}

type bootWorker struct {
	river.WorkerDefaults[BootArgs]
	s *Service
}

func (w *bootWorker) Work(ctx context.Context, job *river.Job[BootArgs]) error {
	a := job.Args
	if job.Attempt > 1 {
		// The last attempt died (kill -9, a lost worker) or failed: a run
		// of this boot it left "running" is over.
		if _, err := w.s.db.Store.InterruptRuns(a.EvaluationID, a.Boot.Variant, a.Boot.Boot,
			store.Interrupted+fmt.Sprintf("attempt %d of job %d ended without finishing this boot", job.Attempt-1, job.ID)); err != nil {
			return err
		}
	}
	at := after{id: a.EvaluationID, gen: a.Gen}
	return work(w.s, ctx, job, a.EvaluationID, func(env runner.Env) error {
		var err error
		if at.graph, err = w.s.graph(a.EvaluationID); err != nil {
			return err
		}
		return runner.Boot(ctx, env, a.EvaluationID, a.Boot)
	}, func(ctx context.Context, tx *store.Tx) ([]river.InsertManyParams, error) {
		return w.s.follow(ctx, tx, at, runner.Step{Stage: runner.StageBoot, Round: a.Round, Boot: a.Boot, Rest: a.Rest}, runner.Found{})
	})
}

type moreWorker struct {
	river.WorkerDefaults[MoreArgs]
	s *Service
}

// Work takes StagePlan (Initial) or StageMore.
func (w *moreWorker) Work(ctx context.Context, job *river.Job[MoreArgs]) error {
	a := job.Args
	at := after{id: a.EvaluationID, gen: a.Gen}
	step := runner.Step{Stage: runner.StageMore, Round: a.Round}
	if a.Initial {
		step = runner.Step{Stage: runner.StagePlan}
	}
	var f runner.Found
	return work(w.s, ctx, job, a.EvaluationID, func(env runner.Env) error {
		env.Record = nil // More records nothing of its own; the next job is inserted below
		var err error
		if at.graph, err = w.s.graph(a.EvaluationID); err != nil {
			return err
		}
		if a.Initial {
			f.Boots, err = runner.Boots(ctx, env, a.EvaluationID)
		} else if a.Round <= at.graph.MaxRound {
			f.Boots, err = runner.More(ctx, env, a.EvaluationID)
		}
		return err
	}, func(ctx context.Context, tx *store.Tx) ([]river.InsertManyParams, error) {
		return w.s.follow(ctx, tx, at, step, f)
	})
}

type reportWorker struct {
	river.WorkerDefaults[ReportArgs]
	s *Service
}

func (w *reportWorker) Work(ctx context.Context, job *river.Job[ReportArgs]) error {
	a := job.Args
	var end evalEnd
	return work(w.s, ctx, job, a.EvaluationID, func(env runner.Env) error {
		// Read before the report's transaction, which ends the
		// evaluation with it (evalEnd).
		var err error
		if end, err = w.s.readEnd(a.EvaluationID); err != nil {
			return err
		}
		out, err := runner.Report(ctx, env, a.EvaluationID, w.s.OutDir(a.EvaluationID))
		if err == nil && out != nil {
			env.Progress.Printf("done: %d regression(s); reports in %s", len(out.Regressions), w.s.OutDir(a.EvaluationID))
			w.s.writeRepro(a.EvaluationID)
		}
		return err
	}, func(ctx context.Context, tx *store.Tx) ([]river.InsertManyParams, error) {
		return w.s.afterReport(ctx, tx, a.EvaluationID, a.Gen, end)
	})
}

type notifyWorker struct {
	river.WorkerDefaults[NotifyArgs]
	s *Service
}

func (w *notifyWorker) Work(ctx context.Context, job *river.Job[NotifyArgs]) error {
	if w.s.cfg.Notify == nil {
		return nil
	}
	a := job.Args
	if err := w.s.cfg.Notify(ctx, a.EvaluationID, a.Event); err != nil {
		w.s.evalLog(a.EvaluationID).printf("posting %s (attempt %d): %v", a.Event, job.Attempt, err)
		if fail.KindOf(err) == fail.KindInput {
			return river.JobCancel(err)
		}
		return err
	}
	return nil
}

func (s *Service) addWorkers(w *river.Workers) {
	river.AddWorker(w, &applyWorker{s: s})
	river.AddWorker(w, &configureWorker{s: s})
	river.AddWorker(w, &buildWorker{s: s})
	river.AddWorker(w, &bootWorker{s: s})
	river.AddWorker(w, &moreWorker{s: s})
	river.AddWorker(w, &reportWorker{s: s})
	river.AddWorker(w, &notifyWorker{s: s})
	river.AddWorker(w, &watchTickWorker{s: s})
	river.AddWorker(w, &retestWorker{s: s})
	river.AddWorker(w, &retestedWorker{s: s})
	river.AddWorker(w, &bisectStepWorker{s: s})
	river.AddWorker(w, &bisectMeasuredWorker{s: s})
	river.AddWorker(w, &perPatchWorker{s: s})
	river.AddWorker(w, &perPatchMeasuredWorker{s: s})
	river.AddWorker(w, &seriesBisectWorker{s: s})
	river.AddWorker(w, &seriesBisectedWorker{s: s})
	river.AddWorker(w, &seriesBisectMeasuredWorker{s: s})
}

// Submit records an evaluation of p with o (runner.Submit: the same inputs
// give the existing evaluation) and queues it. created is false when it
// existed; one that is still queued or running is returned as it is
// (nothing is queued twice), a finished one is queued again (its stages
// find their work done and only redo what is missing).
func (s *Service) Submit(ctx context.Context, p *pipelines.Pipeline, o runner.Options) (id int64, created bool, err error) {
	return s.submit(ctx, p, o, nil)
}

// submit is Submit; then, when set, is called in the transaction that
// queues the evaluation or finds it under way (a job that waits for its
// end registers itself there: waiters.go). That transaction holds the
// evaluation's row (EvaluationStatusTx) before it looks at its jobs: a
// transaction that ends the evaluation either ended it before (its jobs
// are done: it is queued again) or takes the waiters after.
func (s *Service) submit(ctx context.Context, p *pipelines.Pipeline, o runner.Options, then func(tx *store.Tx, id int64) error) (id int64, created bool, err error) {
	if o.From.Email == "" {
		o.From = s.cfg.From
	}
	if o.Lore == "" {
		o.Lore = s.lore
	}
	o.OutDir = ""
	env := s.env(0, "submit")
	env.Progress = progress.Discard()
	id, resumed, err := runner.Submit(ctx, env, p, o)
	if err != nil {
		return 0, false, err
	}
	queued := false
	err = s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		queued = false
		if resumed {
			status, err := s.db.Store.EvaluationStatusTx(tx, id)
			if err != nil {
				return err
			}
			jobs, err := s.engine.jobsTx(ctx, tx, id, 1, unfinished...)
			if err != nil {
				return err
			}
			// A per-patch run waiting for a prefix's evaluation is
			// unfinished work too (perpatchsteps.go).
			waiting, err := s.perPatchWaitingTx(tx, id)
			if err != nil {
				return err
			}
			// So is a step of its series bisection waiting for its
			// measurement's evaluation (seriessteps.go), unless it was
			// cancelled (the step's waiter then does nothing).
			if !waiting && status != StatusCancelled {
				if waiting, err = s.seriesStepWaitingTx(tx, id, 0); err != nil {
					return err
				}
			}
			if len(jobs) > 0 || waiting {
				return callThen(then, tx, id)
			}
		}
		if err := s.enqueueTx(ctx, tx, id, time.Now().UnixNano()); err != nil {
			return err
		}
		queued = true
		return callThen(then, tx, id)
	})
	if err != nil {
		return id, !resumed, err
	}
	if !queued {
		return id, false, nil
	}
	s.logf("evaluation %d %s: %s", id, map[bool]string{true: "submitted", false: "queued again"}[!resumed], p.Name)
	return id, !resumed, nil
}

func callThen(then func(tx *store.Tx, id int64) error, tx *store.Tx, id int64) error {
	if then == nil {
		return nil
	}
	return then(tx, id)
}

// enqueue queues evaluation id's chain from apply as a new generation.
func (s *Service) enqueue(ctx context.Context, id int64) error {
	gen := time.Now().UnixNano()
	return s.db.Store.Tx(ctx, func(tx *store.Tx) error { return s.enqueueTx(ctx, tx, id, gen) })
}

// enqueueTx is enqueue in tx, as generation gen.
func (s *Service) enqueueTx(ctx context.Context, tx *store.Tx, id, gen int64) error {
	if err := s.setStatus(tx, id, StatusQueued); err != nil {
		return err
	}
	jobs := append([]river.InsertManyParams{applyJob(id, gen)}, s.notifyJobs(id, gen, EventQueued)...)
	if err := s.engine.insertManyTx(ctx, tx, jobs); err != nil {
		return fail.Infraf("river: queueing evaluation %d: %w", id, err)
	}
	return nil
}

// Rerun queues a finished, failed or cancelled evaluation again: its
// stages keep what is done (applied series, kernels, finished boots) and
// redo the rest, then report again. A queued or running one is a
// bad-input error.
func (s *Service) Rerun(ctx context.Context, id int64) (int64, error) {
	e, err := s.db.Store.Evaluation(id)
	if err != nil {
		return 0, err
	}
	if e.Status == StatusQueued || e.Status == "running" {
		return 0, fail.Inputf("evaluation %d is %s: cancel it first or wait", id, e.Status)
	}
	if _, _, err := s.db.Store.Inputs(id); err != nil {
		return 0, err
	}
	if err := s.enqueue(ctx, id); err != nil {
		return 0, err
	}
	s.evalLog(id).printf("queued again")
	return id, nil
}

// writeRepro writes evaluation id's reproducer (pipelines/experiments/repro) as
// repro/ beside its reports, replacing an earlier one. The evaluation
// stands without it (the dashboard's download builds it again): a
// failure is only logged.
func (s *Service) writeRepro(id int64) {
	dir := filepath.Join(s.OutDir(id), "repro")
	r, err := repro.Build(s.db.Store, id, repro.Options{})
	if err == nil {
		err = r.Replace(dir)
	}
	if err != nil {
		s.evalLog(id).printf("the reproducer was not written to %s: %v", dir, err)
		return
	}
	for _, m := range r.Missing {
		s.evalLog(id).printf("reproducer %s: missing %s", dir, m)
	}
}
