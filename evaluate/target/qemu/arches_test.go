package qemu

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/internal/testenv"
)

// TestOtherArches builds the 6.1 tree with build's arm64 (virt), x86_64
// (q35) and riscv64 (virt) boot fragments over tinyconfig and boots each
// under TCG with the agent built for that arch, in deterministic mode. The x86_64 kernel is
// buildtest.X86Bench, the one TestAllBenchmarks boots (built once for
// both).
//
// The riscv64 kernel is opt-in too (PATCHEVAL_LONG_TESTS=1; the default
// suite boots Debian's riscv64 kernel, TestRiscv64DebianKernel). The
// x86_64 kernel is opt-in (PATCHEVAL_LONG_TESTS=1): one more kernel
// build does not fit the default suite's budget (README, "Set-up"). The
// default suite still checks the x86_64 boot fragment's config (build's
// TestBootConfigsHold) and boots x86_64 QEMU with Debian's own kernel
// (TestUserlandToolsDebianKernel); arm64 stays the non-ppc64le build and
// boot of the default suite.
func TestOtherArches(t *testing.T) {
	buildtest.SkipIfSlow(t)
	for _, arch := range []string{"x86_64", "arm64", "riscv64"} {
		t.Run(arch, func(t *testing.T) {
			var art *build.Artifact
			if arch == "riscv64" {
				testenv.SkipUnlessLong(t, "a riscv64 kernel build")
			}
			if arch == "x86_64" {
				testenv.SkipUnlessLong(t, "an x86_64 kernel build")
				art = buildtest.X86Bench(t)
			} else {
				art = buildtest.Build(t, build.Request{Repo: buildtest.Repo(t), Commit: buildtest.BaseCommit, Arch: arch,
					BaseConfig: build.BootConfigBase, Fragments: []string{buildtest.BootFragment(t, arch)}, Variant: "boot-" + arch})
			}
			tg := New(Config{CacheDir: agentCache(t), Deterministic: true})
			res, err := tg.Boot(context.Background(), evaluate.Kernel{Variant: "boot-" + arch, Arch: arch, Image: art.Image},
				guest.Plan{Benchmarks: []guest.Bench{{Name: "kill"}, {Name: "getppid", Ops: 50000}, {Name: "execve", Ops: 3}}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Output.Results) != 3 || res.Output.Info.Release == "" {
				t.Fatalf("results %+v info %+v", res.Output.Results, res.Output.Info)
			}
			// The virt boot config sets PERF_EVENTS (x86's Kconfig selects
			// it): software events count under TCG; hardware events
			// depend on the CPU model QEMU emulates, so they are logged.
			if pe := res.Output.Info.PerfEvents; pe == nil || !pe.Software || !strings.Contains(strings.Join(pe.PMUs, ","), "software") {
				t.Errorf("%s guest perf events: %s, want software events and the software PMU (CONFIG_PERF_EVENTS=y)", arch, pe)
			}
			t.Logf("%s guest perf events: %s", arch, res.Output.Info.PerfEvents)
			t.Logf("%s %s: first result after %.1fs; kill %.1f ns/op, getppid %.1f ns/op (deterministic)", arch, res.Output.Info.Release,
				res.FirstResult.Seconds(), res.Output.Results[0].NsPerOp, res.Output.Results[1].NsPerOp)
		})
	}
}

var (
	cacheOnce sync.Once
	cacheDir  string
)

// agentCache is one agent cache directory per test binary.
func agentCache(t *testing.T) string {
	cacheOnce.Do(func() { cacheDir, _ = os.MkdirTemp("", "patcheval-agents-") })
	if cacheDir == "" {
		t.Fatal("no temporary directory for agents")
	}
	return cacheDir
}
