package service

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Watches as queue work (issue 12). The scheduler (watch.Schedule:
// robfig/cron with Recover and SkipIfStillRunning) only inserts a tick
// job when a watch is due; everything else is jobs in the "watch" queue
// (one worker: evaluations and bisection steps build and boot, and run
// one at a time):
//
//   - watch_tick lists the remote (watch.Watcher.Check) and inserts the
//     re-test of the first entry to evaluate, the others riding along (so
//     entries are re-tested in version order, one after another, like an
//     evaluation's boots). While a watch's re-tests are unfinished its
//     ticks insert nothing: the next tick after them picks up what is new.
//     A tick also carries on the watch's bisections left under way with
//     no step job (resumeStuckBisections).
//   - retest fetches one entry and starts its evaluation: with a
//     watch.Planner (serve's watch.PipelineEvaluator) it submits the
//     evaluation to the service's stage graph (apply, configure, build,
//     boot, report jobs: no evaluation runs inside the re-test's job)
//     and, in the transaction that queues it, marks the entry as
//     evaluating it, registers a retested job as the evaluation's waiter
//     (waiters.go) and completes itself. An evaluator that is not a
//     Planner (tests' stand-ins that record an evaluation without
//     kernels) is called in the job (watch.Watcher.Retest). An entry done
//     already is only compared.
//   - retested is queued by the transaction that ends the evaluation
//     (done, failed or cancelled): it records the entry's result as
//     watch.Watcher.Retest does (watch.Watcher.Ended: the comparison
//     with the entry before, the events), then in one transaction queues
//     the first step of each new regression's bisection (watch with
//     --bisect), the next entry's re-test, and completes itself. While a
//     watch's re-test waits for its evaluation, its ticks insert nothing
//     (as while its jobs are unfinished).
//   - bisect_step replays the bisection over the measurements recorded on
//     the event (bisect.Resume: the search is a function of them), makes
//     the one measurement it asks for next and, in one transaction,
//     records it, queues the next step and completes itself. A serve
//     killed mid-bisection resumes at the step it was on; a finished step
//     is never measured again; the step that was running is measured
//     again as the same measurement (bisect.NthMeasurer: the same stored
//     evaluation, its finished builds and boots kept). Its steps are
//     those of the series bisection (bisectsteps.go): each job names its
//     run and measurement, changes the event's state only in
//     transactions that read it again, and a step ahead of the recorded
//     measurements carries the bisection on from them as a new run; the
//     last attempt of a step that keeps failing ends the bisection as
//     failed rather than leave it running. With a bisect.Planner (serve's
//     bisect.PipelineMeasurer) the measurement is an evaluation of the
//     stage graph: the step submits it and ends, and bisect_measured,
//     queued when it ends, records it and queues the next step
//     (watchsteps.go).

// QueueWatch runs the watches' ticks, re-tests and bisection steps.
const QueueWatch = "watch"

// WatchConfig enables the watches in a service (Service.Watch).
type WatchConfig struct {
	// Eval evaluates a watch's pipeline on an entry (serve:
	// watch.PipelineEvaluator on the service's database). A watch.Planner's
	// evaluations run as the service's stage jobs; another Evaluator (the
	// tests' stand-ins, which record an evaluation without kernels) is
	// called inside the re-test's job.
	Eval watch.Evaluator
	// Bisection plans the bisections and writes their reports; its
	// measurer makes the steps' measurements. Nil: regressions are not
	// bisected.
	Bisection *watch.Bisection
	// Deterministic says whether a watch's pipeline is deterministic
	// (watch.Deterministic); nil: no threshold on events.
	Deterministic func(*store.Watch) bool
	// Resync is how often the scheduler re-reads the watches (default a
	// minute).
	Resync time.Duration
}

// WatchTickArgs looks at a watch's remote once. At is when the scheduler
// (or run-now) fired, so each tick is its own job.
type WatchTickArgs struct {
	WatchID int64 `json:"watch_id"`
	At      int64 `json:"at"`
}

func (WatchTickArgs) Kind() string { return "watch_tick" }

// RetestArgs re-tests one history entry (Tag, a store.WatchTag id); Rest
// are the entries after it, in version order. Gen is the tick's At.
//
// The watch and the entry are its unique key while it is unfinished
// (retestJob): two ticks that both found the entry to re-test, in one
// process or two (serve, `watch run-now`, `watch daemon`), insert one
// job, so no entry is ever evaluated by two jobs at once. A finished
// re-test does not block the next one: an entry that is done is only
// compared again (watch.Watcher.Retest).
type RetestArgs struct {
	WatchID int64   `json:"watch_id" river:"unique"`
	Tag     int64   `json:"tag" river:"unique"`
	Rest    []int64 `json:"rest,omitempty"`
	Gen     int64   `json:"gen"`
}

func (RetestArgs) Kind() string { return "retest" }

// RetestedArgs records the result of the re-test of entry Tag (at
// Commit) when its evaluation EvaluationID has ended (End, filled in by
// the transaction that ended it: waiters.go), then carries on with Rest,
// as RetestArgs does. Series says the evaluation applied the watch's
// series (a failed apply names the tag: watch.EvalError).
type RetestedArgs struct {
	WatchID      int64    `json:"watch_id"`
	Tag          int64    `json:"tag"`
	Rest         []int64  `json:"rest,omitempty"`
	Gen          int64    `json:"gen"`
	Commit       string   `json:"commit"`
	EvaluationID int64    `json:"evaluation_id"`
	Series       bool     `json:"series,omitempty"`
	End          *EvalEnd `json:"end,omitempty"`
}

func (RetestedArgs) Kind() string { return "retested" }

// BisectStepArgs makes measurement Seq (0-based) of run Gen of the
// bisection of a watch event (watch.BisectState.Gen; 0 in the jobs of a
// bisection queued before runs were named, which stay as they were).
type BisectStepArgs struct {
	EventID int64 `json:"event_id"`
	Gen     int64 `json:"gen,omitempty"`
	Seq     int   `json:"seq"`
}

func (BisectStepArgs) Kind() string { return "bisect_step" }

// watchTag is the River tag naming a watch's jobs.
func watchTag(id int64) string { return "watch-" + strconv.FormatInt(id, 10) }

func watchJobOpts(watchID int64, attempts int) *river.InsertOpts {
	return &river.InsertOpts{Queue: QueueWatch, Tags: []string{watchTag(watchID)}, MaxAttempts: attempts,
		UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

func retestJob(watchID int64, tags []int64, gen int64) river.InsertManyParams {
	o := watchJobOpts(watchID, 5)
	o.UniqueOpts.ByState = unfinished // River wants available, pending, running and scheduled among them
	return river.InsertManyParams{Args: RetestArgs{WatchID: watchID, Tag: tags[0], Rest: tags[1:], Gen: gen}, InsertOpts: o}
}

func bisectStepJob(watchID, eventID, gen int64, seq int) river.InsertManyParams {
	return river.InsertManyParams{Args: BisectStepArgs{EventID: eventID, Gen: gen, Seq: seq}, InsertOpts: watchJobOpts(watchID, 5)}
}

// Watch enables the watches: Run starts the scheduler, and the watch
// queue's workers evaluate and bisect with cfg. Call it before Run.
//
// A re-test's evaluation and a bisection step's measurement run as the
// service's stage jobs (retest and bisect_step submit them, retested and
// bisect_measured record their results: see above and watchsteps.go), in
// the service's store, cache, budget and slots like any evaluation. A
// pipeline evaluator (watch.PipelineEvaluator, also the bisection's) is
// given the service's store, its compiler cache, its -j budget and its
// build and boot slots, for the measurers that still measure inside the
// job (a bisection's NewMeasurer that is not a bisect.Planner).
func (s *Service) Watch(cfg WatchConfig) {
	for _, e := range []watch.Evaluator{cfg.Eval, bisectionEval(cfg.Bisection)} {
		if pe, ok := e.(*watch.PipelineEvaluator); ok && pe != nil {
			pe.Store, pe.CompilerCache, pe.Budget, pe.Slot = s.db.Store, s.cfg.CompilerCache, s.budget, s.engine.slot
			if pe.Lore == "" {
				// serve --lore reaches every re-test and bisection.
				pe.Lore = s.lore
			}
		}
	}
	s.watchCfg = &cfg
	s.watcher = &watch.Watcher{Store: s.db.Store, Eval: cfg.Eval, Deterministic: cfg.Deterministic, Logf: s.logf}
}

func bisectionEval(b *watch.Bisection) watch.Evaluator {
	if b == nil || b.Eval == nil {
		return nil
	}
	return b.Eval
}

// TickWatch queues a tick of watch id now (the scheduler calls it when
// the watch is due; the API's run-now too). It returns the job's id.
func (s *Service) TickWatch(ctx context.Context, id int64) (int64, error) {
	if s.watchCfg == nil {
		return 0, fail.Inputf("serve: watches are not enabled in this service")
	}
	var jobID int64
	err := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		res, err := s.engine.insertTx(ctx, tx, river.InsertManyParams{Args: WatchTickArgs{WatchID: id, At: time.Now().UnixNano()},
			InsertOpts: watchJobOpts(id, 3)})
		if err != nil {
			return fail.Infraf("river: queueing a tick of watch %d: %w", id, err)
		}
		jobID = res
		return nil
	})
	return jobID, err
}

// scheduleWatches runs the watches' schedules until ctx ends: a due watch
// gets a tick job, nothing is evaluated here.
func (s *Service) scheduleWatches(ctx context.Context) error {
	return watch.Schedule(ctx, s.db.Store, s.logf, s.watchCfg.Resync, func(ctx context.Context, w *store.Watch) {
		if _, err := s.TickWatch(ctx, w.ID); err != nil {
			s.logf("watch %s: queueing its tick: %v", w.Name, err)
		}
	})
}

// watchJobs lists a watch's unfinished jobs of the given kinds.
func (s *Service) watchJobs(ctx context.Context, watchID int64, kinds ...string) ([]*rivertype.JobRow, error) {
	res, err := s.engine.client.JobList(ctx, river.NewJobListParams().Kinds(kinds...).TagsAll(watchTag(watchID)).
		States(unfinished...).First(100))
	if err != nil {
		return nil, fail.Infraf("river: jobs of watch %d: %w", watchID, err)
	}
	return res.Jobs, nil
}

// watchOf finds a watch for a job; a removed one cancels the job.
func (s *Service) watchOf(id int64) (*store.Watch, error) {
	if s.watchCfg == nil {
		return nil, river.JobCancel(fmt.Errorf("watches are not enabled in this service"))
	}
	w, err := s.db.Store.FindWatch(strconv.FormatInt(id, 10))
	if err != nil {
		if fail.KindOf(err) == fail.KindInput {
			return nil, river.JobCancel(fmt.Errorf("watch %d: %w (removed?)", id, err))
		}
		return nil, err
	}
	return w, nil
}

// completeWith inserts params and completes job in one transaction; also,
// when set, writes in it first and returns more jobs to insert. A try
// that Store.Tx runs again (Postgres lost the connection) inserts only
// what its own call of also returned.
func completeWith[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], params []river.InsertManyParams,
	also func(tx *store.Tx) ([]river.InsertManyParams, error)) error {
	return s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		all := params
		if also != nil {
			more, err := also(tx)
			if err != nil {
				return err
			}
			all = append(more, params...)
		}
		if len(all) > 0 {
			if err := s.engine.insertManyTx(ctx, tx, all); err != nil {
				return fail.Infraf("river: %w", err)
			}
		}
		if err := completeTx(ctx, tx, job); err != nil {
			return fail.Infraf("river: completing job %d: %w", job.ID, err)
		}
		return nil
	})
}

