package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/digest"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/internal/testpg"
	"github.com/patcheval/patcheval/pipelines/store"
)

// The interruption tests run `patcheval lore --pipeline` as a child
// process (this test binary, see TestMain) and deliver SIGINT or SIGKILL
// at a chosen point of a chosen stage. The point is a progress line: the
// child's stderr goes through a gate that, on the Nth line matching
// PATCHEVAL_TEST_GATE, prints a marker and (with PATCHEVAL_TEST_GATE_HOLD)
// blocks the stage right there until SIGINT arrives (or SIGKILL ends it).
// Blocking a progress line is where the stage would be anyway at that
// instant; nothing else of the program is changed.
const (
	childArgsEnv = "PATCHEVAL_TEST_CHILD_ARGS"
	gateEnv      = "PATCHEVAL_TEST_GATE"
	gateNEnv     = "PATCHEVAL_TEST_GATE_N"
	gateHoldEnv  = "PATCHEVAL_TEST_GATE_HOLD"
	gateMarker   = "PATCHEVAL-TEST-GATE"
	// childReadyEnv makes the child print childReadyMarker on stderr once
	// SIGINT and SIGTERM reach the program's context.
	childReadyEnv    = "PATCHEVAL_TEST_READY"
	childReadyMarker = "PATCHEVAL-TEST-READY"
)

func TestMain(m *testing.M) {
	if a := os.Getenv(childArgsEnv); a != "" {
		os.Exit(childMain(a))
	}
	cleanup := testenv.PrivateDirs()
	code := testpg.Main(m)
	cleanup()
	os.Exit(code)
}

// childMain is main() with the gate on stderr.
func childMain(argsJSON string) int {
	var args []string
	if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
		fmt.Fprintln(os.Stderr, "child args:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv(childReadyEnv) != "" {
		fmt.Fprintln(os.Stderr, childReadyMarker)
	}
	g := &gate{w: os.Stderr, hold: os.Getenv(gateHoldEnv) == "1", n: 1}
	if re := os.Getenv(gateEnv); re != "" {
		g.re = regexp.MustCompile(re)
	}
	if n, err := strconv.Atoi(os.Getenv(gateNEnv)); err == nil && n > 0 {
		g.n = n
	}
	g.ctx = ctx
	return run(ctx, &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: g}, args)
}

// gate passes lines through; on the nth line matching re it writes the
// marker and, when hold, waits until SIGINT has cancelled the program's
// context before returning.
type gate struct {
	mu   sync.Mutex
	w    io.Writer
	re   *regexp.Regexp
	n    int
	seen int
	hold bool
	ctx  context.Context // cancelled by SIGINT
	buf  []byte
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.buf = append(g.buf, p...)
	for {
		i := bytes.IndexByte(g.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(g.buf[:i+1])
		g.buf = g.buf[i+1:]
		g.w.Write([]byte(line))
		if g.re == nil || !g.re.MatchString(line) {
			continue
		}
		if g.seen++; g.seen != g.n {
			continue
		}
		fmt.Fprintf(g.w, "%s %s", gateMarker, line)
		if g.hold {
			<-g.ctx.Done() // the program has seen the SIGINT
		}
	}
}

// stop is where a child is interrupted.
type stop struct {
	name string
	gate string // regexp of the progress line
	n    int    // its nth occurrence
	hold bool   // block the stage at the line (else signal after delay)
	// delay after the line before the signal (a stage under way).
	delay time.Duration
}

type childResult struct {
	stderr   string
	code     int
	signaled bool // died of the signal
	reached  bool // the gate fired
}

// childTimeout bounds one child run.
var childTimeout = 15 * time.Minute

// runChild runs `patcheval args...` and interrupts it with sig at st
// (st == nil: runs it to its end).
func runChild(t *testing.T, args []string, st *stop, sig syscall.Signal) childResult {
	t.Helper()
	argsJSON, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(argsJSON), "TERM=dumb")
	if st != nil {
		n := st.n
		if n == 0 {
			n = 1
		}
		cmd.Env = append(cmd.Env, gateEnv+"="+st.gate, fmt.Sprintf("%s=%d", gateNEnv, n))
		if st.hold {
			cmd.Env = append(cmd.Env, gateHoldEnv+"=1")
		}
	}
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var res childResult
	var all bytes.Buffer
	timeout := time.AfterFunc(childTimeout, func() { cmd.Process.Kill() })
	defer timeout.Stop()
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		all.WriteString(line + "\n")
		if st != nil && !res.reached && strings.HasPrefix(line, gateMarker) {
			res.reached = true
			time.Sleep(st.delay)
			cmd.Process.Signal(sig)
		}
	}
	err = cmd.Wait()
	res.stderr = all.String()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
		ws := ee.Sys().(syscall.WaitStatus)
		res.signaled = ws.Signaled() && ws.Signal() == sig
	default:
		t.Fatalf("child: %v\n%s", err, res.stderr)
	}
	return res
}

