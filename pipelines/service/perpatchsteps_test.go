package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/experiments/perpatch"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// seriesQueueOnly starts a service on cfg that works only the series
// queue (per_patch and its waiters), with the function that stops its
// jobs: the prefixes' evaluations are queued as stage jobs that nothing
// works, and the test ends them itself.
func seriesQueueOnly(t *testing.T, cfg Config) (*Service, func() error) {
	t.Helper()
	s, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	s.addWorkers(workers)
	if s.engine, err = newEngine(s.db, EngineConfig{Capabilities: AllLocal(1), Queues: []string{QueueSeries}, ID: s.workerID, Grace: time.Second}, workers); err != nil {
		s.Close()
		t.Fatal(err)
	}
	stop, err := s.startJobs(t.Context())
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s, stop
}

// startPerPatch ends evaluation id's report as the report job does: the
// per_patch job follows it.
func startPerPatch(t *testing.T, s *Service, id int64) {
	t.Helper()
	ctx := t.Context()
	end := mustEnd(t, s, id)
	err := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		next, err := s.afterReport(ctx, tx, id, 1, end)
		if err != nil {
			return err
		}
		if len(next) != 1 || next[0].Args.Kind() != (PerPatchArgs{}).Kind() {
			return fmt.Errorf("after the report: %v, want one per_patch job", next)
		}
		return s.engine.insertManyTx(ctx, tx, next)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// prefixWaiter waits for the per_patch_measured waiter of prefix k and
// returns its arguments.
func prefixWaiter(t *testing.T, st *store.Store, k int) PerPatchMeasuredArgs {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		ws, err := st.Waiters(PerPatchMeasuredArgs{}.Kind())
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			var a PerPatchMeasuredArgs
			if err := json.Unmarshal(w.Args, &a); err != nil {
				t.Fatal(err)
			}
			if a.Prefix.K == k {
				if w.EvaluationID != a.Prefix.EvaluationID || a.Prefix.EvaluationID == 0 {
					t.Fatalf("waiter %+v of evaluation %d: not its prefix's", a, w.EvaluationID)
				}
				return a
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no waiter of prefix %d: %+v", k, ws)
		}
	}
}