type watchTickWorker struct {
	river.WorkerDefaults[WatchTickArgs]
	s *Service
}

func (wk *watchTickWorker) Work(ctx context.Context, job *river.Job[WatchTickArgs]) error {
	s := wk.s
	w, err := s.watchOf(job.Args.WatchID)
	if err != nil {
		return err
	}
	if s.watchCfg.Bisection != nil {
		if err := s.resumeStuckBisections(ctx, w); err != nil {
			if ctx.Err() != nil {
				return err
			}
			s.logf("watch %s: looking for bisections with no job to carry them on: %v (the next tick looks again)", w.Name, err)
		}
	}
	busy, err := s.watchJobs(ctx, w.ID, RetestArgs{}.Kind(), RetestedArgs{}.Kind())
	if err != nil {
		return err
	}
	waiting, err := s.retestsWaiting(w.ID)
	if err != nil {
		return err
	}
	if len(busy) > 0 || waiting > 0 {
		s.logf("watch %s: re-tests of an earlier tick are still queued or running: this tick is skipped", w.Name)
		return nil
	}
	res, todo, err := s.watcher.Check(ctx, w)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		// Recorded on the watch (watch list, its page); the next tick
		// retries, nothing else is affected.
		s.logf("watch %s: %v (the next tick retries)", w.Name, err)
		return nil
	}
	if len(res.New) > 0 || len(todo) > 0 {
		s.logf("watch %s: %d matching tag(s), new: %v; %d to re-test", w.Name, res.Listed, res.New, len(todo))
	}
	if len(todo) == 0 {
		return nil
	}
	ids := make([]int64, len(todo))
	for i, t := range todo {
		ids[i] = t.ID
	}
	return completeWith(ctx, s, job, []river.InsertManyParams{retestJob(w.ID, ids, job.Args.At)}, nil)
}

