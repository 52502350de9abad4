package qemu

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/guest/userland"
	"github.com/patcheval/patcheval/internal/xdg"
)

// TestUserlandTools boots the base ppc64le kernel with Debian's ppc64el
// stress-ng and perf appended to the initramfs, runs the seeds' real
// `stress-ng --kill 1` and `perf bench syscall basic` and checks that
// their own output was parsed in their own units, next to the agent's
// kill loop, and which perf events the guest can count.
func TestUserlandTools(t *testing.T) {
	img := kernel(t, "base-voluntary")
	u, err := userland.Build(context.Background(), "ppc64le", []string{"stress-ng", "perf"}, xdg.CacheDir(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	tg := target(t, Config{Deterministic: true, Userland: u.Archive, UserlandLibPath: u.LibPath(), Timeout: 0})
	bench := []guest.Bench{
		{Name: guest.BenchStressNG, Args: []string{"--kill", "1", "-t", "3"}},
		{Name: guest.BenchPerfBench, Args: []string{"syscall", "basic", "-l", "50000"}},
		{Name: guest.BenchKill, Ops: 50000},
	}
	res, err := tg.Boot(context.Background(), evaluate.Kernel{Variant: "v", Arch: "ppc64le", Image: img}, guest.Plan{Benchmarks: bench})
	if err != nil {
		t.Fatal(err)
	}
	checkToolSamples(t, res, "stress-ng --kill 1 -t 3", "perf bench syscall basic -l 50000")
	// The pseries boot config sets PERF_EVENTS: software events count
	// whatever QEMU's CPU model emulates (hardware events: it says).
	if pe := res.Output.Info.PerfEvents; pe == nil || !pe.Software || !strings.Contains(strings.Join(pe.PMUs, ","), "software") {
		t.Errorf("ppc64le guest perf events: %s, want software events and the software PMU (CONFIG_PERF_EVENTS=y)", pe)
	}
}
