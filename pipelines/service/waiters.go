package service

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/service/dashboard"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Jobs that wait for an evaluation (issue 33). A job that needs an
// evaluation's result does not run the evaluation itself: it submits it
// (Service.submit: runner's stage graph, as River jobs) and registers its
// continuation as a waiter of the evaluation (store.Waiter: a job's kind,
// arguments, queue, tags and attempts), in the transaction that queues
// the evaluation, and ends. The transaction that ends the evaluation
// takes its waiters and queues their jobs, each told how the evaluation
// ended (EvalEnd, as its arguments' "end"):
//
//   - done: the graph's StageDone (jobsFor), after the report, the
//     per-patch run or the bisection inside the series;
//   - failed: evalFailed (a stage's bad input or failed result, or its
//     last attempt's infrastructure error);
//   - cancelled: Cancel. Cancelling an evaluation cancels with it the
//     evaluations it waits for (the waiters it owns: waiterOwner) that
//     no live waiter (a watch's, or another evaluation's not cancelled)
//     waits for too (cancelTx).
//
// The waiters are in the database, so one survives a restart of the
// process that registered it, and its job is queued by whichever process
// ends the evaluation. A watch's re-test waits so (retestWorker,
// retestedWorker), a watch bisection's measurement (watchsteps.go) and a
// per-patch run's prefix (perpatchsteps.go) too. An evaluation that
// nothing will end (no job of its own left, e.g. deleted in riverui)
// would hold its waiters for ever: serve's stuck check ends it as failed
// (stuck.go).

// EvalEnd is how an evaluation ended, as a waiter's job is told.
type EvalEnd struct {
	// Status is store.StatusDone, store.StatusFailed or StatusCancelled.
	Status string `json:"status"`
	// Stage is the kind of the job whose failure failed it; Error and
	// Kind (fail.Kind's String) its error.
	Stage string `json:"stage,omitempty"`
	Error string `json:"error,omitempty"`
	Kind  string `json:"kind,omitempty"`
}

// Err is the error the evaluation id ended with (nil when done), of the
// kind it was recorded with.
func (e *EvalEnd) Err(id int64) error {
	switch {
	case e == nil:
		return fail.Infraf("evaluation %d: its end was not recorded", id)
	case e.Status == store.StatusDone:
		return nil
	case e.Status == StatusCancelled:
		return fail.Infraf("evaluation %d was cancelled", id)
	}
	err := fmt.Errorf("%s", e.Error)
	if e.Error == "" {
		err = fmt.Errorf("evaluation %d %s in %s", id, e.Status, e.Stage)
	}
	switch e.Kind {
	case fail.KindInput.String():
		return fail.Input(err)
	case fail.KindFailed.String():
		return fail.Failed(err)
	}
	return fail.Infra(err)
}

// waiterArgs is a waiter's job as stored: its kind and its arguments
// (JSON, with "end" added).
type waiterArgs struct {
	kind string
	args json.RawMessage
}

func (a waiterArgs) Kind() string                 { return a.kind }
func (a waiterArgs) MarshalJSON() ([]byte, error) { return a.args, nil }

// newWaiter is a waiter of evaluation id whose job is args, queued with
// opts (its queue, tags and attempts).
func newWaiter(id int64, args river.JobArgs, opts *river.InsertOpts) (store.Waiter, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return store.Waiter{}, fail.Infraf("waiter of evaluation %d: %w", id, err)
	}
	return store.Waiter{EvaluationID: id, Kind: args.Kind(), Args: b, Queue: opts.Queue, Tags: opts.Tags, MaxAttempts: opts.MaxAttempts}, nil
}

// waitTx registers in tx a waiter of evaluation id whose job is args
// (queued with opts when the evaluation ends) and completes job, the job
// that submitted the evaluation: the continuation and the end of its
// submitter commit together, or neither does.
func waitTx[T river.JobArgs](ctx context.Context, s *Service, tx *store.Tx, id int64, args river.JobArgs, opts *river.InsertOpts, job *river.Job[T]) error {
	wt, err := newWaiter(id, args, opts)
	if err != nil {
		return err
	}
	if _, err := s.db.Store.AddWaiterTx(tx, wt); err != nil {
		return err
	}
	if err := completeTx(ctx, tx, job); err != nil {
		return fail.Infraf("river: completing job %d: %w", job.ID, err)
	}
	return nil
}

