package service

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/internal/linuxtree"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/pipelines/store"
)

// releaseStream is Debian's release stream the watch sees appear, oldest
// first: trixie's 6.12, trixie-backports' 7.2 point releases, sid's
// 7.2.13 and the 7.3 backport.
var releaseStream = []string{"6.12.117", "7.2.6", "7.2.9", "7.2.11", "7.2.12", "7.2.13", "7.3.4"}

// streamRun is what runReleaseStream measured.
type streamRun struct {
	tags    []string
	commits map[string]string // tag -> commit
	tree    string            // the watch's local tree
	history *watch.History
	// perTag is the wall time of the run-now that re-tested each tag
	// (fetch, build, boot, report, and the bisection of an event it
	// found); wall is the whole stream.
	perTag map[string]time.Duration
	wall   time.Duration
	text   string
	svg    []byte
	// bisections are the events' bisection reports (report.txt), by
	// event "from..to benchmark".
	bisections map[string]string
	results    map[string]*bisect.Result
}

// importStream imports the stream's releases into one release-history
// repository in the shared cache (once: the same set gives the same
// commits on every machine) and returns it.
func importStream(tb testing.TB, root string) string {
	repo := &linuxtree.Repo{Path: filepath.Join(root, "releases.git"), Log: testWriter{tb}}
	apt := linuxtree.NewApt(xdg.CacheDir(), testWriter{tb})
	for _, v := range releaseStream {
		req, err := linuxtree.ParseRequest(v)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := repo.ImportDebian(context.Background(), apt, linuxtree.DebsDir(xdg.CacheDir()), req); err != nil {
			tb.Fatalf("import %s: %v", v, err)
		}
	}
	return repo.Path
}

// freshClone makes dir a bare hard-linked clone of src without its tags.
func freshClone(tb testing.TB, src, dir string) {
	if err := os.RemoveAll(dir); err != nil {
		tb.Fatal(err)
	}
	testgit.Git(tb, nil, nil, "clone", "-q", "--bare", "--local", src, dir)
	for _, ref := range strings.Fields(testgit.Git(tb, nil, nil, "--git-dir="+dir, "for-each-ref", "--format=%(refname)", "refs/tags")) {
		testgit.Git(tb, nil, nil, "--git-dir="+dir, "update-ref", "-d", ref)
	}
}

