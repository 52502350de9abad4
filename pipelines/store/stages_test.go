package store

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/fail"
)

// TestStageRecords: inputs, the applied series and stage timings round
// trip; Tx rolls everything back when its function fails.
func TestStageRecords(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, _ := openTemp(t, db)
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
		err = s.Tx(ctx, func(tx *Tx) error {
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
		err = s.Tx(ctx, func(tx *Tx) error {
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
	})
}

// TestStartEvaluation: a starting stage job moves an evaluation from
// queued to running and leaves every other status as it is.
func TestStartEvaluation(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, _ := openTemp(t, db)
		e, _, err := s.CreateOrResumeEvaluation("k", EvaluationMeta{Pipeline: "p"})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ from, want string }{
			{"queued", StatusRunning},
			{StatusRunning, StatusRunning},
			{StatusFailed, StatusFailed},
			{"cancelled", "cancelled"},
			{StatusDone, StatusDone},
		} {
			if err := s.SetEvaluationStatus(e.ID, c.from); err != nil {
				t.Fatal(err)
			}
			got, err := s.StartEvaluation(t.Context(), e.ID)
			if err != nil || got != c.want {
				t.Errorf("from %s: %q %v, want %s", c.from, got, err, c.want)
			}
			if now, _ := s.Evaluation(e.ID); now.Status != c.want {
				t.Errorf("from %s: stored %q, want %s", c.from, now.Status, c.want)
			}
		}
		if _, err := s.StartEvaluation(t.Context(), e.ID+100); fail.KindOf(err) != fail.KindInput {
			t.Errorf("a missing evaluation: %v, want an input error", err)
		}
	})
}

// TestSecondFinishOfABootIsSuperseded: two workers booted the same boot;
// the second to finish keeps no samples and does not count.
func TestSecondFinishOfABootIsSuperseded(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, _ := openTemp(t, db)
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
	})
}

// TestBootRecorder: a boot is a running run from Begin; Finish records its
// status, the BootError's console and its samples together with Also, in
// one transaction (an Also that fails leaves the boot unfinished, so a
// resume does it again); Done is the finished boots.
func TestBootRecorder(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, _ := openTemp(t, db)
		ctx := context.Background()
		ev, _, err := s.CreateOrResumeEvaluation(Key("recorder"), EvaluationMeta{Pipeline: "test"})
		if err != nil {
			t.Fatal(err)
		}
		var also []evaluate.BootKey
		rec := &BootRecorder{Store: s, EvalID: ev.ID, Also: func(_ context.Context, tx *Tx, r evaluate.BootRecord) error {
			also = append(also, r.Key)
			if r.Key.Variant == "broken-also" {
				return fail.Infraf("queue down")
			}
			return s.AddTimingTx(tx, ev.ID, "boot", 1, r.Key.String())
		}}
		panicked := evaluate.BootRecord{Key: evaluate.BootKey{Variant: "full", Boot: 0},
			Err: &evaluate.BootError{Variant: "full", Phase: evaluate.PhaseKernelPanic, Kind: fail.KindFailed, Msg: "Kernel panic", Console: []byte("Linux version 6.1\nKernel panic\n")}}
		ok := evaluate.BootRecord{Key: evaluate.BootKey{Variant: "voluntary", Boot: 0},
			Samples: []evaluate.Sample{{Benchmark: "kill", Metric: "ns/op", Unit: "ns", Value: 900}}}
		lost := evaluate.BootRecord{Key: evaluate.BootKey{Variant: "broken-also", Boot: 0}}
		ids := map[evaluate.BootKey]int64{}
		for _, r := range []evaluate.BootRecord{panicked, ok, lost} {
			id, err := rec.Begin(ctx, r.Key)
			if err != nil {
				t.Fatal(err)
			}
			ids[r.Key] = id
			err = rec.Finish(ctx, id, r)
			if want := r.Key.Variant == "broken-also"; (err != nil) != want {
				t.Errorf("%v: Finish: %v", r.Key, err)
			}
		}
		done, err := rec.Done(ctx)
		if err != nil || len(done) != 2 || !done[panicked.Key] || !done[ok.Key] {
			t.Errorf("done %v %v, want the panicked and the ok boot", done, err)
		}
		runs, err := s.RunsOf(ev.ID)
		if err != nil || len(runs) != 3 {
			t.Fatalf("runs %+v %v", runs, err)
		}
		status := map[string]RunStatus{}
		for _, r := range runs {
			status[r.Variant] = r.Status
		}
		if status["full"] != RunFailed || status["voluntary"] != RunOK || status["broken-also"] != RunRunning {
			t.Errorf("statuses %v: want full failed, voluntary ok, broken-also still running (its Also failed)", status)
		}
		if c, err := s.Console(ids[panicked.Key]); err != nil || !bytes.Equal(c, panicked.Err.(*evaluate.BootError).Console) {
			t.Errorf("console of the panicked boot %q %v, want the BootError's", c, err)
		}
		tm, err := s.Timings(ev.ID)
		if err != nil || len(also) != 3 || tm["boot"].Duration != 2 {
			t.Errorf("Also ran for %v, timings %v %v: want 3 calls and the 2 committed ones' time", also, tm, err)
		}
		if samples, err := s.Samples(ev.ID); err != nil || len(samples) != 1 || samples[0].Variant != "voluntary" {
			t.Errorf("samples %+v %v", samples, err)
		}

		// SIGINT (a cancelled context) after a boot succeeded keeps it; a boot
		// that failed because of the interrupt is left for the resume.
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		rec.Also = nil
		for _, r := range []evaluate.BootRecord{{Key: evaluate.BootKey{Variant: "voluntary", Boot: 1}},
			{Key: evaluate.BootKey{Variant: "voluntary", Boot: 2}, Err: fail.Infra(context.Canceled)}} {
			id, err := rec.Begin(ctx, r.Key)
			if err != nil {
				t.Fatal(err)
			}
			err = rec.Finish(cancelled, id, r)
			if (err == nil) != (r.Err == nil) {
				t.Errorf("%v (boot error %v): Finish under a cancelled context: %v", r.Key, r.Err, err)
			}
		}
		if done, _ := rec.Done(ctx); !done[evaluate.BootKey{Variant: "voluntary", Boot: 1}] || len(done) != 3 {
			t.Errorf("after the interrupt: done %v, want the boot that succeeded kept", done)
		}
	})
}

