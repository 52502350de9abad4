package service

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/artifact"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestFarmRealKernel is bench/farm-build.sh --real: a real evaluation
// across the farm, against the same evaluation on one machine.
//
// The evaluation: Debian's 6.1 tree, one x86_64 kernel (tinyconfig with
// the q35 boot fragment and buildtest.X86BenchSymbols, the kernel
// TestOtherArches/x86_64 and TestAllBenchmarks boot) and two
// variants booting it (the second with another command line), three
// deterministic QEMU boots each. On one machine (runner.Run, the path of
// `patcheval lore --pipeline`, in the coordinator's namespace) the kernel
// comes from the suite's cache (PATCHEVAL_CACHE_DIR): a cache hit, then
// the boots. On the farm, serve with Postgres in one network namespace
// and two workers (x86_64 builds and boots, -j2) in two others, on empty
// caches of their own, with the suite's cache and serve's hidden from
// them: one worker fetches the whole tree from serve into its mirror and
// builds the kernel for real (no kcc hit: its compiler cache is empty),
// and both boot it, fetched through serve's artifact store.
//
// Postgres restarts while the farm's first boot runs (every session
// ends, the workers' too): the evaluation completes.
//
// It checks:
//   - the farm's kernel was built on a worker, from that worker's mirror
//     of serve's tree (fetched over git's smart HTTP), with every object
//     compiled (no compiler-cache hit), and serve's artifact store holds
//     it whole; its .config equals one machine's;
//   - both runs have the same samples (same variants, benchmarks, boots
//     and iterations), each within 0.1% of its counterpart
//     (deterministic QEMU is not bit-exact from boot to boot);
//   - the two report.json files agree (diffReports): the same variants,
//     boots, benchmarks, comparisons and verdicts, every measured number
//     within 0.1%. Fields that say where and when the evaluation ran
//     (ids, dates, paths of the build directory, wall times) may differ,
//     and so may the statistics of the two variants' difference (p
//     values, t, confidence bounds), which move freely when, as here,
//     both variants boot one kernel and measure the same.
//
// It prints BENCH lines with the wall times. A real kernel build: opt-in
// (PATCHEVAL_FARM_REAL=1), never in the default suite;
// PATCHEVAL_FARM_KEEP=DIR keeps the workers' caches, serve's state and
// both reports in DIR.
func TestFarmRealKernel(t *testing.T) {
	mode := os.Getenv("PATCHEVAL_FARM_REAL")
	if mode == "" {
		t.Skip("a benchmark with a real kernel build: bench/farm-build.sh --real (PATCHEVAL_FARM_REAL=1; =one-machine runs the one-machine half alone, boots only)")
	}
	testenv.SkipIfSlow(t, "the kernel tree and a kernel build")
	skipUnlessNetns(t)
	scenario := "real"
	if mode == "one-machine" {
		scenario = "real-one-machine"
	}
	out := runFarm(t, farmSpec{Scenario: scenario, Tree: testenv.LinuxTree(t), Cache: xdg.CacheDir()})
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, "BENCH "); i >= 0 {
			fmt.Println(l[i:])
		}
	}
}

// farmRealPipeline is TestFarmRealKernel's evaluation.
func farmRealPipeline(t *testing.T) *pipelines.Pipeline {
	t.Helper()
	p, err := pipelines.Parse([]byte(fmt.Sprintf(`name = "farm-real"
description = "one x86_64 kernel of the 6.1 tree, two command lines (farm bench)"
deterministic = true
[tree]
base = %q
[series]
apply = false
[build]
arch = ["x86_64"]
config = "tinyconfig"
fragments = ["x86_64-q35"]
symbols = %s
[[variant]]
name = "base"
[[variant]]
name = "base+nokaslr"
kernel = "base"
cmdline = "nokaslr"
[[benchmark]]
name = "kill"
iterations = 200000
[[benchmark]]
name = "getppid"
iterations = 200000
[repeats]
boots = 3
iterations = 2
[target]
kind = "qemu"
smp = 1
memory = "512M"
timeout = "10m"
kvm = "off"
[[comparison]]
base = "base"
other = "base+nokaslr"
`, testenv.BaseCommit, x86BenchTOML())), "farm-real.toml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// x86BenchTOML is buildtest.X86BenchSymbols as a TOML inline table: the
// farm's kernel is the suite's one lean x86_64 kernel.
func x86BenchTOML() string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(buildtest.X86BenchSymbols)) {
		kv = append(kv, fmt.Sprintf("%s = %q", k, buildtest.X86BenchSymbols[k]))
	}
	return "{ " + strings.Join(kv, ", ") + " }"
}