// retestsWaiting is how many of watch id's re-tests wait for their
// evaluation (their retested job is a waiter: waiters.go).
func (s *Service) retestsWaiting(id int64) (int, error) {
	return s.watchWaiting(id, RetestedArgs{}.Kind())
}

type retestWorker struct {
	river.WorkerDefaults[RetestArgs]
	s *Service
}

func (wk *retestWorker) Work(ctx context.Context, job *river.Job[RetestArgs]) error {
	s, a := wk.s, job.Args
	w, t, err := s.watchEntry(a.WatchID, a.Tag)
	if err != nil {
		return err
	}
	pl, graph := s.watchCfg.Eval.(watch.Planner)
	if !graph || !watch.NeedsEvaluation(t) {
		res, err := s.watcher.Retest(ctx, w, t)
		return retestNext(ctx, s, job, w, t, a.Rest, a.Gen, res, err)
	}
	commit, err := s.watcher.Begin(ctx, w, t)
	if err != nil {
		return retestNext(ctx, s, job, w, t, a.Rest, a.Gen, &watch.RetestResult{}, err)
	}
	p, o, err := pl.Plan(ctx, w, t.Tag, commit)
	if err != nil {
		if ctx.Err() != nil {
			return err // shutdown: retried on the next start
		}
		res, err := s.watcher.Ended(ctx, w, t, commit, 0, err)
		return retestNext(ctx, s, job, w, t, a.Rest, a.Gen, res, err)
	}
	next := RetestedArgs{WatchID: w.ID, Tag: t.ID, Rest: a.Rest, Gen: a.Gen, Commit: commit, Series: o.Mbox != nil}
	id, _, err := s.submit(ctx, p, o, func(tx *store.Tx, id int64) error {
		next.EvaluationID = id
		if err := s.db.Store.SetWatchTagTx(tx, t.ID, store.TagRunning, commit, id, nil); err != nil {
			return err
		}
		return waitTx(ctx, s, tx, id, next, watchJobOpts(w.ID, 5), job)
	})
	if err != nil {
		if ctx.Err() != nil {
			return err // shutdown: retried on the next start, the evaluation is resumed
		}
		// Refused (a base the tree lacks, bad inputs) or the store
		// failed: the entry's result, as runner.Run's would be.
		res, err := s.watcher.Ended(ctx, w, t, commit, id, watch.EvalError(o.Mbox != nil, t.Tag, err))
		return retestNext(ctx, s, job, w, t, a.Rest, a.Gen, res, err)
	}
	s.logf("watch %s: %s is evaluation %d (its result is recorded when it ends)", w.Name, t.Tag, id)
	return nil
}

