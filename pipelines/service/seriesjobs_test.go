package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/internal/testpg"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/perpatch"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// seriesTree is a small real git tree and a 4-patch series of it made
// with git format-patch: patch 3 raises bench/getppid from 1000 to 1250
// (what the kernels measure in these tests: benchValue), the others
// touch C files only.
type seriesTree struct {
	repo, base string
	mbox       []byte
	s          *series.Series
}

func newSeriesTree(t *testing.T) *seriesTree {
	t.Helper()
	repo := testgit.InitBare(t, filepath.Join(t.TempDir(), "linux.git"))
	base := testgit.Commit(t, repo, "", "base", "2026-11-02T09:00:00Z", map[string]string{
		"bench/getppid": "1000\n", "kernel/sys.c": "/* sys */\n", "kernel/signal.c": "/* signal */\n", "mm/slab.c": "/* slab */\n", "Makefile": "all:\n"})
	parent := base
	for i, f := range []string{"kernel/sys.c", "kernel/signal.c", "bench/getppid", "mm/slab.c"} {
		content := fmt.Sprintf("/* change %d */\n", i+1)
		if f == "bench/getppid" {
			content = "1250\n"
		}
		parent = testgit.Commit(t, repo, parent, fmt.Sprintf("sys: step %d of the series", i+1), fmt.Sprintf("2026-11-02T10:%02d:00Z", i),
			map[string]string{f: content})
	}
	env := append(testgit.Identity("2026-11-02T11:00:00Z"), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	mb := testgit.Git(t, env, nil, "--git-dir="+repo, "format-patch", "--stdout", "--thread=shallow", "--cover-letter",
		"--from=Patch Author <author@patcheval.invalid>", "--to=test@example.org", base+".."+parent)
	mb = strings.ReplaceAll(mb, "*** SUBJECT HERE ***", "sys: a series of four")
	mb = strings.ReplaceAll(mb, "*** BLURB HERE ***", "Four patches.")
	data := []byte(mb + "\n")
	msgs, err := mbox.ParseBytes(data, "series.mbox")
	if err != nil {
		t.Fatal(err)
	}
	s, err := series.Resolve(mbox.NewThread(msgs, "series.mbox"), series.Options{})
	if err != nil || len(s.Patches) != 4 {
		t.Fatalf("resolve: %v", err)
	}
	return &seriesTree{repo: repo, base: base, mbox: data, s: s}
}

// benchValue is what a kernel at commit measures: bench/getppid's number.
func benchValue(repo, commit string) (float64, error) {
	b, err := testgit.Blob(repo, commit, "bench/getppid")
	if err != nil {
		return 0, fail.Infraf("%s: %v", commit, err)
	}
	return strconv.ParseFloat(strings.TrimSpace(b), 64)
}

// benchSamples are boots deterministic samples of variant at commit.
func benchSamples(repo, commit, variant string, boots int) ([]evaluate.Sample, error) {
	v, err := benchValue(repo, commit)
	if err != nil {
		return nil, err
	}
	var out []evaluate.Sample
	for b := 0; b < boots; b++ {
		out = append(out, evaluate.Sample{Variant: variant, Boot: b, Benchmark: "getppid", Metric: "ns/op", Unit: "ns",
			Value: v * (1 + 0.0001*float64(b%3)), Deterministic: true})
	}
	return out, nil
}

// evaluated stores a finished whole-series evaluation of the default
// pipeline (x86_64, base vs patched) in s as the stages would: submitted
// and applied by the runner, the boots' samples read from the tree, and
// report.json in the service's output directory. It returns its id.
func (st *seriesTree) evaluated(t *testing.T, s *Service, perPatch bool) int64 {
	t.Helper()
	id := st.evaluatedIn(t, s.Store(), perPatch)
	st.writeReport(t, s.Store(), id, s.OutDir(id))
	return id
}

// evaluatedIn is evaluated without the report, in the store st.
func (st *seriesTree) evaluatedIn(t *testing.T, db *store.Store, perPatch bool) int64 {
	t.Helper()
	ctx := context.Background()
	p, err := pipelines.Default(st.s, []string{"x86_64"})
	if err != nil {
		t.Fatal(err)
	}
	env := runner.Env{Store: db}
	id, _, err := runner.Submit(ctx, env, p, runner.Options{Mbox: st.mbox, Tree: st.repo, Base: st.base, Boots: 3, PerPatch: perPatch,
		From: mbox.Address{Name: "Kernel Tester", Email: "tester@example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Apply(ctx, env, id); err != nil {
		t.Fatal(err)
	}
	a, err := db.AppliedOf(id)
	if err != nil || a == nil || len(a.Commits) != 4 {
		t.Fatalf("applied: %+v %v", a, err)
	}
	for b := 0; b < 3; b++ {
		for _, v := range []struct{ name, commit string }{{"base", st.base}, {"patched", a.Head}} {
			ss, err := benchSamples(st.repo, v.commit, v.name, 3)
			if err != nil {
				t.Fatal(err)
			}
			ss = ss[b : b+1]
			ss[0].Boot = b
			run, err := db.BeginRun(id, v.name, b)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.FinishRun(run, store.RunOK, evaluate.Environment{Target: "qemu", Deterministic: true}, nil, ss); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.SetEvaluationStatus(id, store.StatusDone); err != nil {
		t.Fatal(err)
	}
	return id
}

// writeReport writes evaluation id's report.json into dir as the report
// stage would (the whole-series comparison only).
func (st *seriesTree) writeReport(t *testing.T, db *store.Store, id int64, dir string) {
	t.Helper()
	all, err := db.Samples(id)
	if err != nil {
		t.Fatal(err)
	}
	r := &report.Report{Title: "default", ID: fmt.Sprintf("default-%d", id), Generated: time.Now().UTC(), Arch: "x86_64",
		Variants: []report.Variant{{Name: "base", Boots: 3}, {Name: "patched", Boots: 3}}}
	if err := r.AddResults(all, report.Spec{Comparisons: []report.Pair{{Base: "base", Other: "patched"}}}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := report.WriteJSON(f, r); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// treeMeasurer is the per-patch measurer of these tests: the kernels
// stand for bench/getppid's number at the commit. Each prefix is a
// stored evaluation of st (when set), as the runner's are.
type treeMeasurer struct {
	repo     string
	st       *store.Store
	mu       sync.Mutex
	measured []string
}

func (m *treeMeasurer) Measure(ctx context.Context, commit string) ([]evaluate.Sample, int64, error) {
	m.mu.Lock()
	m.measured = append(m.measured, commit)
	m.mu.Unlock()
	ss, err := benchSamples(m.repo, commit, "patched", 3)
	if err != nil || m.st == nil {
		return ss, 0, err
	}
	e, _, err := m.st.CreateOrResumeEvaluation(store.Key("at-commit", commit), store.EvaluationMeta{Pipeline: "default.at-commit", Base: commit})
	if err != nil {
		return nil, 0, err
	}
	for _, sm := range ss {
		run, err := m.st.BeginRun(e.ID, sm.Variant, sm.Boot)
		if err != nil {
			return nil, e.ID, err
		}
		if err := m.st.FinishRun(run, store.RunOK, evaluate.Environment{Deterministic: true}, nil, []evaluate.Sample{sm}); err != nil {
			return nil, e.ID, err
		}
	}
	return ss, e.ID, m.st.SetEvaluationStatus(e.ID, store.StatusDone)
}

// notified collects Config.Notify's events.
type notified struct {
	mu     sync.Mutex
	events []string
}

func (n *notified) notify(ctx context.Context, id int64, event string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, fmt.Sprintf("%d %s", id, event))
	return nil
}

func (n *notified) has(e string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range n.events {
		if x == e {
			return true
		}
	}
	return false
}

// TestServePerPatch: an evaluation submitted with per_patch is measured
// after each patch by the per_patch job that follows its report (the
// evaluation stays running meanwhile), the reports are written again with
// the per-patch table, the dashboard shows it, and only then is Notify
// told the evaluation is done.
func TestServePerPatch(t *testing.T) {
	tr := newSeriesTree(t)
	m := &treeMeasurer{repo: tr.repo}
	var n notified
	s, base := testService(t, Config{Notify: n.notify, Series: SeriesMeasurers{
		PerPatch: func(_ *perpatch.Series, _ *pipelines.Pipeline, _ string) perpatch.Measurer { return m }}})
	id := tr.evaluated(t, s, true)
	ctx := context.Background()
	// The end of the report stage: what follows it, in its transaction.
	end := mustEnd(t, s, id)
	err := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := s.setStatus(tx, id, store.StatusDone); err != nil {
			return err
		}
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
	if e, _ := s.Store().Evaluation(id); e.Status != "running" {
		t.Errorf("status after the report with a per-patch run to come: %s, want running", e.Status)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !n.has(fmt.Sprintf("%d done", id)) {
		if time.Now().After(deadline) {
			t.Fatalf("no done event; events %v", n.events)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if e, _ := s.Store().Evaluation(id); e.Status != store.StatusDone {
		t.Errorf("status: %s, want done", e.Status)
	}
	if len(m.measured) != 3 {
		t.Errorf("measured %d prefixes, want 3 (1/4..3/4; the ends are the evaluation's)", len(m.measured))
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
	if r.PerPatch == nil || len(r.PerPatch.Tables) != 1 {
		t.Fatalf("report.json per_patch: %+v", r.PerPatch)
	}
	if mv := r.PerPatch.Tables[0].Movers(); len(mv) != 1 || !strings.HasPrefix(mv[0], "3/4 (+25.0%") {
		t.Errorf("movers %v, want only 3/4 (+25.0%%)", mv)
	}
	md, _ := os.ReadFile(filepath.Join(s.OutDir(id), "report.md"))
	if !strings.Contains(string(md), "3/4") {
		t.Errorf("report.md has no per-patch section:\n%s", md)
	}
	resp, err := http.Get(base + "/evaluations/" + itoa(id))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`id="per-patch"`, "moved by: 3/4 (&#43;25.0%", "2/4 → 3/4", "sys: step 3 of the series"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the evaluation page lacks %q:\n%s", want, page[strings.Index(string(page), "Per patch"):][:1500])
		}
	}
	// Without per_patch the report is followed by the done event at once.
	id2 := tr.evaluated(t, s, false)
	end = mustEnd(t, s, id2)
	err = s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		next, err := s.afterReport(ctx, tx, id2, 1, end)
		if err == nil && (len(next) != 1 || next[0].Args.Kind() != (NotifyArgs{}).Kind()) {
			err = fmt.Errorf("after the report without per_patch: %v, want the done notification", next)
		}
		return err
	})
	if err != nil {
		t.Error(err)
	}
}

// testSeriesSpec configures the series bisections of a test serve
// process: the measurer reads bench/getppid at the commit instead of
// building and booting a kernel, and appends what it does to Log, one
// line each, so the test sees every measurement across processes. The
// BlockAt-th measurement this process starts never ends (the test kills
// the process there).
type testSeriesSpec struct {
	Log     string
	BlockAt int
}

func (ss *testSeriesSpec) logLine(format string, a ...any) {
	f, err := os.OpenFile(ss.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	fmt.Fprintf(f, format+"\n", a...)
}

func (ss *testSeriesSpec) measurers() SeriesMeasurers {
	started := 0 // across the jobs of this process
	var mu sync.Mutex
	return SeriesMeasurers{Bisect: func(s *perpatch.Series, _ *pipelines.Pipeline, _, _, _, _ string) bisect.Measurer {
		return &seriesStepMeasurer{spec: ss, repo: s.Repo, started: &started, mu: &mu}
	}}
}

type seriesStepMeasurer struct {
	spec    *testSeriesSpec
	repo    string
	mu      *sync.Mutex
	started *int
}

func (m *seriesStepMeasurer) Measure(ctx context.Context, commit string, boots int) (*bisect.Measurement, error) {
	return nil, fail.Infraf("the service must say which measurement of %s it makes (MeasureNth)", commit)
}

func (m *seriesStepMeasurer) MeasureNth(ctx context.Context, commit string, boots, n int) (*bisect.Measurement, error) {
	m.mu.Lock()
	*m.started++
	block := *m.started == m.spec.BlockAt
	m.mu.Unlock()
	m.spec.logLine("start %d %s %d", os.Getpid(), commit, n)
	if block {
		<-ctx.Done() // killed here
		return nil, ctx.Err()
	}
	ss, err := benchSamples(m.repo, commit, "patched", boots)
	if err != nil {
		return nil, err
	}
	out := &bisect.Measurement{Unit: "ns", Built: n == 0, BuildTime: time.Second}
	for _, s := range ss {
		out.Values = append(out.Values, s.Value)
	}
	m.spec.logLine("done %s %d %g", commit, n, out.Values[0])
	return out, nil
}

// TestServeSeriesBisectSurvivesKill: a bisection inside a series asked
// for over the API runs as series_bisect jobs in a real serve process
// (SQLite, River). The serve is killed with SIGKILL in the middle of the
// bisection's second measurement and started again on the same
// database: the bisection goes on from that step (the measurement made
// before is not made again; the interrupted one is made again as the
// same measurement), names patch 3/4, confirmed, and the dashboard and
// the API show it.
func TestServeSeriesBisectSurvivesKill(t *testing.T) {
	root := t.TempDir()
	db := filepath.Join(root, "state", "patcheval.db")
	if err := os.MkdirAll(filepath.Dir(db), 0o755); err != nil {
		t.Fatal(err)
	}
	tr := newSeriesTree(t)
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	id := tr.evaluatedIn(t, st, false)
	st.Close()
	logPath := filepath.Join(root, "series.log")
	spec := func(blockAt int) string {
		b, _ := json.Marshal(map[string]any{"DB": db, "Tree": filepath.Dir(tr.repo), "Cache": t.TempDir(), "State": filepath.Join(root, "state"),
			"Series": testSeriesSpec{Log: logPath, BlockAt: blockAt}})
		return string(b)
	}
	state := func(base string) *SeriesBisectState {
		code, e, raw := call(t, "GET", base+"/api/v1/evaluations/"+itoa(id), "", nil)
		if code != 200 {
			t.Fatalf("GET evaluation: %d %+v", code, e)
		}
		var r EvaluationResponse
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		return r.SeriesBisection
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(logPath)
				t.Fatalf("timed out waiting for %s; log:\n%s", what, log)
			}
		}
	}
	starts := func() []string { return logLinesOf(logPath, "start ") }

	srv := startServe(t, spec(2))
	code, e, raw := call(t, "POST", srv.base+"/api/v1/evaluations/"+itoa(id)+"/bisect", "", nil)
	if code != 202 {
		t.Fatalf("POST bisect: %d %+v %s", code, e, raw)
	}
	var br BisectResponse
	if err := json.Unmarshal(raw, &br); err != nil || !strings.Contains(br.Note, "queued") || br.SeriesBisection == nil ||
		br.SeriesBisection.Benchmark != "getppid" {
		t.Fatalf("POST bisect answered %s (%v)", raw, err)
	}
	waitFor("the second measurement", func() bool { return len(starts()) >= 2 })
	if bs := state(srv.base); bs == nil || bs.Status != SeriesBisectRunning || bs.Next == nil || len(bs.Records) == 0 {
		t.Fatalf("bisection before the kill: %+v", bs)
	}
	srv.cmd.Process.Signal(syscall.SIGKILL)
	<-srv.done
	killed := starts()[1]

	srv = startServe(t, spec(0))
	var bs *SeriesBisectState
	waitFor("the bisection to end", func() bool { bs = state(srv.base); return bs != nil && bs.Ended() })
	all := starts()
	t.Logf("measurements:\n%s", strings.Join(all, "\n"))
	f, g := strings.Fields(killed), strings.Fields(all[2])
	if f[1] == g[1] || f[2] != g[2] || f[3] != g[3] {
		t.Fatalf("after the restart the first measurement was %q, want the interrupted one %q again (in the new process)", all[2], killed)
	}
	done := logLinesOf(logPath, "done ")
	seen := map[string]bool{}
	for _, d := range done {
		k := strings.Join(strings.Fields(d)[1:3], " ")
		if seen[k] {
			t.Fatalf("measurement %s made twice:\n%s", k, strings.Join(done, "\n"))
		}
		seen[k] = true
	}
	if len(all) != len(done)+1 {
		t.Fatalf("%d measurements finished, %d started: only the interrupted one may start twice", len(done), len(all))
	}
	if bs.Status != bisect.Found || bs.Result == nil || bs.Result.Patch != 3 || bs.Result.Patches != 4 || !bs.Result.Confirmed {
		t.Fatalf("bisection %s: %+v; want patch 3/4, confirmed", bs.Status, bs.Result)
	}
	if bs.Result.Builds > bisect.Bound(4) {
		t.Errorf("%d builds, bound %d", bs.Result.Builds, bisect.Bound(4))
	}
	// Asking again answers with the result; nothing is queued.
	code, _, raw = call(t, "POST", srv.base+"/api/v1/evaluations/"+itoa(id)+"/bisect", "", nil)
	if err := json.Unmarshal(raw, &br); err != nil || code != 202 || !strings.Contains(br.Note, "patch 3/4") {
		t.Errorf("POST bisect again: %d %s", code, raw)
	}
	resp, err := http.Get(srv.base + "/evaluations/" + itoa(id))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `id="series-bisection"`) || !strings.Contains(string(page), "patch 3/4") {
		t.Errorf("the evaluation page does not show the bisection")
	}
	// The steps were jobs of the series queue.
	_, _, raw = call(t, "GET", srv.base+"/api/v1/jobs", "", nil)
	var jobs struct{ Jobs []Job }
	json.Unmarshal(raw, &jobs)
	n := 0
	for _, j := range jobs.Jobs {
		if j.Queue == QueueSeries && j.Kind == (SeriesBisectArgs{}).Kind() {
			n++
		}
	}
	if n != len(bs.Records)+1 {
		t.Errorf("%d series_bisect jobs, want one per measurement and the last step's (%d)", n, len(bs.Records)+1)
	}
}

// TestServeAutoBisect: with SeriesBisect, an evaluation submitted with
// per_patch whose whole series regresses goes report -> per_patch ->
// series_bisect steps, staying running; only when the bisection has
// named the patch is it done and Notify told, and its reports (the reply
// draft too) carry the per-patch table and the patch.
func TestServeAutoBisect(t *testing.T) {
	tr := newSeriesTree(t)
	spec := &testSeriesSpec{Log: filepath.Join(t.TempDir(), "series.log")}
	ms := spec.measurers()
	m := &treeMeasurer{repo: tr.repo}
	ms.PerPatch = func(_ *perpatch.Series, _ *pipelines.Pipeline, _ string) perpatch.Measurer { return m }
	var n notified
	var s *Service
	// What the bots would post: the report as it is when Notify hears
	// "done".
	var atDone *report.Report
	notify := func(ctx context.Context, id int64, event string) error {
		if event == EventDone {
			if f, err := os.Open(filepath.Join(s.OutDir(id), "report.json")); err == nil {
				atDone, _ = report.ReadJSON(f)
				f.Close()
			}
		}
		return n.notify(ctx, id, event)
	}
	s, _ = testService(t, Config{Notify: notify, Series: ms, SeriesBisect: true, From: testFrom})
	m.st = s.Store()
	id := tr.evaluated(t, s, true)
	ctx := context.Background()
	end := mustEnd(t, s, id)
	err := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		next, err := s.afterReport(ctx, tx, id, 1, end)
		if err != nil {
			return err
		}
		return s.engine.insertManyTx(ctx, tx, next)
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !n.has(fmt.Sprintf("%d done", id)) {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(spec.Log)
			t.Fatalf("no done event; events %v; measurements:\n%s", n.events, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if atDone == nil || atDone.PerPatch == nil || atDone.PerPatch.Bisection == nil || len(atDone.PerPatch.Tables) != 1 {
		t.Fatalf("the report when Notify heard done: %+v; want the per-patch table and the bisection", atDone)
	}
	if e, _ := s.Store().Evaluation(id); e.Status != store.StatusDone {
		t.Errorf("status %s, want done", e.Status)
	}
	bs, err := s.SeriesBisection(id)
	if err != nil || bs == nil || bs.Status != bisect.Found || bs.Result == nil || bs.Result.Patch != 3 || bs.DoneGen != 1 {
		t.Fatalf("bisection %+v %v; want patch 3 found, finishing generation 1", bs, err)
	}
	f, err := os.Open(filepath.Join(s.OutDir(id), "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.ReadJSON(f)
	f.Close()
	if err != nil || r.PerPatch == nil || len(r.PerPatch.Tables) != 1 || r.PerPatch.Bisection == nil || r.PerPatch.Bisection.Patch != 3 {
		t.Fatalf("report.json per_patch: %+v %v", r.PerPatch, err)
	}
	// The bisection took the per-patch run's samples for its first look
	// at each patch: it measured only the confirmation (the culprit and
	// its parent again).
	starts := logLinesOf(spec.Log, "start ")
	if len(starts) != 2 || !strings.HasSuffix(starts[0], " 1") || !strings.HasSuffix(starts[1], " 1") {
		t.Errorf("the bisection measured %q; want only the two confirmations (measurement 1 of 2/4 and 3/4)", starts)
	}
	eml, _ := os.ReadFile(filepath.Join(s.OutDir(id), "reply.eml"))
	if !strings.Contains(string(eml), "patch 3/4") {
		t.Errorf("the reply draft does not name the patch:\n%s", eml)
	}
	// Not a second time.
	if pl, err := s.autoPlan(id); err != nil || pl != nil {
		t.Errorf("a second automatic bisection of the same evaluation planned: %+v %v", pl, err)
	}
	err = s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		if st, err := s.autoBisection(tx, id, &perpatch.Bisection{}); err != nil || st != nil {
			t.Errorf("a second automatic bisection of the same evaluation: %+v %v", st, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// mustEnd is s.readEnd(id).
func mustEnd(t *testing.T, s *Service, id int64) evalEnd {
	t.Helper()
	end, err := s.readEnd(id)
	if err != nil {
		t.Fatal(err)
	}
	return end
}

// A bisection whose jobs were cancelled (with its evaluation) is started
// again when asked for; one whose jobs are still queued gains the new
// requester instead.
func TestBisectSeriesAfterCancel(t *testing.T) {
	tr := newSeriesTree(t)
	// Nothing measures here: the service works the x86_64 builds only.
	s, _ := testService(t, Config{Work: &Capabilities{Build: []string{"x86_64"}, Cores: 1}})
	id := tr.evaluated(t, s, false)
	ctx := context.Background()
	if _, err := s.BisectSeries(ctx, id, "a"); err != nil {
		t.Fatal(err)
	}
	first, _ := s.SeriesBisection(id)
	note, err := s.BisectSeries(ctx, id, "b")
	if st, _ := s.SeriesBisection(id); err != nil || !strings.Contains(note, "already queued") || st.Gen != first.Gen ||
		strings.Join(st.Requesters, " ") != "a b" {
		t.Fatalf("asked again while queued: %q %v, state %+v", note, err, st)
	}
	if _, err := s.engine.CancelEvaluation(ctx, id); err != nil {
		t.Fatal(err)
	}
	note, err = s.BisectSeries(ctx, id, "c")
	st, _ := s.SeriesBisection(id)
	if err != nil || !strings.Contains(note, "queued:") || st.Gen == first.Gen || st.Status != SeriesBisectQueued ||
		strings.Join(st.Requesters, " ") != "c" {
		t.Fatalf("asked again after the cancel: %q %v, state %+v", note, err, st)
	}
}

// gatedMeasurer is a series bisection's measurer whose first
// measurement waits: it says on started that it began, and ends when
// release is closed.
type gatedMeasurer struct {
	repo     string
	once     *sync.Once
	started  chan struct{}
	release  chan struct{}
	measured *[]string // "commit n" of each measurement made
	mu       *sync.Mutex
}

func (m *gatedMeasurer) Measure(ctx context.Context, commit string, boots int) (*bisect.Measurement, error) {
	return nil, fail.Infraf("the service must say which measurement of %s it makes (MeasureNth)", commit)
}

func (m *gatedMeasurer) MeasureNth(ctx context.Context, commit string, boots, n int) (*bisect.Measurement, error) {
	first := false
	m.once.Do(func() { first = true })
	if first {
		close(m.started)
		select {
		case <-m.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ss, err := benchSamples(m.repo, commit, "patched", boots)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	*m.measured = append(*m.measured, fmt.Sprintf("%s %d", commit, n))
	m.mu.Unlock()
	out := &bisect.Measurement{Unit: "ns", Built: true, BuildTime: time.Second}
	for _, s := range ss {
		out.Values = append(out.Values, s.Value)
	}
	return out, nil
}

// TestBisectSeriesAskedDuringMeasurement: a second request for a series
// bisection that arrives while its job is measuring is not lost when the
// job records the measurement (nor is the measurement lost to the
// request): the bisection goes on to name patch 3/4, with every
// measurement it made recorded, and both requesters are told. On both
// databases.
func TestBisectSeriesAskedDuringMeasurement(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db string) {
		tr := newSeriesTree(t)
		var once sync.Once
		var mu sync.Mutex
		var measured []string
		gm := &gatedMeasurer{repo: tr.repo, once: &once, started: make(chan struct{}), release: make(chan struct{}), measured: &measured, mu: &mu}
		type told struct {
			requesters []string
			text       string
		}
		toldc := make(chan told, 4)
		s, _ := testService(t, Config{Database: db,
			Series: SeriesMeasurers{Bisect: func(*perpatch.Series, *pipelines.Pipeline, string, string, string, string) bisect.Measurer {
				return gm
			}},
			SeriesBisected: func(_ context.Context, _ int64, requesters []string, text string) error {
				toldc <- told{requesters, text}
				return nil
			}})
		id := tr.evaluated(t, s, false)
		ctx := context.Background()
		if note, err := s.BisectSeries(ctx, id, "a"); err != nil || !strings.Contains(note, "queued:") {
			t.Fatalf("first request: %q %v", note, err)
		}
		select {
		case <-gm.started:
		case <-time.After(60 * time.Second):
			t.Fatal("the bisection's first measurement did not start")
		}
		note, err := s.BisectSeries(ctx, id, "b")
		if err != nil || !strings.Contains(note, "already running") {
			t.Fatalf("second request, during the first measurement: %q %v", note, err)
		}
		close(gm.release)
		var got told
		select {
		case got = <-toldc:
		case <-time.After(60 * time.Second):
			st, _ := s.SeriesBisection(id)
			t.Fatalf("nobody was told of the bisection's end; state %+v", st)
		}
		st, err := s.SeriesBisection(id)
		if err != nil || st.Status != bisect.Found || st.Result == nil || st.Result.Patch != 3 {
			t.Fatalf("bisection %+v %v; want patch 3/4 found", st, err)
		}
		recorded := map[string]int{}
		for _, r := range st.Records {
			recorded[fmt.Sprintf("%s %d", r.Commit, r.N)]++
		}
		mu.Lock()
		for _, m := range measured {
			if recorded[m] != 1 {
				t.Errorf("measurement %s recorded %d times, want once; records %+v", m, recorded[m], st.Records)
			}
		}
		mu.Unlock()
		if strings.Join(got.requesters, " ") != "a b" || !strings.Contains(got.text, "patch 3/4") {
			t.Errorf("told %q: %q; want both requesters (a b) told the patch", got.requesters, got.text)
		}
	})
}

// TestSeriesBisectStepAheadOfItsRecords: a series_bisect step whose
// bisection has fewer measurements recorded than its Seq (the state and
// the queue disagree: no job is at the step the records are at) carries
// the bisection on from its records instead of cancelling itself and
// leaving it "running" for ever; the bisection names patch 3/4 and who
// asked is told, and nothing is measured twice, also when a job at the
// records' step is queued too.
func TestSeriesBisectStepAheadOfItsRecords(t *testing.T) {
	tr := newSeriesTree(t)
	var mu sync.Mutex
	var measured []string
	release := make(chan struct{})
	close(release) // no measurement waits
	var once sync.Once
	once.Do(func() {})
	gm := &gatedMeasurer{repo: tr.repo, once: &once, release: release, measured: &measured, mu: &mu}
	toldc := make(chan string, 4)
	s, _ := testService(t, Config{
		Series: SeriesMeasurers{Bisect: func(*perpatch.Series, *pipelines.Pipeline, string, string, string, string) bisect.Measurer { return gm }},
		SeriesBisected: func(_ context.Context, _ int64, requesters []string, text string) error {
			toldc <- strings.Join(requesters, " ") + ": " + text
			return nil
		}})
	ctx := context.Background()
	// queue stores a bisection with no measurement recorded and queues
	// the steps seqs of it (and no other).
	queue := func(id int64, seqs ...int) {
		t.Helper()
		err := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
			st := &SeriesBisectState{Status: SeriesBisectRunning, Gen: time.Now().UnixNano(), Variant: "patched", Benchmark: "getppid",
				Metric: "ns/op", Change: 25, Requesters: []string{"a"}}
			if err := s.db.Store.SetSeriesBisectionTx(tx, id, st); err != nil {
				return err
			}
			var jobs []river.InsertManyParams
			for _, q := range seqs {
				jobs = append(jobs, seriesBisectJob(id, st.Gen, q))
			}
			return s.engine.insertManyTx(ctx, tx, jobs)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wait := func(id int64) {
		t.Helper()
		select {
		case got := <-toldc:
			if !strings.HasPrefix(got, "a: ") || !strings.Contains(got, "patch 3/4") {
				t.Errorf("told %q; want a told patch 3/4", got)
			}
		case <-time.After(60 * time.Second):
			st, _ := s.SeriesBisection(id)
			jobs, _ := s.engine.Jobs(ctx, id, 20)
			var js []string
			for _, j := range jobs {
				js = append(js, fmt.Sprintf("%s %s %s", j.Kind, j.State, j.EncodedArgs))
			}
			t.Fatalf("the bisection did not end; state %+v; jobs:\n%s", st, strings.Join(js, "\n"))
		}
		st, err := s.SeriesBisection(id)
		if err != nil || st.Status != bisect.Found || st.Result == nil || st.Result.Patch != 3 {
			t.Fatalf("bisection %+v %v; want patch 3/4 found", st, err)
		}
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]bool{}
		for _, m := range measured {
			if seen[m] {
				t.Errorf("measurement %s made twice: %q", m, measured)
			}
			seen[m] = true
		}
		measured = nil
	}
	// Only a step ahead of the records is queued.
	id := tr.evaluated(t, s, false)
	queue(id, 2)
	wait(id)
	// Again, with the step at the records queued too, after the step
	// ahead (which runs first).
	queue(id, 2, 0)
	wait(id)
}

// TestBisectSeriesRestartKeepsDoneGen: an automatic bisection (the one
// an evaluation waits for to be done) whose jobs are gone, asked for
// again, starts again as the evaluation's: its end finishes the
// evaluation and tells Notify. Restarted for an evaluation that is no
// longer waiting for it (cancelled), it finishes nothing.
func TestBisectSeriesRestartKeepsDoneGen(t *testing.T) {
	tr := newSeriesTree(t)
	var mu sync.Mutex
	var measured []string
	release := make(chan struct{})
	close(release)
	var once sync.Once
	once.Do(func() {})
	gm := &gatedMeasurer{repo: tr.repo, once: &once, release: release, measured: &measured, mu: &mu}
	var n notified
	toldc := make(chan string, 4)
	s, _ := testService(t, Config{Notify: n.notify,
		Series: SeriesMeasurers{Bisect: func(*perpatch.Series, *pipelines.Pipeline, string, string, string, string) bisect.Measurer { return gm }},
		SeriesBisected: func(_ context.Context, _ int64, requesters []string, text string) error {
			toldc <- strings.Join(requesters, " ") + ": " + text
			return nil
		}})
	ctx := context.Background()
	// interrupted stores an automatic bisection of evaluation id, with
	// the evaluation status, that never ended and has no job.
	interrupted := func(id int64, status string) {
		t.Helper()
		err := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
			if err := s.setStatus(tx, id, status); err != nil {
				return err
			}
			return s.db.Store.SetSeriesBisectionTx(tx, id, &SeriesBisectState{Status: SeriesBisectRunning, Gen: 7, Variant: "patched",
				Benchmark: "getppid", Metric: "ns/op", Change: 25, DoneGen: 1})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ended := func(id int64) *SeriesBisectState {
		t.Helper()
		select {
		case got := <-toldc:
			if !strings.Contains(got, "patch 3/4") {
				t.Errorf("told %q; want patch 3/4", got)
			}
		case <-time.After(60 * time.Second):
			st, _ := s.SeriesBisection(id)
			t.Fatalf("the restarted bisection did not end; state %+v", st)
		}
		st, err := s.SeriesBisection(id)
		if err != nil || st.Status != bisect.Found {
			t.Fatalf("bisection %+v %v; want found", st, err)
		}
		return st
	}
	id := tr.evaluated(t, s, false)
	interrupted(id, "running")
	if note, err := s.BisectSeries(ctx, id, "c"); err != nil || !strings.Contains(note, "queued:") {
		t.Fatalf("asked again: %q %v", note, err)
	}
	if st := ended(id); st.DoneGen != 1 {
		t.Errorf("the restarted bisection's DoneGen is %d, want 1 (the evaluation waits for it)", st.DoneGen)
	}
	for deadline := time.Now().Add(30 * time.Second); !n.has(fmt.Sprintf("%d done", id)); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Notify not told the evaluation is done; events %v", n.events)
		}
	}
	if e, _ := s.Store().Evaluation(id); e.Status != store.StatusDone {
		t.Errorf("evaluation %s, want done", e.Status)
	}
	// Cancelled meanwhile: the restart does not finish the evaluation.
	interrupted(id, StatusCancelled)
	if _, err := s.BisectSeries(ctx, id, "d"); err != nil {
		t.Fatal(err)
	}
	if st := ended(id); st.DoneGen != 0 {
		t.Errorf("restarted for a cancelled evaluation: DoneGen %d, want 0", st.DoneGen)
	}
	if e, _ := s.Store().Evaluation(id); e.Status != StatusCancelled {
		t.Errorf("evaluation %s, want cancelled", e.Status)
	}
}

// TestFinishEvaluationReadsNothingInItsTransaction: what follows an
// evaluation's report (the per-patch run, or with SeriesBisect an
// automatic bisection inside the series) is decided from reads made
// before the report's transaction: inside it, which holds the
// evaluation's row and then its bisection's lock, nothing is read on
// another of the pool's connections (with every other connection taken,
// as by transactions waiting for those locks, it waited for ever). On
// Postgres.
func TestFinishEvaluationReadsNothingInItsTransaction(t *testing.T) {
	tr := newSeriesTree(t)
	ctx := context.Background()
	s, err := New(ctx, Config{Database: testpg.URL(t), Log: testWriter{t}, SeriesBisect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id := tr.evaluated(t, s, false)
	end := mustEnd(t, s, id)
	if end.bisect == nil {
		t.Fatal("no automatic bisection planned for the series' regression")
	}
	pool := s.db.Store.Postgres()
	err = s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := s.setStatus(tx, id, store.StatusDone); err != nil {
			return err
		}
		// Every other connection of the pool taken, given back after 10 s
		// if afterReport still waits then.
		// Counted again after each acquire: a connection River gives back
		// meanwhile is taken too, and one it takes is not waited for.
		var held []*pgxpool.Conn
		for pool.Stat().AcquiredConns() < pool.Config().MaxConns {
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			c, err := pool.Acquire(actx)
			cancel()
			if err != nil {
				return fmt.Errorf("taking the pool's other connections (%d of %d held): %w", pool.Stat().AcquiredConns(), pool.Config().MaxConns, err)
			}
			held = append(held, c)
		}
		returned := make(chan struct{})
		var waited atomic.Bool
		go func() {
			select {
			case <-returned:
			case <-time.After(10 * time.Second):
				waited.Store(true)
			}
			for _, c := range held {
				c.Release()
			}
		}()
		next, err := s.afterReport(ctx, tx, id, 1, end)
		close(returned)
		if waited.Load() {
			return fmt.Errorf("afterReport waited for another connection of the pool inside the report's transaction")
		}
		if err != nil {
			return err
		}
		if len(next) != 1 || next[0].Args.Kind() != (SeriesBisectArgs{}).Kind() {
			return fmt.Errorf("after the report: %v, want the bisection's first step", next)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := s.SeriesBisection(id); err != nil || st == nil || st.DoneGen != 1 {
		t.Fatalf("bisection %+v %v; want an automatic one finishing generation 1", st, err)
	}
}
