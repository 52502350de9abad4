package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/artifact"
	"github.com/patcheval/patcheval/pipelines/runner"
)

// farmRealBenchHZ are the kernels of TestFarmRealBuildBench's
// evaluation: x86_64 tinyconfig at each timer frequency, four real and
// distinct kernels of the same size.
var farmRealBenchHZ = []string{"100", "250", "300", "1000"}

// TestFarmRealBuildBench is bench/farm-build.sh --real-build: the build
// stage of one evaluation of PATCHEVAL_FARM_REAL_BENCH=N (1 to 4) real
// kernels of the imported 6.1 tree (x86_64 tinyconfig with HZ=100, 250,
// 300 and 1000), on one worker at -j1 (one kernel at a time: the
// one-machine reference) and then on two such workers, in one run, as
// TestFarmBuildBench does with fake kernels: serve, Postgres and the
// workers in their own network namespaces, the database and the kernels
// (serve's artifact store) crossing the veth links.
//
// The compiler cache is off (the workers' --compiler-cache none): with
// kcc, a worker's second kernel of the evaluation would take most of its
// objects from the first one's (only the objects whose preprocessed text
// mentions HZ differ), and one worker building four kernels would share
// more than two workers building two each; the figure is the farm's
// parallelism, every object compiled on both sides.
//
// Each worker's mirror of serve's tree is seeded before the timing with
// a local clone of the tree (what its first fetch over git's smart HTTP
// leaves there; that fetch is bench/farm-build.sh --fetch's figure), and
// its cache is otherwise empty. The test checks that every kernel was
// built from its worker's mirror, every object compiled, none from a
// compiler cache (all kernels of both runs compiled the same number of
// objects, more than 0, with 0 compiler-cache hits), and that serve's
// artifact store holds each kernel whole. It prints BENCH lines: both
// wall times and their ratio, and each kernel's times.
func TestFarmRealBuildBench(t *testing.T) {
	v := os.Getenv("PATCHEVAL_FARM_REAL_BENCH")
	if v == "" {
		t.Skip("a benchmark with real kernel builds: bench/farm-build.sh --real-build (PATCHEVAL_FARM_REAL_BENCH=KERNELS)")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > len(farmRealBenchHZ) {
		t.Fatalf("PATCHEVAL_FARM_REAL_BENCH=%q: want a number of kernels, 1 to %d", v, len(farmRealBenchHZ))
	}
	testenv.SkipIfSlow(t, "the kernel tree and kernel builds")
	skipUnlessNetns(t)
	out := runFarm(t, farmSpec{Scenario: "real-bench", Kernels: n, Tree: testenv.LinuxTree(t), Cache: xdg.CacheDir()})
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, "BENCH "); i >= 0 {
			fmt.Println(l[i:])
		}
	}
}

