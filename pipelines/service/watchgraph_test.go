package service

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/pipelines/store"
)

// backportMsgID is the bundled backport thread's cover letter: its
// series patches files the watch tests' small trees do not have, so it
// does not apply on any of their tags.
const backportMsgID = "20261102093000.4121-0-tester@example.org"

// seriesWatch adds watch name of r's v6.*-rc* tags that re-applies the
// backport series on each (the default pipeline, generated for it), and
// returns the store (open) and the watch.
func seriesWatch(t *testing.T, r *watchRemote, db, name string) (*store.Store, *store.Watch) {
	t.Helper()
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.AddWatch(store.Watch{Name: name, Remote: r.URL, Tags: "v6.*-rc*", Pipeline: "default", SeriesID: backportMsgID,
		Schedule: "@every 6h", Tree: r.local})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	return st, w
}

// jobsByKind lists every job in the database at db, by kind.
func jobsByKind(t *testing.T, db string) map[string][]*rivertype.JobRow {
	t.Helper()
	s, err := New(context.Background(), Config{Database: db})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	jobs, err := s.Engine().Jobs(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*rivertype.JobRow{}
	for _, j := range jobs {
		out[j.Kind] = append(out[j.Kind], j)
	}
	return out
}

// TestWatchRetestRunsAsStageJobs: through the watch queue (`watch
// run-now`'s path), a re-test's evaluation is the service's stage graph,
// not a runner.Run inside the re-test's job: the retest job submits the
// evaluation, marks the entry as evaluating it and ends before the
// evaluation does; the evaluation runs as stage jobs carrying its id
// (here its apply, which fails: the watch's series does not apply on
// the tag); the transaction that fails it queues the retested job
// waiting for it, which records the entry's result as a re-test in one
// process records it (the same error, naming the tag, compared with
// watch.Watcher.Tick's on a second database).
//
// It runs on SQLite and on a real PostgreSQL 15.
func TestWatchRetestRunsAsStageJobs(t *testing.T) { onBothDatabases(t, watchRetestStageJobs) }

func watchRetestStageJobs(t *testing.T, root, db string) {
	inbox := testinbox.Start(t, backport)
	r := newWatchRemote(t, root)
	r.tag("v6.2-rc1", r.commit("", 0, "1000"))
	out := filepath.Join(root, "watches")
	st, w := seriesWatch(t, r, db, "series")
	defer st.Close()
	cfg := Config{Database: db, CacheDir: filepath.Join(root, "cache"), Lore: inbox.URL, From: testFrom, Log: testWriter{t}, Grace: 5 * time.Second}
	watches := func(s *Service) WatchConfig {
		return WatchConfig{Eval: &watch.PipelineEvaluator{OutDir: out}}
	}
	run, err := RunWatchNow(t.Context(), cfg, watches, "series")
	if err != nil {
		t.Fatalf("run-now: %v", err)
	}
	if len(run.Failed) != 1 || !strings.HasPrefix(run.Failed[0], "v6.2-rc1: ") || !strings.Contains(run.Failed[0], "does not exist in the tree") {
		t.Fatalf("run-now: %+v, want v6.2-rc1 failed: the series does not apply", run)
	}
	tags, err := st.WatchTags(w.ID)
	if err != nil || len(tags) != 1 {
		t.Fatalf("tags %+v %v", tags, err)
	}
	tag := tags[0]
	if tag.Status != store.TagFailed || tag.EvaluationID == 0 || tag.ErrorKind != "failed" {
		t.Fatalf("entry %+v, want failed with its evaluation", tag)
	}
	e, err := st.Evaluation(tag.EvaluationID)
	if err != nil || e.Status != store.StatusFailed {
		t.Fatalf("evaluation %d: %+v %v, want failed", tag.EvaluationID, e, err)
	}

	jobs := jobsByKind(t, db)
	one := func(kind string) *rivertype.JobRow {
		t.Helper()
		if len(jobs[kind]) != 1 {
			t.Fatalf("%d %s job(s), want one; jobs: %v", len(jobs[kind]), kind, jobs)
		}
		return jobs[kind][0]
	}
	retest, apply, retested := one("retest"), one("apply"), one("retested")
	var aa ApplyArgs
	if err := json.Unmarshal(apply.EncodedArgs, &aa); err != nil || aa.EvaluationID != tag.EvaluationID ||
		!strings.Contains(strings.Join(apply.Tags, " "), evalTag(tag.EvaluationID)) {
		t.Fatalf("apply job %s %v: not the re-test's evaluation %d", apply.EncodedArgs, apply.Tags, tag.EvaluationID)
	}
	if retest.State != rivertype.JobStateCompleted || retested.State != rivertype.JobStateCompleted {
		t.Fatalf("retest %s, retested %s: want both completed", retest.State, retested.State)
	}
	// The re-test's job ended before its evaluation's apply started; the
	// retested job was queued when the evaluation had failed.
	if retest.FinalizedAt == nil || apply.AttemptedAt == nil || !retest.FinalizedAt.Before(*apply.AttemptedAt) {
		t.Fatalf("retest finalized %v, apply attempted %v: the re-test waited for its evaluation", retest.FinalizedAt, apply.AttemptedAt)
	}
	if apply.AttemptedAt != nil && retested.CreatedAt.Before(*apply.AttemptedAt) {
		t.Fatalf("retested queued at %v, before the apply ran (%v)", retested.CreatedAt, apply.AttemptedAt)
	}
	var ra RetestedArgs
	if err := json.Unmarshal(retested.EncodedArgs, &ra); err != nil || ra.EvaluationID != tag.EvaluationID || ra.End == nil ||
		ra.End.Status != store.StatusFailed || ra.End.Stage != "apply" {
		t.Fatalf("retested job %s: want the evaluation's failure in apply", retested.EncodedArgs)
	}
	if n, err := st.Waiters(RetestedArgs{}.Kind()); err != nil || len(n) != 0 {
		t.Fatalf("waiters left: %+v %v", n, err)
	}

	// The same re-test in one process (watch.Watcher.Tick, runner.Run)
	// records the same failure.
	ref := filepath.Join(t.TempDir(), "ref.db")
	rst, rw := seriesWatch(t, r, ref, "series")
	defer rst.Close()
	wr := &watch.Watcher{Store: rst, Eval: &watch.PipelineEvaluator{OutDir: t.TempDir(), Store: rst, Lore: inbox.URL, CacheDir: t.TempDir()}}
	if _, err := wr.Tick(t.Context(), rw); err != nil {
		t.Fatalf("in-process tick: %v", err)
	}
	rtags, err := rst.WatchTags(rw.ID)
	if err != nil || len(rtags) != 1 {
		t.Fatalf("in-process tags %+v %v", rtags, err)
	}
	if got, want := tag, rtags[0]; got.Status != want.Status || got.ErrorKind != want.ErrorKind || got.ErrorText != want.ErrorText ||
		got.Commit != want.Commit {
		t.Fatalf("entry as the jobs recorded it:\n%+v\nas a re-test in one process records it:\n%+v", got, want)
	}
}

// TestWatchRetestWaiterSurvivesRestart: the job that records a re-test's
// result is a waiter in the database, not in the process that submitted
// the evaluation. A process works only the watch queue: its re-test
// submits the evaluation and ends, and the process stops before any
// stage runs. A second process (`watch run-now`) finds the re-test
// waiting (its tick queues nothing), works the evaluation's stages, and
// the transaction that fails it queues the waiting job, which records
// the entry's result there.
func TestWatchRetestWaiterSurvivesRestart(t *testing.T) {
	root := t.TempDir()
	db := filepath.Join(root, "state", "patcheval.db")
	inbox := testinbox.Start(t, backport)
	r := newWatchRemote(t, root)
	r.tag("v6.2-rc1", r.commit("", 0, "1000"))
	out := filepath.Join(root, "watches")
	st, w := seriesWatch(t, r, db, "series")
	defer st.Close()
	cfg := Config{Database: db, CacheDir: filepath.Join(root, "cache"), Lore: inbox.URL, From: testFrom, Log: testWriter{t}, Grace: 5 * time.Second}
	watches := func(s *Service) WatchConfig {
		return WatchConfig{Eval: &watch.PipelineEvaluator{OutDir: out}}
	}

	// The first process: the watch queue only.
	ctx := t.Context()
	s, stop, tag := watchQueueOnly(t, cfg, watches, st, w)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ws, err := st.Waiters(RetestedArgs{}.Kind())
	if err != nil || len(ws) != 1 || ws[0].EvaluationID != tag.EvaluationID {
		t.Fatalf("waiters after the first process: %+v %v", ws, err)
	}
	if e, err := st.Evaluation(tag.EvaluationID); err != nil || e.Status != StatusQueued {
		t.Fatalf("evaluation %d after the first process: %+v %v, want queued", tag.EvaluationID, e, err)
	}

	// The second process.
	run, err := RunWatchNow(ctx, cfg, watches, "series")
	if err != nil {
		t.Fatalf("run-now: %v", err)
	}
	if len(run.Failed) != 1 || !strings.HasPrefix(run.Failed[0], "v6.2-rc1: ") || !strings.Contains(run.Failed[0], "does not exist in the tree") {
		t.Fatalf("run-now: %+v, want v6.2-rc1 failed: the series does not apply", run)
	}
	tags, err := st.WatchTags(w.ID)
	if err != nil || len(tags) != 1 || tags[0].Status != store.TagFailed || tags[0].EvaluationID != tag.EvaluationID {
		t.Fatalf("entry %+v %v, want failed with evaluation %d", tags, err, tag.EvaluationID)
	}
	jobs := jobsByKind(t, db)
	if len(jobs["retest"]) != 1 || len(jobs["retested"]) != 1 || len(jobs["watch_tick"]) != 2 {
		t.Fatalf("jobs %v: want one retest (the second tick queued none) and one retested", jobs)
	}
	if ws, err := st.Waiters(RetestedArgs{}.Kind()); err != nil || len(ws) != 0 {
		t.Fatalf("waiters left: %+v %v", ws, err)
	}
}

// watchQueueOnly starts a watch service on cfg that works only the
// watch queue, ticks watch w and returns when its re-test has submitted
// the evaluation of w's only entry (returned, as stored then), with the
// function that stops its jobs.
func watchQueueOnly(t *testing.T, cfg Config, watches func(*Service) WatchConfig, st *store.Store, w *store.Watch) (*Service, func() error, *store.WatchTag) {
	t.Helper()
	ctx := t.Context()
	s, own, err := watchService(ctx, cfg, watches)
	if err != nil || !own {
		t.Fatalf("watch service: %v (own %v)", err, own)
	}
	workers := river.NewWorkers()
	s.addWorkers(workers)
	if s.engine, err = newEngine(s.db, EngineConfig{Capabilities: AllLocal(1), Queues: []string{QueueWatch}, ID: s.workerID, Grace: time.Second}, workers); err != nil {
		t.Fatal(err)
	}
	stop, err := s.startJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TickWatch(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		tags, err := st.WatchTags(w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(tags) == 1 && tags[0].Status == store.TagRunning && tags[0].EvaluationID > 0 {
			return s, stop, tags[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the re-test did not submit its evaluation: %+v", tags)
		}
	}
}

// TestWatchRetestEvaluationCancelled: cancelling a re-test's evaluation
// ends it, and the transaction that records the cancellation queues the
// job waiting for it: the entry is recorded as an infrastructure failure
// (the next tick re-tests it), and the watch's ticks queue re-tests
// again.
func TestWatchRetestEvaluationCancelled(t *testing.T) {
	root := t.TempDir()
	db := filepath.Join(root, "state", "patcheval.db")
	inbox := testinbox.Start(t, backport)
	r := newWatchRemote(t, root)
	r.tag("v6.2-rc1", r.commit("", 0, "1000"))
	st, w := seriesWatch(t, r, db, "series")
	defer st.Close()
	cfg := Config{Database: db, CacheDir: filepath.Join(root, "cache"), Lore: inbox.URL, From: testFrom, Log: testWriter{t}, Grace: 5 * time.Second}
	watches := func(s *Service) WatchConfig {
		return WatchConfig{Eval: &watch.PipelineEvaluator{OutDir: filepath.Join(root, "watches")}}
	}
	s, stop, tag := watchQueueOnly(t, cfg, watches, st, w)
	defer s.Close()
	defer stop()
	if err := s.Cancel(t.Context(), tag.EvaluationID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		cur, err := st.WatchTag(tag.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Status == store.TagInfra {
			if cur.EvaluationID != tag.EvaluationID || !strings.Contains(cur.ErrorText, "was cancelled") {
				t.Fatalf("entry %+v, want the cancellation of evaluation %d", cur, tag.EvaluationID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("entry %+v: the cancellation was not recorded", cur)
		}
	}
	if ws, err := st.Waiters(RetestedArgs{}.Kind()); err != nil || len(ws) != 0 {
		t.Fatalf("waiters left: %+v %v", ws, err)
	}
	if n, err := s.retestsWaiting(w.ID); err != nil || n != 0 {
		t.Fatalf("re-tests waiting: %d %v", n, err)
	}
}

// TestWatchBisectionStepsRunAsStageJobs: with the bisection's own
// measurer (bisect.PipelineMeasurer, a bisect.Planner), a watch
// bisection's measurement is an evaluation of the service's stage graph:
// the bisect_step job submits it and ends, the evaluation runs as stage
// jobs carrying its id, and the bisect_measured job its end queues
// records the measurement on the event. Here the commits of the small
// test tree are no kernel, so the first measurement's evaluation (of the
// good end) fails in its configure job, and the bisection ends as
// failed with the reason.
func TestWatchBisectionStepsRunAsStageJobs(t *testing.T) {
	root := t.TempDir()
	db := filepath.Join(root, "state", "patcheval.db")
	r := newWatchRemote(t, root)
	rc1 := r.commit("", 0, "1000")
	r.tag("v6.2-rc1", rc1)
	st, w := r.addWatch(db, "mainline", true)
	defer st.Close()
	ws := &testWatchSpec{Log: filepath.Join(root, "watch.log"), Out: filepath.Join(root, "watches")}
	watches := func(s *Service) WatchConfig {
		c := ws.config(s)
		c.Bisection.NewMeasurer = nil // the pipeline's measurer (a bisect.Planner)
		return c
	}
	cfg := Config{Database: db, CacheDir: filepath.Join(root, "cache"), From: testFrom, Log: testWriter{t}, Grace: 5 * time.Second}
	if _, err := RunWatchNow(t.Context(), cfg, watches, "mainline"); err != nil {
		t.Fatal(err)
	}
	commits := r.regression(rc1, 4, 3, 0)
	r.tag("v6.2-rc2", commits[3])
	if _, err := RunWatchNow(t.Context(), cfg, watches, "mainline"); err != nil {
		t.Fatal(err)
	}
	evs, err := st.WatchEvents(w.ID)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events %+v %v", evs, err)
	}
	var bs watch.BisectState
	if err := json.Unmarshal(evs[0].Bisect, &bs); err != nil {
		t.Fatal(err)
	}
	t.Logf("bisection: %s", evs[0].Bisect)
	if bs.Status != watch.BisectFailed || len(bs.Records) != 0 || !strings.Contains(bs.Error, "cannot be configured on this tree") {
		t.Fatalf("bisection %s %q, %d records: want failed: the good end cannot be configured", bs.Status, bs.Error, len(bs.Records))
	}
	jobs := jobsByKind(t, db)
	if len(jobs["bisect_measured"]) != 1 || len(jobs["bisect_step"]) != 1 {
		t.Fatalf("%d bisect_measured, %d bisect_step jobs: want one each", len(jobs["bisect_measured"]), len(jobs["bisect_step"]))
	}
	var ma BisectMeasuredArgs
	step, m := jobs["bisect_step"][0], jobs["bisect_measured"][0]
	if err := json.Unmarshal(m.EncodedArgs, &ma); err != nil || ma.EvaluationID == 0 || ma.End == nil || ma.End.Status != store.StatusFailed ||
		ma.End.Stage != "configure" || ma.Need.Commit != rc1 {
		t.Fatalf("bisect_measured %s: want the configure failure of the good end's evaluation", m.EncodedArgs)
	}
	var configure *rivertype.JobRow
	for _, j := range jobs["configure"] {
		var ca ConfigureArgs
		if json.Unmarshal(j.EncodedArgs, &ca) == nil && ca.EvaluationID == ma.EvaluationID {
			configure = j
		}
	}
	if configure == nil || configure.AttemptedAt == nil {
		t.Fatalf("no configure job of the measurement's evaluation %d: %v", ma.EvaluationID, jobs)
	}
	// The step's job ended before its evaluation's stages ran.
	if step.State != rivertype.JobStateCompleted || step.FinalizedAt == nil || !step.FinalizedAt.Before(*configure.AttemptedAt) {
		t.Fatalf("bisect_step %s finalized %v, configure attempted %v: the step waited for its evaluation", step.State, step.FinalizedAt, configure.AttemptedAt)
	}
	if n, err := st.Waiters(BisectMeasuredArgs{}.Kind()); err != nil || len(n) != 0 {
		t.Fatalf("waiters left: %+v %v", n, err)
	}
}
