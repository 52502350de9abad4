package service

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/perpatch"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// plannedMeasurer is a series bisection's measurer whose measurements are
// evaluations (a bisect.Planner): its Plan is bisect.PipelineMeasurer's,
// so the service's stage graph runs each one; the small test tree is no
// kernel, so each evaluation fails in its configure job, and Measured
// stands for the kernel's samples with bench/getppid's number at the
// commit (what benchSamples gives, as gatedMeasurer's). Its measurements
// must not be made inside a job (MeasureNth, Measure).
type plannedMeasurer struct {
	bisect.PipelineMeasurer
	log *plannedLog
}

// plannedLog is what plannedMeasurers were asked, across the steps' jobs.
type plannedLog struct {
	mu       sync.Mutex
	measured []plannedRead
	boots    map[string]int // by commit, as planned
	inJob    atomic.Int32
}

// plannedRead is one Measured call: the evaluation read back and how it
// ended.
type plannedRead struct {
	commit string
	id     int64
	runErr error
}

func (m *plannedMeasurer) Plan(commit string, boots, n int) (*pipelines.Pipeline, runner.Options, error) {
	m.log.mu.Lock()
	if m.log.boots == nil {
		m.log.boots = map[string]int{}
	}
	m.log.boots[commit] = boots
	m.log.mu.Unlock()
	return m.PipelineMeasurer.Plan(commit, boots, n)
}

func (m *plannedMeasurer) Measure(ctx context.Context, commit string, boots int) (*bisect.Measurement, error) {
	m.log.inJob.Add(1)
	return nil, fail.Inputf("%.12s measured inside a job", commit)
}

func (m *plannedMeasurer) MeasureNth(ctx context.Context, commit string, boots, n int) (*bisect.Measurement, error) {
	return m.Measure(ctx, commit, boots)
}

func (m *plannedMeasurer) Measured(st *store.Store, p *pipelines.Pipeline, commit string, id int64, rep *report.Report, runErr error,
	took time.Duration) (*bisect.Measurement, error) {
	m.log.mu.Lock()
	m.log.measured = append(m.log.measured, plannedRead{commit, id, runErr})
	boots := m.log.boots[commit]
	m.log.mu.Unlock()
	e, err := st.Evaluation(id)
	if err != nil {
		return nil, err
	}
	if e.Base != commit {
		return nil, fail.Inputf("evaluation %d is of %.12s, not of %.12s", id, e.Base, commit)
	}
	ss, err := benchSamples(m.Repo, commit, m.Variant, boots)
	if err != nil {
		return nil, err
	}
	out := &bisect.Measurement{Unit: "ns", Built: true, BuildTime: time.Second}
	for _, s := range ss {
		out.Values = append(out.Values, s.Value)
	}
	return out, nil
}

