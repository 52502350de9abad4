package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/internal/sandbox"
	"github.com/patcheval/patcheval/internal/testpg"
	"github.com/patcheval/patcheval/pipelines/artifact"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// The farm across machines, on one machine: the test makes its own
// network namespaces (ip netns, veth pairs, addresses of 10.201.0.0/16
// that exist only inside them) and runs the coordinator (serve and its
// Postgres) in one and each worker in another, as processes of this test
// binary with their own cache directories. Everything between them
// crosses the veth links: the database, the kernel sources (git smart
// HTTP from serve) and the built kernels (serve's artifact store).

const (
	// farmCoordEnv runs TestFarmCoordinatorRole (in the coordinator's
	// namespace) with a JSON farmSpec.
	farmCoordEnv = "PATCHEVAL_FARM_TEST_COORDINATOR"
	// farmWorkerEnv makes the test binary a `patcheval worker` (TestMain)
	// with a JSON farmWorkerSpec.
	farmWorkerEnv = "PATCHEVAL_FARM_TEST_WORKER"
)

// farmSpec tells the coordinator process where the workers live and what
// to run: the farm's test, or with Scenario "bench" the build benchmark
// (Kernels kernels compiling for Seconds each).
type farmSpec struct {
	Dir              string
	Workers          []farmLink
	Scenario         string
	Kernels, Seconds int
	// Tree and Cache, in scenario "boot" (netns_boot_test.go): the
	// kernel tree and the cache holding its built kernel, serve's.
	Tree, Cache string
}

// farmLink is worker i's namespace and the coordinator's address on its
// link (the worker's is the next one, in a /30).
type farmLink struct {
	NS, Coord, Net string
}

// farmWorkerSpec is one worker process.
type farmWorkerSpec struct {
	DB, Server, TokenFile, Name, Cache, IDFile string
	Build, QEMU                                []string
	// Hide are directories of the coordinator's machine (its cache and
	// state) that the worker must not read: an empty read-only tmpfs
	// covers each in the worker's mount namespace (ip netns exec gives
	// it one of its own), so that what it needs of them crosses the
	// network.
	Hide []string
	// Jobs is its make -j (0: 1).
	Jobs int
	// CompilerCache is its builds' compiler cache ("": kcc).
	CompilerCache string
}

var farmSeq atomic.Int64

// farmNetwork makes a namespace for the coordinator and one per worker,
// each worker linked to the coordinator by a veth pair made inside the
// namespaces (nothing is added to the namespace the test runs in), and
// removes them at the end of the test. It skips the test when it cannot
// (not root, no ip).
func farmNetwork(t *testing.T, workers int) (coord string, links []farmLink) {
	t.Helper()
	skipUnlessNetns(t)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	id := fmt.Sprintf("pe%d-%d", os.Getpid(), farmSeq.Add(1))
	add := func(ns string) {
		ip("netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		ip("-n", ns, "link", "set", "lo", "up")
	}
	coord = id + "-c"
	add(coord)
	for i := range workers {
		w := fmt.Sprintf("%s-w%d", id, i+1)
		add(w)
		dev := fmt.Sprintf("to-w%d", i+1)
		ip("-n", coord, "link", "add", dev, "type", "veth", "peer", "name", "to-coord", "netns", w)
		c, a := fmt.Sprintf("10.201.%d.1", i+1), fmt.Sprintf("10.201.%d.2", i+1)
		ip("-n", coord, "addr", "add", c+"/30", "dev", dev)
		ip("-n", w, "addr", "add", a+"/30", "dev", "to-coord")
		ip("-n", coord, "link", "set", dev, "up")
		ip("-n", w, "link", "set", "to-coord", "up")
		links = append(links, farmLink{NS: w, Coord: c, Net: fmt.Sprintf("10.201.%d.0/30", i+1)})
	}
	return coord, links
}

// skipUnlessNetns skips t where the farm's namespaces cannot be made (not
// root, no ip).
func skipUnlessNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the farm's network-namespace test makes namespaces with ip netns: it needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("the farm's network-namespace test needs the ip command (apt-get install iproute2): %v", err)
	}
}

