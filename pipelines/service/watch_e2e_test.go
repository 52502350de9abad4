package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/bisect"
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
	// first is the first tick (v6.2-rc1 built and booted); toCulprit from
	// v6.2-rc2's appearance to the culprit's report; bisect the bisection.
	first, toCulprit, bisect time.Duration
	event                    *store.WatchEvent
	result                   *bisect.Result
	report                   string
}

// runWatchFlow runs a watch with the pipeline file over the synthetic
// history served on loopback: v6.2-rc1 is there at the first tick;
// next-20261201 and v6.2-rc2 appear before the second, which re-tests
// v6.2-rc2 (and nothing else), finds the regression and bisects it; then
// the remote goes down for a third tick. Failures of the flow itself
// fail tb; the caller checks the figures.
func runWatchFlow(tb testing.TB, pipeline string) *e2eFlow {
	base := buildtest.Repo(tb)
	root := filepath.Join(xdg.CacheDir(), "trees", "retest-e2e")
	if err := os.MkdirAll(filepath.Join(root, "served"), 0o755); err != nil {
		tb.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		tb.Fatal(err)
	}
	upstream, local := filepath.Join(root, "served", "linux.git"), filepath.Join(root, "local.git")
	clone(tb, base, upstream)
	clone(tb, base, local)
	f := &e2eFlow{synth: synthHistory(tb, upstream)}
	for _, tag := range []string{"v6.2-rc1", "v6.2-rc2", "next-20261201"} {
		testgit.Run(nil, nil, "--git-dir="+upstream, "update-ref", "-d", "refs/tags/"+tag)
	}
	testgit.Tag(tb, upstream, "v6.2-rc1", f.synth[0])
	srv := testgit.Serve(tb, filepath.Join(root, "served"))

	st, err := store.Open(filepath.Join(tb.TempDir(), "patcheval.db"))
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	ev := &PipelineEvaluator{OutDir: tb.TempDir(), StorePath: st.Path(), CacheDir: xdg.CacheDir(), Jobs: 2, Progress: progress.New(os.Stderr)}
	b := &Bisection{Eval: ev, From: mbox.Address{Name: "Tester", Email: "tester@patcheval.invalid"}, Logf: tb.Logf}
	var evaluated []string
	counting := EvaluatorFunc(func(ctx context.Context, w *store.Watch, tag, commit string) (int64, error) {
		evaluated = append(evaluated, tag)
		var id int64
		var err error
		buildtest.Serialize(tb, func() { id, err = ev.Evaluate(ctx, w, tag, commit) })
		return id, err
	})
	wr := &Watcher{Store: st, Eval: counting, Deterministic: Deterministic, Logf: tb.Logf,
		Bisect: func(ctx context.Context, w *store.Watch, e *store.WatchEvent, good, bad *store.WatchTag) (any, error) {
			start := time.Now()
			var res any
			var err error
			buildtest.Serialize(tb, func() { res, err = b.Bisect(ctx, w, e, good, bad) })
			f.bisect = time.Since(start)
			return res, err
		}}
	w, err := st.AddWatch(store.Watch{Name: "e2e", Remote: srv.URL() + "/linux.git", Tags: "v6.*-rc*", Pipeline: pipeline,
		Schedule: "@every 30m", Bisect: true, Tree: local})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	res, err := wr.Tick(ctx, w)
	if err != nil {
		tb.Fatalf("first tick: %v", err)
	}
	f.first = time.Since(start)
	if !slices.Equal(res.Evaluated, []string{"v6.2-rc1"}) {
		tb.Fatalf("first tick evaluated %v", res.Evaluated)
	}

	// A non-matching tag and the next rc appear.
	testgit.Tag(tb, upstream, "next-20261201", f.synth[18])
	testgit.Tag(tb, upstream, "v6.2-rc2", f.synth[synthCommits-1])
	appeared := time.Now()
	res, err = wr.Tick(ctx, w)
	if err != nil {
		tb.Fatalf("second tick: %v", err)
	}
	f.toCulprit = time.Since(appeared)
	if !slices.Equal(res.Evaluated, []string{"v6.2-rc2"}) || !slices.Equal(evaluated, []string{"v6.2-rc1", "v6.2-rc2"}) {
		tb.Fatalf("second tick evaluated %v (all: %v), want exactly v6.2-rc2", res.Evaluated, evaluated)
	}
	if len(res.Events) != 1 {
		tb.Fatalf("events %+v, want one", res.Events)
	}
	evs, _ := st.WatchEvents(w.ID)
	if len(evs) != 1 {
		tb.Fatalf("stored events %+v", evs)
	}
	f.event = evs[0]
	var bis struct{ Report, Error string }
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

	// The remote goes down: an infra error on the watch, no history lost.
	srv.Down()
	if _, err := wr.Tick(ctx, w); fail.KindOf(err) != fail.KindInfra {
		tb.Fatalf("tick with the remote down: %v", err)
	}
	h, err := Load(st, w)
	if err != nil {
		tb.Fatal(err)
	}
	if len(h.Tags) != 2 || h.Tags[0].Status != store.TagDone || h.Tags[1].Status != store.TagDone || len(h.Series) != 1 ||
		len(h.Events) != 1 || h.Watch.LastError == "" {
		tb.Fatalf("history after the remote went down: %+v", h)
	}
	var txt strings.Builder
	WriteText(&txt, h)
	tb.Logf("watch show after the remote went down:\n%s", txt.String())
	return f
}

// TestWatchRetestsNewTagAndBisectsTheRegression is the end-to-end test
// with real parts: a git remote over smart HTTP on loopback holding
// Debian's 6.1 tree with a synthetic history, x86_64 kernels built with
// kcc in the shared cache and booted in deterministic QEMU. A new
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
	pipeline, _ := filepath.Abs("testdata/retest-x86-getppid.toml")
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
}
