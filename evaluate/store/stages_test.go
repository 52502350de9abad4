package store

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/fail"
)

// TestStageRecords: inputs, the applied series and stage timings round
// trip; Tx rolls everything back when its function fails.
func TestStageRecords(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	e, _, err := s.CreateOrResumeEvaluation("k", EvaluationMeta{Pipeline: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Inputs(e.ID); fail.KindOf(err) != fail.KindInput {
		t.Errorf("inputs before any: %v, want an input error", err)
	}
	if a, err := s.AppliedOf(e.ID); a != nil || err != nil {
		t.Errorf("applied before any: %+v %v", a, err)
	}
	applied := Applied{Head: "h2", Tree: "t2", Branch: "b", Commits: []AppliedCommit{{Hash: "h1", Tree: "t1", Subject: "one"}, {Hash: "h2", Tree: "t2", Subject: "two"}}}
	err = s.Tx(ctx, func(tx *sql.Tx) error {
		if err := s.SetInputsTx(tx, e.ID, []byte(`{"a":1}`), []byte("From x\n")); err != nil {
			return err
		}
		if err := s.RecordAppliedTx(tx, e.ID, applied); err != nil {
			return err
		}
		if err := s.AddTimingTx(tx, e.ID, "boot", time.Second, ""); err != nil {
			return err
		}
		return s.AddTimingTx(tx, e.ID, "boot", 2*time.Second, "note")
	})
	if err != nil {
		t.Fatal(err)
	}
	in, box, err := s.Inputs(e.ID)
	if err != nil || string(in) != `{"a":1}` || string(box) != "From x\n" {
		t.Errorf("inputs %q %q %v", in, box, err)
	}
	if a, err := s.AppliedOf(e.ID); err != nil || !reflect.DeepEqual(*a, applied) {
		t.Errorf("applied %+v %v, want %+v", a, err, applied)
	}
	if tm, err := s.Timings(e.ID); err != nil || tm["boot"].Duration != 3*time.Second || tm["boot"].Note != "note" {
		t.Errorf("timings %+v %v", tm, err)
	}
	boom := errors.New("boom")
	err = s.Tx(ctx, func(tx *sql.Tx) error {
		if err := s.SetEvaluationStatusTx(tx, e.ID, StatusDone); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("tx error %v", err)
	}
	if got, _ := s.Evaluation(e.ID); got.Status != StatusRunning {
		t.Errorf("status %q after a rolled back tx, want running", got.Status)
	}
}

// TestSecondFinishOfABootIsSuperseded: two workers booted the same boot;
// the second to finish keeps no samples and does not count.
func TestSecondFinishOfABootIsSuperseded(t *testing.T) {
	s, _ := openTemp(t)
	e, _, err := s.CreateOrResumeEvaluation("k", EvaluationMeta{Pipeline: "p"})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.BeginRun(e.ID, "v", 0)
	b, _ := s.BeginRun(e.ID, "v", 0)
	smp := []evaluate.Sample{{Benchmark: "kill", Metric: "ns/op", Value: 1}}
	if err := s.FinishRun(a, RunOK, evaluate.Environment{PerfEvents: "cycles,instructions"}, nil, smp); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(b, RunOK, evaluate.Environment{}, nil, smp); err != nil {
		t.Fatal(err)
	}
	got, err := s.Samples(e.ID)
	if err != nil || len(got) != 1 {
		t.Fatalf("samples %d (%v), want 1: a boot's samples count once", len(got), err)
	}
	runs, _ := s.RunsOf(e.ID)
	if len(runs) != 2 || runs[1].Status != RunInfra || runs[1].ErrorText == "" || runs[0].Env.PerfEvents != "cycles,instructions" {
		t.Errorf("runs %+v, want the second superseded (infra)", runs)
	}
}
