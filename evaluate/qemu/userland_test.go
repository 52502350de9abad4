package qemu

import (
	"context"
	"os"
	"testing"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/userland"
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
	samples, skipped := evaluate.Samples("v", 0, res)
	if len(skipped) > 0 {
		t.Errorf("skipped: %v", skipped)
	}
	units := map[string]string{}
	for _, s := range samples {
		units[s.Benchmark+" | "+s.Metric] = s.Unit
		if !(s.Value > 0) {
			t.Errorf("sample %+v: not positive", s)
		}
		t.Logf("%-40s [%s] %-26s %14.3f %s", s.Benchmark, guest.Source(s.Benchmark), s.Metric, s.Value, s.Unit)
	}
	for k, want := range map[string]string{
		"stress-ng --kill 1 -t 3 | bogo-ops/s (real time)":    "bogo-ops/s",
		"stress-ng --kill 1 -t 3 | bogo-ops/s (usr+sys time)": "bogo-ops/s",
		"perf bench syscall basic -l 50000 | usec/op":         "usec/op",
		"perf bench syscall basic -l 50000 | ops/sec":         "ops/sec",
		"kill | ns/op": "ns",
	} {
		if units[k] != want {
			t.Errorf("%s: unit %q, want %q (have %v)", k, units[k], want, units)
		}
	}
	for _, r := range res.Output.Results {
		if guest.IsTool(r.Benchmark) || (r.Tool == "" && len(r.Metrics) > 0) {
			t.Errorf("result %+v: tool results must carry the command line and the tool's version", r)
		}
	}
	info := res.Output.Info
	if info == nil || len(info.Tools) != 2 || info.PerfEvents == nil {
		t.Fatalf("info %+v", info)
	}
	t.Logf("guest perf events: %s; boot %.1fs", info.PerfEvents, res.Duration.Seconds())
}
