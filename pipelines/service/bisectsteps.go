package service

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/store"
)

// The bisections run as queue work, inside a series (series_bisect,
// seriesjobs.go) and of a watch's regression event (bisect_step,
// watchjobs.go), are one job per measurement over a state stored as one
// document (the measurements recorded so far, the one being made, the
// result). They share how a step's job checks and changes that state:
//
//   - The state names its run (Gen) and each step's job carries the run
//     and the measurement it makes (Seq). A job is the bisection's step
//     when it is of the run, the run has not ended and Seq measurements
//     are recorded (isStep): only then does it change the state. A job of
//     an older run, of one that ended, or whose step was recorded does
//     nothing.
//   - A job of the run with fewer measurements recorded than its Seq
//     (ahead: the state and the queue disagree, e.g. a state written back
//     from an older copy, a database restored from a backup) carries the
//     bisection on from its records as a new run (catchUpTx), instead of
//     leaving it running with no job to carry it on. A new run, not the
//     same: the steps' jobs are unique by their arguments, completed ones
//     included, so a step of the run that was queued already could not be
//     queued again when the bisection gets there.
//   - Every change reads the state in its own transaction, under its lock
//     (changeTx), and is written back in it with the jobs it queues and
//     the job's completion: no change writes back a copy read before
//     another's. Nothing inside reads on another of the pool's
//     connections (what decides the change is read before).

// bisectRun is where a bisection's stored state is, as its step jobs see
// it; the zero value is no bisection.
type bisectRun struct {
	exists   bool
	gen      int64
	recorded int
	ended    bool
}

// isStep says whether step seq of run gen is the one the bisection is at.
func (r bisectRun) isStep(gen int64, seq int) bool {
	return r.exists && r.gen == gen && !r.ended && r.recorded == seq
}

// ahead says whether step seq of run gen belongs to the bisection's run
// (not ended) with fewer measurements recorded than seq.
func (r bisectRun) ahead(gen int64, seq int) bool {
	return r.exists && r.gen == gen && !r.ended && r.recorded < seq
}

// newRunGen is the Gen of a new run of a bisection whose run was gen.
func newRunGen(gen int64) int64 { return max(time.Now().UnixNano(), gen+1) }

// bisectJobs is one bisection run as step jobs, its state of type S (a
// pointer, nil when there is none).
type bisectJobs[S any] struct {
	// read reads the state in tx and holds it until tx ends; write
	// writes it back in tx.
	read  func(tx *store.Tx) (S, error)
	write func(tx *store.Tx, st S) error
	// run is where st is; newRun makes st a new run.
	run    func(st S) bisectRun
	newRun func(st S, gen int64)
	// step is the job making measurement seq of run gen.
	step func(gen int64, seq int) river.InsertManyParams
}

// changeTx changes the state of bisection b for step seq of run gen, in
// one transaction that reads it (b.read) and, when job is set, completes
// job: when the state as stored now passes when (isStep, or ahead for
// catchUpTx), change changes it (the caller's snapshot may be stale) and
// returns the jobs to queue with it, and it is written back. mine says
// whether change was called.
func changeTx[S any, T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], b bisectJobs[S], gen int64, seq int,
	when func(bisectRun, int64, int) bool, change func(tx *store.Tx, st S) ([]river.InsertManyParams, error)) (mine bool, err error) {
	err = s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		mine = false
		st, err := b.read(tx)
		if err != nil {
			return err
		}
		if when(b.run(st), gen, seq) {
			mine = true
			next, err := change(tx, st)
			if err != nil {
				return err
			}
			if err := b.write(tx, st); err != nil {
				return err
			}
			if len(next) > 0 {
				if err := s.engine.insertManyTx(ctx, tx, next); err != nil {
					return fail.Infraf("river: %w", err)
				}
			}
		}
		if job != nil {
			if err := completeTx(ctx, tx, job); err != nil {
				return fail.Infraf("river: completing job %d: %w", job.ID, err)
			}
		}
		return nil
	})
	return mine, err
}

