package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/internal/testpg"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/pipelines/store"
)

// logLinesOf are the lines of the file at path that start with prefix.
func logLinesOf(path, prefix string) []string {
	data, _ := os.ReadFile(path)
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// onBothDatabases runs fn on SQLite (a file in root/state) and on a real
// PostgreSQL 15.
func onBothDatabases(t *testing.T, fn func(t *testing.T, root, db string)) {
	t.Run("sqlite", func(t *testing.T) {
		root := t.TempDir()
		fn(t, root, filepath.Join(root, "state", "patcheval.db"))
	})
	t.Run("postgres", func(t *testing.T) { fn(t, t.TempDir(), testpg.URL(t)) })
}

// watchRemote is a watch test's git remote, served over smart HTTP on
// loopback (URL), and the local tree new tags are fetched into.
type watchRemote struct {
	tb              testing.TB
	upstream, local string
	URL             string
}

// addWatch opens the store at db and adds watch name of this remote's
// v6.*-rc* tags into r.local, with the x86 getppid re-test pipeline
// every 6 hours (bisecting regressions when bisect): the store is
// returned open, for the caller to close.
func (r *watchRemote) addWatch(db, name string, bisect bool) (*store.Store, *store.Watch) {
	r.tb.Helper()
	st, err := store.Open(db)
	if err != nil {
		r.tb.Fatal(err)
	}
	pipeline, _ := filepath.Abs("../experiments/watch/testdata/retest-x86-getppid.toml")
	w, err := st.AddWatch(store.Watch{Name: name, Remote: r.URL, Tags: "v6.*-rc*", Pipeline: pipeline,
		Schedule: "@every 6h", Bisect: bisect, Tree: r.local})
	if err != nil {
		st.Close()
		r.tb.Fatal(err)
	}
	return st, w
}

func newWatchRemote(tb testing.TB, root string) *watchRemote {
	r := &watchRemote{tb: tb, upstream: testgit.InitBare(tb, filepath.Join(root, "served", "linux.git")),
		local: testgit.InitBare(tb, filepath.Join(root, "local.git"))}
	r.URL = testgit.Serve(tb, filepath.Join(root, "served")).URL() + "/linux.git"
	return r
}

// commit adds change i on parent: bench/getppid holds value (what the
// fake evaluator and measurer read; "BROKEN": does not build).
func (r *watchRemote) commit(parent string, i int, value string) string {
	return testgit.Commit(r.tb, r.upstream, parent, fmt.Sprintf("sys: change %d", i), fmt.Sprintf("2026-11-02T%02d:%02d:00Z", 10+i/60, i%60),
		map[string]string{"bench/getppid": value + "\n", "kernel/sys.c": fmt.Sprintf("/* %d */\n", i)})
}

func (r *watchRemote) tag(name, commit string) { testgit.Tag(r.tb, r.upstream, name, commit) }

// regression adds changes 1 to n on parent, one commit each, and returns
// them in order: change culprit and those after it make getppid 25%
// slower (1250 against 1000), change broken does not build.
func (r *watchRemote) regression(parent string, n, culprit, broken int) []string {
	commits := make([]string, 0, n)
	for i := 1; i <= n; i++ {
		v := "1000"
		switch {
		case i == broken:
			v = "BROKEN"
		case i >= culprit:
			v = "1250"
		}
		parent = r.commit(parent, i, v)
		commits = append(commits, parent)
	}
	return commits
}

// TestWatchRunNowBesideServe runs `watch run-now` (RunWatchNow) against
// the database a real serve process works, and then, with the serve
// stopped, two run-nows at once: each tag is evaluated exactly once.
// While serve runs, two run-nows and the API's tick all queue ticks and
// serve's watch queue works them: the run-nows only wait (Served), and
// v6.2-rc1 is evaluated once although three ticks found it. With no
// serve, two run-nows race for v6.2-rc2 and v6.2-rc3 (each evaluation
// takes 300 ms, so their ticks overlap the other's re-tests): on SQLite
// one of them works the watch queue and the other waits for it; on
// Postgres both may work it, and the re-test's unique key (watch, entry)
// lets only one job re-test each tag. A serve started again and a
// run-now beside it evaluate nothing more (SQLite only).
func TestWatchRunNowBesideServe(t *testing.T) { onBothDatabases(t, watchRunNow) }

func watchRunNow(t *testing.T, root, db string) {
	r := newWatchRemote(t, root)
	rc1 := r.commit("", 0, "1000")
	r.tag("v6.2-rc1", rc1)
	st, _ := r.addWatch(db, "mainline", false)
	defer st.Close()
	logPath := filepath.Join(root, "watch.log")
	ws := testWatchSpec{Log: logPath, Out: filepath.Join(root, "watches"), EvalDelay: 300 * time.Millisecond}
	spec, _ := json.Marshal(map[string]any{"DB": db, "Tree": r.local, "Cache": t.TempDir(), "State": filepath.Join(root, "state"), "Watch": ws})
	t.Setenv("PATCHEVAL_STATE_DIR", filepath.Join(root, "state"))
	cfg := Config{Database: db, CacheDir: t.TempDir(), From: testFrom, Log: testWriter{t}, Grace: 5 * time.Second}
	runNows := func(n int, tick func()) []*WatchRun {
		t.Helper()
		runs := make([]*WatchRun, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				runs[i], errs[i] = RunWatchNow(ctx, cfg, ws.config, "mainline")
			}()
		}
		if tick != nil {
			tick()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("run-now %d: %v", i, err)
			}
		}
		return runs
	}
	evals := func(want ...string) {
		t.Helper()
		if got := logLinesOf(logPath, "eval "); !slices.Equal(got, want) {
			t.Fatalf("evaluations %q, want %q (each tag once)", got, want)
		}
	}

	srv := startServe(t, string(spec))
	if store.IsPostgres(db) {
		// Served is decided by serve's heartbeat on Postgres: wait for it.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if ok, _ := watchQueueServed(st); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("serve's heartbeat never listed the watch queue")
			}
		}
	}
	runs := runNows(2, func() {
		if code, e, raw := call(t, "POST", srv.base+"/api/v1/watches/mainline/tick", "", nil); code != 202 {
			t.Fatalf("tick: %d %+v %s", code, e, raw)
		}
	})
	for i, r := range runs {
		if !r.Served || r.TickJob == 0 {
			t.Fatalf("run-now %d beside serve: %+v, want its tick queued for serve", i, r)
		}
	}
	if !slices.Contains(runs[0].Evaluated, "v6.2-rc1") && !slices.Contains(runs[1].Evaluated, "v6.2-rc1") {
		t.Fatalf("run-nows say %+v %+v, want v6.2-rc1 evaluated", runs[0], runs[1])
	}
	evals("eval v6.2-rc1")

	// Two more tags; serve stops; two run-nows at once.
	rc2 := r.commit(rc1, 1, "1000")
	r.tag("v6.2-rc2", rc2)
	r.tag("v6.2-rc3", r.commit(rc2, 2, "1010"))
	srv.cmd.Process.Signal(syscall.SIGTERM)
	<-srv.done
	runs = runNows(2, nil)
	evals("eval v6.2-rc1", "eval v6.2-rc2", "eval v6.2-rc3")
	if !store.IsPostgres(db) && runs[0].Served == runs[1].Served {
		t.Fatalf("run-nows on SQLite without serve: served %v and %v, want one working the queue and one waiting", runs[0].Served, runs[1].Served)
	}
	w, err := st.FindWatch("mainline")
	if err != nil {
		t.Fatal(err)
	}
	tags, err := st.WatchTags(w.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range tags {
		if tg.Status != store.TagDone {
			t.Fatalf("entry %s is %s (%s), want done", tg.Tag, tg.Status, tg.ErrorText)
		}
	}

	if store.IsPostgres(db) {
		return // the rest is the same on both
	}
	// serve again, and a run-now beside it: nothing is new.
	srv = startServe(t, string(spec))
	runs = runNows(1, nil)
	if len(runs[0].New) != 0 || len(runs[0].Evaluated) != 0 {
		t.Fatalf("run-now with nothing new: %+v", runs[0])
	}
	evals("eval v6.2-rc1", "eval v6.2-rc2", "eval v6.2-rc3")
}

