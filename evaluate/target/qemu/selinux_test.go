package qemu

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/guest/selinux"
	"github.com/patcheval/patcheval/internal/testenv"
)

// TestSELinuxModesDebianKernel boots Debian's own x86_64 cloud kernel
// (SELinux built in, BOOTPARAM and DEVELOP set, AppArmor its default
// LSM) three times without a kernel build: selinux=0, and security=selinux
// with the shipped minimal policy (compiled by checkpolicy) loaded by the
// agent through selinuxfs, enforcing and permissive. The agent fails a
// boot whose mode does not take, so each boot's Info names its mode; the
// kill loop's ns/op of the three are logged (TCG, not deterministic).
func TestSELinuxModesDebianKernel(t *testing.T) {
	testenv.SkipUnlessLong(t, "three TCG boots of Debian's x86_64 kernel")
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no qemu-system-x86_64")
	}
	img := debianKernel(t)
	src, err := selinux.Source("minimal")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := selinux.Compile(context.Background(), "minimal", src, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ mode, cmdline string }{
		{guest.SELinuxDisabled, "selinux=0"},
		{guest.SELinuxEnforcing, "security=selinux selinux=1"},
		{guest.SELinuxPermissive, "security=selinux selinux=1"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			s := &guest.SELinux{Mode: c.mode}
			if c.mode != guest.SELinuxDisabled {
				s.Policy, s.PolicyName = pol, "minimal"
			}
			cfg := Config{MemoryMB: 1024}
			if testing.Verbose() {
				cfg.Console = &testLog{t: t}
			}
			res, err := New(cfg).Boot(context.Background(), evaluate.Kernel{Variant: c.mode, Arch: "x86_64", Image: img, Cmdline: c.cmdline},
				guest.Plan{SELinux: s, Benchmarks: []guest.Bench{{Name: guest.BenchKill, Ops: 50000}, {Name: guest.BenchKillChild, Ops: 20000}}})
			if err != nil {
				t.Fatal(err)
			}
			if info := res.Output.Info; info == nil || info.SELinux != c.mode {
				t.Fatalf("info %+v, want SELinux %s", info, c.mode)
			}
			if c.mode != guest.SELinuxDisabled && !strings.Contains(string(res.Console), "SELinux") {
				t.Errorf("console says nothing of SELinux")
			}
			for _, r := range res.Output.Results {
				t.Logf("%s: %s %.1f ns/op", c.mode, r.Benchmark, r.NsPerOp)
			}
		})
	}
}
