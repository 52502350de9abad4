package service

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Positions in the synthetic history (commit k is synth[k-1]): v6.2-rc1
// on 1, v6.2-rc2 on 25; between them 24 commits, of which 13 does not
// build (fixed by 14) and 17 puts a loop into getppid().
const (
	synthCommits  = 25
	brokenCommit  = 13
	culpritCommit = 17
)

var synthFiles = []string{"kernel/signal.c", "kernel/fork.c", "kernel/exit.c", "fs/read_write.c", "lib/string.c",
	"init/main.c", "kernel/sched/core.c", "mm/memory.c"}

const brokenLine = "\nstatic int retest_broken(void) { return 1 }\n"

// synthHistory writes the synthetic history on v6.1-debian into the bare
// repository dir (once: the commits are the same in every run) and
// returns the commits, oldest first.
func synthHistory(t testing.TB, dir string) []string {
	parent := testgit.Git(t, nil, nil, "--git-dir="+dir, "rev-parse", buildtest.BaseCommit+"^{commit}")
	var out []string
	for k := 1; k <= synthCommits; k++ {
		ref := fmt.Sprintf("refs/retest-e2e/%02d", k)
		if c, err := testgit.Run(nil, nil, "--git-dir="+dir, "rev-parse", "-q", "--verify", ref); err == nil {
			out, parent = append(out, c), c
			continue
		}
		subject := fmt.Sprintf("retest: change %d", k)
		files := map[string]string{}
		edit := func(path string, fn func(string) string) {
			old, err := testgit.Blob(dir, parent, path)
			if err != nil {
				t.Fatal(err)
			}
			files[path] = fn(old + "\n")
		}
		switch k {
		case brokenCommit:
			subject = "sys: a helper (does not build)"
			edit("kernel/sys.c", func(s string) string { return s + brokenLine })
		case brokenCommit + 1:
			subject = "sys: fix the build"
			edit("kernel/sys.c", func(s string) string { return strings.Replace(s, brokenLine, "\n", 1) })
		case culpritCommit:
			subject = "sys: spin a little in getppid()"
			edit("kernel/sys.c", func(s string) string {
				old := "SYSCALL_DEFINE0(getppid)\n{\n\tint pid;\n\n"
				if !strings.Contains(s, old) {
					t.Fatal("kernel/sys.c: getppid() not found")
				}
				return strings.Replace(s, old, "SYSCALL_DEFINE0(getppid)\n{\n\tint pid, i;\n\n\tfor (i = 0; i < 400; i++)\n\t\tbarrier();\n", 1)
			})
		default:
			path := synthFiles[k%len(synthFiles)]
			edit(path, func(s string) string { return s + fmt.Sprintf("/* retest: change %d */\n", k) })
		}
		c := testgit.Commit(t, dir, parent, subject, fmt.Sprintf("2026-11-%02dT10:00:00Z", 3+k/4), files)
		testgit.Git(t, nil, nil, "--git-dir="+dir, "update-ref", ref, c)
		out, parent = append(out, c), c
	}
	return out
}

// clone makes a bare hard-linked clone of the 6.1 tree at dir unless it
// exists.
func clone(t testing.TB, src, dir string) {
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		return
	}
	testgit.Git(t, nil, nil, "clone", "-q", "--bare", "--local", src, dir)
}

// e2eFlow is what runWatchFlow measured.
type e2eFlow struct {
	synth []string
	// first is the first run-now (v6.2-rc1 built and booted); toCulprit
	// from v6.2-rc2's appearance to the culprit's report (the second
	// run-now returns when the re-test and every bisection step are
	// done); bisect the bisection's own wall time.
	first, toCulprit, bisect time.Duration
	event                    *store.WatchEvent
	result                   *bisect.Result
	report                   string
	// jobs counts the watch queue's jobs by kind.
	jobs map[string]int
}

// serialMeasurer makes each bisection measurement under the test build
// lock (buildtest.Serialize), like the evaluations.
type serialMeasurer struct {
	tb testing.TB
	m  *bisect.PipelineMeasurer
}