// TestFarmAcrossNetworkNamespaces runs serve with Postgres in one network
// namespace and two workers in two others (TestFarmCoordinatorRole says
// what happens), on a fake kernel tree: real git, make, the build
// package, River, Postgres and HTTP, but make's work takes no time.
func TestFarmAcrossNetworkNamespaces(t *testing.T) {
	runFarm(t, farmSpec{})
}

// TestFarmBuildBench is bench/farm-build.sh: the build stage of an
// evaluation of PATCHEVAL_FARM_BENCH=KERNELS,SECONDS fake kernels, each
// compiling for SECONDS, on one worker building one kernel at a time
// (the one-machine reference) and then on two such workers, in one run.
// It prints a BENCH line with both wall times.
func TestFarmBuildBench(t *testing.T) {
	v := os.Getenv("PATCHEVAL_FARM_BENCH")
	if v == "" {
		t.Skip("a benchmark: bench/farm-build.sh (PATCHEVAL_FARM_BENCH=KERNELS,SECONDS)")
	}
	var spec farmSpec
	if _, err := fmt.Sscanf(v, "%d,%d", &spec.Kernels, &spec.Seconds); err != nil || spec.Kernels < 1 || spec.Seconds < 0 {
		t.Fatalf("PATCHEVAL_FARM_BENCH=%q: want KERNELS,SECONDS", v)
	}
	spec.Scenario = "bench"
	out := runFarm(t, spec)
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, "BENCH "); i >= 0 {
			fmt.Println(l[i:])
		}
	}
}