// catchUpTx ends job, step seq of run gen of bisection b, which is ahead
// of its bisection's records: the bisection goes on from its records as a
// new run, whose first job (at the records' step, returned as at) is
// queued with job's end. Everything else in the state stays (records,
// who asked, what its end finishes). A job of the old run still queued
// at the records' step then does nothing; one measuring it now has its
// measurement made again in the new run.
func catchUpTx[S any, T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], b bisectJobs[S], gen int64, seq int) (mine bool, at int, err error) {
	mine, err = changeTx(ctx, s, job, b, gen, seq, bisectRun.ahead, func(tx *store.Tx, st S) ([]river.InsertManyParams, error) {
		at = b.run(st).recorded
		g := newRunGen(gen)
		b.newRun(st, g)
		return []river.InsertManyParams{b.step(g, at)}, nil
	})
	return mine, at, err
}

// A step whose measurement is an evaluation (a bisect.Planner's: serve's
// bisect.PipelineMeasurer) does not make it in its job (issue 33): it
// submits the evaluation to the stage graph and ends with the job that
// records it registered as the evaluation's waiter (waiters.go), which
// the evaluation's end queues: bisect_measured for a watch's bisection
// (watchsteps.go), series_bisect_measured for one inside a series
// (seriessteps.go). Both submit with submitStep and read the measurement
// back with measuredStep.

// submitStep submits measurement need of a bisection step as an
// evaluation of the stage graph (pm.Plan, Service.submit) and, in the
// transaction that queues it, registers the job that records it as the
// evaluation's waiter (waiter: its arguments and options, given the
// evaluation's id) and completes job, the step's. A measurement refused
// as a failed result (kind failed: the commit cannot be measured) is not
// submitted but returned as its record (Failed: the step is skipped),
// for the caller to record as one made in the job would be.
func submitStep[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], need bisect.Need, pm bisect.Planner,
	waiter func(id int64) (river.JobArgs, *river.InsertOpts)) (id int64, skipped *bisect.Record, err error) {
	p, o, err := pm.Plan(need.Commit, need.Boots, need.N)
	if err != nil {
		return 0, nil, err
	}
	id, _, err = s.submit(ctx, p, o, func(tx *store.Tx, id int64) error {
		args, opts := waiter(id)
		return waitTx(ctx, s, tx, id, args, opts, job)
	})
	if err != nil && ctx.Err() == nil && fail.KindOf(err) == fail.KindFailed {
		rec, _ := bisect.RecordOf(need, &bisect.Measurement{Built: true}, err)
		return 0, &rec, nil
	}
	return id, nil, err
}

// measuredStep is the record of measurement need, evaluation id of
// pm.Plan that ended with end and was submitted at started, read back
// (pm.Measured: its samples, its report's timings). An error says the
// measurement cannot be recorded: retry says whether the waiter's job is
// to be tried again (shutdown, or reading it back failed for
// infrastructure reasons); otherwise the bisection ends as failed, the
// evaluation's end being final (its stages' attempts spent, cancelled,
// or no measurement in it), as a step's last attempt ends it.
func (s *Service) measuredStep(ctx context.Context, pm bisect.Planner, need bisect.Need, id int64, end *EvalEnd,
	started time.Time) (rec bisect.Record, retry bool, err error) {
	p, _, err := pm.Plan(need.Commit, need.Boots, need.N)
	if err != nil {
		return rec, false, err
	}
	endErr := end.Err(id)
	rep, err := s.readReport(id)
	if err != nil {
		return rec, true, err
	}
	meas, err := pm.Measured(s.db.Store, p, need.Commit, id, rep, endErr, time.Since(started))
	if rec, err = bisect.RecordOf(need, meas, err); err != nil {
		return rec, ctx.Err() != nil || (endErr == nil && fail.KindOf(err) == fail.KindInfra), err
	}
	return rec, false, nil
}