func (s serialMeasurer) Measure(ctx context.Context, commit string, boots int) (m *bisect.Measurement, err error) {
	buildtest.Serialize(s.tb, func() { m, err = s.m.Measure(ctx, commit, boots) })
	return m, err
}

func (s serialMeasurer) MeasureNth(ctx context.Context, commit string, boots, n int) (m *bisect.Measurement, err error) {
	buildtest.Serialize(s.tb, func() { m, err = s.m.MeasureNth(ctx, commit, boots, n) })
	return m, err
}

// lockedTreeRoot is <cache>/trees/<name> with its served/ directory,
// under the root's lock (one flow at a time across test processes) until
// unlock.
func lockedTreeRoot(tb testing.TB, name string) (root string, unlock func()) {
	root = filepath.Join(xdg.CacheDir(), "trees", name)
	if err := os.MkdirAll(filepath.Join(root, "served"), 0o755); err != nil {
		tb.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		tb.Fatal(err)
	}
	return root, func() { lock.Close() }
}

// serialWatches is the end-to-end watch tests' watch setup: the
// pipeline evaluator (reports under out, kernels in cacheDir) and the
// bisection's pipeline measurer, each evaluation and measurement under
// the test build lock (buildtest.Serialize); seen, when set, is told
// every tag evaluated.
func serialWatches(tb testing.TB, out, dbPath, cacheDir string, seen func(tag string)) func(*Service) WatchConfig {
	return func(s *Service) WatchConfig {
		ev := &watch.PipelineEvaluator{OutDir: out, StorePath: dbPath, CacheDir: cacheDir, Jobs: 2, Progress: progress.New(os.Stderr)}
		serial := watch.EvaluatorFunc(func(ctx context.Context, w *store.Watch, tag, commit string) (id int64, err error) {
			if seen != nil {
				seen(tag)
			}
			buildtest.Serialize(tb, func() { id, err = ev.Evaluate(ctx, w, tag, commit) })
			return id, err
		})
		b := &watch.Bisection{Eval: ev, From: mbox.Address{Name: "Tester", Email: "tester@patcheval.invalid"}, Logf: tb.Logf,
			NewMeasurer: func(p *pipelines.Pipeline, w *store.Watch, e *store.WatchEvent, dir string) (bisect.Measurer, error) {
				// bisection.Plan's measurer (the service gave ev its
				// store, budget and slots), under the test build lock.
				return serialMeasurer{tb, &bisect.PipelineMeasurer{Pipeline: p, Variant: e.Variant, Benchmark: e.Benchmark,
					Metric: e.Metric, Repo: w.Tree, OutDir: filepath.Join(dir, "steps"), Store: ev.Store, CacheDir: ev.CacheDir,
					Jobs: ev.Jobs, Budget: ev.Budget, Slot: ev.Slot, Progress: ev.Progress}}, nil
			}}
		// The evaluator the service shares its budget and slots with is
		// ev (Service.Watch sets them on the bisection's); serial wraps it.
		return WatchConfig{Eval: serial, Bisection: b, Deterministic: watch.Deterministic}
	}
}