type retestedWorker struct {
	river.WorkerDefaults[RetestedArgs]
	s *Service
}

func (wk *retestedWorker) Work(ctx context.Context, job *river.Job[RetestedArgs]) error {
	s, a := wk.s, job.Args
	w, t, err := s.watchEntry(a.WatchID, a.Tag)
	if err != nil {
		return err
	}
	var evErr error
	if watch.NeedsEvaluation(t) {
		// Not recorded yet (a retried job finds it recorded, and only
		// compares again).
		evErr = a.End.Err(a.EvaluationID)
		evErr = watch.EvalError(a.Series, t.Tag, evErr)
	}
	res, err := s.watcher.Ended(ctx, w, t, a.Commit, a.EvaluationID, evErr)
	return retestNext(ctx, s, job, w, t, a.Rest, a.Gen, res, err)
}

// watchEntry is watch watchID and its entry tagID, for a job on them: an
// entry that is gone cancels the job.
func (s *Service) watchEntry(watchID, tagID int64) (*store.Watch, *store.WatchTag, error) {
	w, err := s.watchOf(watchID)
	if err != nil {
		return nil, nil, err
	}
	t, err := s.db.Store.WatchTag(tagID)
	return w, t, cancelGone(err)
}

// bisectingEvent is event eventID, its watch and its bisection's state
// as stored, for a bisection's job: bisections not enabled, an event
// that is gone or a state that does not decode cancel the job.
func (s *Service) bisectingEvent(eventID int64) (*store.WatchEvent, *store.Watch, *watch.BisectState, error) {
	if s.watchCfg == nil || s.watchCfg.Bisection == nil {
		return nil, nil, nil, river.JobCancel(fmt.Errorf("bisections are not enabled in this service"))
	}
	ev, err := s.db.Store.WatchEvent(eventID)
	if err != nil {
		return nil, nil, nil, cancelGone(err)
	}
	w, err := s.watchOf(ev.WatchID)
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := decodeEventBisect(ev.ID, ev.Bisect, nil)
	if err != nil {
		return nil, nil, nil, river.JobCancel(fmt.Errorf("watch %s: %w", w.Name, err))
	}
	return ev, w, st, nil
}