// farmRealBenchPipeline is run's evaluation of n kernels: a distinct
// pipeline per run, so that the second run is a new evaluation and not
// the first one resumed with its kernels recorded.
func farmRealBenchPipeline(t *testing.T, run, n int) *pipelines.Pipeline {
	t.Helper()
	src := fmt.Sprintf(`name = "farm-build-real-run%d"
description = "%d x86_64 tinyconfig kernels of the 6.1 tree at different HZ (farm build bench, run %d)"
[tree]
base = %q
[series]
apply = false
[build]
arch = ["x86_64"]
config = "tinyconfig"
[[benchmark]]
name = "kill"
`, run, n, run, testenv.BaseCommit)
	for _, hz := range farmRealBenchHZ[:n] {
		src += fmt.Sprintf("[[variant]]\nname = \"hz%s\"\nsymbols = { HZ_%s = \"y\" }\n", hz, hz)
	}
	p, err := pipelines.Parse([]byte(src), fmt.Sprintf("farm-build-real-run%d.toml", run))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// farmRealBenchScenario is TestFarmRealBuildBench's coordinator.
func farmRealBenchScenario(t *testing.T, s *Service, c *farmCoord) {
	ctx := context.Background()
	n := c.spec.Kernels
	// The suite's cache and serve's state are not the workers' to read.
	hide := []string{c.spec.Cache, xdg.StateDir(), filepath.Join(c.spec.Dir, "coordinator")}
	for _, dir := range hide {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// mirror is where a worker with cache keeps its copy of the tree
	// (mirrors.sources).
	mirror := func(cache string) string {
		sum := sha256.Sum256([]byte(c.spec.Tree))
		return filepath.Join(cache, "trees", "farm", hex.EncodeToString(sum[:8])+".git")
	}
	load := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		f := strings.Fields(string(b))
		if len(f) < 3 {
			return "?"
		}
		return strings.Join(f[:3], " ")
	}
	var took []time.Duration
	// compiled is each arm's objects compiled per kernel.
	compiled := []map[string]int{{}, {}}
	for run := 1; run <= 2; run++ {
		var ws []*farmProc
		for i := range run {
			name := fmt.Sprintf("w%d-run%d", i+1, run)
			cache := filepath.Join(c.spec.Dir, name)
			m := mirror(cache)
			if err := os.MkdirAll(filepath.Dir(m), 0o755); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("git", "clone", "--bare", "--local", "--quiet", c.spec.Tree, m).CombinedOutput(); err != nil {
				t.Fatalf("seeding %s's mirror: %v\n%s", name, err, out)
			}
			ws = append(ws, c.start(t, i, farmWorkerSpec{Name: name, Cache: cache, Build: []string{"x86_64"},
				Jobs: 1, CompilerCache: "none", Hide: hide}))
		}
		loadBefore := load()
		t0 := time.Now()
		id, created, err := s.Submit(ctx, farmRealBenchPipeline(t, run, n), runner.Options{Tree: c.spec.Tree})
		if err != nil || !created {
			t.Fatalf("run %d: submit: %d, created %v, %v", run, id, created, err)
		}
		st := s.Store()
		waitFor(t, 6*time.Hour, fmt.Sprintf("run %d: evaluation %d's %d kernels recorded", run, id, n), func() bool {
			bs, err := st.BuildsOf(id)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bs {
				if b.Status != "ok" {
					t.Fatalf("run %d: build %s/%s %s: %s", run, b.Arch, b.Variant, b.Status, b.ErrorText)
				}
			}
			return len(bs) == n
		})
		wall := time.Since(t0)
		took = append(took, wall)
		loadAfter := load()
		tm, _ := st.Timings(id)
		if err := s.Cancel(ctx, id); err != nil { // its boots wait for a QEMU worker
			t.Fatal(err)
		}
		for _, w := range ws {
			w.stop(t)
		}
		t.Logf("BENCH farm-build-real: run %d, %d worker(s): build stage %.1f s (stage timing %.1f s), load %s before, %s after",
			run, run, wall.Seconds(), tm["build"].Duration.Seconds(), loadBefore, loadAfter)

		// Each kernel as serve's artifact store holds it, with its
		// times. Failed checks are errors, not fatal: the figures
		// measured are printed all the same.
		bs, _ := st.BuildsOf(id)
		sort.Slice(bs, func(i, j int) bool { return bs[i].ID < bs[j].ID })
		for _, b := range bs {
			var by *farmProc
			for _, w := range ws {
				if strings.HasPrefix(b.ArtifactDir, w.spec.Cache+"/") {
					by = w
				}
			}
			if by == nil {
				t.Errorf("run %d: %s was built in %s, in no worker's cache", run, b.Variant, b.ArtifactDir)
				continue
			}
			files := runner.BuildFiles(b)
			dir := filepath.Join(c.spec.Dir, fmt.Sprintf("run%d-%s", run, b.Variant))
			if err := artifact.FetchDir(ctx, s.Artifacts(), files, dir); err != nil || len(files) == 0 {
				t.Errorf("run %d: %s from serve's artifact store (%d files): %v", run, b.Variant, len(files), err)
				continue
			}
			a, err := build.LoadArtifact(dir)
			if err != nil {
				t.Errorf("run %d: %s: %v", run, b.Variant, err)
				continue
			}
			r := a.Meta.Results
			compiled[run-1][b.Variant] = r.ObjectsCompiled
			t.Logf("BENCH farm-build-real: run %d %-7s on %-7s %6.1f s (checkout %.1f, config %.1f, make %.1f), %d objects compiled, %d compiler-cache hits (compiler cache %s), recorded at %.1f s",
				run, b.Variant, by.spec.Name, r.Duration["total"], r.Duration["checkout"], r.Duration["config"], r.Duration["build"],
				r.ObjectsCompiled, r.CCacheHits, a.Meta.Build.CompilerCache, b.Created.Sub(t0).Seconds())
			if a.CacheHit || runner.BuildCacheHit(b) {
				t.Errorf("run %d: %s was a cache hit", run, b.Variant)
			}
			if fi, err := os.Stat(a.Image); err != nil || fi.Size() == 0 {
				t.Errorf("run %d: %s: no image from the store (%v)", run, b.Variant, err)
			}
			if !strings.HasPrefix(a.Meta.Git.URL, mirror(by.spec.Cache)) {
				t.Errorf("run %d: %s was built from %s, want %s's seeded mirror %s", run, b.Variant, a.Meta.Git.URL, by.spec.Name, mirror(by.spec.Cache))
			}
			cfg, _ := os.ReadFile(a.Config)
			if hz := strings.TrimPrefix(b.Variant, "hz"); !strings.Contains(string(cfg), "\nCONFIG_HZ="+hz+"\n") {
				t.Errorf("run %d: %s's .config lacks CONFIG_HZ=%s", run, b.Variant, hz)
			}
			if a.Meta.Build.CompilerCache != "none" || r.ObjectsCompiled == 0 || r.CCacheHits != 0 || a.Meta.Build.Incremental {
				t.Errorf("run %d: %s: compiler cache %q, %d objects compiled, %d cache hits, incremental %v; want every object compiled, no compiler cache",
					run, b.Variant, a.Meta.Build.CompilerCache, r.ObjectsCompiled, r.CCacheHits, a.Meta.Build.Incremental)
			}
		}
		// Each run's build directories go when measured: four checked
		// out trees with their objects are several GB.
		for _, w := range ws {
			os.RemoveAll(filepath.Join(w.spec.Cache, "builds"))
		}
	}
	for _, e := range farmRealBenchCompiledDiffer(compiled, farmRealBenchHZ[:n]) {
		t.Error(e)
	}
	t.Logf("BENCH farm-build-real: %d real kernels (x86_64 tinyconfig, HZ %s; 6.1 tree), no compiler cache, -j1 per worker: one worker %.1f s, two workers %.1f s (%.2fx)",
		n, strings.Join(farmRealBenchHZ[:n], "/"), took[0].Seconds(), took[1].Seconds(), took[1].Seconds()/took[0].Seconds())
}

// farmRealBenchCompiledDiffer checks TestFarmRealBuildBench's objects
// compiled (per arm, per kernel) for every object compiled on both
// sides: each kernel compiled as many objects on one arm as on the other
// (the same .config, no compiler cache), and the HZ variants are kernels
// of the same size, so all of them the same number, more than 0. A
// kernel missing from an arm is reported where it went missing.
func farmRealBenchCompiledDiffer(compiled []map[string]int, hzs []string) []string {
	var errs []string
	want := -1
	for run, m := range compiled {
		for _, hz := range hzs {
			got, ok := m["hz"+hz]
			if !ok {
				continue
			}
			if want < 0 {
				want = got
			}
			if got != want || got == 0 {
				errs = append(errs, fmt.Sprintf("run %d: hz%s compiled %d objects, want the same number (> 0) for every kernel of both runs: %v",
					run+1, hz, got, compiled))
			}
		}
	}
	return errs
}

func TestFarmRealBenchCompiledDiffer(t *testing.T) {
	hzs := []string{"100", "250"}
	for _, c := range []struct {
		compiled []map[string]int
		errs     int
	}{
		{[]map[string]int{{"hz100": 516, "hz250": 516}, {"hz100": 516, "hz250": 516}}, 0},
		{[]map[string]int{{"hz100": 516, "hz250": 516}, {"hz100": 516, "hz250": 16}}, 1}, // a cache answered 500
		{[]map[string]int{{"hz100": 0, "hz250": 0}, {"hz100": 0, "hz250": 0}}, 4},
		{[]map[string]int{{"hz100": 516}, {"hz100": 516, "hz250": 516}}, 0}, // hz250's failure is reported where it is
	} {
		if errs := farmRealBenchCompiledDiffer(c.compiled, hzs); len(errs) != c.errs {
			t.Errorf("%v: %d errors %q, want %d", c.compiled, len(errs), errs, c.errs)
		}
	}
}