// TestInterruptEveryStage interrupts one `lore --pipeline` evaluation
// (the bundled backport series, ppc-preempt-dynamic: three ppc64le kernels
// from the shared cache, four deterministic QEMU boots) at every stage,
// once with SIGKILL and once with SIGINT, re-running the same command after
// each interruption, as a user would:
//
//	apply-start   before the series is applied
//	apply-end     the branch is written but not yet recorded
//	build-start   before the first kernel is built
//	build-end     the second kernel is built but not yet recorded
//	boot-mid      300 ms into the second boot (QEMU running; a
//	              deterministic boot takes 2-3 s)
//	report-start  every boot recorded, no report written
//
// After each stop it checks what the store kept; the last run must
// resume, redo nothing that was recorded (no kernel built or boot booted
// twice, no sample counted twice) and write the report.
//
// With the shared cache the kernels are cache hits: the kill lands in the
// build stage, not inside a compiler. A SIGKILL inside a running kernel
// compile of `lore --pipeline` is TestInterruptKernelCompile (long), of
// the service pipelines/service TestKillDuringBuild.
func TestInterruptEveryStage(t *testing.T) {
	repo := buildtest.Repo(t)
	t.Setenv("PATCHEVAL_CACHE_DIR", buildtest.Options(t).CacheDir)
	// The children build the pipeline's kernels when the cache lacks
	// them: under the test build lock, like buildtest's builds.
	buildtest.Serialize(t, func() {
		warmPipelineKernels(t, repo)
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
			t.Run(map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGINT: "SIGINT"}[sig], func(t *testing.T) { interruptEveryStage(t, repo, sig) })
		}
	})
}

// warmPipelineKernels has a child build the pipeline's three kernels into
// the shared cache and kills it at its first boot, so that the stops
// below find them there whichever test package ran first. Cold, the
// three take 15 to 30 minutes on 2 cores: more than childTimeout allows
// one interrupted child, and not the stage this test is about.
func warmPipelineKernels(t *testing.T, repo string) {
	dir := t.TempDir()
	t.Setenv("PATCHEVAL_STATE_DIR", dir)
	branch := fmt.Sprintf("patcheval/test-interrupt-warm-%d", os.Getpid())
	t.Cleanup(func() { exec.Command("git", "--git-dir="+repo, "branch", "-D", branch).Run() })
	defer func(d time.Duration) { childTimeout = d }(childTimeout)
	childTimeout = 80 * time.Minute
	args := []string{"lore", "-m", backport, "--pipeline", "ppc-preempt-dynamic", "--tree", repo, "--branch", branch,
		"--boots", "1", "--db", filepath.Join(dir, "warm.db"), "--out", filepath.Join(dir, "out"),
		"--from", "Kernel Tester <tester@example.org>"}
	res := runChild(t, args, &stop{name: "warm", gate: `boot \S+ #1 on`, hold: true}, syscall.SIGKILL)
	if !res.reached {
		t.Fatalf("warming the pipeline's kernels: the child never reached its first boot (exit %d):\n%s", res.code, res.stderr)
	}
}