// runFarm makes the namespaces and runs TestFarmCoordinatorRole with
// spec in the coordinator's; it returns the coordinator's output.
func runFarm(t *testing.T, spec farmSpec) string {
	t.Helper()
	coord, links := farmNetwork(t, 2)
	spec.Dir, spec.Workers = t.TempDir(), links
	if d := os.Getenv("PATCHEVAL_FARM_KEEP"); d != "" {
		// Keep the run's files (the workers' caches, serve's state and
		// reports) in d for a look afterwards.
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		spec.Dir = d
	}
	js, _ := json.Marshal(spec)
	cmd := exec.Command("ip", "netns", "exec", coord, os.Args[0], "-test.run=^TestFarmCoordinatorRole$", "-test.v", "-test.count=1", "-test.timeout=0")
	// serve's state (its reports and artifact store) stays in the test's
	// directory.
	cmd.Env = append(os.Environ(), farmCoordEnv+"="+string(js), "PATCHEVAL_STATE_DIR="+filepath.Join(spec.Dir, "state"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the coordinator (namespace %s): %v\n%s", coord, err, out)
	}
	if bytes.Contains(out, []byte("--- SKIP")) {
		t.Skipf("the coordinator skipped:\n%s", out)
	}
	if !bytes.Contains(out, []byte("--- PASS: TestFarmCoordinatorRole")) {
		t.Fatalf("the coordinator did not pass:\n%s", out)
	}
	t.Logf("coordinator:\n%s", out)
	return string(out)
}

// farmProc is a worker process.
type farmProc struct {
	spec farmWorkerSpec
	ns   string
	cmd  *exec.Cmd
	done chan error
	id   string // its River client
}

// TestFarmCoordinatorRole is the coordinator of
// TestFarmAcrossNetworkNamespaces (and TestFarmBuildBench), run in its
// namespace:
//
//  1. Two workers, one building ppc64le and one arm64, build the two
//     kernels of an evaluation at the same time (each held mid-link until
//     both run). Each fetched the sources from serve into its own mirror
//     and put the kernel into serve's artifact store; the kernels read
//     back from the store are whole.
//  2. A worker is killed with SIGKILL mid-build (mid-link of a kernel it
//     built before at another commit: a partial vmlinux in its build
//     directory beside the earlier link's command file): serve's orphan
//     watch queues the job again and the other worker builds the kernel
//     (attempt 2).
//  3. The killed worker starts again on its cache and builds the same
//     kernel for another evaluation: it does not take the partial
//     vmlinux left by the killed build for a built one.
//  4. Postgres restarts while that worker builds: the build is recorded,
//     at its first attempt.
func TestFarmCoordinatorRole(t *testing.T) {
	raw := os.Getenv(farmCoordEnv)
	if raw == "" {
		t.Skip("the coordinator of TestFarmAcrossNetworkNamespaces (it runs in the namespace that test makes)")
	}
	var spec farmSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var addrs, nets []string
	for _, l := range spec.Workers {
		addrs, nets = append(addrs, l.Coord), append(nets, l.Net)
	}
	pg := testpg.NewOn(t, addrs, nets)
	db := pg.Database(t)
	tok := []byte("farm-netns-token-0123456789")
	tokFile := filepath.Join(spec.Dir, "token")
	if err := os.WriteFile(tokFile, tok, 0o600); err != nil {
		t.Fatal(err)
	}
	// In this namespace every address is one the test made.
	cfg := Config{Database: db, Token: tok, Name: "coordinator", CacheDir: filepath.Join(spec.Dir, "coordinator"),
		Work: &Capabilities{Coordinator: true, Cores: 1}, OrphanCheck: 300 * time.Millisecond, OrphanConfirm: DefaultOrphanConfirm}
	if spec.Scenario == "boot" {
		// serve builds too, in the cache that holds the kernel: its
		// build is a cache hit put into its artifact store. No Postgres
		// restart here, so orphans are confirmed sooner.
		cfg.CacheDir, cfg.Work.Build, cfg.OrphanConfirm = spec.Cache, []string{"ppc64le"}, time.Second
	}
	s, base := testServiceOn(t, cfg, ":0")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	c := &farmCoord{spec: spec, db: db, port: port, tokFile: tokFile, pg: pg}
	switch spec.Scenario {
	case "boot":
		farmBootScenario(t, s, c)
		return
	case "real", "real-one-machine":
		farmRealScenario(t, s, c)
		return
	case "real-bench":
		farmRealBenchScenario(t, s, c)
		return
	}
	// The fake link waits while the gate exists. The workers' builds run
	// in the sandbox, which shows nothing of the host but what it binds:
	// the gate's directory is an operator's extra read-only path.
	gateDir := filepath.Join(spec.Dir, "gate.d")
	if err := os.MkdirAll(gateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(sandbox.EnvReadOnly, gateDir)
	gate := filepath.Join(gateDir, "gate")
	repo, _, next := fakeKernelTree(t, gate, spec.Seconds)
	suffix := "" // of the workers' names and caches

	start := func(i int, arches ...string) *farmProc {
		t.Helper()
		name := fmt.Sprintf("w%d%s", i+1, suffix)
		return c.start(t, i, farmWorkerSpec{Name: name, Cache: filepath.Join(spec.Dir, name), Build: arches})
	}
	stop := func(p *farmProc) {
		t.Helper()
		p.stop(t)
	}
	buildJobs := func(id int64) []*rivertype.JobRow {
		t.Helper()
		jobs, err := s.Engine().Jobs(ctx, id, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []*rivertype.JobRow
		for _, j := range jobs {
			if j.Kind == (BuildArgs{}).Kind() {
				out = append(out, j)
			}
		}
		return out
	}
	builtOK := func(id int64, n int) []store.Build {
		t.Helper()
		var ok []store.Build
		waitFor(t, 3*time.Minute+time.Duration(spec.Kernels*spec.Seconds)*time.Second, fmt.Sprintf("evaluation %d's %d kernel(s) recorded", id, n), func() bool {
			bs, err := s.Store().BuildsOf(id)
			if err != nil {
				t.Fatal(err)
			}
			ok = ok[:0]
			for _, b := range bs {
				if b.Status != "ok" {
					t.Fatalf("evaluation %d: build %s/%s %s: %s", id, b.Arch, b.Variant, b.Status, b.ErrorText)
				}
				ok = append(ok, b)
			}
			return len(ok) == n
		})
		return ok
	}
	// fromStore is b's kernel as the coordinator's artifact store holds
	// it, checked whole: the fake link writes the .config as the image.
	fromStore := func(b store.Build) *build.Artifact {
		t.Helper()
		files := runner.BuildFiles(b)
		if len(files) == 0 {
			t.Fatalf("build %s/%s records no artifact manifest: %s", b.Arch, b.Variant, b.Metadata)
		}
		dir := filepath.Join(t.TempDir(), "kernel")
		if err := artifact.FetchDir(ctx, s.Artifacts(), files, dir); err != nil {
			t.Fatalf("build %s/%s from serve's artifact store: %v", b.Arch, b.Variant, err)
		}
		a, err := build.LoadArtifact(dir)
		if err != nil {
			t.Fatal(err)
		}
		img, _ := os.ReadFile(a.Image)
		cfg, _ := os.ReadFile(a.Config)
		if len(cfg) == 0 || !bytes.Equal(img, cfg) {
			t.Errorf("build %s/%s: the stored image is not the finished link's (%q)", b.Arch, b.Variant, img)
		}
		return a
	}
	// builtBy checks that b was built by worker p, from p's mirror of the
	// tree.
	builtBy := func(b store.Build, p *farmProc) {
		t.Helper()
		a := fromStore(b)
		if !strings.HasPrefix(b.ArtifactDir, p.spec.Cache+"/") {
			t.Errorf("build %s/%s was made in %s, want in %s's cache %s", b.Arch, b.Variant, b.ArtifactDir, p.spec.Name, p.spec.Cache)
		}
		if mirror := filepath.Join(p.spec.Cache, "trees", "farm"); !strings.HasPrefix(a.Meta.Git.URL, mirror+"/") {
			t.Errorf("build %s/%s was made from %s, want %s's mirror under %s", b.Arch, b.Variant, a.Meta.Git.URL, p.spec.Name, mirror)
		}
	}
	holdBuilds := func() func() {
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return func() { os.Remove(gate) }
	}

	if spec.Scenario == "bench" {
		// The same evaluation's build stage, its kernels distinct (no
		// cache hit), on one worker and then on two, from fresh caches.
		var syms []string
		for i := range spec.Kernels {
			syms = append(syms, fmt.Sprintf("FAKE_R%d", i))
		}
		var took []time.Duration
		for n := 1; n <= 2; n++ {
			suffix = fmt.Sprintf("-run%d", n)
			var ws []*farmProc
			for i := range n {
				ws = append(ws, start(i, "ppc64le"))
			}
			for i := range syms {
				syms[i] = fmt.Sprintf("FAKE_RUN%d_%d", n, i)
			}
			t0 := time.Now()
			id, _, err := s.Submit(ctx, fakePipeline(t, `"ppc64le"`, syms...), runner.Options{Tree: repo})
			if err != nil {
				t.Fatal(err)
			}
			builtOK(id, spec.Kernels)
			took = append(took, time.Since(t0))
			if err := s.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				stop(w)
			}
		}
		t.Logf("BENCH farm-build: %d kernels, %d s of compile each, -j1: one worker %.1f s, two workers %.1f s (%.2fx)",
			spec.Kernels, spec.Seconds, took[0].Seconds(), took[1].Seconds(), took[1].Seconds()/took[0].Seconds())
		return
	}

	// 1. Two workers, two kernels at once. The pipeline has a fragment
	// file, gone from its path on this machine before any worker starts.
	frag := filepath.Join(spec.Dir, "pipeline", "farm.config")
	os.MkdirAll(filepath.Dir(frag), 0o755)
	if err := os.WriteFile(frag, []byte("CONFIG_FAKE_FRAG=y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	release := holdBuilds()
	id1, _, err := s.Submit(ctx, fakePipelineWith(t, `"ppc64le", "arm64"`, frag, "FAKE_A"), runner.Options{Tree: repo})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Dir(frag), filepath.Dir(frag)+".gone"); err != nil {
		t.Fatal(err)
	}
	// w2 builds without a compiler cache (patcheval worker
	// --compiler-cache none), w1 with kcc, the default.
	w1 := start(0, "ppc64le")
	w2 := c.start(t, 1, farmWorkerSpec{Name: "w2" + suffix, Cache: filepath.Join(spec.Dir, "w2"+suffix), Build: []string{"arm64"}, CompilerCache: "none"})
	waitFor(t, 2*time.Minute, "both kernels building at once", func() bool {
		if e, _ := s.Store().Evaluation(id1); e != nil && e.Status == "failed" {
			bs, _ := s.Store().BuildsOf(id1)
			t.Fatalf("evaluation %d failed: builds %+v", id1, bs)
		}
		n := 0
		for _, j := range buildJobs(id1) {
			if j.State == rivertype.JobStateRunning {
				n++
			}
		}
		return n == 2
	})
	release()
	for _, b := range builtOK(id1, 2) {
		w := map[string]*farmProc{"ppc64le": w1, "arm64": w2}[b.Arch]
		builtBy(b, w)
		a := fromStore(b)
		if cfg, _ := os.ReadFile(a.Config); !bytes.Contains(cfg, []byte("CONFIG_FAKE_FRAG=y")) ||
			!slices.ContainsFunc(a.Meta.Build.KconfigAdd, func(f string) bool { return strings.HasPrefix(f, filepath.Join(w.spec.Cache, "farm-files")+"/") }) {
			t.Errorf("build %s/%s: the fragment file did not come from serve's store (fragments %v):\n%s", b.Arch, b.Variant, a.Meta.Build.KconfigAdd, cfg)
		}
		if want := map[string]string{"ppc64le": "kcc", "arm64": "none"}[b.Arch]; a.Meta.Build.CompilerCache != want {
			t.Errorf("build %s/%s on %s: compiler cache %q, want %q", b.Arch, b.Variant, w.spec.Name, a.Meta.Build.CompilerCache, want)
		}
	}
	for _, j := range buildJobs(id1) {
		if j.State != rivertype.JobStateCompleted || len(j.AttemptedBy) != 1 || (j.AttemptedBy[0] != w1.id && j.AttemptedBy[0] != w2.id) {
			t.Errorf("build job %d: %s, attempted by %v; want completed at the first attempt by w1 (%s) or w2 (%s)", j.ID, j.State, j.AttemptedBy, w1.id, w2.id)
		}
	}
	// The workers' progress lines reach serve's live log of the
	// evaluation (the evaluation page's), each with its worker's name.
	waitFor(t, 30*time.Second, "the workers' progress lines in serve's log", func() bool {
		var p, a bool
		for _, l := range s.evalLog(id1).snapshot() {
			p = p || strings.HasPrefix(l, w1.spec.Name+": ") && strings.Contains(l, "built ppc64le/")
			a = a || strings.HasPrefix(l, w2.spec.Name+": ") && strings.Contains(l, "built arm64/")
		}
		return p && a
	})
	// The dashboard shows the workers' build logs, from serve's artifact
	// store: the build directories are on the workers (here hidden from
	// serve by a rename, since the namespaces share one filesystem).
	page := func(path string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+net.JoinHostPort("127.0.0.1", port)+path, nil)
		req.Header.Set("Authorization", "Bearer "+string(tok))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", path, resp.Status, b)
		}
		return string(b)
	}
	bs, _ := s.Store().BuildsOf(id1)
	for _, b := range bs {
		// On other machines serve would not see them at all.
		if err := os.Rename(b.ArtifactDir, b.ArtifactDir+".elsewhere"); err != nil {
			t.Fatal(err)
		}
	}
	evalPage := page(fmt.Sprintf("/evaluations/%d", id1))
	for _, b := range bs {
		logPath := fmt.Sprintf("/evaluations/%d/builds/%d/log", id1, b.ID)
		if !strings.Contains(evalPage, logPath) {
			t.Errorf("the evaluation page does not link %s/%s's build log %s", b.Arch, b.Variant, logPath)
		}
		if l := page(logPath); !strings.Contains(l, "make -C "+filepath.Join(map[string]*farmProc{"ppc64le": w1, "arm64": w2}[b.Arch].spec.Cache, "builds")) {
			t.Errorf("%s/%s's build log on the dashboard is not the worker's:\n%s", b.Arch, b.Variant, l)
		}
	}
	if err := s.Cancel(ctx, id1); err != nil { // its boots wait for a QEMU worker
		t.Fatal(err)
	}

	// 2. SIGKILL mid-build; the other worker builds the kernel. The
	// victim (w1, alone) builds the kernel at the base first, then at the
	// next commit, where it is killed mid-link: its build directory holds
	// a partial vmlinux beside the first link's command file.
	stop(w2)
	p2 := fakePipeline(t, `"ppc64le"`, "FAKE_B")
	id2a, _, err := s.Submit(ctx, p2, runner.Options{Tree: repo})
	if err != nil {
		t.Fatal(err)
	}
	builtBy(builtOK(id2a, 1)[0], w1)
	if err := s.Cancel(ctx, id2a); err != nil {
		t.Fatal(err)
	}
	release = holdBuilds()
	id2, _, err := s.Submit(ctx, p2, runner.Options{Tree: repo, Base: next})
	if err != nil {
		t.Fatal(err)
	}
	victim := w1
	var partial string
	waitFor(t, time.Minute, "w1's build of the next commit mid-link", func() bool {
		m, _ := filepath.Glob(filepath.Join(victim.spec.Cache, "builds", "work", "*", "out", "vmlinux"))
		for _, f := range m {
			if b, _ := os.ReadFile(f); string(b) == "partial\n" {
				partial = f
				return true
			}
		}
		return false
	})
	victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done
	other := start(1, "ppc64le", "arm64")
	release()
	b2 := builtOK(id2, 1)[0]
	builtBy(b2, other)
	for _, j := range buildJobs(id2) {
		died := slices.ContainsFunc(j.Errors, func(e rivertype.AttemptError) bool { return strings.Contains(e.Error, "died") })
		if j.Attempt != 2 || !slices.Equal(j.AttemptedBy, []string{victim.id, other.id}) || !died {
			t.Errorf("the killed build's job %d: attempt %d by %v, errors %v; want attempt 2 by %s after %s, the death among its errors",
				j.ID, j.Attempt, j.AttemptedBy, j.Errors, other.spec.Name, victim.spec.Name)
		}
	}
	if err := s.Cancel(ctx, id2); err != nil {
		t.Fatal(err)
	}

	// 3. The killed worker comes back and builds the same kernel in the
	// build directory the kill left.
	if b, _ := os.ReadFile(partial); string(b) != "partial\n" {
		t.Fatalf("%s: %q, want the partial link the kill left", partial, b)
	}
	stop(other)
	victim = start(0, "ppc64le")
	id3, _, err := s.Submit(ctx, p2, runner.Options{Tree: repo, Base: next, Boots: 2})
	if err != nil || id3 == id2 {
		t.Fatalf("a second evaluation of the same kernel: %d (first %d), %v", id3, id2, err)
	}
	builtBy(builtOK(id3, 1)[0], victim)
	if err := s.Cancel(ctx, id3); err != nil {
		t.Fatal(err)
	}

	// 4. Postgres restarts while the worker builds: every session ends
	// (the worker's presence lock too). The worker reconnects and records
	// the kernel; its job is not taken for an orphan's.
	release = holdBuilds()
	id4, _, err := s.Submit(ctx, fakePipeline(t, `"ppc64le"`, "FAKE_C"), runner.Options{Tree: repo})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, victim.spec.Name+"'s build running", func() bool {
		return slices.ContainsFunc(buildJobs(id4), func(j *rivertype.JobRow) bool { return j.State == rivertype.JobStateRunning })
	})
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	release()
	builtBy(builtOK(id4, 1)[0], victim)
	for _, j := range buildJobs(id4) {
		if j.State != rivertype.JobStateCompleted || j.Attempt != 1 {
			t.Errorf("build job %d across the Postgres restart: %s at attempt %d (errors %v), want completed at attempt 1", j.ID, j.State, j.Attempt, j.Errors)
		}
	}
	if err := s.Cancel(ctx, id4); err != nil {
		t.Fatal(err)
	}
	stop(victim)
}