// runReleaseStream runs a watch with the release-stream pipeline over a
// git remote served on loopback (smart HTTP) that gains Debian's releases
// as tags one at a time, oldest first; after each new tag, one run-now
// (ticks, re-tests and bisection steps as River jobs in this process, the
// path of `patcheval watch run-now`). The kernels are built in cacheDir
// (builds and the kcc store). Failures of the flow fail tb; the caller
// checks the figures.
func runReleaseStream(tb testing.TB, cacheDir, pipeline string) *streamRun {
	root, unlock := lockedTreeRoot(tb, "release-stream")
	defer unlock()
	releases := importStream(tb, root)
	r := &streamRun{commits: map[string]string{}, perTag: map[string]time.Duration{}, bisections: map[string]string{},
		results: map[string]*bisect.Result{}}
	for _, v := range releaseStream {
		tag := linuxtree.VersionTag(v)
		r.tags = append(r.tags, tag)
		r.commits[tag] = testgit.Git(tb, nil, nil, "--git-dir="+releases, "rev-parse", tag+"^{commit}")
	}
	upstream := filepath.Join(root, "served", "linux.git")
	r.tree = filepath.Join(root, "local.git")
	freshClone(tb, releases, upstream)
	freshClone(tb, releases, r.tree)
	srv := testgit.Serve(tb, filepath.Join(root, "served"))

	dbPath := filepath.Join(tb.TempDir(), "patcheval.db")
	st, err := store.Open(dbPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	w, err := st.AddWatch(store.Watch{Name: "releases", Remote: srv.URL() + "/linux.git", Tags: "v*", Pipeline: pipeline,
		Schedule: "@every 30m", Bisect: true, Tree: r.tree})
	if err != nil {
		tb.Fatal(err)
	}
	out := tb.TempDir()
	watches := serialWatches(tb, out, dbPath, cacheDir, nil)
	cfg := Config{Database: dbPath, CacheDir: cacheDir, Jobs: 2, Log: testWriter{tb}, Grace: 10 * time.Second}
	ctx := context.Background()
	start := time.Now()
	for _, tag := range r.tags {
		// The next release appears on the remote (the first before the
		// first look, which evaluates only the newest tag there is).
		testgit.Tag(tb, upstream, tag, r.commits[tag])
		t0 := time.Now()
		run, err := RunWatchNow(ctx, cfg, watches, "releases")
		if err != nil {
			tb.Fatalf("run-now after %s appeared: %v", tag, err)
		}
		r.perTag[tag] = time.Since(t0)
		if !slices.Equal(run.Evaluated, []string{tag}) {
			tb.Fatalf("run-now after %s appeared evaluated %v, want exactly %s", tag, run.Evaluated, tag)
		}
		tb.Logf("%s: re-tested in %s, %d event(s)", tag, r.perTag[tag].Round(time.Second), len(run.Events))
	}
	r.wall = time.Since(start)

	cur, err := st.FindWatch(w.Name) // as the ticks left it (last check)
	if err != nil {
		tb.Fatal(err)
	}
	if r.history, err = watch.Load(st, cur); err != nil {
		tb.Fatal(err)
	}
	var txt strings.Builder
	if err := watch.WriteText(&txt, r.history); err != nil {
		tb.Fatal(err)
	}
	r.text = txt.String()
	var svg strings.Builder
	if err := watch.WriteSVG(&svg, r.history); err != nil {
		tb.Fatal(err)
	}
	r.svg = []byte(svg.String())
	evs, err := st.WatchEvents(w.ID)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range evs {
		if e.Verdict != "regression" {
			continue
		}
		key := fmt.Sprintf("%s..%s %s %s", e.From, e.To, e.Benchmark, e.Metric)
		var bis watch.BisectState
		if err := json.Unmarshal(e.Bisect, &bis); err != nil || bis.Report == "" {
			tb.Fatalf("regression %s was not bisected: %s", key, e.Bisect)
		}
		rep, err := os.ReadFile(bis.Report)
		if err != nil {
			tb.Fatal(err)
		}
		r.bisections[key] = string(rep)
		js, err := os.ReadFile(strings.TrimSuffix(bis.Report, ".txt") + ".json")
		if err != nil {
			tb.Fatal(err)
		}
		res := &bisect.Result{}
		if err := json.Unmarshal(js, res); err != nil {
			tb.Fatal(err)
		}
		r.results[key] = res
	}
	return r
}

// checkReleaseStream checks what every release-stream run must show: one
// re-test per release in version order, each with its build recorded,
// the plot, and every regression between two releases bisected to the
// release commit with the note that the history goes no finer.
func checkReleaseStream(tb testing.TB, r *streamRun) {
	h := r.history
	var got []string
	for _, t := range h.Tags {
		got = append(got, t.Tag)
		if t.Status != store.TagDone {
			tb.Errorf("%s: status %s (%s), want done", t.Tag, t.Status, t.ErrorText)
		}
		if t.Build == nil {
			tb.Errorf("%s: no build recorded", t.Tag)
		}
	}
	if !slices.Equal(got, r.tags) {
		tb.Fatalf("history tags %v, want %v in version order", got, r.tags)
	}
	if len(h.Series) == 0 || !strings.Contains(string(r.svg), "<svg") {
		tb.Fatalf("no series or no plot: %d series, svg %d bytes", len(h.Series), len(r.svg))
	}
	if len(h.Events) == 0 {
		tb.Fatalf("no step flagged across %s..%s (a year of kernel changes, deterministic counts):\n%s", r.tags[0], r.tags[len(r.tags)-1], r.text)
	}
	for key, res := range r.results {
		if res.Commits != 1 || res.Status != bisect.Found || res.Culprit == nil || res.Culprit.Hash != r.commits[res.BadRef] {
			tb.Errorf("%s: bisection %s over %d commit(s), culprit %+v; want the release commit of %s (adjacent tags: one commit)",
				key, res.Status, res.Commits, res.Culprit, res.BadRef)
		}
		if !strings.Contains(r.bisections[key], "imported as a whole release") ||
			!strings.Contains(r.bisections[key], "a finer answer needs the real history") {
			tb.Errorf("%s: the report does not say the history goes no finer:\n%s", key, r.bisections[key])
		}
	}
}

// TestReleaseStreamWatch is the release-stream watch end to end with real
// parts: Debian's linux-source packages (6.12.117, 7.2.6, 7.2.9, 7.2.11,
// 7.2.12, 7.2.13, 7.3.4) imported into a release history, served over
// smart HTTP on loopback and tagged one release at a time; the watch
// re-tests each new tag as it appears (x86_64 tinyconfig, kcc, the
// shared kernel cache, deterministic QEMU), flags the steps between
// releases and bisects each as far as the history allows: to the
// adjacent tag pair. Opt-in: seven kernels of three releases, cold the
// first time (bench/release-stream.sh runs it with a cold cache and
// records the figures).
func TestReleaseStreamWatch(t *testing.T) {
	testenv.SkipUnlessLong(t, "seven x86_64 kernels of Debian's 6.12/7.2/7.3 release stream, incremental through kcc")
	pipeline, _ := filepath.Abs("../experiments/watch/testdata/release-stream.toml")
	r := runReleaseStream(t, xdg.CacheDir(), pipeline)
	t.Logf("watch show:\n%s", r.text)
	checkReleaseStream(t, r)
	for key, rep := range r.bisections {
		t.Logf("bisection %s:\n%s", key, rep)
	}
}

// BenchmarkReleaseStream runs the release-stream watch with a cold kernel
// cache and compiler cache (a fresh cache directory), then builds the
// newest 7.2 point release again from scratch (another fresh cache, no
// compiler cache) as the reference for its re-test's compile time. It
// reports the stream's wall time, each tag's build seconds and compiled
// objects, and the point-release re-test / cold build ratio. With
// PATCHEVAL_RELEASE_STREAM_OUT set, the watch's text, its plot and the
// bisection reports are written there. With
// PATCHEVAL_RELEASE_STREAM_RESUME=1 the cache of an interrupted run is
// kept: the kernels it built come from the build cache (the summary says
// so per tag) and the next ones build on its kcc store, as they would
// have in that run. bench/release-stream.sh runs it.
func BenchmarkReleaseStream(b *testing.B) {
	buildtest.SkipIfSlow(b)
	pipeline, _ := filepath.Abs("../experiments/watch/testdata/release-stream.toml")
	for i := 0; i < b.N; i++ {
		cache := filepath.Join(xdg.CacheDir(), "bench-release-stream")
		if os.Getenv("PATCHEVAL_RELEASE_STREAM_RESUME") != "1" {
			if err := os.RemoveAll(cache); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.RemoveAll(filepath.Join(cache, "cold")); err != nil {
			b.Fatal(err)
		}
		r := runReleaseStream(b, cache, pipeline)
		checkReleaseStream(b, r)
		b.ReportMetric(r.wall.Seconds(), "stream-s")
		var lines []string
		for _, t := range r.history.Tags {
			s := t.Build
			if s.Cached {
				lines = append(lines, fmt.Sprintf("%-10s re-test %6.0f s  build: from the build cache (an earlier run's kernel), nothing compiled",
					t.Tag, r.perTag[t.Tag].Seconds()))
				continue
			}
			lines = append(lines, fmt.Sprintf("%-10s re-test %6.0f s  build %6.0f s  compiled %4d of %4d objects (%d from kcc)",
				t.Tag, r.perTag[t.Tag].Seconds(), s.Seconds, s.Compiled, s.Objects, s.Reused))
		}
		// The cold reference: the last 7.2 point release of the stream,
		// same recipe, nothing cached.
		ref := "v7.2.13"
		var retest *watch.TagEntry
		for k := range r.history.Tags {
			if r.history.Tags[k].Tag == ref {
				retest = &r.history.Tags[k]
			}
		}
		req := build.Request{Repo: r.tree, Commit: r.commits[ref], Arch: "x86_64", BaseConfig: "tinyconfig",
			Fragments: []string{buildtest.BootFragment(b, "x86_64")}, Variant: "cold"}
		var d time.Duration
		var art *build.Artifact
		var err error
		buildtest.Serialize(b, func() {
			start := time.Now()
			art, err = build.Build(context.Background(), req, build.Options{CacheDir: filepath.Join(cache, "cold"), CompilerCache: "none", Jobs: 2, Nice: 10, NoNetwork: true})
			d = time.Since(start)
		})
		if err != nil {
			b.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("cold build of %s (no caches): %.0f s, %d objects", ref, d.Seconds(), art.Meta.Results.ObjectsCompiled),
			fmt.Sprintf("re-test / cold: %.3f (build %.0f s of %.0f s)", retest.Build.Seconds/d.Seconds(), retest.Build.Seconds, d.Seconds()),
			fmt.Sprintf("stream wall: %.0f s for %d releases", r.wall.Seconds(), len(r.tags)))
		b.ReportMetric(d.Seconds(), "cold-build-s")
		b.ReportMetric(retest.Build.Seconds/d.Seconds(), "retest/cold")
		summary := strings.Join(lines, "\n") + "\n"
		b.Logf("release stream:\n%s\nwatch show:\n%s", summary, r.text)
		if dir := os.Getenv("PATCHEVAL_RELEASE_STREAM_OUT"); dir != "" {
			files := map[string][]byte{"summary.txt": []byte(summary), "watch-show.txt": []byte(r.text), "history.svg": r.svg}
			for key, rep := range r.bisections {
				files["bisect-"+strings.NewReplacer(" ", "_", "/", "_").Replace(key)+".txt"] = []byte(rep)
			}
			for name, data := range files {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}
