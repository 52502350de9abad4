package service

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/pipelines/store"
)

// A watch bisection's measurement with a bisect.Planner (serve's
// bisect.PipelineMeasurer) is an evaluation of the service's stage graph,
// not a runner.Run inside the step's job: bisect_step submits it
// (Plan) and, in the transaction that queues it, registers a
// bisect_measured job as its waiter (waiters.go) and completes itself.
// When the evaluation ends, bisect_measured reads the measurement back
// (Measured: its samples, its report's timings), records it on the event
// and queues the next step in one transaction, as bisect_step does with
// a measurement made in its job. A measurement whose evaluation ended
// for infrastructure reasons (its stages' attempts spent) or was
// cancelled ends the bisection as failed, as a step's last attempt does.

// BisectMeasuredArgs records measurement Seq (Need) of run Gen of the
// bisection of watch WatchID's event EventID when its evaluation
// EvaluationID, submitted at Started, has ended (End, filled in by the
// transaction that ended it).
type BisectMeasuredArgs struct {
	WatchID      int64       `json:"watch_id"`
	EventID      int64       `json:"event_id"`
	Gen          int64       `json:"gen,omitempty"`
	Seq          int         `json:"seq"`
	Need         bisect.Need `json:"need"`
	EvaluationID int64       `json:"evaluation_id"`
	Started      time.Time   `json:"started"`
	End          *EvalEnd    `json:"end,omitempty"`
}

func (BisectMeasuredArgs) Kind() string { return "bisect_measured" }

// submitWatchStep submits measurement need of bisection step job as an
// evaluation (submitStep) and ends job with its waiter registered; retry
// and txErr sort errors (bisectStepWorker.Work).
func (s *Service) submitWatchStep(ctx context.Context, job *river.Job[BisectStepArgs], b bisectJobs[*watch.BisectState], w *store.Watch,
	need *bisect.Need, pm bisect.Planner, retry, txErr func(error) error) error {
	a := job.Args
	next := BisectMeasuredArgs{WatchID: w.ID, EventID: a.EventID, Gen: a.Gen, Seq: a.Seq, Need: *need, Started: time.Now().UTC()}
	id, skipped, err := submitStep(ctx, s, job, *need, pm, func(id int64) (river.JobArgs, *river.InsertOpts) {
		next.EvaluationID = id
		return next, watchJobOpts(w.ID, 5)
	})
	if err != nil {
		return retry(err)
	}
	if skipped != nil {
		// Refused as a failed result: the step is skipped, as a
		// measurement that failed in its job is.
		return recordWatchStep(ctx, s, job, b, a.Gen, a.Seq, *skipped, txErr)
	}
	s.logf("watch %s: measurement %d of %s is evaluation %d (recorded when it ends)", w.Name, a.Seq+1, need.Commit[:min(12, len(need.Commit))], id)
	return nil
}

type bisectMeasuredWorker struct {
	river.WorkerDefaults[BisectMeasuredArgs]
	s *Service
}

func (wk *bisectMeasuredWorker) Work(ctx context.Context, job *river.Job[BisectMeasuredArgs]) error {
	s, a := wk.s, job.Args
	ev, w, st, err := s.bisectingEvent(a.EventID)
	if err != nil {
		return err
	}
	if !watchBisectRun(st).isStep(a.Gen, a.Seq) {
		return nil // another run, ended, or recorded
	}
	b := s.watchBisectJobs(w.ID, ev.ID)
	failed := func(err error) error { return bisectFailedAt(ctx, s, job, a.Gen, a.Seq, w, ev, err) }
	txErr := func(err error) error {
		if fail.KindOf(err) == fail.KindInput {
			return river.JobCancel(err)
		}
		if ctx.Err() == nil && job.Attempt >= job.MaxAttempts {
			return failed(err)
		}
		return err
	}
	good, bad, err := eventTags(s.db.Store, w, ev)
	if err != nil {
		return failed(err)
	}
	pl, err := s.watchCfg.Bisection.Plan(w, ev, good, bad)
	if err != nil {
		return failed(err)
	}
	pm, ok := pl.Options.Measurer.(bisect.Planner)
	if !ok {
		return failed(fail.Inputf("watch %s: the bisection's measurer no longer measures with evaluations", w.Name))
	}
	rec, retry, err := s.measuredStep(ctx, pm, a.Need, a.EvaluationID, a.End, a.Started)
	if err != nil {
		if !retry {
			return failed(err)
		}
		if ctx.Err() != nil {
			return err
		}
		return txErr(err) // reading it back: retried
	}
	return recordWatchStep(ctx, s, job, b, a.Gen, a.Seq, rec, txErr)
}

// readReport is evaluation id's report as its report stage wrote it, nil
// when it has none.
func (s *Service) readReport(id int64) (*report.Report, error) {
	f, err := os.Open(filepath.Join(s.OutDir(id), "report.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fail.Infraf("evaluation %d: %v", id, err)
	}
	defer f.Close()
	r, err := report.ReadJSON(f)
	if err != nil {
		return nil, fail.Infraf("evaluation %d: %v", id, err)
	}
	return r, nil
}

// watchWaiting is how many of watch id's jobs wait for an evaluation
// (waiters of the kinds given).
func (s *Service) watchWaiting(id int64, kinds ...string) (int, error) {
	n := 0
	for _, k := range kinds {
		ws, err := s.db.Store.Waiters(k)
		if err != nil {
			return 0, err
		}
		for _, w := range ws {
			var a struct {
				WatchID int64 `json:"watch_id"`
			}
			if json.Unmarshal(w.Args, &a) == nil && a.WatchID == id {
				n++
			}
		}
	}
	return n, nil
}
