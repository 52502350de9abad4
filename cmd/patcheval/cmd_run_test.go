package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunFlags(t *testing.T) {
	v, err := parseKernelFlag("full=/k/vmlinux,arch=ppc64le,cmdline=selinux=0 enforcing=0,preempt=full")
	if err != nil || v.Kernel.Variant != "full" || v.Kernel.Image != "/k/vmlinux" || v.Kernel.Cmdline != "selinux=0 enforcing=0" || v.Preempt != "full" {
		t.Fatalf("%+v %v", v, err)
	}
	for _, bad := range []string{"novariant", "=x", "a=/k,arch=mips", "a=/k,colour=red"} {
		if _, err := parseKernelFlag(bad); err == nil {
			t.Errorf("--kernel %q accepted", bad)
		}
	}
	bs, err := parseBenches("kill,getppid:1000,rcu:50,stress-ng-kill:5")
	if err != nil || len(bs) != 4 || bs[1].Ops != 1000 || bs[2].Calls != 50 || bs[3].Seconds != 5 {
		t.Fatalf("%+v %v", bs, err)
	}
	for _, bad := range []string{"", "nope", "kill:x", "kill:-1"} {
		if _, err := parseBenches(bad); err == nil {
			t.Errorf("--bench %q accepted", bad)
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"run", "--bench", "kill"}); code != 2 || !strings.Contains(errb.String(), "--kernel") {
		t.Errorf("run without --kernel: code %d, %s", code, errb.String())
	}
}

// TestRunSSHKernels: an ssh run names what it measures. Without --kernel
// it is refused (it used to measure the running kernel as "running"
// silently) unless --running says so; several kernels without a boot
// method are refused (the one running kernel would be measured under
// both names); a kernel given by path carries its build-id.
func TestRunSSHKernels(t *testing.T) {
	t.Setenv("PATCHEVAL_STATE_DIR", t.TempDir())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--target", "ssh://root@127.0.0.1:1"}, "name the kernel to measure (--kernel VARIANT=PATH"},
		{[]string{"run", "--target", "ssh://root@127.0.0.1:1", "--kernel", "a=/k/a,arch=x86_64", "--kernel", "b=/k/b,arch=x86_64"},
			"2 different kernels or command lines, but without --boot kexec or --boot-hook the machine only runs one"},
		{[]string{"run", "--target", "ssh://root@127.0.0.1:1", "--boot", "none", "--kernel", "a=/k/a,arch=x86_64", "--kernel", "b=/k/a,arch=x86_64,cmdline=mitigations=off"},
			"2 different kernels or command lines"},
		{[]string{"run", "--running", "--kernel", "a=/k/a,arch=x86_64"}, "--running is for an ssh target without --kernel"},
		{[]string{"run", "--target", "ssh://root@127.0.0.1:1", "--running", "--console-log", "/nonexistent/lab/console.log"},
			"console log /nonexistent/lab/console.log: no directory /nonexistent/lab"},
		{[]string{"run", "--kernel", "a=/k/a,arch=x86_64", "--console-log", "/var/log/console.log"}, "a console log (/var/log/console.log) is for an ssh target"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, c.args); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%q: exit %d, want 2 and %q:\n%s", c.args, code, c.want, errb.String())
		}
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "k.c"), filepath.Join(dir, "vmlinux")
	os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644)
	if out, err := exec.Command("gcc", "-o", bin, src, "-Wl,--build-id=0x00112233445566778899aabbccddeeff00112233").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	v, err := parseKernelFlag("a=" + bin + ",arch=x86_64")
	if err != nil || v.Kernel.BuildID != "00112233445566778899aabbccddeeff00112233" {
		t.Errorf("ELF image: build-id %q, %v", v.Kernel.BuildID, err)
	}
	if v, _ := parseKernelFlag("a=/k/bzImage,arch=x86_64,build-id=ABCD"); v.Kernel.BuildID != "abcd" {
		t.Errorf("build-id option: %q", v.Kernel.BuildID)
	}
}

// TestRunPrintsABootErrorOnce boots a file that is no kernel in real QEMU:
// the failed boot's error is printed once, as it happens, and the command's
// last line counts it instead of repeating it (it used to print it twice).
func TestRunPrintsABootErrorOnce(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 not installed")
	}
	junk := filepath.Join(t.TempDir(), "junk")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("not a kernel\n"), 300), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATCHEVAL_STATE_DIR", t.TempDir())
	var out, errb bytes.Buffer
	code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb},
		[]string{"run", "--kernel", "a=" + junk + ",arch=x86_64", "--bench", "kill", "--boots", "1", "--timeout", "60s"})
	if code != 3 {
		t.Errorf("exit %d, want 3 (QEMU could not start the image: infrastructure)\n%s", code, errb.String())
	}
	if n := strings.Count(errb.String(), "qemu: linux kernel too old"); n == 0 || n > 2 {
		t.Errorf("the boot error (console tail and QEMU's stderr) appears %d times:\n%s", n, errb.String())
	}
	if n := strings.Count(errb.String(), "patcheval run: booting a:"); n != 1 {
		t.Errorf("the boot error is printed %d times, want once:\n%s", n, errb.String())
	}
	if !strings.Contains(errb.String(), "patcheval run: 1 boot(s) failed (errors above)") {
		t.Errorf("no summary line:\n%s", errb.String())
	}
}

// TestConfigDiffErrorPrefix: config-diff's errors name the command once.
func TestConfigDiffErrorPrefix(t *testing.T) {
	var out, errb bytes.Buffer
	missing := filepath.Join(t.TempDir(), "missing")
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"config-diff", missing, missing}); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if n := strings.Count(errb.String(), "config-diff:"); n != 1 || !strings.Contains(errb.String(), missing) {
		t.Errorf("stderr names config-diff %d times (want once) or not the file:\n%s", n, errb.String())
	}
}
