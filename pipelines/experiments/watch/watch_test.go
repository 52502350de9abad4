package watch

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/pipelines/store"
)

// upstream is a real remote served over git's smart HTTP on loopback,
// with a history whose file bench/getppid holds what a "measurement" of
// the tree gives: the watch tests check the watch (listing, fetching,
// ordering, history, events) with a real git remote and a real store; the
// evaluation itself is treeEval, which reads the fetched tree (the
// kernel build and boot are pipelines' tests, and the e2e test here).
type upstream struct {
	srv  *testgit.Server
	dir  string
	url  string
	head string
	n    int
}

func newUpstream(t *testing.T) *upstream {
	root := t.TempDir()
	u := &upstream{dir: testgit.InitBare(t, filepath.Join(root, "linux.git"))}
	u.srv = testgit.Serve(t, root)
	u.url = u.srv.URL() + "/linux.git"
	return u
}

// commit adds a commit whose measurement is value.
func (u *upstream) commit(t *testing.T, value int) string {
	u.n++
	u.head = testgit.Commit(t, u.dir, u.head, fmt.Sprintf("change %d", u.n),
		fmt.Sprintf("2026-11-02T10:%02d:00Z", u.n), map[string]string{
			"bench/getppid": strconv.Itoa(value) + "\n",
			"kernel/sys.c":  fmt.Sprintf("/* revision %d */\n", u.n),
		})
	return u.head
}

// treeEval "measures" bench/getppid of the fetched commit in the local
// tree (3 identical samples, as deterministic QEMU gives) and stores it
// as an evaluation.
type treeEval struct {
	st    *store.Store
	mu    sync.Mutex
	calls []string
	// during runs inside an evaluation (to take the remote down).
	during func(tag string)
	// builds, per tag, is the build row's metadata (as the runner
	// records it) the evaluation stores: none when absent.
	builds map[string]string
}

func (e *treeEval) Evaluate(ctx context.Context, w *store.Watch, tag, commit string) (int64, error) {
	e.mu.Lock()
	e.calls = append(e.calls, tag)
	e.mu.Unlock()
	if e.during != nil {
		e.during(tag)
	}
	s, err := testgit.Blob(w.Tree, commit, "bench/getppid")
	if err != nil {
		return 0, fail.Failedf("%s does not have the benchmark: %v", tag, err)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fail.Failedf("%s: %v", tag, err)
	}
	ev, _, err := e.st.CreateOrResumeEvaluation(store.Key(w.Pipeline, commit), store.EvaluationMeta{Pipeline: w.Pipeline, Tree: w.Tree, Base: commit})
	if err != nil {
		return 0, err
	}
	if m, ok := e.builds[tag]; ok {
		if _, err := e.st.RecordBuild(ev.ID, store.Build{Variant: "base", Arch: "ppc64le", Commit: commit, Status: "ok", Metadata: []byte(m)}); err != nil {
			return 0, err
		}
	}
	for boot := 0; boot < 3; boot++ {
		id, err := e.st.BeginRun(ev.ID, "base", boot)
		if err != nil {
			return 0, err
		}
		smp := []evaluate.Sample{{Benchmark: "getppid", Metric: "ns/op", Unit: "ns", Value: v, Deterministic: true}}
		if err := e.st.FinishRun(id, store.RunOK, evaluate.Environment{Deterministic: true}, nil, smp); err != nil {
			return 0, err
		}
	}
	return ev.ID, e.st.SetEvaluationStatus(ev.ID, store.StatusDone)
}

