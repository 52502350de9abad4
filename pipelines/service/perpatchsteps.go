package service

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/experiments/perpatch"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// A per-patch run with a perpatch.Planner (serve's perpatch.RunnerMeasurer)
// measures each prefix of the series as an evaluation of the service's
// stage graph, not a runner.Run inside the per_patch job (issue 33): the
// per_patch job submits the first prefix's evaluation (Plan) and, in the
// transaction that queues it, registers a per_patch_measured job as its
// waiter (waiters.go) and completes itself. When that evaluation ends,
// per_patch_measured replays the prefixes recorded before (their records
// travel in its arguments: perpatch.Walk.Resume), records this one
// (Measured: its samples; a prefix whose kernel does not build or boot is
// left out of the tables with a note, as in the job) and submits the
// next prefix's evaluation with itself as the waiter again; after the
// last prefix it writes the tables into the reports and goes on with the
// evaluation's graph (perPatchFinish), as the per_patch job does with a
// per-patch run made in it. A prefix whose evaluation ended for
// infrastructure reasons (its stages' attempts spent) or was cancelled
// ends the per-patch run as not done, with the reason in the report (as
// a per_patch job's last attempt does). The evaluation stays running
// meanwhile, and a waiting per-patch run counts as its unfinished work
// (perPatchWaitingTx). Cancelling the evaluation cancels the prefix's
// evaluation under way too, unless another live waiter waits for it
// (cancelTx).

// PerPatchMeasuredArgs records prefix Prefix (Prefix.EvaluationID is the
// evaluation that measures it) of the per-patch run of generation Gen of
// evaluation EvaluationID when that evaluation has ended (End, filled
// in by the transaction that ended it); Done are the prefixes recorded
// before it, in order.
type PerPatchMeasuredArgs struct {
	EvaluationID int64             `json:"evaluation_id"`
	Gen          int64             `json:"gen"`
	Prefix       perpatch.Prefix   `json:"prefix"`
	Done         []perpatch.Prefix `json:"done,omitempty"`
	End          *EvalEnd          `json:"end,omitempty"`
}

func (PerPatchMeasuredArgs) Kind() string { return "per_patch_measured" }

// perPatchNext goes on with per-patch run w of evaluation id (generation
// gen), done its prefixes recorded so far: it submits the next prefix's
// evaluation (pm.Plan) and ends job with a per_patch_measured waiter
// registered, or, when every prefix is recorded, finishes the run
// (perPatchFinish). A prefix whose evaluation is refused as a failed
// result is recorded as one (left out of the tables) and the next one
// submitted; an infrastructure error is retried (job's attempts), and on
// the last attempt ends the run as not done.
func perPatchNext[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], id, gen int64, w *perpatch.Walk, pm perpatch.Planner,
	done []perpatch.Prefix) error {
	log := s.evalLog(id)
	for {
		k, step, ok := w.Next()
		if !ok {
			pp, err := w.Tables()
			return perPatchFinish(ctx, s, job, id, gen, pp, err)
		}
		log.printf("per-patch: measuring %s %s", step.Label, step.Subject)
		next := PerPatchMeasuredArgs{EvaluationID: id, Gen: gen, Prefix: perpatch.Prefix{K: k, Commit: step.Commit}, Done: done}
		p, o, err := pm.Plan(step.Commit)
		var pid int64
		if err == nil {
			pid, _, err = s.submit(ctx, p, o, func(tx *store.Tx, pid int64) error {
				next.Prefix.EvaluationID = pid
				return waitTx(ctx, s, tx, pid, next, jobOpts(QueueSeries, id, 3), job)
			})
			if err == nil {
				log.printf("per-patch: %s is evaluation %d (recorded when it ends)", step.Label, pid)
				return nil
			}
		}
		if ctx.Err() != nil {
			return err // shutdown: retried
		}
		if fail.KindOf(err) == fail.KindInfra && job.Attempt < job.MaxAttempts {
			log.printf("per-patch: attempt %d of %d failed, will retry: %v", job.Attempt, job.MaxAttempts, err)
			return err
		}
		// As the measurement of the prefix in the job failed.
		rec, err := w.Record(k, nil, pid, err)
		if err != nil {
			return perPatchFinish(ctx, s, job, id, gen, w.PerPatch(), err)
		}
		done = append(done, rec)
	}
}

type perPatchMeasuredWorker struct {
	river.WorkerDefaults[PerPatchMeasuredArgs]
	s *Service
}