// TestSeriesBisectionStepsRunAsStageJobs: with a measurer whose
// measurements are evaluations (a bisect.Planner, as serve's
// bisect.PipelineMeasurer), a series bisection's step does not measure in
// its job: series_bisect submits the measurement's evaluation to the
// stage graph and ends; the evaluation runs as stage jobs carrying its id
// (here its configure fails: the small tree is no kernel); the
// transaction that ends it queues the series_bisect_measured job waiting
// for it, which records the measurement and queues the next step. The
// first process works the coordinator's queues only and stops while a
// step waits for its evaluation (its configure not run): the waiter is
// in the database, and the second process, working every queue, runs the
// evaluation and records the measurement there. While the step waits,
// the bisection is running (asked again) and the evaluation is under way
// (submitted again, it is not queued again). The bisection names
// patch 3/4 with the same measurements, in the same order, as one whose
// measurements are made inside its jobs (gatedMeasurer).
func TestSeriesBisectionStepsRunAsStageJobs(t *testing.T) {
	root := t.TempDir()
	db := filepath.Join(root, "state", "patcheval.db")
	tr := newSeriesTree(t)
	var log plannedLog
	ms := SeriesMeasurers{Bisect: func(ser *perpatch.Series, at *pipelines.Pipeline, variant, benchmark, metric, outDir string) bisect.Measurer {
		return &plannedMeasurer{PipelineMeasurer: bisect.PipelineMeasurer{Pipeline: at, Variant: variant, Benchmark: benchmark, Metric: metric,
			Repo: ser.Repo, OutDir: outDir}, log: &log}
	}}
	toldc := make(chan string, 4)
	cfg := Config{Database: db, CacheDir: filepath.Join(root, "cache"), From: testFrom, Log: testWriter{t}, Grace: 5 * time.Second, Series: ms,
		SeriesBisected: func(_ context.Context, _ int64, requesters []string, text string) error {
			toldc <- strings.Join(requesters, " ") + ": " + text
			return nil
		}}

	// The first process: the coordinator's queues (series, apply, ...),
	// no build queue.
	first := cfg
	first.Work = &Capabilities{Coordinator: true, Cores: 1}
	s1, err := New(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx1, stop1 := context.WithCancel(t.Context())
	done1 := make(chan error, 1)
	go func() { done1 <- s1.Run(ctx1, ln) }()
	id := tr.evaluated(t, s1, false)
	if note, err := s1.BisectSeries(t.Context(), id, "a"); err != nil || !strings.Contains(note, "queued:") {
		t.Fatalf("BisectSeries: %q %v", note, err)
	}
	waiting := waitStepWaiter(t, s1, id, &log)
	// A step waits with its job ended: the bisection's evaluation has no
	// unfinished job, yet asking again finds the bisection running.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		jobs, err := s1.Engine().Jobs(t.Context(), id, 10, unfinished...)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the step's job did not end: %v", jobs)
		}
	}
	if note, err := s1.BisectSeries(t.Context(), id, "b"); err != nil || !strings.Contains(note, "already running") {
		t.Fatalf("asked again while a step waits for its evaluation: %q %v", note, err)
	}
	// Submitted again meanwhile, the evaluation is not queued again (as
	// while its step's job runs).
	p, err := pipelines.Default(tr.s, []string{"x86_64"})
	if err != nil {
		t.Fatal(err)
	}
	again, created, err := s1.submit(t.Context(), p, runner.Options{Mbox: tr.mbox, Tree: tr.repo, Base: tr.base, Boots: 3, From: testFrom}, nil)
	if err != nil || again != id || created {
		t.Fatalf("submitted again: evaluation %d (created %v) %v; want evaluation %d", again, created, err, id)
	}
	if jobs, err := s1.Engine().Jobs(t.Context(), id, 10, unfinished...); err != nil || len(jobs) != 0 {
		t.Fatalf("submitted again while a step waits: jobs %v %v; want none (not queued again)", jobs, err)
	}
	stop1()
	if err := <-done1; err != nil {
		t.Fatalf("first process: %v", err)
	}
	s1.Close()
	var wa SeriesBisectMeasuredArgs
	if err := json.Unmarshal(waiting.Args, &wa); err != nil || wa.EvaluationID != id || wa.Measurement != waiting.EvaluationID {
		t.Fatalf("waiter %+v (%s): want a step of evaluation %d's bisection", waiting, waiting.Args, id)
	}
	before, err := seriesBisectionIn(mustOpen(t, db), id)
	if err != nil || before == nil || before.Status != SeriesBisectRunning || before.Next == nil || *before.Next != wa.Need ||
		len(before.Records) != wa.Seq {
		t.Fatalf("bisection after the first process: %+v %v; want running, measuring %+v (step %d)", before, err, wa.Need, wa.Seq+1)
	}

	// The second process: every queue.
	s2, _ := testService(t, cfg)
	var told string
	select {
	case told = <-toldc:
	case <-time.After(3 * time.Minute):
		st, _ := s2.SeriesBisection(id)
		t.Fatalf("the bisection did not end; state %+v", st)
	}
	st, err := s2.SeriesBisection(id)
	if err != nil || st.Status != bisect.Found || st.Result == nil || st.Result.Patch != 3 || told != "a b: "+st.Text() {
		t.Fatalf("bisection %+v %v, told %q; want patch 3/4 found, a and b told", st, err, told)
	}
	if n := log.inJob.Load(); n > 0 {
		t.Fatalf("%d measurement(s) made inside a job", n)
	}
	if ws, err := s2.Store().Waiters(SeriesBisectMeasuredArgs{}.Kind()); err != nil || len(ws) != 0 {
		t.Fatalf("waiters left: %+v %v", ws, err)
	}

	// Each measurement not answered with the evaluation's own samples was
	// an evaluation of stage jobs, run after its step's job ended, and
	// recorded by the job its end queued.
	all, err := s2.Engine().Jobs(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	steps := map[int]*rivertype.JobRow{}
	configures := map[int64]*rivertype.JobRow{}
	var measured []SeriesBisectMeasuredArgs
	for _, j := range all {
		switch j.Kind {
		case SeriesBisectArgs{}.Kind():
			var a SeriesBisectArgs
			if json.Unmarshal(j.EncodedArgs, &a) == nil && a.EvaluationID == id && a.Gen == st.Gen {
				steps[a.Seq] = j
			}
		case ConfigureArgs{}.Kind():
			var a ConfigureArgs
			if json.Unmarshal(j.EncodedArgs, &a) != nil {
				continue
			}
			// The first to run.
			if c := configures[a.EvaluationID]; c == nil || j.AttemptedAt != nil && (c.AttemptedAt == nil || j.AttemptedAt.Before(*c.AttemptedAt)) {
				configures[a.EvaluationID] = j
			}
		case SeriesBisectMeasuredArgs{}.Kind():
			var a SeriesBisectMeasuredArgs
			if err := json.Unmarshal(j.EncodedArgs, &a); err != nil || j.State != rivertype.JobStateCompleted {
				t.Fatalf("series_bisect_measured %s %s: %v", j.State, j.EncodedArgs, err)
			}
			measured = append(measured, a)
		}
	}
	evaluated := 0
	for i, r := range st.Records {
		if r.Note != "measured before" {
			evaluated++
		}
		if i == wa.Seq && (r.Commit != wa.Need.Commit || r.N != wa.Need.N) {
			t.Errorf("record %d %+v: want the measurement the first process waited for, %+v", i, r, wa.Need)
		}
	}
	if evaluated < 2 || len(measured) != evaluated {
		t.Fatalf("%d series_bisect_measured job(s), %d measurement(s) not made before (of %d): want one each, at least 2", len(measured),
			evaluated, len(st.Records))
	}
	log.mu.Lock()
	reads := append([]plannedRead(nil), log.measured...)
	log.mu.Unlock()
	if len(reads) != len(measured) {
		t.Errorf("%d measurement(s) read back, %d recorded", len(reads), len(measured))
	}
	for _, r := range reads {
		if r.runErr == nil || !strings.Contains(r.runErr.Error(), "cannot be configured on this tree") {
			t.Errorf("evaluation %d of %.12s read back with %v: want its configure's failure", r.id, r.commit, r.runErr)
		}
	}
	for _, m := range measured {
		if m.End == nil || m.End.Status != store.StatusFailed || m.End.Stage != "configure" || m.Measurement == 0 {
			t.Errorf("series_bisect_measured %+v: want its evaluation's configure failure", m)
			continue
		}
		rec := st.Records[m.Seq]
		if rec.Commit != m.Need.Commit || rec.N != m.Need.N || len(rec.Values) == 0 {
			t.Errorf("record %d %+v: not the measurement of %+v", m.Seq, rec, m.Need)
		}
		step, conf := steps[m.Seq], configures[m.Measurement]
		if step == nil || conf == nil || conf.AttemptedAt == nil || step.State != rivertype.JobStateCompleted || step.FinalizedAt == nil ||
			!step.FinalizedAt.Before(*conf.AttemptedAt) {
			t.Errorf("step %d (job %+v) and its evaluation %d's configure (%+v): want the step ended before the configure ran", m.Seq+1, step,
				m.Measurement, conf)
		}
	}

	// The same bisection with its measurements made inside its jobs.
	ref := inJobSeriesBisection(t, tr)
	if len(ref.Records) != len(st.Records) || ref.Result.Patch != st.Result.Patch || ref.Result.Confirmed != st.Result.Confirmed ||
		ref.Result.Builds != st.Result.Builds {
		t.Fatalf("with the measurements in the jobs: %+v, %d records; as evaluations: %+v, %d records", ref.Result, len(ref.Records),
			st.Result, len(st.Records))
	}
	for i := range ref.Records {
		g, w := st.Records[i], ref.Records[i]
		if g.Commit != w.Commit || g.N != w.N || g.Boots != w.Boots || fmt.Sprint(g.Values) != fmt.Sprint(w.Values) || g.Failed != w.Failed {
			t.Errorf("record %d: %+v as an evaluation, %+v in the job", i, g, w)
		}
	}
}