// TestInterruptRuns: the runs of a boot left "running" by a process that
// died end as infrastructure failures saying why; finished runs and other
// boots are untouched; the boot is not finished, so it is redone.
func TestInterruptRuns(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, _ := openTemp(t, db)
		e, _, err := s.CreateOrResumeEvaluation("k", EvaluationMeta{Pipeline: "p"})
		if err != nil {
			t.Fatal(err)
		}
		done, _ := s.BeginRun(e.ID, "v", 0)
		if err := s.FinishRun(done, RunOK, evaluate.Environment{}, nil, nil); err != nil {
			t.Fatal(err)
		}
		s.BeginRun(e.ID, "v", 1) // the dead process's run
		other, _ := s.BeginRun(e.ID, "w", 1)
		n, err := s.InterruptRuns(e.ID, "v", 1, "interrupted: serve died")
		if err != nil || n != 1 {
			t.Fatalf("InterruptRuns = %d, %v; want 1", n, err)
		}
		runs, _ := s.RunsOf(e.ID)
		if runs[0].Status != RunOK || runs[1].Status != RunInfra || runs[1].ErrorText != "interrupted: serve died" ||
			runs[1].Finished.IsZero() || runs[2].ID != other || runs[2].Status != RunRunning {
			t.Errorf("runs after InterruptRuns: %+v", runs)
		}
		if fin, _ := s.FinishedRuns(e.ID); fin[evaluate.BootKey{Variant: "v", Boot: 1}] {
			t.Error("an interrupted boot counts as finished")
		}
		if n, err := s.InterruptRuns(e.ID, "v", 1, "again"); err != nil || n != 0 {
			t.Errorf("second InterruptRuns = %d, %v; want 0", n, err)
		}
	})
}