// BenchmarkWatchJobsBisect measures the watch's job path on the cheap
// side: the synthetic history (N first-parent commits between v6.2-rc1
// and v6.2-rc2 on a real git remote over smart HTTP, the regression at
// 9/16 of the range, one commit that does not build just after it) is
// evaluated and bisected by the kill test's fake evaluator and measurer
// (they read the value from the tree: no kernel is built or booted), as
// `watch run-now` runs it (RunWatchNow: River jobs on SQLite, worked in
// this process). So the figures are the bisection's arithmetic and the
// jobs' own cost: builds used vs the bound ceil(log2(N)) + 2 (plus the
// skipped commit), measurements, and the wall time from the second
// run-now (v6.2-rc2 has appeared) to the culprit's report, per
// bisection step. The real-kernel figures come from
// TestWatchRetestsNewTagAndBisectsTheRegression and bench/bisect.sh.
func BenchmarkWatchJobsBisect(b *testing.B) {
	for _, n := range []int{16, 64, 256} {
		b.Run(fmt.Sprintf("commits=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchWatchJobsBisect(b, n)
			}
		})
	}
}

func benchWatchJobsBisect(b *testing.B, n int) {
	root := b.TempDir()
	r := newWatchRemote(b, root)
	parent := r.commit("", 0, "1000")
	r.tag("v6.2-rc1", parent)
	culprit := n * 9 / 16
	commits := r.regression(parent, n, culprit, culprit+1)
	parent, culpritHash := commits[n-1], commits[culprit-1]
	db := filepath.Join(root, "state", "patcheval.db")
	st, w := r.addWatch(db, "bench", true)
	defer st.Close()
	ws := testWatchSpec{Log: filepath.Join(root, "watch.log"), Out: filepath.Join(root, "watches")}
	cfg := Config{Database: db, CacheDir: b.TempDir(), From: testFrom, Log: io.Discard, Grace: 5 * time.Second}
	if _, err := RunWatchNow(b.Context(), cfg, ws.config, "bench"); err != nil {
		b.Fatal(err)
	}
	r.tag("v6.2-rc2", parent)
	start := time.Now()
	if _, err := RunWatchNow(b.Context(), cfg, ws.config, "bench"); err != nil {
		b.Fatal(err)
	}
	toCulprit := time.Since(start)
	evs, err := st.WatchEvents(w.ID)
	if err != nil || len(evs) != 1 {
		b.Fatalf("events %+v %v", evs, err)
	}
	var bs watch.BisectState
	if err := json.Unmarshal(evs[0].Bisect, &bs); err != nil {
		b.Fatal(err)
	}
	if bs.Status != bisect.Found || bs.Culprit == nil || bs.Culprit.Hash != culpritHash {
		b.Fatalf("bisection %s %+v, want %s", bs.Status, bs.Culprit, culpritHash)
	}
	b.ReportMetric(float64(bs.Builds), "builds")
	b.ReportMetric(float64(bs.Bound), "bound")
	b.ReportMetric(float64(bs.Skipped), "skipped")
	b.ReportMetric(float64(len(bs.Records)), "measurements")
	b.ReportMetric(toCulprit.Seconds(), "tag-to-culprit-s")
	b.ReportMetric(toCulprit.Seconds()*1000/float64(len(bs.Records)+2), "ms/job")
}