func interruptEveryStage(t *testing.T, repo string, sig syscall.Signal) {
	dir := t.TempDir()
	db := filepath.Join(dir, "patcheval.db")
	out := filepath.Join(dir, "out")
	branch := fmt.Sprintf("patcheval/test-interrupt-%d-%d", os.Getpid(), sig)
	t.Cleanup(func() { exec.Command("git", "--git-dir="+repo, "branch", "-D", branch).Run() })
	t.Setenv("PATCHEVAL_STATE_DIR", dir)
	args := []string{"lore", "-m", backport, "--pipeline", "ppc-preempt-dynamic", "--tree", repo, "--branch", branch,
		"--boots", "1", "--db", db, "--out", out, "--from", "Kernel Tester <tester@example.org>"}

	stops := []stop{
		{name: "apply-start", gate: `applying \d+ patch`, hold: true},
		{name: "apply-end", gate: `applied \d+ patch`, hold: true},
		{name: "build-start", gate: `building ppc64le/`, hold: true},
		{name: "build-end", gate: `built ppc64le/`, n: 2, hold: true},
		{name: "boot-mid", gate: `boot \S+ #1 on`, n: 2, delay: 300 * time.Millisecond},
		// The run after boot-mid boots the three left.
		{name: "report-start", gate: `boot \S+ #1: `, n: 3, hold: true},
	}
	// What each stop must leave in the store: applied?, kernels recorded
	// (at least builds, at most maxBuilds), boots finished. SIGKILL at
	// apply-end and build-end loses the work done but not yet recorded
	// (the next run finds the branch and the kernel in the build cache
	// again); SIGINT there records it first. The pipeline's three kernels
	// build at the same time (one -j budget), so while the child is held
	// at the second "built" line the third may finish and be recorded
	// too: build-end allows up to all three.
	type kept struct {
		applied       bool
		builds, boots int
		maxBuilds     int
	}
	want := map[string]kept{
		"apply-start": {false, 0, 0, 0}, "apply-end": {false, 0, 0, 0}, "build-start": {true, 0, 0, 0},
		"build-end": {true, 1, 0, 3}, "boot-mid": {true, 3, 1, 3}, "report-start": {true, 3, 4, 3},
	}
	if sig == syscall.SIGINT {
		want["apply-end"] = kept{true, 0, 0, 0}
		want["build-end"] = kept{true, 2, 0, 3}
	}
	var evalID int64
	for _, st := range stops {
		res := runChild(t, args, &st, sig)
		if !res.reached {
			t.Fatalf("%s: the child never reached %q (exit %d):\n%s", st.name, st.gate, res.code, res.stderr)
		}
		switch sig {
		case syscall.SIGKILL:
			if !res.signaled {
				t.Fatalf("%s: the child did not die of SIGKILL (exit %d):\n%s", st.name, res.code, res.stderr)
			}
		case syscall.SIGINT:
			// Interrupted: exit 3 (infrastructure), and told how to resume.
			if res.code != 3 || !strings.Contains(res.stderr, "interrupted; finished work is kept, re-run the same command to resume") {
				t.Fatalf("%s: SIGINT: exit %d, want 3 and the resume hint:\n%s", st.name, res.code, res.stderr)
			}
		}
		if _, err := os.Stat(filepath.Join(out, "report.txt")); err == nil {
			t.Fatalf("%s: a report was written by an interrupted run", st.name)
		}
		s, err := store.Open(db)
		if err != nil {
			t.Fatalf("%s: the state file does not open after %s: %v", st.name, sig, err)
		}
		evs, err := s.ListEvaluations()
		if err != nil || len(evs) != 1 {
			t.Fatalf("%s: evaluations %+v %v, want one", st.name, evs, err)
		}
		evalID = evs[0].ID
		a, _ := s.AppliedOf(evalID)
		builds, _ := s.BuildsOf(evalID)
		done, _ := s.FinishedRuns(evalID)
		s.Close()
		w := want[st.name]
		nb := 0
		for _, b := range builds {
			if b.Status == "ok" {
				nb++
			}
		}
		if (a != nil) != w.applied || nb < w.builds || nb > w.maxBuilds || len(done) != w.boots {
			t.Errorf("%s: the store kept applied %v, %d kernel(s), %d boot(s); want %v, %d..%d, %d",
				st.name, a != nil, nb, len(done), w.applied, w.builds, w.maxBuilds, w.boots)
		}
		if st.name == "apply-end" {
			// The branch was written, the record was not: the next run
			// applies again onto the same branch without complaint.
			if err := exec.Command("git", "--git-dir="+repo, "rev-parse", "--verify", "-q", branch).Run(); err != nil {
				t.Errorf("apply-end: the branch %s was not written before the stop", branch)
			}
		}
		t.Logf("%s: %s at %q; store: applied %v, %d kernel(s), %d boot(s)", st.name, sig, st.gate, a != nil, nb, len(done))
	}

	// The last run resumes and finishes.
	res := runChild(t, args, nil, sig)
	if res.code != 0 {
		t.Fatalf("final run: exit %d\n%s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, fmt.Sprintf("resuming evaluation %d (4 boot(s) already finished)", evalID)) {
		t.Errorf("final run did not resume with every boot kept:\n%s", res.stderr)
	}
	for _, redo := range []string{"applying ", "building ppc64le/", "boot voluntary #1 on"} {
		if strings.Contains(res.stderr, redo) {
			t.Errorf("final run redid recorded work (%q):\n%s", redo, res.stderr)
		}
	}
	if fi, err := os.Stat(filepath.Join(out, "report.txt")); err != nil || fi.Size() == 0 {
		t.Fatalf("no report after the final run: %v", err)
	}
	s, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, err := s.RunsOf(evalID)
	if err != nil {
		t.Fatal(err)
	}
	ok := map[evaluate.BootKey]int{}
	samples := map[int]int{}
	for _, r := range runs {
		if r.Status == store.RunOK {
			ok[evaluate.BootKey{Variant: r.Variant, Boot: r.Boot}]++
			samples[r.Samples]++
		}
	}
	if len(ok) != 4 || len(samples) != 1 {
		t.Errorf("finished boots %v (samples per boot %v): want 4 distinct boots with the same number of samples", ok, samples)
	}
	for k, n := range ok {
		if n != 1 {
			t.Errorf("boot %v recorded %d times", k, n)
		}
	}
	a, _ := s.AppliedOf(evalID)
	head, _ := exec.Command("git", "--git-dir="+repo, "rev-parse", branch).Output()
	if a == nil || strings.TrimSpace(string(head)) != a.Head || len(a.Commits) != 1 {
		t.Errorf("applied %+v, branch at %s", a, head)
	}
}

// TestInterruptKernelCompile SIGKILLs `lore --pipeline` (the bundled
// backport series, ppc-preempt-dynamic, one boot per variant) while make
// and the compilers of a real kernel build run, and runs the same command
// again. The resumed run must lose nothing already done (the series is
// not applied again, the kernels recorded before the kill are not built
// again, the killed build's finished objects are not compiled again) and
// give the same result as a run that was never interrupted: the same
// kernel (.config and System.map) and every boot once.
//
// A reference evaluation runs first on the shared cache (warm: cache hits
// and four short deterministic boots; cold, it builds the three kernels
// there like any `lore --pipeline`). The interrupted one runs on a private
// cache holding the shared cache's other two kernels and its
// compiler-cache objects (hard links), but not the "full" kernel: that
// build is real (sources checked out, olddefconfig, make) with kcc hits,
// so it compiles nothing and never writes the shared cache, but it costs
// minutes of CPU, hence PATCHEVAL_LONG_TESTS=1 (never in CI). It takes no
// test build lock: the lock's holder may keep it for an hour of builds,
// and this test's own build is in a cache no other test uses.
func TestInterruptKernelCompile(t *testing.T) {
	testenv.SkipUnlessLong(t, "a ppc64le kernel build (kcc hits) killed and resumed, about 10 minutes")
	repo := buildtest.Repo(t)
	shared := buildtest.Options(t).CacheDir
	t.Setenv("PATCHEVAL_CACHE_DIR", shared)
	// A kernel build with kcc hits takes 6 to 25 minutes on a busy
	// 2-core machine.
	defer func(d time.Duration) { childTimeout = d }(childTimeout)
	childTimeout = 50 * time.Minute
	dir := t.TempDir()
	t.Setenv("PATCHEVAL_STATE_DIR", dir)
	lore := func(name string) []string {
		branch := fmt.Sprintf("patcheval/test-kill-compile-%s-%d", name, os.Getpid())
		t.Cleanup(func() { exec.Command("git", "--git-dir="+repo, "branch", "-D", branch).Run() })
		return []string{"lore", "-m", backport, "--pipeline", "ppc-preempt-dynamic", "--tree", repo, "--branch", branch,
			"--boots", "1", "-j", "2", "--db", filepath.Join(dir, name+".db"), "--out", filepath.Join(dir, name+"-out"),
			"--from", "Kernel Tester <tester@example.org>"}
	}
	const killed = "full" // the kernel whose build is killed

	// The reference: never interrupted.
	ref := runChild(t, lore("ref"), nil, syscall.SIGKILL)
	if ref.code != 0 {
		t.Fatalf("reference run: exit %d\n%s", ref.code, ref.stderr)
	}
	refBuilds := storedBuilds(t, filepath.Join(dir, "ref.db"))
	// The same kernel: the same .config and every symbol at the same
	// address (System.map). The images themselves differ in the build
	// timestamp, the applied commit's date (each evaluation applies the
	// series anew, and the build cache is keyed by tree: the reference's
	// cache hit was built from another commit), and what derives from it
	// (build ID, initramfs mtimes).
	refMap := filepath.Join(refBuilds[killed].ArtifactDir, "System.map")
	refSum, err := digest.File(refMap)
	if err != nil {
		t.Fatal(err)
	}
	refConfig, err := digest.File(filepath.Join(refBuilds[killed].ArtifactDir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	var refMeta struct {
		Results struct {
			ObjectsCompiled int `json:"objects_compiled"`
		} `json:"results"`
		Build struct {
			Incremental bool `json:"incremental"`
		} `json:"build"`
	}
	if data, err := os.ReadFile(filepath.Join(refBuilds[killed].ArtifactDir, "metadata.json")); err != nil || json.Unmarshal(data, &refMeta) != nil {
		t.Fatalf("reference kernel's metadata: %v", err)
	}

	// The private cache: everything the run needs but the killed kernel.
	priv := filepath.Join(dir, "cache")
	for _, d := range []string{"agents", "userland", "kcc/layers"} {
		if _, err := os.Stat(filepath.Join(shared, d)); err == nil {
			linkTree(t, filepath.Join(shared, d), filepath.Join(priv, d))
		}
	}
	for v, b := range refBuilds {
		if v == killed {
			continue
		}
		linkTree(t, b.ArtifactDir, filepath.Join(priv, "builds", filepath.Base(b.ArtifactDir)))
	}
	idx, _ := filepath.Glob(filepath.Join(shared, "builds", "index", "*"))
	for _, p := range idx {
		key, err := os.ReadFile(p)
		if err != nil || strings.TrimSpace(string(key)) == filepath.Base(refBuilds[killed].ArtifactDir) {
			continue
		}
		linkTree(t, p, filepath.Join(priv, "builds", "index", filepath.Base(p)))
	}
	t.Setenv("PATCHEVAL_CACHE_DIR", priv)

	// The kill: 2 s after the first progress line (one every 20 s) that
	// counts 100 objects or more, so objects are compiled and compilers
	// are running.
	args := lore("killed")
	db := filepath.Join(dir, "killed.db")
	st := stop{name: "compile", gate: "ppc64le/" + killed + `: (CC|AS) \S+ \([1-9]\d{2,} objects\)`, delay: 2 * time.Second}
	res := runChild(t, args, &st, syscall.SIGKILL)
	if !res.reached || !res.signaled {
		t.Fatalf("the child did not die of SIGKILL in the compile (reached %v, exit %d):\n%s", res.reached, res.code, res.stderr)
	}
	// The objects make had started by the last progress line.
	started := 0
	for _, m := range regexp.MustCompile("ppc64le/"+killed+`: (?:CC|AS) \S+ \((\d+) objects\)`).FindAllStringSubmatch(res.stderr, -1) {
		started, _ = strconv.Atoi(m[1])
	}
	kept := storedBuilds(t, db)
	if _, ok := kept[killed]; ok || len(kept) != 2 {
		t.Errorf("after the kill the store holds kernels %v, want the two cached ones and not %q", slices.Sorted(maps.Keys(kept)), killed)
	}
	t.Logf("killed with %d object(s) started; store: %v", started, slices.Sorted(maps.Keys(kept)))

	again := runChild(t, args, nil, syscall.SIGKILL)
	if again.code != 0 {
		t.Fatalf("the same command after the kill: exit %d\n%s", again.code, again.stderr)
	}
	for _, redo := range []string{"applying ", "building ppc64le/voluntary"} {
		if strings.Contains(again.stderr, redo) {
			t.Errorf("the resumed run redid recorded work (%q):\n%s", redo, again.stderr)
		}
	}
	m := regexp.MustCompile(`ppc64le/` + killed + `: built vmlinux in \S+ \((\d+) objects, (\d+) compiled`).FindStringSubmatch(again.stderr)
	if m == nil {
		t.Fatalf("the resumed run did not build the killed kernel:\n%s", again.stderr)
	}
	objects, _ := strconv.Atoi(m[1])
	// make redoes the objects it had started but not finished (at most
	// -j of them) and whatever kbuild always remakes.
	if total := refMeta.Results.ObjectsCompiled; !refMeta.Build.Incremental && objects > total-started+8 {
		t.Errorf("the resumed build compiled %d object(s); %d of the %d had been started before the kill: finished work was lost", objects, started, total)
	}
	got := storedBuilds(t, db)
	if sum, err := digest.File(filepath.Join(got[killed].ArtifactDir, "System.map")); err != nil || sum != refSum {
		t.Errorf("the kernel built across the kill differs from the uninterrupted one: System.map %s %v, want %s (%s)", sum, err, refSum, refMap)
	}
	if sum, err := digest.File(filepath.Join(got[killed].ArtifactDir, "config")); err != nil || sum != refConfig {
		t.Errorf("the kernel built across the kill has another .config: %s %v, want %s", sum, err, refConfig)
	}
	s, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs, _ := s.ListEvaluations()
	if len(evs) != 1 {
		t.Fatalf("evaluations %+v, want one", evs)
	}
	runs, _ := s.RunsOf(evs[0].ID)
	ok := map[evaluate.BootKey]int{}
	for _, r := range runs {
		if r.Status == store.RunOK {
			ok[evaluate.BootKey{Variant: r.Variant, Boot: r.Boot}]++
		}
	}
	if len(ok) != 4 {
		t.Errorf("finished boots %v, want the 4 variants once each", ok)
	}
	for k, n := range ok {
		if n != 1 {
			t.Errorf("boot %v recorded %d times", k, n)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "killed-out", "report.txt")); err != nil || fi.Size() == 0 {
		t.Errorf("no report after the resumed run: %v", err)
	}
	t.Logf("resumed: %s", m[0])
}

// storedBuilds returns the state file's successful kernels by variant.
func storedBuilds(t *testing.T, db string) map[string]store.Build {
	t.Helper()
	s, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs, err := s.ListEvaluations()
	if err != nil || len(evs) != 1 {
		t.Fatalf("%s: evaluations %+v %v, want one", db, evs, err)
	}
	bs, err := s.BuildsOf(evs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.Build{}
	for _, b := range bs {
		if b.Status == "ok" {
			out[b.Variant] = b
		}
	}
	return out
}

// linkTree copies src (a file or a directory) to dst with hard links
// (the private cache must not write into the shared one: every writer
// there replaces files by rename).
func linkTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-al", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -al %s %s: %v: %s", src, dst, err, out)
	}
}

// TestLorePipelineBadStateFile: a corrupt or truncated state file stops
// `lore --pipeline` before any stage (exit 3, the file named), and the
// file is left as it was.
func TestLorePipelineBadStateFile(t *testing.T) {
	repo := buildtest.Repo(t)
	dir := t.TempDir()
	// A real state file cut in half, and one that is not SQLite at all.
	good := filepath.Join(dir, "good.db")
	s, err := store.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, _, err := s.CreateOrResumeEvaluation(fmt.Sprint("k", i), store.EvaluationMeta{Pipeline: strings.Repeat("p", 500)}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	whole, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"truncated.db": whole[:len(whole)/2],
		"junk.db":      bytes.Repeat([]byte("not a database\x00\xff"), 512),
	} {
		db := filepath.Join(dir, name)
		if err := os.WriteFile(db, data, 0o644); err != nil {
			t.Fatal(err)
		}
		branch := "patcheval/test-bad-state-" + name
		var out, errb bytes.Buffer
		code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"lore", "-m", backport, "--pipeline", "ppc-preempt-dynamic",
			"--tree", repo, "--branch", branch, "--boots", "1", "--db", db, "--out", filepath.Join(dir, "out")})
		if code != 3 || !strings.Contains(errb.String(), db) {
			t.Errorf("%s: exit %d, want 3 naming the file:\n%s", name, code, errb.String())
		}
		if got, _ := os.ReadFile(db); !bytes.Equal(got, data) {
			t.Errorf("%s: the state file was changed", name)
		}
		if exec.Command("git", "--git-dir="+repo, "rev-parse", "--verify", "-q", branch).Run() == nil {
			exec.Command("git", "--git-dir="+repo, "branch", "-D", branch).Run()
			t.Errorf("%s: the series was applied although the state file is unusable", name)
		}
		t.Logf("%s: %s", name, strings.TrimSpace(errb.String()))
	}
}