// farmCoord is what the coordinator's role tells its workers: the
// database, serve's port and the token file.
type farmCoord struct {
	spec              farmSpec
	db, port, tokFile string
	pg                *testpg.Server
}

// start starts worker process ws (its Name, Cache and capabilities set)
// in worker i's namespace, reaching the coordinator over its link, and
// waits until it works.
func (c *farmCoord) start(t *testing.T, i int, ws farmWorkerSpec) *farmProc {
	t.Helper()
	l := c.spec.Workers[i]
	u, _ := url.Parse(c.db)
	u.Host = net.JoinHostPort(l.Coord, u.Port())
	ws.DB, ws.Server, ws.TokenFile = u.String(), "http://"+net.JoinHostPort(l.Coord, c.port), c.tokFile
	ws.IDFile = filepath.Join(c.spec.Dir, ws.Name+".id")
	os.Remove(ws.IDFile)
	js, _ := json.Marshal(ws)
	p := &farmProc{spec: ws, ns: l.NS, done: make(chan error, 1)}
	p.cmd = exec.Command("ip", "netns", "exec", l.NS, os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), farmWorkerEnv+"="+string(js))
	p.cmd.Stdout, p.cmd.Stderr = testWriter{t}, testWriter{t}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	waitFor(t, time.Minute, ws.Name+" starts", func() bool {
		select {
		case err := <-p.done:
			t.Fatalf("%s exited before it worked: %v", ws.Name, err)
		default:
		}
		b, err := os.ReadFile(ws.IDFile)
		p.id = string(b)
		return err == nil && p.id != ""
	})
	return p
}