// retestNext ends job, the re-test of entry t of watch w (retest or
// retested) that did res (err: it failed): an error ends the chain of
// re-tests (the next tick takes it up again); otherwise, in one
// transaction, it queues the first step of each new regression's
// bisection, the re-test of the entries rest, and completes job.
func retestNext[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], w *store.Watch, t *store.WatchTag, rest []int64, gen int64,
	res *watch.RetestResult, err error) error {
	if err != nil {
		if ctx.Err() != nil {
			return err // shutdown: retried on the next start, the evaluation resumes
		}
		// Recorded on the entry (queued again, or infra); the chain ends
		// here and the next tick takes it up again, as an in-process tick
		// does.
		return river.JobCancel(fmt.Errorf("re-testing %s: %w (the next tick retries)", t.Tag, err))
	}
	var params []river.InsertManyParams
	var bisects []*watch.Regression
	if s.watchCfg.Bisection != nil {
		for i := range res.Events {
			if r := &res.Events[i]; r.Bisect {
				bisects = append(bisects, r)
			}
		}
		// The events' states are read in the transaction in the order of
		// their ids (store.EventBisectTx).
		slices.SortFunc(bisects, func(x, y *watch.Regression) int { return cmp.Compare(x.Event.ID, y.Event.ID) })
	}
	if len(rest) > 0 {
		params = append(params, retestJob(w.ID, rest, gen))
	}
	var queued []*watch.Regression
	err = completeWith(ctx, s, job, params, func(tx *store.Tx) ([]river.InsertManyParams, error) {
		queued = nil
		var steps []river.InsertManyParams
		for _, r := range bisects {
			b := s.watchBisectJobs(w.ID, r.Event.ID)
			// Read again under the event's lock: the re-test's look at it
			// was before this transaction, and a bisection under way
			// must not be replaced.
			cur, err := b.read(tx)
			if err != nil {
				return nil, err
			}
			if cur != nil {
				continue
			}
			st := &watch.BisectState{Result: bisect.Result{Status: watch.BisectQueued, GoodRef: r.Good.Tag, BadRef: r.Bad.Tag,
				Benchmark: r.Event.Benchmark, Metric: r.Event.Metric}, Gen: time.Now().UnixNano()}
			if err := b.write(tx, st); err != nil {
				return nil, err
			}
			queued = append(queued, r)
			steps = append(steps, b.step(st.Gen, 0))
		}
		return steps, nil
	})
	if err == nil {
		for _, r := range queued {
			s.logf("watch %s: bisection of %s..%s %s %s queued", w.Name, r.Good.Tag, r.Bad.Tag, r.Event.Benchmark, r.Event.Metric)
		}
	}
	return err
}

// watchBisectRun is where a watch event's bisection st is
// (bisectsteps.go).
func watchBisectRun(st *watch.BisectState) bisectRun {
	if st == nil {
		return bisectRun{}
	}
	return bisectRun{exists: true, gen: st.Gen, recorded: len(st.Records), ended: st.Ended()}
}

// decodeEventBisect is a watch event's bisection state as stored (nil
// when none).
func decodeEventBisect(eventID int64, b []byte, err error) (*watch.BisectState, error) {
	if err != nil || len(b) == 0 {
		return nil, err
	}
	var st watch.BisectState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fail.Inputf("event %d: the stored bisection is unreadable: %v", eventID, err)
	}
	return &st, nil
}

