package service

import (
	"context"
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/perpatch"
	"github.com/patcheval/patcheval/pipelines/store"
)

// A series bisection's measurement with a bisect.Planner (serve's
// bisect.PipelineMeasurer) is an evaluation of the service's stage graph,
// not a runner.Run inside the step's job (issue 33), as a watch
// bisection's is (watchsteps.go): series_bisect submits it (submitStep)
// and, in the transaction that queues it, registers a
// series_bisect_measured job as its waiter (waiters.go) and completes
// itself. When the evaluation ends, series_bisect_measured reads the
// measurement back (measuredStep), records it on the bisection and
// queues the next step in one transaction, as series_bisect does with a
// measurement made in its job. A measurement whose evaluation ended for
// infrastructure reasons (its stages' attempts spent), was cancelled or
// has no measurement in it ends the bisection as failed, as a step's last
// attempt does. A commit's first measurement that the evaluation or its
// per-patch run made already is still answered in the step's job
// (perpatch.Bisection.Known: nothing to evaluate).
//
// While a step waits for its evaluation, the bisection's evaluation has
// no job of its own: BisectSeries counts the waiter as its job, and so
// does Service.submit (the same evaluation submitted again is not queued
// again meanwhile, as it is not while the step's job runs)
// (seriesStepWaitingTx). Cancelling an automatic bisection's evaluation
// cancels the measurement's evaluation too, unless another live waiter
// waits for it (cancelTx); the waiter's job, queued when the
// measurement's evaluation ends, does nothing for a cancelled evaluation
// (as the step's job, cancelled with it, did nothing more), and the
// bisection asked for again starts a new run.

// SeriesBisectMeasuredArgs records measurement Seq (Need) of run Gen of
// the bisection inside evaluation EvaluationID's series when its
// evaluation Measurement, submitted at Started, has ended (End, filled in
// by the transaction that ended it).
type SeriesBisectMeasuredArgs struct {
	EvaluationID int64       `json:"evaluation_id"`
	Gen          int64       `json:"gen"`
	Seq          int         `json:"seq"`
	Need         bisect.Need `json:"need"`
	Measurement  int64       `json:"measurement_id"`
	Started      time.Time   `json:"started"`
	End          *EvalEnd    `json:"end,omitempty"`
}

func (SeriesBisectMeasuredArgs) Kind() string { return "series_bisect_measured" }

// step is the series_bisect step whose measurement a records.
func (a SeriesBisectMeasuredArgs) step() SeriesBisectArgs {
	return SeriesBisectArgs{EvaluationID: a.EvaluationID, Gen: a.Gen, Seq: a.Seq}
}

// submitSeriesStep submits measurement need of series bisection step job
// as an evaluation (submitStep) and ends job with its waiter registered;
// retry sorts errors (seriesBisectWorker.Work).
func (s *Service) submitSeriesStep(ctx context.Context, job *river.Job[SeriesBisectArgs], need *bisect.Need, pm bisect.Planner,
	retry func(error) error) error {
	a := job.Args
	next := SeriesBisectMeasuredArgs{EvaluationID: a.EvaluationID, Gen: a.Gen, Seq: a.Seq, Need: *need, Started: time.Now().UTC()}
	id, skipped, err := submitStep(ctx, s, job, *need, pm, func(id int64) (river.JobArgs, *river.InsertOpts) {
		next.Measurement = id
		return next, jobOpts(QueueSeries, a.EvaluationID, 5)
	})
	if err != nil {
		return retry(err)
	}
	if skipped != nil {
		// Refused as a failed result: the step is skipped, as a
		// measurement that failed in its job is.
		return recordSeriesStep(ctx, s, job, a, *skipped, retry)
	}
	s.evalLog(a.EvaluationID).printf("series bisection: measurement %d (%.12s) is evaluation %d (recorded when it ends)", a.Seq+1, need.Commit, id)
	return nil
}

// recordSeriesStep records rec, the measurement of step a, queues the
// next step and ends job, in one transaction; retry sorts its error.
func recordSeriesStep[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], a SeriesBisectArgs, rec bisect.Record,
	retry func(error) error) error {
	_, err := seriesBisectTxOf(ctx, s, job, a, func(tx *store.Tx, st *SeriesBisectState) ([]river.InsertManyParams, error) {
		st.Records = append(st.Records, rec)
		return []river.InsertManyParams{seriesBisectJob(a.EvaluationID, a.Gen, a.Seq+1)}, nil
	})
	if err != nil {
		return retry(err) // the last attempt ends the bisection rather than leave it running
	}
	return nil
}

type seriesBisectMeasuredWorker struct {
	river.WorkerDefaults[SeriesBisectMeasuredArgs]
	s *Service
}

func (w *seriesBisectMeasuredWorker) Work(ctx context.Context, job *river.Job[SeriesBisectMeasuredArgs]) error {
	s, a := w.s, job.Args
	st, err := s.SeriesBisection(a.EvaluationID)
	if err != nil {
		return err
	}
	if !st.run().isStep(a.Gen, a.Seq) {
		return nil // another run, ended, or recorded
	}
	if _, err := s.liveEvaluation(a.EvaluationID); err != nil {
		return err
	}
	step := a.step()
	ended := func(err error) error {
		return seriesBisectEndOf(ctx, s, job, step, SeriesBisectFailed, nil, err.Error())
	}
	// retry returns an infrastructure error for River to retry; the last
	// attempt ends the bisection as failed instead.
	retry := func(err error) error {
		if ctx.Err() == nil && job.Attempt >= job.MaxAttempts {
			return ended(err)
		}
		return err
	}
	ser, err := s.loadSeries(a.EvaluationID)
	if err != nil {
		if fail.KindOf(err) == fail.KindInfra {
			return retry(err)
		}
		return ended(err)
	}
	dir := filepath.Join(s.OutDir(a.EvaluationID), "series-bisect")
	pl, note, err := perpatch.PlanBisection(ser, perpatch.Options{BisectMeasurer: s.bisectMeasurer(a.EvaluationID, ser, filepath.Join(dir, "steps"))})
	if err == nil && pl == nil {
		err = fail.Inputf("series bisection: %s", note)
	}
	if err != nil {
		return ended(err)
	}
	pm := pl.Planner()
	if pm == nil {
		return ended(fail.Inputf("series bisection of evaluation %d: its measurer no longer measures with evaluations", a.EvaluationID))
	}
	rec, again, err := s.measuredStep(ctx, pm, a.Need, a.Measurement, a.End, a.Started)
	if err != nil {
		if again {
			return retry(err) // reading it back
		}
		return ended(err)
	}
	s.evalLog(a.EvaluationID).printf("series bisection: measurement %d (%.12s) recorded from evaluation %d", a.Seq+1, a.Need.Commit, a.Measurement)
	return recordSeriesStep(ctx, s, job, step, rec, retry)
}

// seriesStepWaitingTx says, in tx, whether a step of run gen (0: any
// run) of the bisection inside evaluation id's series waits for its
// measurement's evaluation (a series_bisect_measured waiter).
func (s *Service) seriesStepWaitingTx(tx *store.Tx, id, gen int64) (bool, error) {
	ws, err := s.db.Store.WaitersTx(tx, SeriesBisectMeasuredArgs{}.Kind())
	if err != nil {
		return false, err
	}
	for _, w := range ws {
		var a SeriesBisectMeasuredArgs
		if json.Unmarshal(w.Args, &a) == nil && a.EvaluationID == id && (gen == 0 || a.Gen == gen) {
			return true, nil
		}
	}
	return false, nil
}
