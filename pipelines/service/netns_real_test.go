package service

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
)

// TestFarmRealKernel is bench/farm-build.sh --real: a real evaluation
// across the farm, against the same evaluation on one machine.
//
// The evaluation: Debian's 6.1 tree, one x86_64 kernel (tinyconfig with
// the q35 boot fragment, the kernel TestOtherArches/x86_64 boots) and two
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
// It checks that both complete with the same boots and that their
// samples agree (deterministic QEMU: within 0.1%), and prints BENCH
// lines with the wall times. A real kernel build: opt-in
// (PATCHEVAL_FARM_REAL=1), never in the default suite.
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
`, testenv.BaseCommit)), "farm-real.toml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// farmRealScenario is TestFarmRealKernel's coordinator (s: serve on
// Postgres, running the coordinator's stages only).
func farmRealScenario(t *testing.T, s *Service, c *farmCoord) {
	ctx := context.Background()
	p := farmRealPipeline(t)

	// One machine: the kernel from the suite's cache, then the boots.
	// It must be a cache hit: this scenario builds no kernel here.
	req := build.Request{Repo: c.spec.Tree, Commit: testenv.BaseCommit, Arch: "x86_64", BaseConfig: build.BootConfigBase, Variant: "base"}
	frag, err := build.WriteBootConfig("x86_64", filepath.Join(c.spec.Cache, "boot-configs"))
	if err != nil {
		t.Fatal(err)
	}
	req.Fragments = []string{frag}
	if a, err := build.Cached(ctx, req, build.Options{CacheDir: c.spec.Cache}); err != nil || a == nil {
		t.Fatalf("the x86_64 boot kernel is not in the cache %s (%v): build it first (evaluate/qemu TestOtherArches/x86_64, PATCHEVAL_LONG_TESTS=1)", c.spec.Cache, err)
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
	if len(refBuilds) != 1 || !cacheHit(refBuilds[0]) {
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
	var built time.Duration
	waitFor(t, 90*time.Minute, "the farm's evaluation done", func() bool {
		e, err := st.Evaluation(id)
		if err != nil {
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
		return e.Status == "done"
	})
	farmWall := time.Since(t0)
	for _, w := range ws {
		w.stop(t)
	}
	bs, err := st.BuildsOf(id)
	if err != nil || len(bs) != 1 || cacheHit(bs[0]) {
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

func countFinished(runs []store.Run) int {
	n := 0
	for _, r := range runs {
		if r.Status.Finished() {
			n++
		}
	}
	return n
}

// cacheHit reports whether build row b's kernel came from the cache.
func cacheHit(b store.Build) bool {
	var m struct {
		CacheHit bool `json:"cache_hit"`
	}
	_ = json.Unmarshal(b.Metadata, &m)
	return m.CacheHit
}