// watchBisectJobs is the bisection of event eventID of watch watchID as
// step jobs.
func (s *Service) watchBisectJobs(watchID, eventID int64) bisectJobs[*watch.BisectState] {
	return bisectJobs[*watch.BisectState]{
		read: func(tx *store.Tx) (*watch.BisectState, error) {
			b, err := s.db.Store.EventBisectTx(tx, eventID)
			return decodeEventBisect(eventID, b, err)
		},
		write:  func(tx *store.Tx, st *watch.BisectState) error { return s.db.Store.SetEventBisectTx(tx, eventID, st) },
		run:    watchBisectRun,
		newRun: func(st *watch.BisectState, gen int64) { st.Gen = gen },
		step:   func(gen int64, seq int) river.InsertManyParams { return bisectStepJob(watchID, eventID, gen, seq) },
	}
}

type bisectStepWorker struct {
	river.WorkerDefaults[BisectStepArgs]
	s *Service
}

func (wk *bisectStepWorker) Work(ctx context.Context, job *river.Job[BisectStepArgs]) error {
	s, a := wk.s, job.Args
	// A snapshot to plan the step with: what this job writes it writes
	// in a transaction that reads the state again (changeTx).
	ev, w, st, err := s.bisectingEvent(a.EventID)
	if err != nil {
		return err
	}
	b := s.watchBisectJobs(w.ID, ev.ID)
	if r := watchBisectRun(st); !r.isStep(a.Gen, a.Seq) {
		if r.ahead(a.Gen, a.Seq) {
			mine, at, err := catchUpTx(ctx, s, job, b, a.Gen, a.Seq)
			if err == nil && mine {
				s.logf("watch %s: bisection %s..%s: step %d was queued with only %d measurement(s) recorded: carrying on from the records (measurement %d next)",
					w.Name, ev.From, ev.To, a.Seq+1, at, at+1)
			}
			return cancelGone(err)
		}
		return nil // another run, finished, or this step was recorded and a later job carries on
	}
	// retry returns an infrastructure error for River to retry; the last
	// attempt ends the bisection as failed instead (it would otherwise
	// stay running with no job to carry it on).
	retry := func(err error) error {
		if ctx.Err() == nil && job.Attempt >= job.MaxAttempts {
			return s.bisectFailed(ctx, job, w, ev, err)
		}
		return err
	}
	// txErr is retry for an error of a transaction on the event's
	// bisection (changeTx), except that an event removed meanwhile or a
	// state now unreadable (bad input) cancels the job: no attempt
	// changes that, and there is nothing left to end.
	txErr := func(err error) error {
		if fail.KindOf(err) == fail.KindInput {
			return river.JobCancel(err)
		}
		return retry(err)
	}
	// failed ends the bisection on an error that trying again does not
	// change (no regression between its ends, an end that does not
	// build, a removed tag); infrastructure errors are retried.
	failed := func(err error) error {
		if ctx.Err() != nil || fail.KindOf(err) == fail.KindInfra {
			return retry(err)
		}
		return s.bisectFailed(ctx, job, w, ev, err)
	}
	good, bad, err := eventTags(s.db.Store, w, ev)
	if err != nil {
		return failed(err)
	}
	pl, err := s.watchCfg.Bisection.Plan(w, ev, good, bad)
	if err != nil {
		return failed(err)
	}
	started := st.Started
	if started.IsZero() {
		started = time.Now().UTC()
	}
	measurer := pl.Options.Measurer
	pl.Options.Logf = nil // the replay would log every earlier step again
	res, need, err := bisect.Resume(ctx, pl.Options, st.Records, started)
	if err != nil {
		return failed(err)
	}
	if n := len(res.Steps); n > 0 && a.Seq > 0 {
		last := res.Steps[n-1]
		s.logf("watch %s: bisect %s..%s: step %d %s %s: %s (%s)", w.Name, good.Tag, bad.Tag, last.N, last.Commit.Hash[:12],
			last.Commit.Subject, last.Verdict, last.Reason)
	}
	if need == nil {
		fin, err := s.watchCfg.Bisection.Finish(pl, res)
		if err != nil {
			return retry(err)
		}
		mine, err := changeTx(ctx, s, job, b, a.Gen, a.Seq, bisectRun.isStep, func(tx *store.Tx, cur *watch.BisectState) ([]river.InsertManyParams, error) {
			recs, gen := cur.Records, cur.Gen
			*cur = *fin
			cur.Records, cur.Gen = recs, gen
			return nil, nil
		})
		if err != nil {
			return txErr(err)
		}
		if mine {
			s.logf("watch %s: bisection %s..%s ended %s after %d measurement(s), %d build(s) (bound %d): %s", w.Name, good.Tag, bad.Tag,
				res.Status, len(st.Records), res.Builds, res.Bound, fin.Report)
		}
		return nil
	}
	return s.measureWatchStep(ctx, job, b, w, good.Tag, bad.Tag, res, need, measurer, retry, txErr)
}

