package service

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestFarmBootKilledMidBoot: a worker is killed with SIGKILL while QEMU
// runs a benchmark in it; River gets the boot job back (serve's orphan
// watch) and the other worker boots that kernel again; the boot is
// counted once and the killed boot's samples are nowhere.
//
// Real parts: Postgres, serve and two `patcheval worker` processes in
// their own network namespaces (as TestFarmAcrossNetworkNamespaces),
// the suite's cached ppc64le kernel (Debian's 6.1 tree, pseries boot
// fragment, voluntary preemption; built here under the build lock if no
// test built it yet) and deterministic QEMU. serve "builds" it (a cache
// hit) and puts it into its artifact store; the workers, on empty caches
// of their own and with serve's cache and state hidden from them by a
// tmpfs, fetch it from the store over their links, build their guest
// agents and boot it.
//
// It is opt-in (PATCHEVAL_LONG_TESTS=1): three deterministic boots of
// several seconds each (one of them cut short) are too much for the
// default suite's time. The default suite kills a worker mid-build
// (TestFarmAcrossNetworkNamespaces) and serve mid-boot (TestServeEndToEnd).
func TestFarmBootKilledMidBoot(t *testing.T) {
	buildtest.SkipIfSlow(t)
	testenv.SkipUnlessLong(t, "three deterministic ppc64le boots across the farm's network namespaces")
	skipUnlessNetns(t)
	buildtest.PPC64(t, "base-voluntary")
	runFarm(t, farmSpec{Scenario: "boot", Tree: buildtest.Repo(t), Cache: xdg.CacheDir()})
}