// TestStageSpans: a stage's jobs that ran at the same time (three
// kernels built side by side) count once in its wall time, the jobs'
// added-up time is kept as Busy, and time added without a span (an older
// patcheval's) counts as it was.
func TestStageSpans(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, _ := openTemp(t, db)
		e, _, err := s.CreateOrResumeEvaluation("k", EvaluationMeta{Pipeline: "p"})
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Unix(1_700_000_000, 0)
		min := time.Minute
		err = s.Tx(context.Background(), func(tx *Tx) error {
			for _, sp := range []struct {
				stage      string
				start, len time.Duration
			}{
				{"build", 0, 30 * min}, // three kernels at once:
				{"build", 1 * min, 34 * min},
				{"build", 2 * min, 32 * min}, // 0..35
				{"build", 50 * min, 5 * min}, // a rebuild after a pause: 50..55
				{"boot", 60 * min, min},      // serial boots: no overlap
				{"boot", 62 * min, min},
			} {
				if err := s.AddSpanTx(tx, e.ID, sp.stage, t0.Add(sp.start), sp.len, ""); err != nil {
					return err
				}
			}
			return s.AddTimingTx(tx, e.ID, "build", 2*min, "") // no span
		})
		if err != nil {
			t.Fatal(err)
		}
		tm, err := s.Timings(e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if b := tm["build"]; b.Duration != 42*min || b.Busy != 103*min {
			t.Errorf("build: wall %s, busy %s; want 42m (35+5+2) and 1h43m", b.Duration, b.Busy)
		}
		if b := tm["boot"]; b.Duration != 2*min || b.Busy != 0 {
			t.Errorf("boot: wall %s, busy %s; want 2m, and no busy time beside it", b.Duration, b.Busy)
		}
	})
}

// TestResolvedSeries: the resolved series is stored beside the inputs,
// which SetInputsTx replaces without touching it; none is nil; an
// evaluation stored before schema 14 (migrated) has none and keeps its
// inputs.
func TestResolvedSeries(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		// A database of the schema before the resolved series, with an
		// evaluation and its inputs.
		all := migrations
		before := slices.Index(all, migrationResolvedSeries)
		if before < 0 {
			t.Fatal("no migration adds the resolved series")
		}
		migrations = all[:before]
		s, _ := openTemp(t, db)
		migrations = all
		e, _, err := s.CreateOrResumeEvaluation("k", EvaluationMeta{Pipeline: "p"})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := s.Tx(ctx, func(tx *Tx) error { return s.SetInputsTx(tx, e.ID, []byte(`{"a":1}`), []byte("From x\n")) }); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s, _ = openTemp(t, db)
		if v, err := s.Version(); err != nil || v != SchemaVersion() {
			t.Fatalf("migrated to %d (%v), want %d", v, err, SchemaVersion())
		}
		if r, err := s.ResolvedSeries(e.ID); r != nil || err != nil {
			t.Errorf("resolved series of an evaluation stored before them: %q %v, want none", r, err)
		}
		if in, box, err := s.Inputs(e.ID); err != nil || string(in) != `{"a":1}` || string(box) != "From x\n" {
			t.Errorf("inputs after the migration: %q %q %v", in, box, err)
		}

		set := func(series []byte) error {
			return s.Tx(ctx, func(tx *Tx) error { return s.SetResolvedSeriesTx(tx, e.ID, series) })
		}
		if err := set([]byte(`{"series":1}`)); err != nil {
			t.Fatal(err)
		}
		if err := s.Tx(ctx, func(tx *Tx) error { return s.SetInputsTx(tx, e.ID, []byte(`{"a":2}`), []byte("From y\n")) }); err != nil {
			t.Fatal(err)
		}
		if r, err := s.ResolvedSeries(e.ID); err != nil || string(r) != `{"series":1}` {
			t.Errorf("resolved series after new inputs: %q %v", r, err)
		}
		if err := set(nil); err != nil {
			t.Fatal(err)
		}
		if r, err := s.ResolvedSeries(e.ID); r != nil || err != nil {
			t.Errorf("resolved series after none was set: %q %v", r, err)
		}

		// Without inputs: an input error to read, an error to set.
		e2, _, err := s.CreateOrResumeEvaluation("k2", EvaluationMeta{Pipeline: "p"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ResolvedSeries(e2.ID); fail.KindOf(err) != fail.KindInput {
			t.Errorf("resolved series without inputs: %v, want an input error", err)
		}
		if err := s.Tx(ctx, func(tx *Tx) error { return s.SetResolvedSeriesTx(tx, e2.ID, []byte("{}")) }); err == nil {
			t.Error("a resolved series was stored without inputs")
		}
	})
}
