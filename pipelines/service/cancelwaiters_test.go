package service

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/pipelines/experiments/perpatch"
)

// TestCancelCancelsWaitedForPrefix: cancelling an evaluation whose
// per-patch run waits for a prefix's evaluation cancels that evaluation
// too (its queued apply job never runs), since nothing else waits for
// it; the waiter's job its end queues does nothing for the cancelled
// evaluation.
//
// It fails without the propagation: the prefix's evaluation stays queued
// with its apply job, to be measured for nobody.
func TestCancelCancelsWaitedForPrefix(t *testing.T) {
	root := t.TempDir()
	s, id, p1 := perPatchWaiting(t, Config{Database: filepath.Join(root, "state", "patcheval.db"), CacheDir: filepath.Join(root, "cache"),
		From: testFrom, Log: testWriter{t}, Grace: 5 * time.Second})
	if err := s.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Store().Evaluation(p1); err != nil || e.Status != StatusCancelled {
		t.Fatalf("prefix evaluation %d: %+v %v, want cancelled with evaluation %d", p1, e, err, id)
	}
	if got := evalJobStates(t, s, p1); len(got["apply"]) != 1 || got["apply"][0] != rivertype.JobStateCancelled {
		t.Fatalf("prefix evaluation %d's jobs %v, want its apply job cancelled", p1, got)
	}
	if ws, err := s.Store().Waiters(PerPatchMeasuredArgs{}.Kind()); err != nil || len(ws) != 0 {
		t.Fatalf("waiters left: %+v %v", ws, err)
	}
	// The per_patch_measured job the prefix's end queued does nothing.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		got := evalJobStates(t, s, id)["per_patch_measured"]
		if len(got) == 1 && got[0] == rivertype.JobStateCancelled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("per_patch_measured jobs %v, want one, cancelled", got)
		}
	}
	if e, _ := s.Store().Evaluation(id); e.Status != StatusCancelled {
		t.Fatalf("evaluation %d is %s, want cancelled", id, e.Status)
	}
}

// TestCancelLeavesSharedMeasurement: a prefix's evaluation that another
// live evaluation waits for too (a measurement shared by two series)
// keeps running when the first is cancelled; cancelling the second, the
// last that waits for it, cancels it.
//
// The second half fails without the propagation (the prefix's
// evaluation stays queued).
func TestCancelLeavesSharedMeasurement(t *testing.T) {
	root := t.TempDir()
	s, id, p1 := perPatchWaiting(t, Config{Database: filepath.Join(root, "state", "patcheval.db"), CacheDir: filepath.Join(root, "cache"),
		From: testFrom, Log: testWriter{t}, Grace: 5 * time.Second})
	// Another evaluation, running, whose per-patch run waits for the same
	// prefix's evaluation.
	tr := newSeriesTree(t)
	other := tr.evaluated(t, s, false)
	if other == id {
		t.Fatalf("the second evaluation is the first (%d)", id)
	}
	if err := s.setStatus(nil, other, "running"); err != nil {
		t.Fatal(err)
	}
	addWaiter(t, s, p1, PerPatchMeasuredArgs{EvaluationID: other, Gen: 1, Prefix: perpatch.Prefix{K: 1, EvaluationID: p1}})

	if err := s.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Store().Evaluation(p1); err != nil || e.Status != StatusQueued {
		t.Fatalf("shared prefix evaluation %d: %+v %v, want it still queued (evaluation %d waits for it)", p1, e, err, other)
	}
	if got := evalJobStates(t, s, p1); len(got["apply"]) != 1 || got["apply"][0] != rivertype.JobStateAvailable {
		t.Fatalf("shared prefix evaluation %d's jobs %v, want its apply job queued", p1, got)
	}
	if ws, err := s.Store().Waiters(PerPatchMeasuredArgs{}.Kind()); err != nil || len(ws) != 2 {
		t.Fatalf("waiters %+v %v, want both still waiting", ws, err)
	}

	if err := s.Cancel(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Store().Evaluation(p1); err != nil || e.Status != StatusCancelled {
		t.Fatalf("prefix evaluation %d: %+v %v, want cancelled with evaluation %d, the last that waited for it", p1, e, err, other)
	}
	if got := evalJobStates(t, s, p1); len(got["apply"]) != 1 || got["apply"][0] != rivertype.JobStateCancelled {
		t.Fatalf("prefix evaluation %d's jobs %v, want its apply job cancelled", p1, got)
	}
	if ws, err := s.Store().Waiters(PerPatchMeasuredArgs{}.Kind()); err != nil || len(ws) != 0 {
		t.Fatalf("waiters left: %+v %v", ws, err)
	}
}