// stop stops p with SIGTERM; it must exit cleanly.
func (p *farmProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-p.done; err != nil {
		t.Fatalf("%s after SIGTERM: %v", p.spec.Name, err)
	}
}

// waitFor polls cond every 50 ms until it holds, failing t after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
	}
}

// farmWorkerMain is a `patcheval worker` in this test binary (TestMain):
// it works until SIGTERM.
func farmWorkerMain(raw string) int {
	var spec farmWorkerSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for _, dir := range spec.Hide {
		if err := syscall.Mount("patcheval-hidden", dir, "tmpfs", syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, "size=4k,mode=0555"); err != nil {
			fmt.Fprintf(os.Stderr, "hiding %s from the worker: %v\n", dir, err)
			return 3
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	tok, err := ReadToken(spec.TokenFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w, err := NewWorker(ctx, WorkerConfig{Database: spec.DB, Server: spec.Server, Token: tok, Name: spec.Name, CacheDir: spec.Cache,
		Jobs: max(1, spec.Jobs), CompilerCache: spec.CompilerCache, BuildWorkers: 1, BootWorkers: 1, Grace: 5 * time.Second, Capabilities: Capabilities{Build: spec.Build, QEMU: spec.QEMU, Cores: 1}, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer w.Close()
	if err := os.WriteFile(spec.IDFile, []byte(w.s.WorkerID()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	return 0
}
