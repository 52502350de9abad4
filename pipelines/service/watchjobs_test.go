package service

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/pipelines/store"
)

// testWatchSpec configures the watches of a test serve process: the
// evaluator and the bisection's measurer read bench/getppid from the
// fetched tree ("BROKEN": the commit does not build) instead of building
// and booting a kernel, and append what they do to Log, one line each,
// so the test sees every evaluation and measurement across processes.
// The BlockAt-th measurement this process starts never ends (the test
// kills the process there).
type testWatchSpec struct {
	Log     string
	Out     string
	BlockAt int
	// EvalDelay is how long each evaluation takes (0: none).
	EvalDelay time.Duration
}

func (ws *testWatchSpec) logLine(format string, a ...any) {
	f, err := os.OpenFile(ws.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	fmt.Fprintf(f, format+"\n", a...)
}

func (ws *testWatchSpec) config(s *Service) WatchConfig {
	st := s.Store()
	eval := watch.EvaluatorFunc(func(ctx context.Context, w *store.Watch, tag, commit string) (int64, error) {
		ws.logLine("eval %s", tag)
		time.Sleep(ws.EvalDelay)
		v, err := treeValue(w.Tree, commit)
		if err != nil {
			return 0, err
		}
		e, _, err := st.CreateOrResumeEvaluation(store.Key(w.Pipeline, commit), store.EvaluationMeta{Pipeline: w.Pipeline, Tree: w.Tree, Base: commit})
		if err != nil {
			return 0, err
		}
		for boot := 0; boot < 3; boot++ {
			id, err := st.BeginRun(e.ID, "base", boot)
			if err != nil {
				return 0, err
			}
			smp := []evaluate.Sample{{Variant: "base", Boot: boot, Benchmark: "getppid", Metric: "ns/op", Unit: "ns", Value: v, Deterministic: true}}
			if err := st.FinishRun(id, store.RunOK, evaluate.Environment{Deterministic: true}, nil, smp); err != nil {
				return 0, err
			}
		}
		return e.ID, st.SetEvaluationStatus(e.ID, store.StatusDone)
	})
	started := 0
	b := &watch.Bisection{Eval: &watch.PipelineEvaluator{OutDir: ws.Out}, From: testFrom,
		NewMeasurer: func(p *pipelines.Pipeline, w *store.Watch, ev *store.WatchEvent, dir string) (bisect.Measurer, error) {
			return &treeStepMeasurer{ws: ws, repo: w.Tree, started: &started}, nil
		}}
	return WatchConfig{Eval: eval, Bisection: b, Deterministic: func(*store.Watch) bool { return true }}
}

func treeValue(repo, commit string) (float64, error) {
	s, err := testgit.Blob(repo, commit, "bench/getppid")
	if err != nil {
		return 0, fail.Infraf("reading %s: %v", commit, err)
	}
	if strings.TrimSpace(s) == "BROKEN" {
		return 0, fail.Failedf("kernel/sys.c:1: error: expected ';' before '}' token")
	}
	return strconv.ParseFloat(strings.TrimSpace(s), 64)
}

// treeStepMeasurer is the bisection's measurer of testWatchSpec.
type treeStepMeasurer struct {
	ws      *testWatchSpec
	repo    string
	started *int
}

func (m *treeStepMeasurer) Measure(ctx context.Context, commit string, boots int) (*bisect.Measurement, error) {
	return nil, fail.Infraf("the service must say which measurement of %s it makes (MeasureNth)", commit)
}

func (m *treeStepMeasurer) MeasureNth(ctx context.Context, commit string, boots, n int) (*bisect.Measurement, error) {
	*m.started++
	m.ws.logLine("start %d %s %d", os.Getpid(), commit, n)
	if *m.started == m.ws.BlockAt {
		<-ctx.Done() // killed here
		return nil, ctx.Err()
	}
	v, err := treeValue(m.repo, commit)
	out := &bisect.Measurement{Unit: "ns", Built: n == 0, BuildTime: time.Second}
	if err != nil {
		m.ws.logLine("done %s %d broken", commit, n)
		return out, err
	}
	for i := 0; i < boots; i++ {
		out.Values = append(out.Values, v)
	}
	m.ws.logLine("done %s %d %g", commit, n, v)
	return out, nil
}

// TestServeWatchJobsResumeBisectionAfterKill runs a watch in a real
// `serve` process (SQLite, River) against a real git remote served over
// smart HTTP on loopback: ticks, re-tests and bisection steps are jobs.
// A tick queued through the API re-tests v6.2-rc1 only; then a
// non-matching tag and v6.2-rc2 appear 16 commits later (one of them does
// not build, one makes getppid 25% slower), and the next tick re-tests
// v6.2-rc2 only, finds the regression and queues its bisection. The
// serve is killed with SIGKILL in the middle of the bisection's fourth
// measurement and started again: the bisection goes on from that step
// (the steps recorded before are not measured again; the interrupted one
// is measured again as the same measurement), skips the commit that does
// not build and names the culprit, confirmed, in at most ceil(log2(16)) +
// 2 builds plus the skipped one.
//
// It runs on SQLite and on a real PostgreSQL 15, where the restarted
// serve finds the killed one's step job by its presence lock.
func TestServeWatchJobsResumeBisectionAfterKill(t *testing.T) { onBothDatabases(t, watchJobsAfterKill) }

func watchJobsAfterKill(t *testing.T, root, db string) {
	r := newWatchRemote(t, root)
	local, commit := r.local, r.commit
	rc1 := commit("", 0, "1000")
	r.tag("v6.2-rc1", rc1)

	st, _ := r.addWatch(db, "mainline", true)
	st.Close()
	logPath := filepath.Join(root, "watch.log")
	spec := func(blockAt int) string {
		b, _ := json.Marshal(map[string]any{"DB": db, "Tree": local, "Cache": t.TempDir(), "State": filepath.Join(root, "state"),
			"Watch": testWatchSpec{Log: logPath, Out: filepath.Join(root, "watches"), BlockAt: blockAt}})
		return string(b)
	}
	history := func(base string) *watch.History {
		code, e, raw := call(t, "GET", base+"/api/v1/watches/mainline", "", nil)
		if code != 200 {
			t.Fatalf("GET watch: %d %+v", code, e)
		}
		var h watch.History
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatal(err)
		}
		return &h
	}
	bisection := func(h *watch.History) *watch.BisectState {
		if len(h.Events) != 1 || len(h.Events[0].Bisect) == 0 {
			return nil
		}
		var bs watch.BisectState
		if err := json.Unmarshal(h.Events[0].Bisect, &bs); err != nil {
			t.Fatal(err)
		}
		return &bs
	}
	waitFor := func(what string, limit time.Duration, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(limit); !ok(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(logPath)
				t.Fatalf("timed out waiting for %s; log:\n%s", what, log)
			}
		}
	}
	logLines := func(prefix string) []string { return logLinesOf(logPath, prefix) }
	tick := func(base string) {
		code, e, raw := call(t, "POST", base+"/api/v1/watches/mainline/tick", "", nil)
		if code != 202 {
			t.Fatalf("tick: %d %+v %s", code, e, raw)
		}
	}

	srv := startServe(t, spec(4))
	tick(srv.base)
	waitFor("v6.2-rc1 re-tested", time.Minute, func() bool {
		h := history(srv.base)
		return len(h.Tags) == 1 && h.Tags[0].Status == store.TagDone
	})

	// 16 commits: change 9 makes getppid 25% slower, change 12 (the
	// second midpoint) does not build; a non-matching tag and v6.2-rc2 on
	// top.
	commits := r.regression(rc1, 16, 9, 12)
	r.tag("next-20261201", commits[11])
	r.tag("v6.2-rc2", commits[15])
	tick(srv.base)
	waitFor("the fourth measurement", 2*time.Minute, func() bool { return len(logLines("start ")) >= 4 })
	if bs := bisection(history(srv.base)); bs == nil || bs.Status != watch.BisectRunning || len(bs.Records) != 3 ||
		bs.Next == nil || len(bs.Steps) != 3 {
		t.Fatalf("bisection before the kill: %+v", bs)
	}
	srv.cmd.Process.Signal(syscall.SIGKILL)
	<-srv.done
	killed := logLines("start ")[3]

	srv = startServe(t, spec(0))
	var bs *watch.BisectState
	waitFor("the bisection to end", 2*time.Minute, func() bool {
		bs = bisection(history(srv.base))
		return bs != nil && bs.Ended()
	})
	starts := logLines("start ")
	t.Logf("measurements:\n%s", strings.Join(starts, "\n"))
	// The restarted serve went on with the interrupted measurement.
	f, g := strings.Fields(killed), strings.Fields(starts[4])
	if f[1] == g[1] || f[2] != g[2] || f[3] != g[3] {
		t.Fatalf("after the restart the first measurement was %q, want the interrupted one %q again (in the new process)", starts[4], killed)
	}
	// Each measurement made exactly once; the interrupted one is the only
	// one started twice.
	done := logLines("done ")
	seen := map[string]bool{}
	for _, d := range done {
		k := strings.Join(strings.Fields(d)[1:3], " ")
		if seen[k] {
			t.Fatalf("measurement %s made twice:\n%s", k, strings.Join(done, "\n"))
		}
		seen[k] = true
	}
	if len(done) != len(bs.Records) || len(starts) != len(done)+1 {
		t.Fatalf("%d measurements finished, %d started, %d recorded", len(done), len(starts), len(bs.Records))
	}
	if bs.Status != bisect.Found || bs.Culprit == nil || bs.Culprit.Hash != commits[8] || !bs.Confirmed {
		t.Fatalf("bisection %s culprit %+v confirmed %v, want %s (sys: change 9)", bs.Status, bs.Culprit, bs.Confirmed, commits[8])
	}
	// The bound is ceil(log2(16)) + 2 = 6 builds; the skipped commit's
	// failed build is one more.
	if bs.Skipped != 1 || bs.Builds > bisect.Bound(16)+bs.Skipped || bs.Commits != 16 || bs.GoodRef != "v6.2-rc1" || bs.BadRef != "v6.2-rc2" {
		t.Fatalf("bisection: %d builds (bound %d), %d skipped, %d commits, %s..%s", bs.Builds, bisect.Bound(16), bs.Skipped, bs.Commits,
			bs.GoodRef, bs.BadRef)
	}
	if bs.Change < 24.9 || bs.Change > 25.1 {
		t.Fatalf("change %.2f%%, want +25%%", bs.Change)
	}
	rep, err := os.ReadFile(bs.Report)
	if err != nil || !strings.Contains(string(rep), commits[8]) {
		t.Fatalf("report %s: %v\n%s", bs.Report, err, rep)
	}
	for _, name := range []string{"report.md", "report.json", "kcidb.json", "culprit.eml"} {
		if _, err := os.Stat(filepath.Join(filepath.Dir(bs.Report), name)); err != nil {
			t.Errorf("bisection report: %v", err)
		}
	}
	// Each matching tag re-tested once; the non-matching one never.
	if evals := logLines("eval "); !slices.Equal(evals, []string{"eval v6.2-rc1", "eval v6.2-rc2"}) {
		t.Fatalf("evaluations %q", evals)
	}
	h := history(srv.base)
	if len(h.Tags) != 2 || h.Tags[1].Status != store.TagDone || h.Events[0].Verdict != "regression" {
		t.Fatalf("history %+v events %+v", h.Tags, h.Events)
	}
	// The ticks and steps were jobs of the watch queue.
	_, _, raw := call(t, "GET", srv.base+"/api/v1/jobs", "", nil)
	var jobs struct{ Jobs []Job }
	json.Unmarshal(raw, &jobs)
	kinds := map[string]int{}
	for _, j := range jobs.Jobs {
		if j.Queue == QueueWatch {
			kinds[j.Kind]++
		}
	}
	if kinds["watch_tick"] != 2 || kinds["retest"] != 2 || kinds["bisect_step"] != len(bs.Records)+1 {
		t.Fatalf("watch queue jobs %v, want 2 ticks, 2 re-tests and %d bisection steps", kinds, len(bs.Records)+1)
	}
}
