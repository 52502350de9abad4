package qemu

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/pipelines/store"
)

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
)

// ppcAgent builds the ppc64le agent once per test binary.
func ppcAgent(t *testing.T) string {
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "patcheval-agent-test-")
		if err != nil {
			agentErr = err
			return
		}
		agentPath, agentErr = guest.Build(context.Background(), "ppc64le", dir)
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentPath
}

func target(t *testing.T, cfg Config) *Target {
	cfg.Agent = ppcAgent(t)
	if testing.Verbose() {
		cfg.Console = &testLog{t: t}
	}
	return New(cfg)
}

type testLog struct{ t *testing.T }

func (l *testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func TestCommand(t *testing.T) {
	tg := New(Config{Deterministic: true, SMP: 2, Cmdline: "quiet"})
	for arch, want := range map[string][]string{
		"ppc64le": {"qemu-system-ppc64", "-M pseries,x-vof=on -cpu POWER9 -vga none", "console=hvc0"},
		"arm64":   {"qemu-system-aarch64", "-M virt -cpu max", "console=ttyAMA0"},
		"x86_64":  {"qemu-system-x86_64", "-M q35", "console=ttyS0"},
	} {
		argv, cmdline, kvm, err := tg.Command(evaluate.Kernel{Arch: arch, Image: "vmlinux", Cmdline: "selinux=0 enforcing=0"}, "initrd")
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Join(argv, " ")
		if argv[0] != want[0] || !strings.Contains(s, want[1]) || !strings.Contains(s, "-icount shift=0,sleep=off") || !strings.Contains(s, "-smp 2") || kvm {
			t.Errorf("%s: %s (kvm %v)", arch, s, kvm)
		}
		if !strings.HasPrefix(cmdline, want[2]) || !strings.HasSuffix(cmdline, "selinux=0 enforcing=0 quiet") {
			t.Errorf("%s: cmdline %q", arch, cmdline)
		}
	}
	if _, _, _, err := New(Config{KVM: "on", Deterministic: true}).Command(evaluate.Kernel{Arch: "ppc64le"}, "x"); fail.KindOf(err) != fail.KindInput {
		t.Errorf("kvm+icount accepted: %v", err)
	}
	if _, _, _, err := tg.Command(evaluate.Kernel{Arch: "mips"}, "x"); fail.KindOf(err) != fail.KindInput {
		t.Errorf("unknown arch: %v", err)
	}
}

// TestRunDeterministic boots the voluntary kernel three times through
// evaluate.Run with the store's recorder (two variants, one boot already
// finished in the store): order must be interleaved with the done boot
// skipped, every boot recorded, and in deterministic mode the two boots of
// the same kernel agree within 1% on kill ns/op.
func TestRunDeterministic(t *testing.T) {
	img := kernel(t, "base-voluntary")
	tg := target(t, Config{Deterministic: true})
	a := evaluate.Kernel{Variant: "a", Arch: "ppc64le", Image: img, Cmdline: "selinux=0"}
	b := evaluate.Kernel{Variant: "b", Arch: "ppc64le", Image: img}
	st, err := store.Open(filepath.Join(t.TempDir(), store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ev, _, err := st.CreateOrResumeEvaluation(store.Key("TestRunDeterministic"), store.EvaluationMeta{Pipeline: "test"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &store.BootRecorder{Store: st, EvalID: ev.ID}
	runID, err := rec.Begin(context.Background(), evaluate.BootKey{Variant: "b", Boot: 0})
	if err == nil {
		err = rec.Finish(context.Background(), runID, evaluate.BootRecord{Key: evaluate.BootKey{Variant: "b", Boot: 0}})
	}
	if err != nil {
		t.Fatal(err)
	}
	var order []evaluate.BootKey
	kill := map[evaluate.BootKey]float64{}
	boots, err := evaluate.Interleave([]evaluate.RunVariant{{Kernel: a}, {Kernel: b}},
		guest.Plan{Iterations: 2, Benchmarks: []guest.Bench{{Name: "kill"}, {Name: "getppid", Ops: 50000}}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	err = evaluate.Run(context.Background(), tg, boots, evaluate.RunOptions{Recorder: rec, Each: func(rec evaluate.BootRecord) {
		order = append(order, rec.Key)
		if rec.Err != nil {
			t.Fatalf("%v: %v", rec.Key, rec.Err)
		}
		r := rec.Result
		if !r.Env.Deterministic || r.Env.KernelRelease == "" || r.Output.Info == nil {
			t.Errorf("%v: env %+v info %+v", rec.Key, r.Env, r.Output.Info)
		}
		// The recorded command line names the per-boot initramfs (gone
		// after the boot) by its placeholder.
		if i := slices.Index(r.Env.QEMUArgs, "-initrd"); i < 0 || i+1 >= len(r.Env.QEMUArgs) || r.Env.QEMUArgs[i+1] != evaluate.BootInitramfs {
			t.Errorf("%v: recorded QEMU command %q: want -initrd %s", rec.Key, r.Env.QEMUArgs, evaluate.BootInitramfs)
		}
		if rec.Key.Variant == "a" && !strings.Contains(r.Output.Info.Cmdline, "selinux=0") {
			t.Errorf("variant a cmdline %q lacks selinux=0", r.Output.Info.Cmdline)
		}
		if len(rec.Samples) != 8 {
			t.Errorf("%v: %d samples, want 8", rec.Key, len(rec.Samples))
		}
		for _, s := range rec.Samples {
			if !s.Deterministic {
				t.Errorf("sample %+v not marked deterministic", s)
			}
			if s.Benchmark == "kill" && s.Metric == "ns/op" && s.Iteration == 1 {
				kill[rec.Key] = s.Value
			}
		}
		t.Logf("%v: %s boot %.1fs, first result after %.1fs, kill %.1f ns/op", rec.Key, r.Env.KernelRelease, r.Duration.Seconds(), r.FirstResult.Seconds(), kill[rec.Key])
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []evaluate.BootKey{{Variant: "a", Boot: 0}, {Variant: "a", Boot: 1}, {Variant: "b", Boot: 1}}
	if len(order) != 3 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
		t.Fatalf("boot order %v, want %v", order, want)
	}
	k0, k1 := kill[want[0]], kill[want[1]]
	if d := math.Abs(k0-k1) / k0; d > 0.01 {
		t.Errorf("deterministic kill ns/op differ by %.2f%%: %.1f vs %.1f", d*100, k0, k1)
	}
	done, err := rec.Done(context.Background())
	samples, serr := st.Samples(ev.ID)
	if err != nil || serr != nil || len(done) != 4 || len(samples) != 3*8 {
		t.Errorf("the store holds %d finished boots (want 4) and %d samples (want 24): %v %v", len(done), len(samples), err, serr)
	}
}

// TestAllBenchmarks boots once with two CPUs and runs every benchmark of
// the agent in the one kernel of the suite that has what each needs
// (buildtest.X86Bench: MEMBARRIER for rcu, BRIDGE for bridge-sh); a
// skipped benchmark fails it. It is opt-in (PATCHEVAL_LONG_TESTS=1) with
// the x86_64 build; TestLoopBenchmarks is the default suite's.
func TestAllBenchmarks(t *testing.T) {
	buildtest.SkipIfSlow(t)
	testenv.SkipUnlessLong(t, "an x86_64 kernel build with MEMBARRIER and BRIDGE")
	img := buildtest.X86Bench(t).Image
	benches := []guest.Bench{
		{Name: "kill", Ops: 20000}, {Name: "kill-child", Ops: 20000}, {Name: "getppid", Ops: 20000}, {Name: "getpgid", Ops: 20000},
		{Name: "fork", Ops: 50}, {Name: "execve", Ops: 5}, {Name: "rcu", Runs: 2, Calls: 5}, {Name: "bridge-sh", Ops: 5},
	}
	if len(benches) != len(guest.Benchmarks) {
		t.Fatalf("the test lists %d benchmarks, the agent has %d (%v)", len(benches), len(guest.Benchmarks), guest.Benchmarks)
	}
	res := bootBenchmarks(t, evaluate.Kernel{Variant: "v", Arch: "x86_64", Image: img}, benches)
	if i := res.Output.Info; i.NumCPU != 2 || i.PreemptPresent || i.CPUs != "0" {
		t.Errorf("info %+v", i)
	}
}

// TestLoopBenchmarks runs, in the default suite's ppc64le kernel, the
// agent's benchmarks that kernel has what they need for (all but rcu and
// bridge-sh, which need MEMBARRIER and BRIDGE: TestAllBenchmarks); a
// skipped one fails it.
func TestLoopBenchmarks(t *testing.T) {
	img := kernel(t, "base-voluntary")
	res := bootBenchmarks(t, evaluate.Kernel{Variant: "v", Arch: "ppc64le", Image: img}, []guest.Bench{
		{Name: "kill", Ops: 20000}, {Name: "kill-child", Ops: 20000}, {Name: "getppid", Ops: 20000}, {Name: "getpgid", Ops: 20000},
		{Name: "fork", Ops: 50}, {Name: "execve", Ops: 5},
	})
	if i := res.Output.Info; i.NumCPU != 2 || i.PreemptPresent || i.CPUs != "0" {
		t.Errorf("info %+v", i)
	}
}

// bootBenchmarks boots k once with two CPUs (the agent built for k's
// arch), runs benches pinned to CPU 0, and fails t unless every one was
// measured (none skipped).
func bootBenchmarks(t *testing.T, k evaluate.Kernel, benches []guest.Bench) *evaluate.BootResult {
	t.Helper()
	var tg *Target
	if k.Arch == "ppc64le" {
		tg = target(t, Config{SMP: 2})
	} else {
		cfg := Config{SMP: 2, MemoryMB: 1024, CacheDir: agentCache(t)}
		if testing.Verbose() {
			cfg.Console = &testLog{t: t}
		}
		tg = New(cfg)
	}
	res, err := tg.Boot(context.Background(), k,
		guest.Plan{CPUs: "0", Sysctls: map[string]string{"kernel.printk": "4"}, Benchmarks: benches})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output.Results) != len(benches) {
		t.Fatalf("%d results for %d benchmarks:\n%s", len(res.Output.Results), len(benches), res.Console)
	}
	for _, r := range res.Output.Results {
		t.Logf("%-10s %12.1f ns/op %s", r.Benchmark, r.NsPerOp, r.Skipped)
		switch {
		case r.Skipped != "":
			t.Errorf("%s was not measured: %s", r.Benchmark, r.Skipped)
		case r.NsPerOp <= 0 || r.Iterations <= 0:
			t.Errorf("bad result %+v", r)
		}
	}
	return res
}

func TestKernelPanic(t *testing.T) {
	img := kernel(t, "base-voluntary")
	tg := target(t, Config{Timeout: 3 * time.Minute})
	_, err := tg.Boot(context.Background(), evaluate.Kernel{Variant: "p", Arch: "ppc64le", Image: img, Cmdline: "rdinit=/nonexistent"},
		guest.Plan{Benchmarks: []guest.Bench{{Name: "kill"}}})
	var be *evaluate.BootError
	if !errors.As(err, &be) || be.Phase != evaluate.PhaseKernelPanic || fail.KindOf(err) != fail.KindFailed {
		t.Fatalf("rdinit=/nonexistent: %v", err)
	}
	if !strings.Contains(be.Tail, "Kernel panic") || len(be.Console) == 0 {
		t.Errorf("tail lacks the panic:\n%s", be.Tail)
	}
	t.Logf("classified: %s: %s", be.Phase, be.Msg)
}

func TestHangAndAgentFailure(t *testing.T) {
	img := kernel(t, "base-voluntary")
	k := evaluate.Kernel{Variant: "h", Arch: "ppc64le", Image: img}
	start := time.Now()
	_, err := target(t, Config{Timeout: 15 * time.Second}).Boot(context.Background(), k,
		guest.Plan{Benchmarks: []guest.Bench{{Name: "kill", Ops: 1 << 30}}})
	var be *evaluate.BootError
	if !errors.As(err, &be) || be.Phase != evaluate.PhaseKernelHang || fail.KindOf(err) != fail.KindFailed {
		t.Fatalf("endless benchmark: %v", err)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("hang took %v to be killed", el)
	}
	if !strings.Contains(be.Tail, guest.Marker) {
		t.Errorf("tail lacks the agent's info record:\n%s", be.Tail)
	}
	t.Logf("classified: %s: %s", be.Phase, be.Msg)

	_, err = target(t, Config{}).Boot(context.Background(), k,
		guest.Plan{Preempt: "full", Benchmarks: []guest.Bench{{Name: "kill"}}})
	if !errors.As(err, &be) || be.Phase != evaluate.PhaseAgentFailure || !strings.Contains(be.Msg, "sched/preempt") {
		t.Fatalf("preempt=full on a kernel without PREEMPT_DYNAMIC: %v", err)
	}
	t.Logf("classified: %s: %s", be.Phase, be.Msg)
}

// TestPreemptModels is the seed's measurement: in deterministic mode,
// PREEMPT=y (which selects PREEMPT_RCU) makes kill() dearer than
// PREEMPT_VOLUNTARY on the same patched tree; and the dynamic kernel
// switches models at run time through /sys/kernel/debug/sched/preempt.
func TestPreemptModels(t *testing.T) {
	vol := kernel(t, "patched-voluntary")
	full := kernel(t, "patched-full")
	dyn := kernel(t, "patched-dynamic")
	tg := target(t, Config{Deterministic: true})
	plan := guest.Plan{Benchmarks: []guest.Bench{{Name: "kill"}}}
	ns := map[string]float64{}
	for _, v := range []evaluate.RunVariant{
		{Kernel: evaluate.Kernel{Variant: "voluntary", Arch: "ppc64le", Image: vol}},
		{Kernel: evaluate.Kernel{Variant: "full", Arch: "ppc64le", Image: full}},
		{Kernel: evaluate.Kernel{Variant: "dynamic-full", Arch: "ppc64le", Image: dyn}, Preempt: "full"},
	} {
		p := plan
		p.Preempt = v.Preempt
		res, err := tg.Boot(context.Background(), v.Kernel, p)
		if err != nil {
			t.Fatal(err)
		}
		i := res.Output.Info
		if v.Preempt != "" && (!i.PreemptPresent || i.Preempt != v.Preempt) {
			t.Errorf("%s: sched/preempt %q (present %v), want %s", v.Kernel.Variant, i.PreemptRaw, i.PreemptPresent, v.Preempt)
		}
		ns[v.Kernel.Variant] = res.Output.Results[0].NsPerOp
		t.Logf("%s (%s, sched/preempt %q): kill %.1f ns/op deterministic", v.Kernel.Variant, i.Release, i.PreemptRaw, ns[v.Kernel.Variant])
	}
	if ns["full"] < ns["voluntary"]*1.05 {
		t.Errorf("PREEMPT=y kill %.1f ns/op not above PREEMPT_VOLUNTARY %.1f ns/op", ns["full"], ns["voluntary"])
	}
}

// TestKernelDoesNotBoot: an image QEMU cannot load (not ELF, another
// architecture's ELF) and one it loads that never prints (a ppc64le
// program that is not a kernel: the guest agent) are infrastructure
// errors naming the phase and the image, never a result.
func TestKernelDoesNotBoot(t *testing.T) {
	dir := t.TempDir()
	notKernel := dir + "/vmlinux"
	if err := os.WriteFile(notKernel, []byte("this is not a kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := target(t, Config{Timeout: 20 * time.Second}).Boot(context.Background(),
		evaluate.Kernel{Variant: "x", Arch: "ppc64le", Image: notKernel}, guest.Plan{Benchmarks: []guest.Bench{{Name: "kill"}}})
	var be *evaluate.BootError
	if !errors.As(err, &be) || fail.KindOf(err) != fail.KindInfra || (be.Phase != evaluate.PhaseInfra && be.Phase != evaluate.PhaseNoBoot) {
		t.Fatalf("not a kernel: %v, want an infrastructure BootError", err)
	}
	if el := time.Since(start); el > time.Minute {
		t.Errorf("took %v to give up", el)
	}
	t.Logf("classified: %s: %v", be.Phase, err)

	for _, c := range []struct{ name, image, phase string }{
		{"x86_64 ELF", "/bin/true", evaluate.PhaseInfra},
		{"ppc64le program", ppcAgent(t), evaluate.PhaseNoBoot},
	} {
		start = time.Now()
		_, err = target(t, Config{Timeout: 10 * time.Second}).Boot(context.Background(),
			evaluate.Kernel{Variant: "y", Arch: "ppc64le", Image: c.image}, guest.Plan{Benchmarks: []guest.Bench{{Name: "kill"}}})
		if !errors.As(err, &be) || fail.KindOf(err) != fail.KindInfra || be.Phase != c.phase {
			t.Fatalf("%s as a kernel: %v, want an infrastructure BootError in phase %s", c.name, err, c.phase)
		}
		if el := time.Since(start); el > time.Minute {
			t.Errorf("%s: took %v to give up", c.name, el)
		}
		t.Logf("%s: classified: %s: %v", c.name, be.Phase, err)
	}
}

// TestWrongKernelStopsBeforeTheBenchmarks boots the suite's ppc64le
// kernel as if it were another build (a build-id that is not its own):
// the agent proves the kernel before its first benchmark, so the boot is
// a wrong-kernel infra error with no result on the console and no
// sample. The same kernel under its own build-id is verified and measured.
func TestWrongKernelStopsBeforeTheBenchmarks(t *testing.T) {
	buildtest.SkipIfSlow(t)
	a := buildtest.PPC64(t, "base-voluntary")
	own := a.BuildID()
	tg := target(t, Config{Deterministic: true, Timeout: 5 * time.Minute})
	plan := guest.Plan{Benchmarks: []guest.Bench{{Name: "getppid", Ops: 1000}}}
	wrong := strings.Repeat("0", len(own)-1) + "1"
	rec := evaluate.Boot(context.Background(), tg, evaluate.PlannedBoot{
		Kernel: evaluate.Kernel{Variant: "w", Arch: "ppc64le", Image: a.Image, BuildID: wrong}, Plan: plan})
	var be *evaluate.BootError
	if !errors.As(rec.Err, &be) || be.Phase != evaluate.PhaseWrongKernel || fail.KindOf(rec.Err) != fail.KindInfra {
		t.Fatalf("a kernel under another build-id: %v; want a %s infra error", rec.Err, evaluate.PhaseWrongKernel)
	}
	if !strings.Contains(be.Msg, "build-id "+own) || !strings.Contains(be.Msg, "want "+wrong) {
		t.Errorf("the error does not name both build-ids: %s", be.Msg)
	}
	if rec.Result == nil || len(rec.Result.Output.Results) != 0 || len(rec.Samples) != 0 ||
		strings.Contains(string(rec.Result.Console), `"type":"result"`) {
		t.Fatalf("the agent measured the wrong kernel (%d samples):\n%s", len(rec.Samples), rec.Result.Console)
	}
	if errs := rec.Result.Output.Errors; len(errs) != 1 || !strings.HasPrefix(errs[0], guest.WrongKernelPrefix) {
		t.Errorf("agent errors %q: want its refusal", errs)
	}
	t.Logf("refused before any benchmark: %s", be.Msg)

	rec = evaluate.Boot(context.Background(), tg, evaluate.PlannedBoot{
		Kernel: evaluate.Kernel{Variant: "r", Arch: "ppc64le", Image: a.Image, BuildID: own}, Plan: plan})
	if rec.Err != nil || !rec.Result.Env.Verified || rec.Result.Env.BuildID != own || len(rec.Samples) == 0 {
		t.Fatalf("the kernel under its own build-id: %v, verified %v, build-id %q, %d samples",
			rec.Err, rec.Result != nil && rec.Result.Env.Verified, rec.Result.Env.BuildID, len(rec.Samples))
	}
}
