package ssh

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/target/testlab"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testenv"
)

// TestLabKexec drives the whole hardware path on the emulated lab host
// (evaluate/target/testlab: QEMU x86_64 TCG, Debian's sshd and kexec-tools in
// its initramfs, a forwarded loopback port): SSH in, kexec into the
// kernel under test, verify its build-id and command line, benchmark;
// lose the machine in the middle of a kexec and recover through the
// boot hook (a power cycle), and lose it again during the benchmarks; a
// kernel whose build-id is not the one asked for is an infra error
// without a sample; a kernel that panics on the way up and one that
// panics during the benchmarks are that kernel's failed boots (exit 1),
// read from the machine's console log. Long: one x86_64 kernel build (886 objects (measured: 2 h 3 min at nice 10, load ~35 on 2 cores), cached).
func TestLabKexec(t *testing.T) {
	testenv.SkipUnlessLong(t, "an x86_64 kernel build and TCG boots of the lab host")
	buildtest.SkipIfSlow(t)
	art := testlab.Kernel(t)
	start := time.Now()
	h := testlab.Start(t, art.Image)
	t.Logf("lab machine %s up after %v (kernel build-id %s)", h.URL, time.Since(start).Round(time.Second), art.BuildID())
	newTarget := func(wait time.Duration) *Target {
		tg, err := New(Config{URL: h.URL, IdentityFile: h.Identity, Options: h.SSHOptions(), CacheDir: t.TempDir(),
			Boot: BootKexec, Initrd: h.Initrd, BootHook: h.RestartHook, BootWait: wait, Timeout: 10 * time.Minute, ConsoleLog: h.Console})
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	k := evaluate.Kernel{Variant: "voluntary", Arch: "x86_64", Image: art.Image, BuildID: art.BuildID(), Cmdline: "patcheval.lab=1"}
	plan := guest.Plan{Benchmarks: []guest.Bench{{Name: "getppid", Ops: 20000}, {Name: "kill", Ops: 20000}}}
	ctx := context.Background()

	t.Run("kexec verify measure", func(t *testing.T) {
		bootStart := time.Now()
		res, err := newTarget(5*time.Minute).Boot(ctx, k, plan)
		if err != nil {
			t.Fatalf("%v\nconsole:\n%s", err, h.ConsoleTail(30))
		}
		if !res.Env.Verified || res.Env.BuildID != art.BuildID() || len(res.Output.Results) != 2 {
			t.Fatalf("env %+v, %d results\n%s", res.Env, len(res.Output.Results), res.Console)
		}
		for _, l := range strings.Split(string(res.Console), "\n") {
			if strings.HasPrefix(l, "--- kexec ") || strings.HasPrefix(l, "--- verified") {
				t.Logf("%s", l)
			}
		}
		t.Logf("boot + verify + 2 benchmarks: %v; getppid %.0f ns/op", time.Since(bootStart).Round(time.Second), res.Output.Results[0].NsPerOp)
	})

	labFailures(t, h, k, plan, newTarget)
}

// labFailures loses the machine in the middle of a kexec and again during
// the benchmarks (each time it must come back through the boot hook and
// be measured), asks for a build-id the machine does not run, and kexecs
// a kernel that panics on the way up and one that panics on an NMI
// during the benchmarks (each the kernel's failed boot, not retried).
func labFailures(t *testing.T, h *testlab.Host, k evaluate.Kernel, plan guest.Plan, newTarget func(time.Duration) *Target) {
	ctx := context.Background()
	t.Run("lost once and recovered", func(t *testing.T) {
		before := strings.Count(readFile(h.Console), "Linux version")
		killed := make(chan bool, 1)
		go func() {
			// Lose the machine as soon as the kexec'd kernel starts.
			for i := 0; i < 600; i++ {
				if strings.Count(readFile(h.Console), "Linux version") > before {
					h.Kill()
					killed <- true
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
			killed <- false
		}()
		res, err := newTarget(3*time.Minute).Boot(ctx, k, plan)
		if !<-killed {
			t.Fatal("the kexec'd kernel never started: nothing was lost")
		}
		if err != nil {
			t.Fatalf("not recovered: %v\nconsole:\n%s", err, h.ConsoleTail(30))
		}
		c := string(res.Console)
		if !strings.Contains(c, "--- boot hook (recover)") || !strings.Contains(c, "kexec boot attempt 2 of 2") || !res.Env.Verified {
			t.Errorf("recovery not in the console:\n%s", c)
		}
		t.Logf("lost during the kexec, power-cycled by the hook, kexec'd again: %s", firstLine(c[strings.Index(c, "--- kexec boot failed"):]))
	})

	t.Run("wrong kernel", func(t *testing.T) {
		wrong := k
		wrong.BuildID = strings.Repeat("0", 40)
		res, err := newTarget(3*time.Minute).Boot(ctx, wrong, plan)
		var be *evaluate.BootError
		if !errors.As(err, &be) || be.Phase != evaluate.PhaseWrongKernel || fail.KindOf(err) != fail.KindInfra ||
			!strings.Contains(be.Msg, "build-id "+k.BuildID) || !strings.Contains(be.Msg, "want "+wrong.BuildID) {
			t.Fatalf("err %v", err)
		}
		if len(res.Output.Results) != 0 {
			t.Errorf("%d results from the wrong kernel", len(res.Output.Results))
		}
		t.Logf("wrong kernel: %s", be.Msg)
	})

	t.Run("lost during the benchmarks and recovered", func(t *testing.T) {
		// ~30 s of getppid in TCG (1,600 ns/op): long enough for the
		// watcher's ssh to see the agent, short enough to run again.
		long := guest.Plan{Benchmarks: []guest.Bench{{Name: "getppid", Ops: 20000000}}}
		wctx, stop := context.WithCancel(ctx)
		hit := whileAgentRuns(wctx, h, func() error { h.Kill(); return nil })
		res, err := newTarget(3*time.Minute).Boot(ctx, k, long)
		stop()
		if herr := <-hit; herr != nil {
			t.Fatal(herr)
		}
		if err != nil {
			t.Fatalf("not recovered: %v\nconsole:\n%s", err, h.ConsoleTail(30))
		}
		c := string(res.Console)
		if !strings.Contains(c, "--- lost: the machine stopped answering during the benchmarks") || !strings.Contains(c, "\n--- boot attempt 2 of 2") ||
			!res.Env.Verified || len(res.Output.Results) != 1 {
			t.Errorf("%d results; the loss and the second boot not in the console:\n%s", len(res.Output.Results), c)
		}
		t.Logf("lost during the benchmarks, booted and measured again: %s", firstLine(c[strings.Index(c, "--- lost"):]))
	})

	t.Run("kernel that panics on the way up", func(t *testing.T) {
		dead := k
		dead.Cmdline = "rdinit=/nonexistent init=/nonexistent"
		start := time.Now()
		res, err := newTarget(100*time.Second).Boot(ctx, dead, plan)
		var be *evaluate.BootError
		if !errors.As(err, &be) || be.Phase != evaluate.PhaseKernelPanic || fail.KindOf(err) != fail.KindFailed ||
			!strings.Contains(be.Msg, "Kernel panic - not syncing") || !strings.Contains(be.Tail, "Kernel panic - not syncing") {
			t.Fatalf("err %v\nconsole:\n%s", err, h.ConsoleTail(20))
		}
		if len(res.Output.Results) != 0 || strings.Contains(string(res.Console), "kexec boot attempt 2") {
			t.Errorf("%d results, console:\n%s", len(res.Output.Results), res.Console)
		}
		if !strings.Contains(string(res.Console), "--- the machine is back for the next boot") {
			t.Errorf("the machine was not brought back:\n%s", res.Console)
		}
		t.Logf("panics on the way up (%v, the machine brought back): %s", time.Since(start).Round(time.Second), firstLine(err.Error()))
	})

	t.Run("kernel that panics during the benchmarks", func(t *testing.T) {
		nmi := k
		nmi.Cmdline += " unknown_nmi_panic"
		// Minutes of getppid: the NMI stops it.
		long := guest.Plan{Benchmarks: []guest.Bench{{Name: "getppid", Ops: 200000000}}}
		wctx, stop := context.WithCancel(ctx)
		hit := whileAgentRuns(wctx, h, h.NMI)
		res, err := newTarget(3*time.Minute).Boot(ctx, nmi, long)
		stop()
		if herr := <-hit; herr != nil {
			t.Fatal(herr)
		}
		var be *evaluate.BootError
		if !errors.As(err, &be) || be.Phase != evaluate.PhaseKernelPanic || fail.KindOf(err) != fail.KindFailed ||
			!strings.Contains(be.Msg, "during the benchmarks") || !strings.Contains(be.Tail, "NMI") {
			t.Fatalf("err %v\nconsole:\n%s", err, h.ConsoleTail(20))
		}
		if strings.Contains(string(res.Console), "boot attempt 2") {
			t.Errorf("a crash was retried:\n%s", res.Console)
		}
		t.Logf("panics during the benchmarks: %s", firstLine(err.Error()))
	})
}

// whileAgentRuns calls do once the agent runs on the lab machine (its
// binary is some process's executable) and sends do's error; when ctx
// ends first (the boot ended) it sends that the agent was never seen.
func whileAgentRuns(wctx context.Context, h *testlab.Host, do func() error) <-chan error {
	hit := make(chan error, 1)
	go func() {
		for wctx.Err() == nil {
			ctx, cancel := context.WithTimeout(wctx, 20*time.Second)
			out, _ := h.SSH(ctx, "ls -l /proc/[0-9]*/exe 2>/dev/null | grep -c /tmp/patcheval-agent-")
			cancel()
			if n, _ := strconv.Atoi(strings.TrimSpace(string(out))); n > 0 {
				hit <- do()
				return
			}
			time.Sleep(300 * time.Millisecond)
		}
		hit <- errors.New("the agent never ran on the lab machine")
	}()
	return hit
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}