// endedTx takes evaluation id's waiters in tx, the transaction that
// records how it ended, and returns their jobs, each told end.
func (s *Service) endedTx(tx *store.Tx, id int64, end EvalEnd) ([]river.InsertManyParams, error) {
	ws, err := s.db.Store.TakeWaitersTx(tx, id)
	if err != nil {
		return nil, err
	}
	e, err := json.Marshal(end)
	if err != nil {
		return nil, fail.Infraf("evaluation %d: %w", id, err)
	}
	var out []river.InsertManyParams
	for _, w := range ws {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(w.Args, &m); err != nil || m == nil {
			s.logf("evaluation %d: waiter %d (%s) has unreadable arguments, dropped: %v", id, w.ID, w.Kind, err)
			continue
		}
		m["end"] = e
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fail.Infraf("evaluation %d: waiter %d: %w", id, w.ID, err)
		}
		out = append(out, river.InsertManyParams{Args: waiterArgs{kind: w.Kind, args: b},
			InsertOpts: &river.InsertOpts{Queue: w.Queue, Tags: w.Tags, MaxAttempts: w.MaxAttempts}})
	}
	return out, nil
}

// endTx records evaluation id's end (status, with end's details) in tx
// and queues its waiters' jobs, and more.
func (s *Service) endTx(ctx context.Context, tx *store.Tx, id int64, end EvalEnd, more []river.InsertManyParams) error {
	if err := s.setStatus(tx, id, end.Status); err != nil {
		return err
	}
	jobs, err := s.endedTx(tx, id, end)
	if err != nil {
		return err
	}
	if jobs = append(more, jobs...); len(jobs) > 0 {
		if err := s.engine.insertManyTx(ctx, tx, jobs); err != nil {
			return fail.Infraf("river: %w", err)
		}
	}
	return nil
}

// cancelTx ends evaluation id as cancelled in tx (its waiters' jobs
// queued, told so) and with it every evaluation it waits for, a per-patch
// prefix's or a series bisection step's measurement (the evaluations its
// waiters wait for: waiterOwner), that is queued or running and that no
// live waiter waits for: a waiter of a watch, or of another evaluation
// not cancelled, keeps a shared measurement running. Those are cancelled
// the same way, and so what they wait for. It returns the evaluations
// cancelled with id, whose jobs the caller cancels once tx has
// committed (cancelledWith).
func (s *Service) cancelTx(ctx context.Context, tx *store.Tx, id int64) ([]int64, error) {
	if err := s.endTx(ctx, tx, id, EvalEnd{Status: StatusCancelled}, nil); err != nil {
		return nil, err
	}
	cancelled := map[int64]bool{id: true}
	// live says whether waiter w's job would carry on: its owner, if it
	// has one, is not cancelled. The owner is not locked (only what tx
	// changes is, parent before child): two evaluations cancelled at once
	// that share a measurement may both leave it running, as before.
	live := func(w *store.Waiter) (bool, error) {
		o := waiterOwner(w)
		if o == 0 {
			return true, nil
		}
		if cancelled[o] {
			return false, nil
		}
		status, err := statusTx(tx, o)
		if err != nil {
			if fail.KindOf(err) == fail.KindInput {
				return false, nil // gone
			}
			return false, err
		}
		return status != StatusCancelled, nil
	}
	var out []int64
	for todo := []int64{id}; len(todo) > 0; todo = todo[1:] {
		// Read again for each: ending an evaluation takes its waiters.
		ws, err := s.db.Store.AllWaitersTx(tx)
		if err != nil {
			return nil, err
		}
	children:
		for _, w := range ws {
			c := w.EvaluationID
			if waiterOwner(w) != todo[0] || cancelled[c] {
				continue
			}
			for _, o := range ws {
				if o.EvaluationID != c {
					continue
				}
				l, err := live(o)
				if err != nil {
					return nil, err
				}
				if l {
					continue children // shared: left running
				}
			}
			status, err := s.db.Store.EvaluationStatusTx(tx, c)
			if err != nil {
				if fail.KindOf(err) == fail.KindInput {
					continue
				}
				return nil, err
			}
			if !dashboard.Active(status) {
				continue
			}
			if err := s.endTx(ctx, tx, c, EvalEnd{Status: StatusCancelled}, nil); err != nil {
				return nil, err
			}
			cancelled[c] = true
			out = append(out, c)
			todo = append(todo, c)
		}
	}
	return out, nil
}

// cancelledWith cancels the jobs of the evaluations cancelTx cancelled
// with evaluation id.
func (s *Service) cancelledWith(ctx context.Context, id int64, with []int64) error {
	for _, c := range with {
		n, err := s.engine.CancelEvaluation(ctx, c)
		if err != nil {
			return err
		}
		s.logf("evaluation %d cancelled with evaluation %d, which waited for it (%d job(s))", c, id, n)
		s.evalLog(c).printf("cancelled with evaluation %d, which waited for it (%d job(s))", id, n)
	}
	return nil
}