// measureWatchStep shows watch bisection step need (of job) as the one
// being measured, measures it and records it, queueing the next step;
// retry and txErr sort its errors (bisectStepWorker.Work).
func (s *Service) measureWatchStep(ctx context.Context, job *river.Job[BisectStepArgs], b bisectJobs[*watch.BisectState], w *store.Watch, goodTag, badTag string,
	res *bisect.Result, need *bisect.Need, measurer bisect.Measurer, retry, txErr func(error) error) error {
	a, watchName := job.Args, w.Name
	// Show the step being measured, then measure it.
	mine, err := changeTx[*watch.BisectState, BisectStepArgs](ctx, s, nil, b, a.Gen, a.Seq, bisectRun.isStep, func(tx *store.Tx, cur *watch.BisectState) ([]river.InsertManyParams, error) {
		cur.Result, cur.Next = *res, need
		cur.Result.GoodRef, cur.Result.BadRef, cur.Status = goodTag, badTag, watch.BisectRunning
		return nil, nil
	})
	if err != nil {
		return txErr(err)
	}
	if !mine {
		return nil
	}
	s.logf("watch %s: bisect %s..%s: measuring %s (%d boot(s), measurement %d)", watchName, goodTag, badTag, need.Commit[:12], need.Boots, a.Seq+1)
	if pm, ok := measurer.(bisect.Planner); ok {
		return s.submitWatchStep(ctx, job, b, w, need, pm, retry, txErr)
	}
	rec, err := bisect.Measure(ctx, measurer, *need)
	if err != nil {
		return retry(err) // shutdown or infrastructure: retried, the same measurement again
	}
	return recordWatchStep(ctx, s, job, b, a.Gen, a.Seq, rec, txErr)
}

// recordWatchStep records rec, measurement seq of run gen of bisection
// b, queues the next step and ends job, in one transaction; txErr sorts
// its error.
func recordWatchStep[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], b bisectJobs[*watch.BisectState], gen int64, seq int,
	rec bisect.Record, txErr func(error) error) error {
	_, err := changeTx(ctx, s, job, b, gen, seq, bisectRun.isStep, func(tx *store.Tx, cur *watch.BisectState) ([]river.InsertManyParams, error) {
		cur.Records = append(cur.Records, rec)
		return []river.InsertManyParams{b.step(gen, seq+1)}, nil
	})
	if err != nil {
		return txErr(err) // the last attempt ends the bisection rather than leave it running
	}
	return nil
}

// bisectFailed ends the bisection step job belongs to, which cannot go
// on (no regression between its ends, an end that does not build, a
// removed tag, or its last attempt failed): the error is stored on the
// event, the job completes. A step the bisection is no longer at changes
// nothing.
func (s *Service) bisectFailed(ctx context.Context, job *river.Job[BisectStepArgs], w *store.Watch, ev *store.WatchEvent, err error) error {
	return bisectFailedAt(ctx, s, job, job.Args.Gen, job.Args.Seq, w, ev, err)
}

// bisectFailedAt is bisectFailed for job, which makes step seq of run
// gen (bisect_step, bisect_measured).
func bisectFailedAt[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], gen int64, seq int, w *store.Watch, ev *store.WatchEvent, err error) error {
	mine, terr := changeTx(ctx, s, job, s.watchBisectJobs(w.ID, ev.ID), gen, seq, bisectRun.isStep,
		func(tx *store.Tx, st *watch.BisectState) ([]river.InsertManyParams, error) {
			st.Status, st.Error, st.Kind, st.Next = watch.BisectFailed, err.Error(), fail.KindOf(err).String(), nil
			return nil, nil
		})
	if terr == nil && mine {
		s.logf("watch %s: bisection %s..%s failed: %v", w.Name, ev.From, ev.To, err)
	}
	return cancelGone(terr)
}