type fixture struct {
	up   *upstream
	st   *store.Store
	ev   *treeEval
	wr   *Watcher
	w    *store.Watch
	logs []string
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{up: newUpstream(t)}
	var err error
	f.st, err = store.Open(filepath.Join(t.TempDir(), "patcheval.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.st.Close() })
	f.ev = &treeEval{st: f.st}
	var mu sync.Mutex
	f.wr = &Watcher{Store: f.st, Eval: f.ev, Deterministic: func(*store.Watch) bool { return true },
		Logf: func(format string, a ...any) {
			mu.Lock()
			defer mu.Unlock()
			f.logs = append(f.logs, fmt.Sprintf(format, a...))
			t.Logf(format, a...)
		}}
	w := store.Watch{Name: "mainline", Remote: f.up.url, Tags: "v6.*-rc*", Pipeline: "test-getppid",
		Schedule: "@every 30m", Tree: testgit.InitBare(t, filepath.Join(t.TempDir(), "local.git"))}
	if err := Validate(&w, nil); err != nil {
		t.Fatal(err)
	}
	if f.w, err = f.st.AddWatch(w); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) tick(t *testing.T) *TickResult {
	t.Helper()
	res, err := f.wr.Tick(context.Background(), f.w)
	if err != nil {
		t.Fatalf("tick: %v", err)
	}
	return res
}

func TestNewMatchingTagTriggersOneRetest(t *testing.T) {
	f := newFixture(t)
	testgit.Tag(t, f.up.dir, "v6.1-rc7", f.up.commit(t, 100))
	testgit.Tag(t, f.up.dir, "v6.2-rc1", f.up.commit(t, 100))
	f.up.commit(t, 100)

	// First look: the history is recorded, only the newest tag evaluated.
	res := f.tick(t)
	if !slices.Equal(res.New, []string{"v6.1-rc7", "v6.2-rc1"}) || !slices.Equal(res.Evaluated, []string{"v6.2-rc1"}) {
		t.Fatalf("first tick: new %v evaluated %v", res.New, res.Evaluated)
	}
	// Nothing new: nothing evaluated.
	if res := f.tick(t); len(res.New)+len(res.Evaluated) != 0 {
		t.Fatalf("idle tick: %+v", res)
	}
	// A non-matching tag and a matching one; the matching one is rc10,
	// which sorts before rc9 by name: order by version.
	testgit.Tag(t, f.up.dir, "next-20261102", f.up.commit(t, 100))
	testgit.Tag(t, f.up.dir, "v6.2-rc9", f.up.commit(t, 100))
	testgit.Tag(t, f.up.dir, "v6.2-rc10", f.up.commit(t, 100))
	f.up.commit(t, 100)
	res = f.tick(t)
	if !slices.Equal(res.Evaluated, []string{"v6.2-rc9", "v6.2-rc10"}) {
		t.Fatalf("evaluated %v, want [v6.2-rc9 v6.2-rc10] (version order, next-* not matching)", res.Evaluated)
	}
	if !slices.Equal(f.ev.calls, []string{"v6.2-rc1", "v6.2-rc9", "v6.2-rc10"}) {
		t.Fatalf("evaluations %v: each matching tag exactly once", f.ev.calls)
	}
	// Only the tags' objects came over: the local tree has the tags, and
	// not the untagged commit on top or the non-matching tag.
	if _, err := testgit.Run(nil, nil, "--git-dir="+f.w.Tree, "rev-parse", "-q", "--verify", "refs/tags/next-20261102"); err == nil {
		t.Fatal("the non-matching tag was fetched")
	}
	if _, err := testgit.Run(nil, nil, "--git-dir="+f.w.Tree, "cat-file", "-e", f.up.head); err == nil {
		t.Fatal("the untagged head was fetched")
	}
	w, _ := f.st.FindWatch("mainline")
	if w.LastError != "" || w.LastOK.IsZero() {
		t.Fatalf("watch state after good ticks: %+v", w)
	}
}

func TestRegressionBetweenTagsIsAnEventAndBisected(t *testing.T) {
	f := newFixture(t)
	f.w.Bisect = true
	var bisected []string
	f.wr.Bisect = func(ctx context.Context, w *store.Watch, ev *store.WatchEvent, good, bad *store.WatchTag) (any, error) {
		bisected = append(bisected, good.Tag+".."+bad.Tag+" "+good.Commit[:7]+".."+bad.Commit[:7])
		return map[string]string{"culprit": "test"}, nil
	}
	testgit.Tag(t, f.up.dir, "v6.2-rc1", f.up.commit(t, 1000))
	f.tick(t)
	f.up.commit(t, 1000)
	f.up.commit(t, 1250) // the regression
	testgit.Tag(t, f.up.dir, "v6.2-rc2", f.up.commit(t, 1250))
	f.up.commit(t, 1000)                                       // a fix: an improvement
	testgit.Tag(t, f.up.dir, "v6.2-rc3", f.up.commit(t, 1001)) // 0.1%: noise under the 0.5% threshold
	testgit.Tag(t, f.up.dir, "v6.2-rc4", f.up.commit(t, 1001))
	res := f.tick(t)
	if len(res.Events) != 2 {
		t.Fatalf("events %+v, want a regression rc1..rc2 and an improvement rc2..rc3", res.Events)
	}
	r, i := res.Events[0], res.Events[1]
	if r.Verdict != "regression" || r.From != "v6.2-rc1" || r.To != "v6.2-rc2" || r.Change < 24.9 || r.Change > 25.1 ||
		r.Benchmark != "getppid" || r.Metric != "ns/op" {
		t.Fatalf("regression event %+v", r)
	}
	if i.Verdict != "improvement" || i.From != "v6.2-rc2" || i.To != "v6.2-rc3" {
		t.Fatalf("improvement event %+v", i)
	}
	if len(bisected) != 1 || !strings.HasPrefix(bisected[0], "v6.2-rc1..v6.2-rc2 ") {
		t.Fatalf("bisections %v, want one of rc1..rc2", bisected)
	}
	evs, _ := f.st.WatchEvents(f.w.ID)
	if len(evs) != 2 || !strings.Contains(string(evs[0].Bisect), "culprit") {
		t.Fatalf("stored events %+v", evs)
	}
	h, err := Load(f.st, f.w)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Series) != 1 || len(h.Series[0].Values) != 4 || h.Series[0].Values[1].Mean != 1250 || h.Series[0].Values[1].N != 3 {
		t.Fatalf("history %+v", h.Series)
	}
	var svg strings.Builder
	if err := WriteSVG(&svg, h); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(svg.String()))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("the SVG is not well-formed: %v\n%s", err, svg.String())
		}
	}
	for _, want := range []string{"<polygon", "<polyline", ">v6.2-rc4<", "regression v6.2-rc1..v6.2-rc2 +25.0%", "improvement v6.2-rc2..v6.2-rc3"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestRemoteDownMidWatchLosesNoHistory(t *testing.T) {
	f := newFixture(t)
	testgit.Tag(t, f.up.dir, "v6.2-rc1", f.up.commit(t, 100))
	f.tick(t)
	testgit.Tag(t, f.up.dir, "v6.2-rc2", f.up.commit(t, 110))
	testgit.Tag(t, f.up.dir, "v6.2-rc3", f.up.commit(t, 120))
	// The remote goes down while rc2 is being evaluated: rc3 cannot be
	// fetched.
	f.ev.during = func(tag string) {
		if tag == "v6.2-rc2" {
			f.up.srv.Down()
		}
	}
	res, err := f.wr.Tick(context.Background(), f.w)
	if err == nil || fail.KindOf(err) != fail.KindInfra {
		t.Fatalf("tick with the remote going down: %v, want an infra error", err)
	}
	if !slices.Equal(res.Evaluated, []string{"v6.2-rc2"}) {
		t.Fatalf("evaluated %v before the remote went down", res.Evaluated)
	}
	w, _ := f.st.FindWatch(f.w.Name)
	if w.LastError == "" || w.LastErrorKind != "infrastructure" || !strings.Contains(w.LastError, f.up.url) {
		t.Fatalf("watch state %+v: the error must name the remote", w)
	}
	// Next tick, still down: an error, nothing lost.
	if _, err := f.wr.Tick(context.Background(), f.w); err == nil {
		t.Fatal("tick against a down remote succeeded")
	}
	h, _ := Load(f.st, f.w)
	var got []string
	for _, tg := range h.Tags {
		got = append(got, tg.Tag+"="+tg.Status)
	}
	if want := []string{"v6.2-rc1=done", "v6.2-rc2=done", "v6.2-rc3=queued"}; !slices.Equal(got, want) {
		t.Fatalf("history while down %v, want %v", got, want)
	}
	// Back up: the queued tag is evaluated and the error cleared.
	f.ev.during = nil
	f.up.srv.Up(t)
	res = f.tick(t)
	if !slices.Equal(res.Evaluated, []string{"v6.2-rc3"}) || len(res.Events) != 1 {
		t.Fatalf("after the remote came back: %+v", res)
	}
	w, _ = f.st.FindWatch(f.w.Name)
	if w.LastError != "" {
		t.Fatalf("error kept after a good tick: %q", w.LastError)
	}
	if !slices.Equal(f.ev.calls, []string{"v6.2-rc1", "v6.2-rc2", "v6.2-rc3"}) {
		t.Fatalf("evaluations %v", f.ev.calls)
	}
}

func TestSchedulerTicksAndSkipsWhileRunning(t *testing.T) {
	s := NewScheduler(t.Logf)
	if err := s.Set(1, "TZ=UTC", func() {}); err == nil {
		t.Fatal("Set accepted a bad spec")
	}
	if err := s.Set(1, "@every 1m", func() {}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	time.Sleep(50 * time.Millisecond)
	if next := s.Next(1); next.IsZero() || time.Until(next) > time.Minute+time.Second {
		t.Fatalf("next run %v", next)
	}
	s.Remove(1)
	if len(s.IDs()) != 0 {
		t.Fatal("entry not removed")
	}
	cancel()
	<-done
}

// TestSeriesThatNoLongerAppliesIsAResult: a watch re-applying a series
// (the real PipelineEvaluator: apply at object level comes before any
// build) records "does not apply on <tag>" with the failing hunk as the
// tag's result, and the watch itself is fine.
func TestSeriesThatNoLongerAppliesIsAResult(t *testing.T) {
	f := newFixture(t)
	rc1 := f.up.commit(t, 100)
	testgit.Tag(t, f.up.dir, "v6.2-rc1", rc1)
	// The series changes the value on rc1; rc2 changed the same line.
	fix := testgit.Commit(t, f.up.dir, rc1, "bench: make getppid faster", "2026-11-02T11:00:00Z",
		map[string]string{"bench/getppid": "90\n"})
	mbx := filepath.Join(t.TempDir(), "series.mbox")
	patch := testgit.Git(t, testgit.Identity("2026-11-02T11:00:00Z"), nil, "--git-dir="+f.up.dir, "format-patch", "-1", "--stdout",
		"--subject-prefix=PATCH", "--thread", fix)
	if err := os.WriteFile(mbx, []byte(patch+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testgit.Tag(t, f.up.dir, "v6.2-rc2", f.up.commit(t, 110))
	ev := &PipelineEvaluator{OutDir: t.TempDir(), StorePath: f.st.Path(), CacheDir: t.TempDir()}
	f.wr.Eval = ev
	w := *f.w
	w.Name, w.Pipeline, w.SeriesID = "series", "ppc-preempt-dynamic", mbx
	sw, err := f.st.AddWatch(w)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.wr.Tick(context.Background(), sw)
	if err != nil {
		t.Fatalf("tick: %v", err)
	}
	if len(res.Failed) != 1 || !strings.Contains(res.Failed[0], "does not apply on v6.2-rc2") || !strings.Contains(res.Failed[0], "bench/getppid") {
		t.Fatalf("failed %q, want 'does not apply on v6.2-rc2' naming the file", res.Failed)
	}
	h, _ := Load(f.st, sw)
	if len(h.Tags) != 2 || h.Tags[1].Status != store.TagFailed || h.Tags[1].ErrorKind != "failed" {
		t.Fatalf("history %+v", h.Tags)
	}
	var txt strings.Builder
	WriteText(&txt, h)
	if !strings.Contains(txt.String(), "does not apply on v6.2-rc2") {
		t.Fatalf("watch show:\n%s", txt.String())
	}
	t.Logf("watch show:\n%s", txt.String())
}
