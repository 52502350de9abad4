package ssh

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/guest/userland"
	"github.com/patcheval/patcheval/evaluate/target/testlab"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
)

// TestLabDebianKernel runs the lab host on Debian's own cloud kernel (no
// kernel build: its virtio_net and the modules under it are loaded by the
// lab's /init) and kexecs it into itself with a fresh nonce: the kexec
// boot method, the wait for the nonce and the verification against the
// build-id the machine showed before, on a distribution kernel.
func TestLabDebianKernel(t *testing.T) {
	testenv.SkipUnlessLong(t, "TCG boots of Debian's kernel on the lab host")
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
	deb, err := userland.Fetch(context.Background(), "x86_64", pkg, xdg.CacheDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if o, err := exec.Command("dpkg-deb", "-x", deb, dir).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, o)
	}
	imgs, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	mods, _ := filepath.Glob(filepath.Join(dir, "lib", "modules", "*", "kernel"))
	if len(imgs) != 1 || len(mods) != 1 {
		t.Fatalf("image %v modules %v", imgs, mods)
	}
	var ko []string
	for _, m := range []string{"drivers/virtio/virtio_ring.ko", "drivers/virtio/virtio.ko", "drivers/virtio/virtio_pci_modern_dev.ko",
		"drivers/virtio/virtio_pci_legacy_dev.ko", "drivers/virtio/virtio_pci.ko", "net/core/failover.ko", "drivers/net/net_failover.ko",
		"drivers/net/virtio_net.ko"} {
		ko = append(ko, filepath.Join(mods[0], m))
	}
	start := time.Now()
	h := testlab.StartWith(t, testlab.Options{Kernel: imgs[0], NIC: "virtio-net-pci", Modules: ko})
	t.Logf("lab machine on %s up after %v", filepath.Base(imgs[0]), time.Since(start).Round(time.Second))
	tg, err := New(Config{URL: h.URL, IdentityFile: h.Identity, Options: h.SSHOptions(), CacheDir: t.TempDir(),
		Boot: BootKexec, Initrd: h.Initrd, BootHook: h.RestartHook, BootWait: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	p, err := tg.probe(context.Background())
	if err != nil || len(p.BuildID) != 40 {
		t.Fatalf("probe %+v %v", p, err)
	}
	k := evaluate.Kernel{Variant: "debian", Arch: "x86_64", Image: imgs[0], BuildID: p.BuildID, Cmdline: "patcheval.lab=1"}
	bootStart := time.Now()
	res, err := tg.Boot(context.Background(), k, guest.Plan{Benchmarks: []guest.Bench{{Name: "getppid", Ops: 20000}}})
	if err != nil {
		t.Fatalf("%v\nconsole:\n%s", err, h.ConsoleTail(30))
	}
	if !res.Env.Verified || len(res.Output.Results) != 1 {
		t.Fatalf("env %+v\n%s", res.Env, res.Console)
	}
	for _, l := range strings.Split(string(res.Console), "\n") {
		if strings.HasPrefix(l, "--- ") {
			t.Logf("%s", l)
		}
	}
	t.Logf("kexec + verify + getppid: %v", time.Since(bootStart).Round(time.Second))
	labFailures(t, h, k, guest.Plan{Benchmarks: []guest.Bench{{Name: "getppid", Ops: 20000}}}, func(wait time.Duration) *Target {
		tg, err := New(Config{URL: h.URL, IdentityFile: h.Identity, Options: h.SSHOptions(), CacheDir: t.TempDir(),
			Boot: BootKexec, Initrd: h.Initrd, BootHook: h.RestartHook, BootWait: 2 * wait, Timeout: 10 * time.Minute, ConsoleLog: h.Console})
		if err != nil {
			t.Fatal(err)
		}
		return tg
	})
}