// farmBootPipeline boots the suite's ppc64le base kernel
// (buildtest.Variants["base-voluntary"]) deterministically; each boot
// runs the kill loop iterations times.
func farmBootPipeline(t *testing.T, iterations int) *pipelines.Pipeline {
	t.Helper()
	src := fmt.Sprintf(`name = "farm-boot"
description = "the suite's ppc64le base kernel, booted by farm workers"
deterministic = true
[tree]
base = %q
[series]
apply = false
[build]
arch = ["ppc64le"]
config = "tinyconfig"
fragments = ["ppc64le-pseries"]
[[variant]]
name = "voluntary"
symbols = { PREEMPT_VOLUNTARY = "y" }
[[benchmark]]
name = "kill"
iterations = 200000
[repeats]
iterations = %d
[target]
kind = "qemu"
smp = 1
memory = "512M"
timeout = "10m"
kvm = "off"
`, buildtest.BaseCommit, iterations)
	p, err := pipelines.Parse([]byte(src), "farm-boot.toml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// qemuChild is the pid of a QEMU process whose parent is pid (0: none).
func qemuChild(pid int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) && strings.HasPrefix(s[open+1:end], "qemu-system") && f[0] != "Z" {
			return child
		}
	}
	return 0
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// farmBootScenario is TestFarmBootKilledMidBoot's coordinator (in its
// namespace; s builds ppc64le from spec.Cache):
//
//  1. Two workers that boot ppc64le, nothing else, start on empty caches;
//     an evaluation of one kernel with two boots is submitted. serve
//     records the kernel (a cache hit) and its artifacts.
//  2. The first boot finishes on either worker; its timings say when, in
//     a boot of this kernel, the benchmarks run (from the first result to
//     the end).
//  3. The worker that runs the second boot is killed with SIGKILL a third
//     into that boot's benchmarks, its QEMU with it.
//  4. serve's orphan watch queues the boot job again and the other worker
//     boots the kernel: the evaluation is done with each boot finished
//     once, the first boot's samples as they were, the killed boot's run
//     ended as interrupted without a sample, and (deterministic QEMU) the
//     rebooted boot's samples equal the first boot's.
func farmBootScenario(t *testing.T, s *Service, c *farmCoord) {
	ctx := context.Background()
	hide := []string{c.spec.Cache, xdg.StateDir()}
	for _, dir := range hide {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w1 := c.start(t, 0, farmWorkerSpec{Name: "w1", Cache: filepath.Join(c.spec.Dir, "w1"), QEMU: []string{"ppc64le"}, Hide: hide})
	w2 := c.start(t, 1, farmWorkerSpec{Name: "w2", Cache: filepath.Join(c.spec.Dir, "w2"), QEMU: []string{"ppc64le"}, Hide: hide})
	id, _, err := s.Submit(ctx, farmBootPipeline(t, 6), runner.Options{Tree: c.spec.Tree, Boots: 2})
	if err != nil {
		t.Fatal(err)
	}
	st := s.Store()
	runs := func() []store.Run {
		t.Helper()
		rs, err := st.RunsOf(id)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	checkRunning := func() {
		t.Helper()
		if e, _ := st.Evaluation(id); e != nil && (e.Status == "failed" || e.Status == StatusCancelled) {
			bs, _ := st.BuildsOf(id)
			t.Fatalf("evaluation %d %s: builds %+v, runs %+v", id, e.Status, bs, runs())
		}
	}

	// 1, 2. The first boot.
	var first store.Run
	waitFor(t, 15*time.Minute, "the first boot finished", func() bool {
		checkRunning()
		for _, r := range runs() {
			if r.Status.Finished() {
				first = r
				return true
			}
		}
		return false
	})
	if first.Status != store.RunOK || first.Samples == 0 {
		t.Fatalf("the first boot: %s with %d samples: %s", first.Status, first.Samples, first.ErrorText)
	}
	bs, err := st.BuildsOf(id)
	if err != nil || len(bs) != 1 || len(runner.BuildFiles(bs[0])) == 0 || !strings.HasPrefix(bs[0].ArtifactDir, c.spec.Cache+"/") {
		t.Fatalf("the kernel's build row: %+v, %v; want one build in serve's cache %s with its artifact manifest", bs, err, c.spec.Cache)
	}
	tm, err := st.Timings(id)
	if err != nil {
		t.Fatal(err)
	}
	boot, bench := tm["boot"].Duration, tm["benchmark"].Duration
	if boot <= 0 || bench <= 0 {
		t.Fatalf("timings of the first boot: %+v", tm)
	}
	t.Logf("the first boot (run %d, %d samples): first result after %s, benchmarks %s", first.ID, first.Samples, boot.Round(time.Millisecond), bench.Round(time.Millisecond))

	// 3. The second boot, killed during its benchmarks.
	var victim, other *farmProc
	var qemu int
	var seen time.Time
	waitFor(t, 5*time.Minute, "the second boot's QEMU", func() bool {
		checkRunning()
		for _, w := range []*farmProc{w1, w2} {
			if qemu = qemuChild(w.cmd.Process.Pid); qemu != 0 {
				seen, victim, other = time.Now(), w, map[*farmProc]*farmProc{w1: w2, w2: w1}[w]
				return true
			}
		}
		return false
	})
	// A third into the benchmarks: the kill lands in them unless this
	// boot runs more than a third slower or faster than the first, and
	// before the boot's end unless it runs a third faster.
	time.Sleep(time.Until(seen.Add(boot + bench/3)))
	var killed store.Run
	for _, r := range runs() {
		if r.ID != first.ID {
			killed = r
		}
	}
	if killed.Status != store.RunRunning || !alive(qemu) {
		t.Fatalf("the second boot is %q (run %d) and its QEMU alive=%v %s after it started: it ended before the kill "+
			"(the first boot's benchmarks ran from %s to %s after QEMU started)", killed.Status, killed.ID, alive(qemu),
			time.Since(seen).Round(time.Millisecond), boot.Round(time.Millisecond), (boot + bench).Round(time.Millisecond))
	}
	samplesBefore := 0
	for _, r := range runs() {
		samplesBefore += r.Samples
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done
	t.Logf("killed %s %s into the second boot (run %d, QEMU %d); %d sample rows before", victim.spec.Name,
		time.Since(seen).Round(time.Millisecond), killed.ID, qemu, samplesBefore)
	waitFor(t, 30*time.Second, "the killed worker's QEMU gone", func() bool { return !alive(qemu) })

	// 4. The other worker boots it; the evaluation completes.
	waitFor(t, 15*time.Minute, "the evaluation done", func() bool {
		checkRunning()
		e, err := st.Evaluation(id)
		return err == nil && e.Status == "done"
	})
	finished := map[evaluate.BootKey]store.Run{}
	total := 0
	for _, r := range runs() {
		total += r.Samples
		k := evaluate.BootKey{Variant: r.Variant, Boot: r.Boot}
		switch {
		case r.ID == killed.ID:
			if r.Status != store.RunInfra || !strings.Contains(r.ErrorText, "interrupted") || r.Samples != 0 {
				t.Errorf("the killed boot's run %d: %s %q with %d samples; want infra, interrupted, none", r.ID, r.Status, r.ErrorText, r.Samples)
			}
		case !r.Status.Finished():
			t.Errorf("run %d (%s#%d) is %s after the evaluation is done", r.ID, r.Variant, r.Boot, r.Status)
		default:
			if prev, dup := finished[k]; dup {
				t.Errorf("boot %s finished twice: runs %d and %d", k, prev.ID, r.ID)
			}
			finished[k] = r
		}
	}
	again, ok := finished[evaluate.BootKey{Variant: killed.Variant, Boot: killed.Boot}]
	if len(finished) != 2 || !ok || finished[evaluate.BootKey{Variant: first.Variant, Boot: first.Boot}].ID != first.ID {
		t.Fatalf("finished boots %+v: want the first boot's run %d and the killed boot booted again", finished, first.ID)
	}
	for _, r := range runs() {
		if r.ID == first.ID && r.Samples != first.Samples {
			t.Errorf("the first boot's run had %d samples before the kill, %d after", first.Samples, r.Samples)
		}
	}
	if again.Samples != first.Samples || total != samplesBefore+again.Samples {
		t.Errorf("sample rows: %d before the kill, %d after; the boot again has %d, the first %d: want before + the boot again",
			samplesBefore, total, again.Samples, first.Samples)
	}
	samples, err := st.Samples(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != total {
		t.Errorf("%d sample rows of finished runs, %d rows in all", len(samples), total)
	}
	// Deterministic QEMU: the same kernel and plan give the same numbers
	// on either worker, to a few parts in 100,000 (-icount is not
	// bit-exact from boot to boot: 983.639 and 983.672 ns/op were seen).
	values := map[int][]float64{}
	for _, sm := range samples {
		values[sm.Boot] = append(values[sm.Boot], sm.Value)
	}
	a, b := values[first.Boot], values[again.Boot]
	same := len(a) == len(b) && len(a) > 0
	for i := range min(len(a), len(b)) {
		same = same && math.Abs(a[i]-b[i]) <= 1e-3*math.Abs(a[i])
	}
	if !same {
		t.Errorf("deterministic boots of one kernel differ by more than 0.1%%: boot %d %v, boot %d (again, on %s) %v", first.Boot, a,
			again.Boot, other.spec.Name, b)
	}
	// The boot job: rescued from the killed worker, run by the other.
	jobs, err := s.Engine().Jobs(ctx, id, 100)
	if err != nil {
		t.Fatal(err)
	}
	retried := 0
	for _, j := range jobs {
		if j.Kind != (BootArgs{}).Kind() {
			continue
		}
		if j.State != rivertype.JobStateCompleted {
			t.Errorf("boot job %d: %s", j.ID, j.State)
		}
		if j.Attempt == 1 {
			continue
		}
		retried++
		died := slices.ContainsFunc(j.Errors, func(e rivertype.AttemptError) bool { return strings.Contains(e.Error, "died") })
		if j.Attempt != 2 || !slices.Equal(j.AttemptedBy, []string{victim.id, other.id}) || !died {
			t.Errorf("the killed boot's job %d: attempt %d by %v, errors %v; want attempt 2 by %s after %s, the death among its errors",
				j.ID, j.Attempt, j.AttemptedBy, j.Errors, other.spec.Name, victim.spec.Name)
		}
	}
	if retried != 1 {
		t.Errorf("%d boot jobs were retried, want the killed one", retried)
	}
	// The workers fetched the kernel from serve's store, not from its
	// cache (hidden from them).
	for _, w := range []*farmProc{w1, w2} {
		if m, _ := filepath.Glob(filepath.Join(w.spec.Cache, "artifacts", "*", "vmlinux")); len(m) != 1 {
			t.Errorf("%s's cache holds the kernel %v times from the artifact store, want once", w.spec.Name, m)
		}
	}
	if _, err := os.Stat(filepath.Join(xdg.StateDir(), "evaluations", strconv.FormatInt(id, 10), "report.json")); err != nil {
		t.Errorf("serve's report: %v", err)
	}
	t.Logf("boot %s#%d: killed on %s, booted again on %s (run %d, %d samples: %v); %d sample rows in all",
		killed.Variant, killed.Boot, victim.spec.Name, other.spec.Name, again.ID, again.Samples, values[again.Boot], total)
	other.stop(t)
}