// cancelGone cancels a bisection step job whose transaction on the
// event's bisection failed with a bad-input error (store.EventBisectTx:
// the event was removed with its watch; decodeEventBisect: the stored
// state is unreadable), instead of River retrying it and then discarding
// it; other errors are returned as they are.
func cancelGone(err error) error {
	if err != nil && fail.KindOf(err) == fail.KindInput {
		return river.JobCancel(err)
	}
	return err
}

// resumeStuckBisections carries on, each as a new run from its records,
// the bisections of watch w's events that are under way (queued or
// running) with no unfinished bisect_step job to carry them on: older
// versions cancelled a step ahead of its records and discarded a step's
// failed last attempt, and a job can be lost (a database restored from a
// backup, a job removed by hand). The re-test skips an event that has a
// bisection, so such a bisection would otherwise stay running for ever.
// A watch's ticks call it. Each is decided in a transaction that reads
// the state under its lock (store.EventBisectTx), then lists the event's
// unfinished steps of its run at or after its records (a job of another
// run, or of a step recorded, does nothing): a step that changed the
// state committed its next job with it, and one changing it now holds
// the lock until it has.
func (s *Service) resumeStuckBisections(ctx context.Context, w *store.Watch) error {
	evs, err := s.db.Store.WatchEvents(w.ID)
	if err != nil {
		return err
	}
	slices.SortFunc(evs, func(x, y *store.WatchEvent) int { return cmp.Compare(x.ID, y.ID) })
	for _, ev := range evs {
		if st, err := decodeEventBisect(ev.ID, ev.Bisect, nil); err != nil || st == nil || st.Ended() {
			continue // none, ended, or unreadable (the event's page shows it)
		}
		b := s.watchBisectJobs(w.ID, ev.ID)
		at := -1
		err := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
			at = -1
			st, err := b.read(tx)
			if err != nil {
				return err
			}
			r := b.run(st)
			if !r.exists || r.ended {
				return nil
			}
			res, err := s.engine.jobListTx(ctx, tx, river.NewJobListParams().Kinds(BisectStepArgs{}.Kind()).
				TagsAll(watchTag(w.ID)).States(unfinished...).First(10000))
			if err != nil {
				return fail.Infraf("river: bisection steps of watch %d: %w", w.ID, err)
			}
			for _, j := range res.Jobs {
				var a BisectStepArgs
				if json.Unmarshal(j.EncodedArgs, &a) == nil && a.EventID == ev.ID && a.Gen == r.gen && a.Seq >= r.recorded {
					return nil // its step's job, or one ahead (which catches up)
				}
			}
			// A step whose measurement is an evaluation under way waits
			// for it (bisect_measured).
			ws, err := s.db.Store.WaitersTx(tx, BisectMeasuredArgs{}.Kind())
			if err != nil {
				return err
			}
			for _, w := range ws {
				var a BisectMeasuredArgs
				if json.Unmarshal(w.Args, &a) == nil && a.EventID == ev.ID && a.Gen == r.gen && a.Seq >= r.recorded {
					return nil
				}
			}
			g := newRunGen(r.gen)
			b.newRun(st, g)
			if err := b.write(tx, st); err != nil {
				return err
			}
			if err := s.engine.insertManyTx(ctx, tx, []river.InsertManyParams{b.step(g, r.recorded)}); err != nil {
				return fail.Infraf("river: %w", err)
			}
			at = r.recorded
			return nil
		})
		if err != nil {
			return fmt.Errorf("event %d: %w", ev.ID, err)
		}
		if at >= 0 {
			s.logf("watch %s: bisection %s..%s was under way with no job to carry it on: carrying on from its %d measurement(s) as a new run",
				w.Name, ev.From, ev.To, at)
		}
	}
	return nil
}

// eventTags finds an event's good and bad entries.
func eventTags(st *store.Store, w *store.Watch, ev *store.WatchEvent) (good, bad *store.WatchTag, err error) {
	tags, err := st.WatchTags(w.ID)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range tags {
		switch t.Tag {
		case ev.From:
			good = t
		case ev.To:
			bad = t
		}
	}
	if good == nil || bad == nil || good.Commit == "" || bad.Commit == "" {
		return nil, nil, fail.Inputf("watch %s: event %s..%s: the tags are no longer in the history", w.Name, ev.From, ev.To)
	}
	return good, bad, nil
}