// waitStepWaiter waits until a step of evaluation id's series bisection
// waits for its measurement's evaluation, and returns its waiter; a
// measurement made inside a job fails the test at once.
func waitStepWaiter(t *testing.T, s *Service, id int64, log *plannedLog) store.Waiter {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if n := log.inJob.Load(); n > 0 {
			t.Fatalf("%d measurement(s) made inside a series_bisect job", n)
		}
		ws, err := s.Store().Waiters(SeriesBisectMeasuredArgs{}.Kind())
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) == 1 {
			return *ws[0]
		}
		if time.Now().After(deadline) {
			st, _ := s.SeriesBisection(id)
			t.Fatalf("no step waits for its measurement's evaluation; waiters %+v, bisection %+v", ws, st)
		}
	}
}

// TestSeriesBisectionStepWaiterCancelled: an automatic bisection whose
// step waits for its measurement's evaluation, the bisection's
// evaluation cancelled meanwhile, goes no further: the measurement's
// evaluation is cancelled with it (nothing else waits for it), the
// waiter's job its end queues records nothing and queues nothing, the
// evaluation stays cancelled, and the bisection asked for again starts a
// new run (the waiter does not count as its job), as when its step's job
// was cancelled with the evaluation.
func TestSeriesBisectionStepWaiterCancelled(t *testing.T) {
	tr := newSeriesTree(t)
	var log plannedLog
	s, _ := testService(t, Config{Work: &Capabilities{Coordinator: true, Cores: 1},
		Series: SeriesMeasurers{Bisect: func(ser *perpatch.Series, at *pipelines.Pipeline, variant, benchmark, metric, outDir string) bisect.Measurer {
			return &plannedMeasurer{PipelineMeasurer: bisect.PipelineMeasurer{Pipeline: at, Variant: variant, Benchmark: benchmark, Metric: metric,
				Repo: ser.Repo, OutDir: outDir}, log: &log}
		}}})
	ctx := t.Context()
	id := tr.evaluated(t, s, false)
	// The evaluation waits for its bisection, as an automatic one's does.
	if err := s.setStatus(nil, id, "running"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BisectSeries(ctx, id, "a"); err != nil {
		t.Fatal(err)
	}
	w := waitStepWaiter(t, s, id, &log)
	before, err := s.SeriesBisection(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The measurement's evaluation, which nothing else waits for, is
	// cancelled with it (cancelTx); it used to be cancelled here by hand.
	if e, err := s.Store().Evaluation(w.EvaluationID); err != nil || e.Status != StatusCancelled {
		t.Fatalf("the measurement's evaluation %d: %+v %v, want cancelled with evaluation %d", w.EvaluationID, e, err, id)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		jobs, err := s.Engine().Jobs(ctx, id, 100)
		if err != nil {
			t.Fatal(err)
		}
		var m *rivertype.JobRow
		for _, j := range jobs {
			if j.Kind == (SeriesBisectMeasuredArgs{}).Kind() {
				m = j
			}
		}
		if m != nil && m.FinalizedAt != nil {
			if m.State != rivertype.JobStateCancelled {
				t.Fatalf("the waiter's job %s, want cancelled (its evaluation was)", m.State)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter's job was not cancelled: %+v", m)
		}
	}
	st, err := s.SeriesBisection(id)
	if err != nil || st.Gen != before.Gen || st.Status != SeriesBisectRunning || len(st.Records) != len(before.Records) {
		t.Fatalf("bisection %+v %v after the cancellations; want it as it was: %+v", st, err, before)
	}
	if e, err := s.Store().Evaluation(id); err != nil || e.Status != StatusCancelled {
		t.Fatalf("evaluation %+v %v, want cancelled", e, err)
	}
	log.mu.Lock()
	if len(log.measured) != 0 {
		t.Errorf("measurements read back: %+v", log.measured)
	}
	log.mu.Unlock()
	note, err := s.BisectSeries(ctx, id, "b")
	if st, _ := s.SeriesBisection(id); err != nil || !strings.Contains(note, "queued:") || st.Gen == before.Gen || st.DoneGen != 0 {
		t.Fatalf("asked again: %q %v, bisection %+v; want a new run that finishes nothing", note, err, st)
	}
}

// mustOpen opens the store at db for the test.
func mustOpen(t *testing.T, db string) *store.Store {
	t.Helper()
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// inJobSeriesBisection bisects tr's series in a service whose measurer
// measures inside the steps' jobs (gatedMeasurer, not waiting), and
// returns the bisection as it ended.
func inJobSeriesBisection(t *testing.T, tr *seriesTree) *SeriesBisectState {
	t.Helper()
	var mu sync.Mutex
	var measured []string
	release := make(chan struct{})
	close(release)
	var once sync.Once
	once.Do(func() {})
	gm := &gatedMeasurer{repo: tr.repo, once: &once, release: release, measured: &measured, mu: &mu}
	toldc := make(chan struct{}, 1)
	s, _ := testService(t, Config{
		Series: SeriesMeasurers{Bisect: func(*perpatch.Series, *pipelines.Pipeline, string, string, string, string) bisect.Measurer { return gm }},
		SeriesBisected: func(context.Context, int64, []string, string) error {
			toldc <- struct{}{}
			return nil
		}})
	id := tr.evaluated(t, s, false)
	if _, err := s.BisectSeries(t.Context(), id, "a"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-toldc:
	case <-time.After(time.Minute):
		t.Fatal("the in-job bisection did not end")
	}
	st, err := s.SeriesBisection(id)
	if err != nil || st.Result == nil {
		t.Fatalf("in-job bisection %+v %v", st, err)
	}
	return st
}