func (wk *perPatchMeasuredWorker) Work(ctx context.Context, job *river.Job[PerPatchMeasuredArgs]) error {
	s, a := wk.s, job.Args
	if _, err := s.liveEvaluation(a.EvaluationID); err != nil {
		return err
	}
	s.beat.begin(job.ID, fmt.Sprintf("per-patch run of evaluation %d, prefix %d (attempt %d)", a.EvaluationID, a.Prefix.K, job.Attempt))
	defer s.beat.end(job.ID)
	// retry returns an infrastructure error for River to retry; the last
	// attempt ends the per-patch run as not done.
	retry := func(pp *report.PerPatch, err error) error {
		if ctx.Err() != nil {
			return err
		}
		if fail.KindOf(err) == fail.KindInfra && job.Attempt < job.MaxAttempts {
			s.evalLog(a.EvaluationID).printf("per-patch: attempt %d of %d failed, will retry: %v", job.Attempt, job.MaxAttempts, err)
			return err
		}
		return perPatchFinish(ctx, s, job, a.EvaluationID, a.Gen, pp, err)
	}
	ser, m, release, err := s.perPatchMeasurer(a.EvaluationID)
	if err != nil {
		return retry(nil, err)
	}
	defer release()
	pm, ok := m.(perpatch.Planner)
	if !ok {
		return retry(nil, fail.Inputf("evaluation %d: the per-patch measurer no longer measures with evaluations", a.EvaluationID))
	}
	w, err := perpatch.Start(ser)
	if err == nil && w == nil {
		err = fail.Inputf("evaluation %d: the series has no patch to measure", a.EvaluationID)
	}
	if err != nil {
		return retry(nil, err)
	}
	if err := w.Resume(a.Done, func(r perpatch.Prefix) ([]evaluate.Sample, error) {
		ss, _, err := pm.Measured(s.db.Store, r.Commit, r.EvaluationID, nil)
		return ss, err
	}); err != nil {
		return retry(w.PerPatch(), err)
	}
	k, step, ok := w.Next()
	if !ok || k != a.Prefix.K || step.Commit != a.Prefix.Commit {
		return retry(w.PerPatch(), fail.Inputf("per-patch: evaluation %d measured prefix %d (%.12s), not this series' next", a.Prefix.EvaluationID, a.Prefix.K, a.Prefix.Commit))
	}
	endErr := a.End.Err(a.Prefix.EvaluationID)
	if a.End != nil && a.End.Stage == (ConfigureArgs{}).Kind() && fail.KindOf(endErr) == fail.KindInput {
		// The configure job refuses a kernel that cannot be configured
		// as bad input (runner.ConfigureKernel), where the local loop's
		// configure round fails the evaluation as a failed result. The
		// prefix's recipe is the one the whole evaluation configured:
		// it is the prefix's kernel that does not build, recorded as
		// the in-job path records it.
		endErr = fail.Failed(endErr)
	}
	samples, pid, err := pm.Measured(s.db.Store, step.Commit, a.Prefix.EvaluationID, endErr)
	if err != nil && endErr == nil && fail.KindOf(err) == fail.KindInfra {
		return retry(w.PerPatch(), err) // reading it back
	}
	rec, err := w.Record(k, samples, pid, err)
	if err != nil {
		// Final: the evaluation's own stages had their attempts.
		return perPatchFinish(ctx, s, job, a.EvaluationID, a.Gen, w.PerPatch(), err)
	}
	return perPatchNext(ctx, s, job, a.EvaluationID, a.Gen, w, pm, append(a.Done, rec))
}

// perPatchWaitingTx says, in tx, whether evaluation id's per-patch run
// waits for a prefix's evaluation (a per_patch_measured waiter): work of
// the evaluation that is not (yet) a job.
func (s *Service) perPatchWaitingTx(tx *store.Tx, id int64) (bool, error) {
	ws, err := s.db.Store.WaitersTx(tx, PerPatchMeasuredArgs{}.Kind())
	if err != nil {
		return false, err
	}
	for _, w := range ws {
		var a struct {
			EvaluationID int64 `json:"evaluation_id"`
		}
		if json.Unmarshal(w.Args, &a) == nil && a.EvaluationID == id {
			return true, nil
		}
	}
	return false, nil
}

// perPatchFinish ends evaluation id's per-patch run (generation gen) with
// pp and err (final: "not done", with the reason in the report), writes
// the reports again with its table and, in one transaction, queues what
// follows it in the graph and completes job.
func perPatchFinish[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], id, gen int64, pp *report.PerPatch, err error) error {
	log := s.evalLog(id)
	dir := s.OutDir(id)
	if err != nil {
		// The whole-series report stands; it says why it has no table.
		log.printf("per-patch run not done: %v", err)
		if pp == nil {
			pp = &report.PerPatch{}
		}
		pp.Notes = append(pp.Notes, "per-patch run not done: "+err.Error())
	}
	if err := s.amendReport(id, dir, func(r *report.Report) {
		if r.PerPatch != nil && r.PerPatch.Bisection != nil && pp.Bisection == nil {
			pp.Bisection = r.PerPatch.Bisection // a series bisection's result stays
		}
		r.PerPatch = pp
	}); err != nil {
		if ctx.Err() != nil || job.Attempt < job.MaxAttempts {
			return err
		}
		// Give up on the table, not on the evaluation: its report stands.
		log.printf("per-patch: the reports could not be written again: %v", err)
	} else {
		log.printf("per-patch: done; reports in %s", dir)
	}
	auto, err := s.autoPlan(id)
	if err != nil {
		return err
	}
	at := after{id: id, gen: gen, graph: runner.Graph{PerPatch: true, SeriesBisect: s.cfg.SeriesBisect}, bisect: auto}
	return s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		next, err := s.follow(ctx, tx, at, runner.Step{Stage: runner.StagePerPatch}, runner.Found{})
		if err != nil {
			return err
		}
		// None when the evaluation is done without a notify job
		// (no Config.Notify) or waiter.
		if len(next) > 0 {
			if err := s.engine.insertManyTx(ctx, tx, next); err != nil {
				return fail.Infraf("river: %w", err)
			}
		}
		if err := completeTx(ctx, tx, job); err != nil {
			return fail.Infraf("river: completing job %d: %w", job.ID, err)
		}
		return nil
	})
}