// farmRealScenario is TestFarmRealKernel's coordinator (s: serve on
// Postgres, running the coordinator's stages only).
func farmRealScenario(t *testing.T, s *Service, c *farmCoord) {
	ctx := context.Background()
	p := farmRealPipeline(t)

	// One machine: the kernel from the suite's cache, then the boots.
	// It must be a cache hit: this scenario builds no kernel here.
	req := build.Request{Repo: c.spec.Tree, Commit: testenv.BaseCommit, Arch: "x86_64", BaseConfig: build.BootConfigBase, Variant: "base",
		Symbols: maps.Clone(buildtest.X86BenchSymbols)}
	frag, err := build.WriteBootConfig("x86_64", filepath.Join(c.spec.Cache, "boot-configs"))
	if err != nil {
		t.Fatal(err)
	}
	req.Fragments = []string{frag}
	if a, err := build.Cached(ctx, req, build.Options{CacheDir: c.spec.Cache}); err != nil || a == nil {
		t.Fatalf("the x86_64 boot kernel is not in the cache %s (%v): build it first (evaluate/target/qemu TestOtherArches/x86_64, PATCHEVAL_LONG_TESTS=1)", c.spec.Cache, err)
	}
	ref, err := store.Open(filepath.Join(c.spec.Dir, "one-machine.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	refOut := filepath.Join(c.spec.Dir, "one-machine")
	t0 := time.Now()
	res, err := runner.Run(ctx, runner.Env{Store: ref, CacheDir: c.spec.Cache, Progress: progress.New(testWriter{t})}, p,
		runner.Options{Tree: c.spec.Tree, OutDir: refOut})
	if err != nil {
		t.Fatalf("one machine: %v", err)
	}
	oneWall := time.Since(t0)
	refBuilds, _ := ref.BuildsOf(res.EvaluationID)
	if len(refBuilds) != 1 || !runner.BuildCacheHit(refBuilds[0]) {
		t.Fatalf("one machine: builds %+v, want the one kernel from the cache", refBuilds)
	}
	refRuns, _ := ref.RunsOf(res.EvaluationID)
	if c.spec.Scenario == "real-one-machine" {
		t.Logf("BENCH farm-real: one machine (kernel from the cache, %d boots): %.1f s", countFinished(refRuns), oneWall.Seconds())
		return
	}

	// The farm: cold workers.
	hide := []string{c.spec.Cache, xdg.StateDir(), filepath.Join(c.spec.Dir, "coordinator")}
	for _, dir := range hide {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var ws []*farmProc
	for i := range 2 {
		name := fmt.Sprintf("w%d", i+1)
		ws = append(ws, c.start(t, i, farmWorkerSpec{Name: name, Cache: filepath.Join(c.spec.Dir, name),
			Build: []string{"x86_64"}, QEMU: []string{"x86_64"}, Jobs: 2, Hide: hide}))
	}
	t0 = time.Now()
	id, _, err := s.Submit(ctx, p, runner.Options{Tree: c.spec.Tree})
	if err != nil {
		t.Fatal(err)
	}
	st := s.Store()
	var built, restarted time.Duration
	waitFor(t, 3*time.Hour, "the farm's evaluation done", func() bool {
		e, err := st.Evaluation(id)
		if err != nil {
			if restarted != 0 && time.Since(t0)-restarted < time.Minute {
				return false // Postgres is starting again
			}
			t.Fatal(err)
		}
		if e.Status == "failed" || e.Status == StatusCancelled {
			bs, _ := st.BuildsOf(id)
			t.Fatalf("the farm's evaluation %s: builds %+v", e.Status, bs)
		}
		if built == 0 {
			if bs, _ := st.BuildsOf(id); len(bs) == 1 {
				built = time.Since(t0)
			}
		}
		// Postgres restarts mid-evaluation, once the first boot runs:
		// every session ends (the workers' too); the evaluation goes on.
		if restarted == 0 && e.Status != "done" {
			if runs, _ := st.RunsOf(id); slices.ContainsFunc(runs, func(r store.Run) bool { return r.Status == store.RunRunning }) {
				if err := c.pg.Restart(); err != nil {
					t.Fatal(err)
				}
				restarted = time.Since(t0)
				t.Logf("Postgres restarted at %.1f s, a boot running", restarted.Seconds())
			}
		}
		return e.Status == "done"
	})
	farmWall := time.Since(t0)
	if restarted == 0 {
		t.Errorf("Postgres was not restarted: no boot was seen running")
	}
	for _, w := range ws {
		w.stop(t)
	}
	bs, err := st.BuildsOf(id)
	if err != nil || len(bs) != 1 || runner.BuildCacheHit(bs[0]) {
		t.Fatalf("the farm's builds: %+v %v, want one kernel built on a worker", bs, err)
	}
	builder := ""
	for _, w := range ws {
		if strings.HasPrefix(bs[0].ArtifactDir, w.spec.Cache+"/") {
			builder = w.spec.Name
		}
	}
	if builder == "" {
		t.Errorf("the farm's kernel was built in %s, in neither worker's cache", bs[0].ArtifactDir)
	}
	// The kernel as serve's artifact store holds it: built from the
	// builder's mirror of serve's tree (fetched over smart HTTP), every
	// object compiled (an empty compiler cache).
	files := runner.BuildFiles(bs[0])
	if len(files) == 0 {
		t.Fatalf("the farm's build records no artifact manifest: %s", bs[0].Metadata)
	}
	fetched := filepath.Join(c.spec.Dir, "farm-kernel")
	if err := artifact.FetchDir(ctx, s.Artifacts(), files, fetched); err != nil {
		t.Fatalf("the farm's kernel from serve's artifact store: %v", err)
	}
	fa, err := build.LoadArtifact(fetched)
	if err != nil {
		t.Fatal(err)
	}
	if mirror := filepath.Join(c.spec.Dir, builder, "trees", "farm") + "/"; builder != "" && !strings.HasPrefix(fa.Meta.Git.URL, mirror) {
		t.Errorf("the farm's kernel was built from %s, want %s's mirror under %s", fa.Meta.Git.URL, builder, mirror)
	}
	if r := fa.Meta.Results; r.ObjectsCompiled == 0 || r.CCacheHits != 0 {
		t.Errorf("the farm's build: %d objects compiled, %d compiler-cache hits; want a cold build (every object compiled)", r.ObjectsCompiled, r.CCacheHits)
	}
	refArt, err := build.LoadArtifact(refBuilds[0].ArtifactDir)
	if err != nil {
		t.Fatal(err)
	}
	sameImage := fileHash(t, fa.Image) == fileHash(t, refArt.Image)
	sameConfig := fileHash(t, fa.Config) == fileHash(t, refArt.Config)
	if !sameConfig {
		t.Errorf("the farm's .config differs from one machine's (%s, %s)", fa.Config, refArt.Config)
	}

	// The same boots, the same numbers.
	farmRuns, _ := st.RunsOf(id)
	// Who booted what: the boot jobs' last attempts.
	booted := map[string]int{}
	jobs, err := s.Engine().Jobs(ctx, id, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Kind == (BootArgs{}).Kind() && len(j.AttemptedBy) > 0 {
			for _, w := range ws {
				if j.AttemptedBy[len(j.AttemptedBy)-1] == w.id {
					booted[w.spec.Name]++
				}
			}
		}
	}
	fs, err := st.Samples(id)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ref.Samples(res.EvaluationID)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		variant, bench, metric string
		boot, iter             int
	}
	refBy := map[key]float64{}
	for _, sm := range rs {
		refBy[key{sm.Variant, sm.Benchmark, sm.Metric, sm.Boot, sm.Iteration}] = sm.Value
	}
	worst := 0.0
	means := map[string][2]float64{}
	for _, sm := range fs {
		k := key{sm.Variant, sm.Benchmark, sm.Metric, sm.Boot, sm.Iteration}
		v, ok := refBy[k]
		if !ok {
			t.Errorf("the farm's sample %+v has no counterpart on one machine", k)
			continue
		}
		if v != 0 {
			worst = math.Max(worst, math.Abs(sm.Value-v)/math.Abs(v))
		}
		if sm.Metric == "ns/op" {
			m := means[sm.Variant+" "+sm.Benchmark]
			means[sm.Variant+" "+sm.Benchmark] = [2]float64{m[0] + sm.Value, m[1] + v}
		}
	}
	if len(fs) != len(rs) || len(fs) == 0 {
		t.Errorf("the farm has %d samples, one machine %d", len(fs), len(rs))
	}
	if worst > 1e-3 {
		t.Errorf("the farm's samples differ from one machine's by up to %.3f%% (deterministic QEMU: want within 0.1%%)", 100*worst)
	}
	// The reports: the same variants, boots, comparisons and verdicts;
	// numbers within 0.1%; only where and when differ.
	one, err := os.ReadFile(filepath.Join(refOut, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	farm, err := os.ReadFile(filepath.Join(s.OutDir(id), "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := diffReports(farm, one, 1e-3)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, d := range diffs {
		n[d.Class]++
		if d.Class == diffMeasured {
			t.Errorf("report: the farm's differs from one machine's at %s", d)
		} else {
			t.Logf("report: difference in a %s: %s", d.Class, d)
		}
	}
	t.Logf("BENCH farm-real: report.json, farm against one machine: %d difference(s) in what was measured (verdicts, samples and means within 0.1%%), %d in statistics of the variants' difference, %d in where and when",
		n[diffMeasured], n[diffStatistic], n[diffCircumstance])
	t.Logf("BENCH farm-real: the farm's kernel: %d objects compiled, %d compiler-cache hits, built from %s; image identical to one machine's: %v",
		fa.Meta.Results.ObjectsCompiled, fa.Meta.Results.CCacheHits, fa.Meta.Git.URL, sameImage)

	var names []string
	for n := range means {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Logf("BENCH farm-real: %-28s farm %.1f, one machine %.1f (sum of ns/op over the samples)", n, means[n][0], means[n][1])
	}
	t.Logf("BENCH farm-real: samples farm %d, one machine %d; largest difference %.4f%%", len(fs), len(rs), 100*worst)
	t.Logf("BENCH farm-real: one machine (kernel from the cache, %d boots): %.1f s", countFinished(refRuns), oneWall.Seconds())
	t.Logf("BENCH farm-real: farm, cold workers (tree fetch + kernel build on %s, -j2; %d boots on both): %.1f s, of which until the kernel was recorded %.1f s",
		builder, countFinished(farmRuns), farmWall.Seconds(), built.Seconds())
	tm, _ := st.Timings(id)
	t.Logf("BENCH farm-real: farm stage times: build %.1f s, boot %.1f s, benchmark %.1f s", tm["build"].Duration.Seconds(),
		tm["boot"].Duration.Seconds(), tm["benchmark"].Duration.Seconds())
	rtm, _ := ref.Timings(res.EvaluationID)
	t.Logf("BENCH farm-real: one machine stage times: build %.1f s, boot %.1f s, benchmark %.1f s", rtm["build"].Duration.Seconds(),
		rtm["boot"].Duration.Seconds(), rtm["benchmark"].Duration.Seconds())
	t.Logf("the farm's kernel: %s; boot jobs by worker: %v", bs[0].ArtifactDir, booted)
}

// fileHash is the sha256 of file path, hex.
func fileHash(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

func countFinished(runs []store.Run) int {
	n := 0
	for _, r := range runs {
		if r.Status.Finished() {
			n++
		}
	}
	return n
}

// The farm bench's pipeline parses and builds the suite's lean x86_64
// kernel (buildtest.X86Bench), which its one-machine half takes from the
// cache.
func TestFarmRealPipelineIsTheSuitesKernel(t *testing.T) {
	p := farmRealPipeline(t)
	b := p.Builds()
	if len(b) != 1 || b[0].Arch != "x86_64" || !maps.Equal(b[0].Symbols, buildtest.X86BenchSymbols) {
		t.Fatalf("builds %+v, want one x86_64 kernel with %v", b, buildtest.X86BenchSymbols)
	}
}
