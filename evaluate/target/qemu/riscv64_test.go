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
	"github.com/patcheval/patcheval/internal/debian"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
)

// TestRiscv64DebianKernel boots Debian trixie's own riscv64 kernel
// (linux-image-riscv64's image, through the private trixie apt state the
// riscv64 userland comes from: bookworm has no riscv64) on QEMU's virt
// machine under TCG, with the agent built for GOARCH=riscv64 and Debian's
// riscv64 stress-ng and perf appended to its initramfs: the same
// benchmarks as the other arches' boots (the agent's kill, getppid and
// execve loops, stress-ng --kill, perf bench syscall basic). No kernel
// build: the riscv64 boot fragment's own kernel, and its deterministic
// repeats, are TestRiscv64OwnKernels' (PATCHEVAL_LONG_TESTS=1). Debian's kernel
// is not a deterministic-mode kernel: it randomizes (KASLR seeded from
// the virt machine's rng-seed, user ASLR), and two -icount boots gave
// getppid 1406.1 and 1430.0 ns/op, execve 4.8 and 15.6 ms.
func TestRiscv64DebianKernel(t *testing.T) {
	testenv.SkipIfSlow(t, "Debian trixie's riscv64 packages and QEMU boots")
	if _, err := exec.LookPath("qemu-system-riscv64"); err != nil {
		t.Fatal("no qemu-system-riscv64: run .ci/install-deps (qemu-system-misc)")
	}
	ctx := context.Background()
	cache := xdg.CacheDir()
	img := debianRiscv64Kernel(t, cache)
	u, err := userland.Build(ctx, "riscv64", []string{"stress-ng", "perf"}, cache, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{MemoryMB: 1024, Userland: u.Archive, UserlandLibPath: u.LibPath(), CacheDir: agentCache(t)}
	if testing.Verbose() {
		cfg.Console = &testLog{t: t}
	}
	k := evaluate.Kernel{Variant: "debian", Arch: "riscv64", Image: img}
	res, err := New(cfg).Boot(ctx, k, guest.Plan{Benchmarks: []guest.Bench{
		{Name: guest.BenchStressNG, Args: []string{"--kill", "1", "-t", "3"}},
		{Name: guest.BenchPerfBench, Args: []string{"syscall", "basic", "-l", "20000"}},
		{Name: guest.BenchKill, Ops: 20000},
	}})
	if err != nil {
		t.Fatal(err)
	}
	checkToolSamples(t, res, "stress-ng --kill 1 -t 3", "perf bench syscall basic -l 20000")
	if m := res.Output.Info.Machine; m != "riscv64" {
		t.Errorf("guest machine %q, want riscv64", m)
	}
	t.Logf("riscv64 %s: boot %.1fs, first result after %.1fs", res.Output.Info.Release, res.Duration.Seconds(), res.FirstResult.Seconds())

}

// debianRiscv64Kernel is the image of trixie's riscv64 kernel
// (linux-image-riscv64's dependency).
func debianRiscv64Kernel(t *testing.T, cache string) string {
	t.Helper()
	a := &debian.Apt{Dir: filepath.Join(cache, "debian", "apt-riscv64-trixie"), Suites: []string{"trixie"}, Arch: "riscv64"}
	out, err := a.Run(context.Background(), "", "apt-cache", "depends", "linux-image-riscv64")
	if err != nil {
		t.Fatal(err)
	}
	var pkg string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
			pkg = strings.TrimSuffix(f[1], ":riscv64")
		}
	}
	if pkg == "" {
		t.Fatalf("linux-image-riscv64 depends on no image:\n%s", out)
	}
	deb, err := userland.Fetch(context.Background(), "riscv64", pkg, cache)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if o, err := exec.Command("dpkg-deb", "-x", deb, dir).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x %s: %v\n%s", deb, err, o)
	}
	imgs, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinu*-*"))
	if len(imgs) != 1 {
		t.Fatalf("no kernel image in %s: %v", deb, imgs)
	}
	return imgs[0]
}
