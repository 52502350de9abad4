package qemu

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/guest/userland"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
)

// TestUserlandToolsDebianKernel boots Debian's own x86_64 cloud kernel
// (linux-image-cloud-amd64's image, through apt) under TCG with Debian's
// amd64 stress-ng and perf appended to the agent's initramfs, so that the
// users' tools are checked in a guest without waiting for a kernel build:
// stress-ng --kill gives bogo-ops/s, perf bench syscall basic usec/op and
// ops/sec, next to the agent's kill loop in ns; and the agent says which
// perf events the guest counts (software only under TCG).
func TestUserlandToolsDebianKernel(t *testing.T) {
	testenv.SkipIfSlow(t, "Debian packages from the mirror and a QEMU boot")
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no qemu-system-x86_64")
	}
	ctx := context.Background()
	cache := xdg.CacheDir()
	img := debianKernel(t)
	u, err := userland.Build(ctx, "x86_64", []string{"stress-ng", "perf"}, cache, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{MemoryMB: 1024, Userland: u.Archive, UserlandLibPath: u.LibPath()}
	if testing.Verbose() {
		cfg.Console = &testLog{t: t}
	}
	res, err := New(cfg).Boot(ctx, evaluate.Kernel{Variant: "debian", Arch: "x86_64", Image: img}, guest.Plan{Benchmarks: []guest.Bench{
		{Name: guest.BenchStressNG, Args: []string{"--kill", "1", "-t", "3"}},
		{Name: guest.BenchPerfBench, Args: []string{"syscall", "basic", "-l", "50000"}},
		{Name: guest.BenchKill, Ops: 50000},
	}})
	if err != nil {
		t.Fatal(err)
	}
	checkToolSamples(t, res, "stress-ng --kill 1 -t 3", "perf bench syscall basic -l 50000")
	// The agent reads the running kernel's build-id from /sys/kernel/notes.
	if id := res.Output.Info.BuildID; len(id) != 40 {
		t.Errorf("Debian kernel's build-id as the agent read it: %q, want 40 hex digits", id)
	}
	if pe := res.Output.Info.PerfEvents; pe == nil || !pe.Software || pe.Hardware {
		t.Errorf("TCG guest perf events: %s, want software only", pe)
	}
}

// checkToolSamples checks the units of a boot's tool and loop samples.
func checkToolSamples(t *testing.T, res *evaluate.BootResult, sng, perf string) {
	t.Helper()
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
		t.Logf("%-36s [%s] %-26s %14.3f %s", s.Benchmark, guest.Source(s.Benchmark), s.Metric, s.Value, s.Unit)
	}
	for k, want := range map[string]string{
		sng + " | bogo-ops/s (real time)":    "bogo-ops/s",
		sng + " | bogo-ops/s (usr+sys time)": "bogo-ops/s",
		perf + " | usec/op":                  "usec/op",
		perf + " | ops/sec":                  "ops/sec",
		"kill | ns/op":                       "ns",
	} {
		if units[k] != want {
			t.Errorf("%s: unit %q, want %q (have %v)", k, units[k], want, units)
		}
	}
	for _, r := range res.Output.Results {
		if len(r.Metrics) > 0 && !strings.HasPrefix(r.Tool, strings.Fields(r.Benchmark)[0]) {
			t.Errorf("result %q: tool %q", r.Benchmark, r.Tool)
		}
	}
	info := res.Output.Info
	if info == nil || len(info.Tools) != 2 || info.PerfEvents == nil {
		t.Fatalf("info %+v", info)
	}
	t.Logf("guest perf events: %s; boot %.1fs", info.PerfEvents, res.Duration.Seconds())
}

// debianKernel is the image of Debian's x86_64 cloud kernel
// (linux-image-cloud-amd64's dependency, through apt, cached).
func debianKernel(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("apt-cache", "depends", "linux-image-cloud-amd64").Output()
	if err != nil {
		t.Fatal(err)
	}
	var pkg string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
			pkg = f[1]
		}
	}
	if pkg == "" {
		t.Fatalf("linux-image-cloud-amd64 depends on no image:\n%s", out)
	}
	deb, err := userland.Fetch(context.Background(), "x86_64", pkg, xdg.CacheDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if o, err := exec.Command("dpkg-deb", "-x", deb, dir).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x %s: %v\n%s", deb, err, o)
	}
	imgs, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(imgs) != 1 {
		t.Fatalf("no vmlinuz in %s", deb)
	}
	return imgs[0]
}
