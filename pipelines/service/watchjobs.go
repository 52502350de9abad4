package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/bisect"
	"github.com/patcheval/patcheval/pipelines/watch"
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
//   - retest fetches one entry and evaluates it (watch.Watcher.Retest;
//     the evaluation is a stored one, so a retried job resumes it), then
//     in one transaction queues the first step of each new regression's
//     bisection (watch with --bisect), the next entry's re-test, and
//     completes itself.
//   - bisect_step replays the bisection over the measurements recorded on
//     the event (bisect.Resume: the search is a function of them), makes
//     the one measurement it asks for next and, in one transaction,
//     records it, queues the next step and completes itself. A serve
//     killed mid-bisection resumes at the step it was on; a finished step
//     is never measured again; the step that was running is measured
//     again as the same measurement (bisect.NthMeasurer: the same stored
//     evaluation, its finished builds and boots kept).

// QueueWatch runs the watches' ticks, re-tests and bisection steps.
const QueueWatch = "watch"

// WatchConfig enables the watches in a service (Service.Watch).
type WatchConfig struct {
	// Eval evaluates a watch's pipeline on an entry (serve:
	// watch.PipelineEvaluator on the service's database).
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

// BisectStepArgs makes measurement Seq (0-based) of the bisection of a
// watch event.
type BisectStepArgs struct {
	EventID int64 `json:"event_id"`
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

func bisectStepJob(watchID, eventID int64, seq int) river.InsertManyParams {
	return river.InsertManyParams{Args: BisectStepArgs{EventID: eventID, Seq: seq}, InsertOpts: watchJobOpts(watchID, 5)}
}

// Watch enables the watches: Run starts the scheduler, and the watch
// queue's workers evaluate and bisect with cfg. Call it before Run.
//
// Re-tests and bisection steps evaluate in their job (runner.Run), not as
// stage jobs: a pipeline evaluator (watch.PipelineEvaluator, also the
// bisection's) is given the service's store, its -j budget and its build
// and boot slots, so their builds share the budget with the build jobs
// and their boots never run beside another boot of this process.
func (s *Service) Watch(cfg WatchConfig) {
	for _, e := range []watch.Evaluator{cfg.Eval, bisectionEval(cfg.Bisection)} {
		if pe, ok := e.(*watch.PipelineEvaluator); ok && pe != nil {
			pe.Store, pe.Budget, pe.Slot = s.db.Store, s.budget, s.engine.slot
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

// completeWith inserts params and completes job in one transaction.
func completeWith[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], params []river.InsertManyParams, also func(tx *store.Tx) error) error {
	return s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		if len(params) > 0 {
			if err := s.engine.insertManyTx(ctx, tx, params); err != nil {
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
	busy, err := s.watchJobs(ctx, w.ID, RetestArgs{}.Kind())
	if err != nil {
		return err
	}
	if len(busy) > 0 {
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

type retestWorker struct {
	river.WorkerDefaults[RetestArgs]
	s *Service
}

func (wk *retestWorker) Work(ctx context.Context, job *river.Job[RetestArgs]) error {
	s, a := wk.s, job.Args
	w, err := s.watchOf(a.WatchID)
	if err != nil {
		return err
	}
	t, err := s.db.Store.WatchTag(a.Tag)
	if err != nil {
		if fail.KindOf(err) == fail.KindInput {
			return river.JobCancel(err)
		}
		return err
	}
	res, err := s.watcher.Retest(ctx, w, t)
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
	var queued []*watch.Regression
	if s.watchCfg.Bisection != nil {
		for i := range res.Events {
			if r := &res.Events[i]; r.Bisect {
				queued = append(queued, r)
				params = append(params, bisectStepJob(w.ID, r.Event.ID, 0))
			}
		}
	}
	if len(a.Rest) > 0 {
		params = append(params, retestJob(w.ID, a.Rest, a.Gen))
	}
	err = completeWith(ctx, s, job, params, func(tx *store.Tx) error {
		for _, r := range queued {
			st := watch.BisectState{Result: bisect.Result{Status: watch.BisectQueued, GoodRef: r.Good.Tag, BadRef: r.Bad.Tag,
				Benchmark: r.Event.Benchmark, Metric: r.Event.Metric}}
			if err := s.db.Store.SetEventBisectTx(tx, r.Event.ID, st); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for _, r := range queued {
			s.logf("watch %s: bisection of %s..%s %s %s queued", w.Name, r.Good.Tag, r.Bad.Tag, r.Event.Benchmark, r.Event.Metric)
		}
	}
	return err
}

type bisectStepWorker struct {
	river.WorkerDefaults[BisectStepArgs]
	s *Service
}

func (wk *bisectStepWorker) Work(ctx context.Context, job *river.Job[BisectStepArgs]) error {
	s, a := wk.s, job.Args
	if s.watchCfg == nil || s.watchCfg.Bisection == nil {
		return river.JobCancel(fmt.Errorf("bisections are not enabled in this service"))
	}
	ev, err := s.db.Store.WatchEvent(a.EventID)
	if err != nil {
		if fail.KindOf(err) == fail.KindInput {
			return river.JobCancel(err)
		}
		return err
	}
	w, err := s.watchOf(ev.WatchID)
	if err != nil {
		return err
	}
	var st watch.BisectState
	if len(ev.Bisect) > 0 {
		if err := json.Unmarshal(ev.Bisect, &st); err != nil {
			return river.JobCancel(fmt.Errorf("watch %s event %d: the stored bisection is unreadable: %v", w.Name, ev.ID, err))
		}
	}
	if st.Ended() || len(st.Records) > a.Seq {
		return nil // finished, or this step was recorded and a later job carries on
	}
	if len(st.Records) < a.Seq {
		return river.JobCancel(fmt.Errorf("watch %s event %d: step %d queued but only %d recorded", w.Name, ev.ID, a.Seq, len(st.Records)))
	}
	good, bad, err := eventTags(s.db.Store, w, ev)
	if err != nil {
		return s.bisectFailed(ctx, job, w, ev, &st, err)
	}
	pl, err := s.watchCfg.Bisection.Plan(w, ev, good, bad)
	if err != nil {
		return s.bisectFailed(ctx, job, w, ev, &st, err)
	}
	if st.Started.IsZero() {
		st.Started = time.Now().UTC()
	}
	measurer := pl.Options.Measurer
	pl.Options.Logf = nil // the replay would log every earlier step again
	res, need, err := bisect.Resume(ctx, pl.Options, st.Records, st.Started)
	if err != nil {
		if ctx.Err() != nil || fail.KindOf(err) == fail.KindInfra {
			return err
		}
		return s.bisectFailed(ctx, job, w, ev, &st, err)
	}
	if n := len(res.Steps); n > 0 && a.Seq > 0 {
		last := res.Steps[n-1]
		s.logf("watch %s: bisect %s..%s: step %d %s %s: %s (%s)", w.Name, good.Tag, bad.Tag, last.N, last.Commit.Hash[:12],
			last.Commit.Subject, last.Verdict, last.Reason)
	}
	st.Result, st.Next = *res, need
	if need == nil {
		fin, err := s.watchCfg.Bisection.Finish(pl, res)
		if err != nil {
			return err
		}
		fin.Records = st.Records
		s.logf("watch %s: bisection %s..%s ended %s after %d measurement(s), %d build(s) (bound %d): %s", w.Name, good.Tag, bad.Tag,
			res.Status, len(st.Records), res.Builds, res.Bound, fin.Report)
		return completeWith(ctx, s, job, nil, func(tx *store.Tx) error { return s.db.Store.SetEventBisectTx(tx, ev.ID, fin) })
	}
	// Show the step being measured, then measure it.
	st.Result.GoodRef, st.Result.BadRef, st.Status = good.Tag, bad.Tag, watch.BisectRunning
	if err := s.db.Store.SetEventBisect(ev.ID, st); err != nil {
		return err
	}
	s.logf("watch %s: bisect %s..%s: measuring %s (%d boot(s), measurement %d)", w.Name, good.Tag, bad.Tag, need.Commit[:12], need.Boots, a.Seq+1)
	rec, err := bisect.Measure(ctx, measurer, *need)
	if err != nil {
		if ctx.Err() == nil && job.Attempt >= job.MaxAttempts {
			return s.bisectFailed(ctx, job, w, ev, &st, err)
		}
		return err // shutdown or infrastructure: retried, the same measurement again
	}
	st.Records = append(st.Records, rec)
	return completeWith(ctx, s, job, []river.InsertManyParams{bisectStepJob(w.ID, ev.ID, a.Seq+1)},
		func(tx *store.Tx) error { return s.db.Store.SetEventBisectTx(tx, ev.ID, st) })
}

// bisectFailed ends a bisection that cannot go on (no regression between
// its ends, an end that does not build, a removed tag): the error is
// stored on the event, the job completes.
func (s *Service) bisectFailed(ctx context.Context, job *river.Job[BisectStepArgs], w *store.Watch, ev *store.WatchEvent, st *watch.BisectState, err error) error {
	st.Status, st.Error, st.Kind, st.Next = watch.BisectFailed, err.Error(), fail.KindOf(err).String(), nil
	s.logf("watch %s: bisection %s..%s failed: %v", w.Name, ev.From, ev.To, err)
	return completeWith(ctx, s, job, nil, func(tx *store.Tx) error { return s.db.Store.SetEventBisectTx(tx, ev.ID, *st) })
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
