package service

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/service/dashboard"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Stuck evaluations (issue 33). An evaluation that jobs wait for
// (waiters.go) is ended by one of its own jobs: the graph's last step, a
// stage's failure (evalFailed) or Cancel. When none of its jobs is left
// that may still run (available, pending, retryable, running, scheduled)
// and it is still queued or running, nothing will ever end it: its jobs
// were cancelled, discarded or deleted outside the service (riverui, SQL),
// or the transaction recording a failure failed. Its waiters would then
// wait for ever, and with them the per-patch run, the series bisection or
// the watch that needs it.
//
// serve looks for such evaluations when it starts and then every
// Config.StuckCheck: an evaluation with waiters, queued or running, with
// no unfinished job of its own, and not itself waiting for another
// evaluation (a waiter it owns: a per-patch run or a series bisection
// step waiting for its measurement has no job meanwhile, and is ended by
// that measurement's end). One found so twice, Config.StuckConfirm apart,
// is checked again in the transaction that ends it as failed (an
// infrastructure failure: "stuck: no stage job left for evaluation N"),
// which queues its waiters as any end does. A job running on a dead
// worker still counts as its job: the orphan watch (orphans.go) queues it
// again.

// Default stuck-evaluation check intervals (Config.StuckCheck,
// Config.StuckConfirm).
const (
	DefaultStuckCheck   = time.Minute
	DefaultStuckConfirm = 30 * time.Second
)

// waiterOwner is the evaluation whose work waiter w's job carries on,
// when it is not the evaluation w waits for: the evaluation of a per-patch
// run (per_patch_measured) or of a series bisection (series_bisect_measured)
// whose measurement w waits for. 0 for a waiter that works for no other
// evaluation (a watch's re-test or bisection step: their arguments name
// the evaluation they wait for).
func waiterOwner(w *store.Waiter) int64 {
	var a struct {
		EvaluationID int64 `json:"evaluation_id"`
	}
	if json.Unmarshal(w.Args, &a) != nil || a.EvaluationID == w.EvaluationID {
		return 0
	}
	return a.EvaluationID
}

// stuckTx says, in tx, whether evaluation id is stuck: waited for, queued
// or running, not waiting for another evaluation and with no unfinished
// job. Its status is read first; with lock, locked on Postgres (the
// transaction that ends it), so that a submission that queues it again
// meanwhile (runner.Submit resuming it) is either seen or waits for tx.
// Without, nothing is locked: the look over every evaluation must not
// lock them one after another (in another order than Cancel does).
func (s *Service) stuckTx(ctx context.Context, tx *store.Tx, id int64, lock bool) (bool, error) {
	var status string
	var err error
	if lock {
		status, err = s.db.Store.EvaluationStatusTx(tx, id)
	} else {
		status, err = statusTx(tx, id)
	}
	if err != nil {
		if fail.KindOf(err) == fail.KindInput {
			return false, nil // gone (its waiters with it)
		}
		return false, err
	}
	if !dashboard.Active(status) {
		return false, nil
	}
	ws, err := s.db.Store.AllWaitersTx(tx)
	if err != nil {
		return false, err
	}
	waited := false
	for _, w := range ws {
		if waiterOwner(w) == id {
			return false, nil // it waits for another evaluation
		}
		waited = waited || w.EvaluationID == id
	}
	if !waited {
		return false, nil
	}
	jobs, err := s.engine.jobsTx(ctx, tx, id, 1, unfinished...)
	if err != nil {
		return false, err
	}
	return len(jobs) == 0, nil
}

// statusTx reads evaluation id's status in tx without locking it (a
// missing evaluation is a bad-input error).
func statusTx(tx *store.Tx, id int64) (string, error) {
	var status string
	err := tx.QueryRow(`SELECT status FROM evaluations WHERE id = ?`, id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fail.Inputf("no evaluation %d", id)
	}
	if err != nil {
		return "", fail.Infraf("evaluation %d: %w", id, err)
	}
	return status, nil
}

// stuckEvaluations are the evaluations stuck now (stuckTx).
func (s *Service) stuckEvaluations(ctx context.Context) ([]int64, error) {
	var out []int64
	err := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		out = nil
		ws, err := s.db.Store.AllWaitersTx(tx)
		if err != nil {
			return err
		}
		seen := map[int64]bool{}
		for _, w := range ws {
			if seen[w.EvaluationID] {
				continue
			}
			seen[w.EvaluationID] = true
			stuck, err := s.stuckTx(ctx, tx, w.EvaluationID, false)
			if err != nil {
				return err
			}
			if stuck {
				out = append(out, w.EvaluationID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fail.Infraf("database %s: stuck evaluations: %w", s.db.Where, err)
	}
	return out, nil
}

// endStuck ends evaluation id as failed if it is still stuck, queueing
// its waiters (and Notify's job) in the same transaction; it reports
// whether it did.
func (s *Service) endStuck(ctx context.Context, id int64) (bool, error) {
	why := fail.Infraf("stuck: no stage job left for evaluation %d (its jobs ended without ending it)", id)
	ended := false
	err := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		ended = false
		stuck, err := s.stuckTx(ctx, tx, id, true)
		if err != nil || !stuck {
			return err
		}
		ended = true
		return s.endTx(ctx, tx, id, EvalEnd{Status: store.StatusFailed, Error: why.Error(), Kind: fail.KindInfra.String()},
			s.notifyJobs(id, time.Now().UnixNano(), EventFailed))
	})
	if err != nil {
		return false, fail.Infraf("database %s: ending stuck evaluation %d: %w", s.db.Where, id, err)
	}
	if ended {
		s.logf("evaluation %d failed: %v", id, why)
		s.evalLog(id).printf("failed: %v", why)
	}
	return ended, nil
}

// watchStuck looks for stuck evaluations until ctx ends: at once, then
// every StuckCheck, or StuckConfirm after finding one (it is ended when
// found stuck again).
func (s *Service) watchStuck(ctx context.Context) {
	every, confirm := s.cfg.StuckCheck, s.cfg.StuckConfirm
	if every <= 0 {
		every = DefaultStuckCheck
	}
	if confirm <= 0 {
		confirm = DefaultStuckConfirm
	}
	seen := map[int64]time.Time{} // when each was first found stuck
	for {
		wait := every
		found, err := s.stuckEvaluations(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.logf("looking for stuck evaluations: %v", err)
		} else {
			next := map[int64]time.Time{}
			for _, id := range found {
				at, ok := seen[id]
				if !ok {
					next[id] = time.Now()
					wait = min(wait, confirm)
					continue
				}
				if d := time.Since(at); d < confirm {
					next[id] = at
					wait = min(wait, confirm-d)
					continue
				}
				if _, err := s.endStuck(ctx, id); err != nil {
					if ctx.Err() != nil {
						return
					}
					s.logf("%v", err)
					next[id] = at
				}
			}
			seen = next
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