// prefixSamples stores the samples of prefix evaluation id at commit, as
// its boots would (the kernels stand for bench/getppid's number).
func prefixSamples(t *testing.T, st *store.Store, repo, commit string, id int64) {
	t.Helper()
	ss, err := benchSamples(repo, commit, "patched", 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, sm := range ss {
		run, err := st.BeginRun(id, sm.Variant, sm.Boot)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.FinishRun(run, store.RunOK, evaluate.Environment{Target: "qemu", Deterministic: true}, nil, []evaluate.Sample{sm}); err != nil {
			t.Fatal(err)
		}
	}
}

// endPrefix ends evaluation id as the stage graph's last job does:
// done (the graph's StageDone) or with end.
func endPrefix(t *testing.T, s *Service, id int64, end *EvalEnd) {
	t.Helper()
	ctx := t.Context()
	err := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		if end != nil {
			return s.endTx(ctx, tx, id, *end, nil)
		}
		next, err := s.jobsFor(ctx, tx, after{id: id, gen: 1}, []runner.Step{{Stage: runner.StageDone}})
		if err != nil {
			return err
		}
		return s.engine.insertManyTx(ctx, tx, next)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fixedMeasurer answers the prefixes' measurements as the stored
// evaluations did (the in-job path's RunnerMeasurer reads their samples
// back so): by commit, the evaluation and its error.
type fixedMeasurer struct {
	st   *store.Store
	ids  map[string]int64
	errs map[string]error
}

func (m *fixedMeasurer) Measure(ctx context.Context, commit string) ([]evaluate.Sample, int64, error) {
	id := m.ids[commit]
	if err := m.errs[commit]; err != nil {
		return nil, id, err
	}
	ss, err := m.st.Samples(id)
	return ss, id, err
}

// TestPerPatchPrefixesRunAsStageJobs: with the service's own per-patch
// measurer (perpatch.RunnerMeasurer, a perpatch.Planner), a per-patch
// run's prefixes are evaluations of the service's stage graph, not a
// runner.Run inside the per_patch job: the per_patch job submits the
// first prefix's evaluation (queued as its own apply job) and completes
// before it ends; the per_patch_measured job the end of each prefix's
// evaluation queues records it and submits the next. The first process
// stops while the second prefix's waiter is registered; the second
// process fires it (here the prefix's kernel does not build: a failed
// end) and carries the run on. The reports' per-patch section is the
// one the in-job path (perpatch.Run) makes of the same measurements, and
// the evaluation is done only after it.
//
// It fails with the old in-job path: no prefix evaluation is submitted
// and no waiter is registered (the job runs runner.Run itself).
func TestPerPatchPrefixesRunAsStageJobs(t *testing.T) {
	tr := newSeriesTree(t)
	root := t.TempDir()
	db := filepath.Join(root, "state", "patcheval.db")
	cfg := Config{Database: db, CacheDir: filepath.Join(root, "cache"), From: testFrom, Log: testWriter{t}, Grace: 5 * time.Second}

	// The first process.
	s, stop := seriesQueueOnly(t, cfg)
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := tr.evaluated(t, s, true)
	outDir := s.OutDir(id)
	ser, err := perpatch.Load(st, id)
	if err != nil || len(ser.Commits) != 4 {
		t.Fatalf("series: %+v %v", ser, err)
	}
	commit := func(k int) string { return ser.Commits[k-1].Hash }
	startPerPatch(t, s, id)

	w1 := prefixWaiter(t, st, 1)
	p1 := w1.Prefix.EvaluationID
	if w1.EvaluationID != id || w1.Prefix.Commit != commit(1) || len(w1.Done) != 0 || p1 == id {
		t.Fatalf("the first prefix's waiter %+v", w1)
	}
	if e, err := st.Evaluation(p1); err != nil || e.Status != StatusQueued || e.Base != commit(1) || e.Pipeline != "default.at-commit" {
		t.Fatalf("prefix 1's evaluation %d: %+v %v, want default.at-commit at %.12s, queued", p1, e, err, commit(1))
	}
	if e, _ := st.Evaluation(id); e.Status != "running" {
		t.Fatalf("evaluation %d is %s while its per-patch run waits, want running", id, e.Status)
	}
	jobs, err := s.engine.Jobs(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var perPatchJob, applyJob *rivertype.JobRow
	for _, j := range jobs {
		var a struct {
			EvaluationID int64 `json:"evaluation_id"`
		}
		json.Unmarshal(j.EncodedArgs, &a)
		switch {
		case j.Kind == "per_patch" && a.EvaluationID == id:
			perPatchJob = j
		case j.Kind == "apply" && a.EvaluationID == p1 && strings.Contains(strings.Join(j.Tags, " "), evalTag(p1)):
			applyJob = j
		}
	}
	if perPatchJob == nil || perPatchJob.State != rivertype.JobStateCompleted || applyJob == nil || applyJob.State != rivertype.JobStateAvailable {
		t.Fatalf("per_patch job %+v, prefix 1's apply job %+v: want the per_patch job completed and the prefix's evaluation queued as its stage jobs",
			perPatchJob, applyJob)
	}
	// A submission of the evaluation meanwhile does not queue it again:
	// its per-patch run is its unfinished work.
	err = s.db.Store.Tx(t.Context(), func(tx *store.Tx) error {
		waiting, err := s.perPatchWaitingTx(tx, id)
		if err == nil && !waiting {
			err = errors.New("the per-patch run does not count as waiting")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	prefixSamples(t, st, tr.repo, commit(1), p1)
	endPrefix(t, s, p1, nil)
	w2 := prefixWaiter(t, st, 2)
	p2 := w2.Prefix.EvaluationID
	if len(w2.Done) != 1 || w2.Done[0] != (perpatch.Prefix{K: 1, Commit: commit(1), EvaluationID: p1}) || p2 == p1 {
		t.Fatalf("the second prefix's waiter %+v", w2)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// The second process: prefix 2's kernel does not build.
	s, stop = seriesQueueOnly(t, cfg)
	defer s.Close()
	defer stop()
	buildErr := "build: kernel/signal.c: error: expected ';' before '}' token\nmore of the log"
	endPrefix(t, s, p2, &EvalEnd{Status: store.StatusFailed, Stage: "build", Error: buildErr, Kind: fail.KindFailed.String()})
	w3 := prefixWaiter(t, st, 3)
	p3 := w3.Prefix.EvaluationID
	if len(w3.Done) != 2 || w3.Done[1] != (perpatch.Prefix{K: 2, Commit: commit(2), EvaluationID: p2, Failed: buildErr}) {
		t.Fatalf("the third prefix's waiter %+v", w3)
	}
	prefixSamples(t, st, tr.repo, commit(3), p3)
	endPrefix(t, s, p3, nil)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		e, err := st.Evaluation(id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == store.StatusDone {
			break
		}
		if time.Now().After(deadline) {
			jobs, _ := s.engine.Jobs(t.Context(), 0, 1000)
			for _, j := range jobs {
				if len(j.Errors) > 0 {
					t.Logf("job %d %s %s: %+v", j.ID, j.Kind, j.State, j.Errors[len(j.Errors)-1].Error)
				}
			}
			t.Fatalf("evaluation %d is %s: the per-patch run did not end", id, e.Status)
		}
	}
	if ws, err := st.Waiters(PerPatchMeasuredArgs{}.Kind()); err != nil || len(ws) != 0 {
		t.Fatalf("waiters left: %+v %v", ws, err)
	}

	f, err := os.Open(filepath.Join(outDir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.ReadJSON(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if r.PerPatch == nil || len(r.PerPatch.Tables) != 1 {
		t.Fatalf("report.json per_patch: %+v", r.PerPatch)
	}
	if mv := r.PerPatch.Tables[0].Movers(); len(mv) != 1 || !strings.HasPrefix(mv[0], "3/4 (+25.0%") {
		t.Errorf("movers %v, want only 3/4 (+25.0%%)", mv)
	}
	// The in-job path's account of the same measurements.
	want, err := perpatch.Run(t.Context(), ser, perpatch.Options{PerPatch: true, Measurer: &fixedMeasurer{st: st,
		ids:  map[string]int64{commit(1): p1, commit(2): p2, commit(3): p3},
		errs: map[string]error{commit(2): fail.Failed(errors.New(buildErr))}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := roundTrip(t, r.PerPatch), roundTrip(t, want); got != want {
		t.Fatalf("per-patch section as the jobs recorded it:\n%s\nas the in-job path records it:\n%s", got, want)
	}
	if !strings.Contains(strings.Join(r.PerPatch.Notes, "\n"), "2/4 "+commit(2)[:12]+" does not build or boot") {
		t.Errorf("notes %q, want 2/4 left out", r.PerPatch.Notes)
	}
}

// roundTrip is pp as JSON, read and written again (as report.json keeps it).
func roundTrip(t *testing.T, pp *report.PerPatch) string {
	t.Helper()
	b, err := json.Marshal(pp)
	if err != nil {
		t.Fatal(err)
	}
	var back report.PerPatch
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b, err = json.MarshalIndent(&back, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPerPatchPrefixFailsInItsStageJobs: in a service working every
// queue, a prefix's evaluation runs as stage jobs of its own after the
// per_patch job ended: here the small test tree is no kernel, so each
// prefix's configure job fails its evaluation, and the per_patch_measured
// job its failure queues records the prefix as one whose kernel does not
// build and submits the next, as the in-job path (runner.Run in one
// process) records them; the evaluation is then done with the tables of
// its ends.
func TestPerPatchPrefixFailsInItsStageJobs(t *testing.T) {
	tr := newSeriesTree(t)
	root := t.TempDir()
	var n notified
	s, _ := testService(t, Config{Database: filepath.Join(root, "state", "patcheval.db"), CacheDir: filepath.Join(root, "cache"),
		From: testFrom, Notify: n.notify, Grace: 5 * time.Second})
	id := tr.evaluated(t, s, true)
	startPerPatch(t, s, id)
	for deadline := time.Now().Add(3 * time.Minute); !n.has(fmt.Sprintf("%d done", id)); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no done event; events %v", n.events)
		}
	}
	jobs, err := s.engine.Jobs(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]*rivertype.JobRow{}
	for _, j := range jobs {
		byKind[j.Kind] = append(byKind[j.Kind], j)
	}
	if len(byKind["per_patch"]) != 1 || len(byKind["per_patch_measured"]) != 3 || len(byKind["configure"]) != 3 {
		t.Fatalf("%d per_patch, %d per_patch_measured, %d configure jobs: want one, and three (a prefix each)", len(byKind["per_patch"]),
			len(byKind["per_patch_measured"]), len(byKind["configure"]))
	}
	pj := byKind["per_patch"][0]
	prefixes := map[int64]*rivertype.JobRow{} // the configure job of each prefix's evaluation
	for _, cj := range byKind["configure"] {
		var ca ConfigureArgs
		if err := json.Unmarshal(cj.EncodedArgs, &ca); err != nil {
			t.Fatal(err)
		}
		prefixes[ca.EvaluationID] = cj
	}
	for _, mj := range byKind["per_patch_measured"] {
		var ma PerPatchMeasuredArgs
		if err := json.Unmarshal(mj.EncodedArgs, &ma); err != nil || ma.EvaluationID != id || ma.End == nil ||
			ma.End.Status != store.StatusFailed || ma.End.Stage != "configure" {
			t.Fatalf("per_patch_measured job %s: want a prefix's failure in configure", mj.EncodedArgs)
		}
		cj := prefixes[ma.Prefix.EvaluationID]
		if cj == nil || cj.AttemptedAt == nil || mj.CreatedAt.Before(*cj.AttemptedAt) {
			t.Fatalf("per_patch_measured job %s: its prefix's configure job %+v did not run before it", mj.EncodedArgs, cj)
		}
		if ma.Prefix.K == 1 && (pj.FinalizedAt == nil || !pj.FinalizedAt.Before(*cj.AttemptedAt)) {
			t.Fatalf("per_patch finalized %v, prefix 1's configure attempted %v: the per_patch job did not wait for its prefix", pj.FinalizedAt, cj.AttemptedAt)
		}
	}
	if e, _ := s.Store().Evaluation(id); e.Status != store.StatusDone {
		t.Errorf("status %s, want done", e.Status)
	}
	f, err := os.Open(filepath.Join(s.OutDir(id), "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.ReadJSON(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}

	// The in-job path (runner.Run in one process) records the same.
	ref, err := store.Open(filepath.Join(t.TempDir(), "ref.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	rid := tr.evaluatedIn(t, ref, true)
	ser, err := perpatch.Load(ref, rid)
	if err != nil {
		t.Fatal(err)
	}
	at, err := perpatch.AtCommit(ser.Pipeline, perpatch.SeriesPairs(ser.Pipeline))
	if err != nil {
		t.Fatal(err)
	}
	want, err := perpatch.Run(t.Context(), ser, perpatch.Options{PerPatch: true, Measurer: &perpatch.RunnerMeasurer{
		Env: runner.Env{Store: ref, CacheDir: filepath.Join(root, "cache"), Jobs: 1}, Pipeline: at, Repo: ser.Repo, Boots: ser.Boots, OutDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	got := r.PerPatch
	if got == nil || len(got.Notes) != 3 || len(want.Notes) != 3 {
		t.Fatalf("per-patch section %+v, in-job %+v: want a note on each prefix", got, want)
	}
	// The notes quote the error, which the two drivers word apart (the
	// local loop's configure round, the configure job): the rest is the
	// same.
	for i := range got.Notes {
		prefix := fmt.Sprintf("%d/4 %s does not build or boot, left out of the tables: ", i+1, ser.Commits[i].Hash[:12])
		for _, note := range []string{got.Notes[i], want.Notes[i]} {
			if !strings.HasPrefix(note, prefix) || !strings.Contains(note, "cannot be configured on this tree") {
				t.Errorf("note %q, want %q... cannot be configured", note, prefix)
			}
		}
	}
	got.Notes, want.Notes = nil, nil
	if g, w := roundTrip(t, got), roundTrip(t, want); g != w {
		t.Fatalf("per-patch section as the jobs recorded it:\n%s\nas the in-job path records it:\n%s", g, w)
	}
}