// TestInterruptFetch stops `lore <msgid>` in its first stage, fetching
// from a real public-inbox: before the request, and with the thread
// downloaded but not yet parsed or cached; SIGKILL and SIGINT. SIGINT
// after the download lets the command finish (it is done but for
// printing: exit 0). The thread cache never holds a partial thread, and
// the same command then works.
func TestInterruptFetch(t *testing.T) {
	testenv.SkipIfSlow(t, "public-inbox")
	srv := testinbox.Start(t, backport)
	const msgid = "20261102093000.4121-1-tester@example.org"
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		for _, st := range []stop{
			{name: "fetch-start", gate: `fetching http`, hold: true},
			{name: "fetch-end", gate: `fetched http`, hold: true},
		} {
			name := map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGINT: "SIGINT"}[sig] + "/" + st.name
			t.Run(name, func(t *testing.T) {
				cache := t.TempDir()
				t.Setenv("PATCHEVAL_CACHE_DIR", cache)
				args := []string{"lore", "--lore", srv.URL, msgid}
				res := runChild(t, args, &st, sig)
				if !res.reached {
					t.Fatalf("the child never reached %q (exit %d):\n%s", st.gate, res.code, res.stderr)
				}
				finished := sig == syscall.SIGINT && st.name == "fetch-end"
				// SIGINT after the download: the thread is cached whole,
				// and the command still says it was interrupted (exit 3,
				// never 0).
				if sig == syscall.SIGKILL && !res.signaled || sig == syscall.SIGINT && (res.code != 3 || !strings.Contains(res.stderr, "interrupted; finished work is kept")) {
					t.Fatalf("%v: exit %d signaled %v:\n%s", sig, res.code, res.signaled, res.stderr)
				}
				var cached []string
				filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
					if err == nil && !d.IsDir() && strings.HasSuffix(p, ".mbox") {
						cached = append(cached, p)
					}
					return nil
				})
				for _, p := range cached {
					data, _ := os.ReadFile(p)
					if !finished || !bytes.Contains(bytes.ToLower(data), []byte("message-id: <"+msgid+">")) {
						t.Errorf("an interrupted fetch cached %s (%d bytes)", p, len(data))
					}
				}
				again := runChild(t, args, nil, sig)
				if again.code != 0 || !strings.Contains(again.stderr, "fetched http") && !(finished && strings.Contains(again.stderr, "using cached thread")) {
					t.Fatalf("the same command after the stop: exit %d\n%s", again.code, again.stderr)
				}
			})
		}
	}
}