// runWatchFlow runs a watch with the pipeline file over the synthetic
// history served on loopback, through the watch jobs (RunWatchNow, the
// path of `patcheval watch run-now`: ticks, re-tests and bisection steps
// are River jobs worked in this process, with the service's -j budget
// and slots): v6.2-rc1 is there at the first run-now; next-20261201 and
// v6.2-rc2 appear before the second, which re-tests v6.2-rc2 (and
// nothing else), finds the regression and bisects it step by step; then
// the remote goes down for a third. Failures of the flow itself fail tb;
// the caller checks the figures.
func runWatchFlow(tb testing.TB, pipeline string) *e2eFlow {
	base := buildtest.Repo(tb)
	root, unlock := lockedTreeRoot(tb, "retest-e2e")
	defer unlock()
	upstream, local := filepath.Join(root, "served", "linux.git"), filepath.Join(root, "local.git")
	clone(tb, base, upstream)
	clone(tb, base, local)
	f := &e2eFlow{synth: synthHistory(tb, upstream)}
	for _, tag := range []string{"v6.2-rc1", "v6.2-rc2", "next-20261201"} {
		testgit.Run(nil, nil, "--git-dir="+upstream, "update-ref", "-d", "refs/tags/"+tag)
	}
	testgit.Tag(tb, upstream, "v6.2-rc1", f.synth[0])
	srv := testgit.Serve(tb, filepath.Join(root, "served"))

	dbPath := filepath.Join(tb.TempDir(), "patcheval.db")
	st, err := store.Open(dbPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	w, err := st.AddWatch(store.Watch{Name: "e2e", Remote: srv.URL() + "/linux.git", Tags: "v6.*-rc*", Pipeline: pipeline,
		Schedule: "@every 30m", Bisect: true, Tree: local})
	if err != nil {
		tb.Fatal(err)
	}
	out := tb.TempDir()
	var mu sync.Mutex
	var evaluated []string
	watches := serialWatches(tb, out, dbPath, xdg.CacheDir(), func(tag string) {
		mu.Lock()
		evaluated = append(evaluated, tag)
		mu.Unlock()
	})
	cfg := Config{Database: dbPath, CacheDir: xdg.CacheDir(), Jobs: 2, Log: testWriter{tb}, Grace: 10 * time.Second}
	ctx := context.Background()
	start := time.Now()
	run, err := RunWatchNow(ctx, cfg, watches, "e2e")
	if err != nil {
		tb.Fatalf("first run-now: %v", err)
	}
	f.first = time.Since(start)
	if run.Served || !slices.Equal(run.Evaluated, []string{"v6.2-rc1"}) {
		tb.Fatalf("first run-now: %+v, want v6.2-rc1 evaluated in this process", run)
	}

	// A non-matching tag and the next rc appear.
	testgit.Tag(tb, upstream, "next-20261201", f.synth[18])
	testgit.Tag(tb, upstream, "v6.2-rc2", f.synth[synthCommits-1])
	appeared := time.Now()
	run, err = RunWatchNow(ctx, cfg, watches, "e2e")
	if err != nil {
		tb.Fatalf("second run-now: %v", err)
	}
	f.toCulprit = time.Since(appeared)
	if !slices.Equal(run.Evaluated, []string{"v6.2-rc2"}) || !slices.Equal(evaluated, []string{"v6.2-rc1", "v6.2-rc2"}) {
		tb.Fatalf("second run-now evaluated %v (all: %v), want exactly v6.2-rc2", run.Evaluated, evaluated)
	}
	if len(run.Events) != 1 {
		tb.Fatalf("events %+v, want one", run.Events)
	}
	evs, _ := st.WatchEvents(w.ID)
	if len(evs) != 1 {
		tb.Fatalf("stored events %+v", evs)
	}
	f.event = evs[0]
	var bis watch.BisectState
	if err := json.Unmarshal(f.event.Bisect, &bis); err != nil || bis.Report == "" {
		tb.Fatalf("bisection: %s", f.event.Bisect)
	}
	rep, _ := os.ReadFile(bis.Report)
	f.report = string(rep)
	js, err := os.ReadFile(strings.TrimSuffix(bis.Report, ".txt") + ".json")
	if err != nil {
		tb.Fatal(err)
	}
	f.result = &bisect.Result{}
	if err := json.Unmarshal(js, f.result); err != nil {
		tb.Fatal(err)
	}
	f.bisect = f.result.Wall
	if len(bis.Records) == 0 {
		tb.Fatalf("the bisection recorded no measurement on its event: it did not run as jobs")
	}

	// The remote goes down: an infra error on the watch, no history lost.
	srv.Down()
	if _, err := RunWatchNow(ctx, cfg, watches, "e2e"); fail.KindOf(err) != fail.KindInfra {
		tb.Fatalf("run-now with the remote down: %v", err)
	}
	cur, err := st.FindWatch(w.Name) // as the tick left it (LastError)
	if err != nil {
		tb.Fatal(err)
	}
	h, err := watch.Load(st, cur)
	if err != nil {
		tb.Fatal(err)
	}
	if len(h.Tags) != 2 || h.Tags[0].Status != store.TagDone || h.Tags[1].Status != store.TagDone || len(h.Series) != 1 ||
		len(h.Events) != 1 || h.Watch.LastError == "" {
		tb.Fatalf("history after the remote went down: %+v", h)
	}
	var txt strings.Builder
	watch.WriteText(&txt, h)
	tb.Logf("watch show after the remote went down:\n%s", txt.String())
	f.jobs = watchJobKinds(tb, dbPath)
	return f
}

// watchJobKinds counts the watch queue's jobs in the database by kind.
func watchJobKinds(tb testing.TB, db string) map[string]int {
	s, err := New(context.Background(), Config{Database: db})
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	jobs, err := s.Engine().Jobs(context.Background(), 0, 1000)
	if err != nil {
		tb.Fatal(err)
	}
	kinds := map[string]int{}
	for _, j := range jobs {
		if j.Queue == QueueWatch {
			kinds[j.Kind]++
		}
	}
	return kinds
}

// TestWatchRetestsNewTagAndBisectsTheRegression is the end-to-end test
// with real parts: a git remote over smart HTTP on loopback holding
// Debian's 6.1 tree with a synthetic history, x86_64 kernels built with
// kcc in the shared cache and booted in deterministic QEMU, the watch run
// through its River jobs as `watch run-now` runs it (tick, re-test, one
// job per bisection step). A new
// matching tag triggers one re-test (a non-matching one none), the
// getppid regression between the tags is an event, the bisection names
// the commit that caused it within ceil(log2(24)) + 2 builds while
// skipping the commit that does not build, and the remote going down
// loses no history. The first run builds (minutes); later runs reuse the
// cached kernels and only boot. It is opt-in (PATCHEVAL_LONG_TESTS=1):
// its x86_64 builds of a second tree have not been measured on CI's 2
// cores yet, and the default suite must stay under its budget.
func TestWatchRetestsNewTagAndBisectsTheRegression(t *testing.T) {
	testenv.SkipUnlessLong(t, "up to 9 x86_64 kernel builds of a synthetic history, incremental through kcc")
	pipeline, _ := filepath.Abs("../experiments/watch/testdata/retest-x86-getppid.toml")
	f := runWatchFlow(t, pipeline)
	t.Logf("bisection report:\n%s", f.report)
	t.Logf("first tick %s; tag appeared -> culprit reported %s (bisection %s)", f.first.Round(time.Second),
		f.toCulprit.Round(time.Second), f.bisect.Round(time.Second))
	e, r := f.event, f.result
	if e.Verdict != "regression" || e.Benchmark != "getppid" || e.Metric != "ns/op" || e.From != "v6.2-rc1" || e.To != "v6.2-rc2" {
		t.Fatalf("event %+v, want the getppid regression v6.2-rc1..v6.2-rc2", e)
	}
	if r.Status != bisect.Found || r.Culprit == nil || r.Culprit.Hash != f.synth[culpritCommit-1] || !r.Confirmed {
		t.Fatalf("bisection %s %+v, want %s confirmed", r.Status, r.Culprit, f.synth[culpritCommit-1])
	}
	if r.Commits != synthCommits-1 || r.Builds > bisect.Bound(r.Commits) {
		t.Fatalf("%d builds for %d commits, want at most ceil(log2(24)) + 2 = 7", r.Builds, r.Commits)
	}
	skipped := false
	for _, s := range r.Steps {
		if s.Verdict == bisect.Skip && s.Commit.Hash == f.synth[brokenCommit-1] {
			skipped = true
		}
	}
	if !skipped || !strings.Contains(f.report, "sys: a helper (does not build)") {
		t.Fatalf("the commit that does not build was not skipped:\n%s", f.report)
	}
	// Two ticks with new tags and one with the remote down, one re-test
	// per new tag, and one bisection job per measurement plus the last
	// (which writes the report).
	if f.jobs["watch_tick"] != 3 || f.jobs["retest"] != 2 || f.jobs["bisect_step"] < r.Measured+1 {
		t.Fatalf("watch queue jobs %v, want 3 ticks, 2 re-tests and a bisection step per measurement (%d measured)", f.jobs, r.Measured)
	}
	t.Logf("watch queue jobs: %v; builds %d of bound %d over %d commits", f.jobs, r.Builds, r.Bound, r.Commits)
}

// BenchmarkRetestBisect runs the watch flow of the end-to-end test with a
// fresh build recipe (the test pipeline plus a fragment that sets
// CONFIG_LOCALVERSION to a nonce: the same kernels but for their release
// string, so no cached artifact and a new O= directory, with kcc's store
// warm), so every figure includes real builds: the first tick's build,
// the re-test of the new tag, and the bisection's incremental step
// builds. (A fragment holding only a comment changed the recipe but not
// the .config, and kernels are cached by their final .config: every step
// was a cache hit.) With PATCHEVAL_BENCH_CLEAN=1 it
// also builds the culprit from scratch (fresh cache, no compiler cache)
// for the incremental-vs-clean ratio. bench/bisect.sh runs it. The watch
// runs through its jobs (runWatchFlow).
func BenchmarkRetestBisect(b *testing.B) {
	buildtest.SkipIfSlow(b)
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		nonce := filepath.Join(dir, "bench-nonce.config")
		if err := os.WriteFile(nonce, []byte(fmt.Sprintf("CONFIG_LOCALVERSION=\"-bench%d\"\n", time.Now().UnixNano())), 0o644); err != nil {
			b.Fatal(err)
		}
		src, err := os.ReadFile("../experiments/watch/testdata/retest-x86-getppid.toml")
		if err != nil {
			b.Fatal(err)
		}
		toml := strings.Replace(string(src), `fragments = ["qemu-boot"]`, fmt.Sprintf(`fragments = ["qemu-boot", %q]`, nonce), 1)
		pipeline := filepath.Join(dir, "bench.toml")
		if err := os.WriteFile(pipeline, []byte(toml), 0o644); err != nil {
			b.Fatal(err)
		}
		f := runWatchFlow(b, pipeline)
		r := f.result
		if r.Culprit == nil || r.Culprit.Hash != f.synth[culpritCommit-1] {
			b.Fatalf("bisection found %+v, want %s", r.Culprit, f.synth[culpritCommit-1])
		}
		var steps []float64
		for _, s := range r.Steps {
			if s.Built && s.Error == "" && len(s.Values) > 0 {
				steps = append(steps, s.BuildSeconds)
			}
		}
		b.ReportMetric(float64(r.Builds), "builds")
		b.ReportMetric(float64(r.Bound), "bound")
		b.ReportMetric(float64(r.Commits), "commits")
		b.ReportMetric(stats.Summarize(steps).Mean, "step-build-s")
		b.ReportMetric(maxOf(steps), "max-step-build-s")
		b.ReportMetric(f.first.Seconds(), "first-tick-s")
		b.ReportMetric(f.bisect.Seconds(), "bisect-s")
		b.ReportMetric(f.toCulprit.Seconds(), "tag-to-culprit-s")
		b.Logf("bisection report:\n%s", f.report)
		if os.Getenv("PATCHEVAL_BENCH_CLEAN") == "1" {
			req := build.Request{Repo: filepath.Join(xdg.CacheDir(), "trees", "retest-e2e", "served", "linux.git"), Commit: r.Culprit.Hash,
				Arch: "x86_64", BaseConfig: "tinyconfig", Fragments: []string{buildtest.BootFragment(b, "x86_64"), nonce}, Variant: "clean"}
			var d time.Duration
			buildtest.Serialize(b, func() {
				start := time.Now()
				_, err = build.Build(context.Background(), req, build.Options{CacheDir: b.TempDir(), CompilerCache: "none", Jobs: 2, Nice: 10, NoNetwork: true})
				d = time.Since(start)
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(d.Seconds(), "clean-build-s")
			if m := stats.Summarize(steps).Mean; m > 0 {
				b.ReportMetric(m/d.Seconds(), "step/clean")
			}
		}
	}
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
