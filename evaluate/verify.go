package evaluate

import (
	"fmt"
	"strings"

	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/internal/fail"
)

// PhaseWrongKernel is a boot whose machine runs another kernel, or
// another command line, than the one asked for: an infrastructure error
// (a kexec that did not take, a machine that rebooted into its default
// kernel, a stale image), never a measurement of the kernel under test.
const PhaseWrongKernel = "wrong-kernel"

// Verify proves that the kernel a boot reports (the agent's info record,
// or the ssh target's shell probe) is k: the same GNU build-id as k's
// vmlinux when k has one, and every word of k's command line (plus want,
// e.g. the ssh target's boot nonce) in /proc/cmdline. The error names
// both sides. A kernel with no recorded build-id is checked on its
// command line only; Verified then stays false.
func Verify(k Kernel, info *guest.Info, want ...string) (verified bool, err error) {
	wrong := func(format string, a ...any) error {
		return &BootError{Variant: k.Variant, Phase: PhaseWrongKernel, Kind: fail.KindInfra, Msg: fmt.Sprintf(format, a...)}
	}
	if info == nil {
		return false, wrong("the machine did not say which kernel it runs (no info record)")
	}
	if k.BuildID != "" {
		switch {
		case info.BuildID == "":
			return false, wrong("cannot verify the kernel: the running kernel (%s) shows no build-id in %s; want %s (%s)",
				info.Release, guest.NotesPath, k.BuildID, imageName(k))
		case !strings.EqualFold(info.BuildID, k.BuildID):
			return false, wrong("the running kernel is not the one asked for: build-id %s (release %s) is running, want %s (%s)",
				info.BuildID, info.Release, k.BuildID, imageName(k))
		}
	}
	have := map[string]bool{}
	for _, f := range strings.Fields(info.Cmdline) {
		have[f] = true
	}
	var missing []string
	for _, f := range append(strings.Fields(k.Cmdline), want...) {
		if f != "" && !have[f] {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return false, wrong("the running kernel was booted with another command line: %q lacks %s", info.Cmdline, strings.Join(missing, " "))
	}
	return k.BuildID != "", nil
}

func imageName(k Kernel) string {
	if k.Image == "" {
		return "variant " + k.Variant
	}
	return k.Image
}

// verifyBoot checks a finished boot's kernel (Verify) and records the
// build-id it showed in the boot's environment.
func verifyBoot(k Kernel, res *BootResult) error {
	if res == nil || res.Output == nil || res.Output.Info == nil {
		return nil
	}
	if res.Env.BuildID == "" {
		res.Env.BuildID = res.Output.Info.BuildID
	}
	ok, err := Verify(k, res.Output.Info)
	if err != nil {
		if be, isBE := err.(*BootError); isBE {
			be.Console, be.Tail = res.Console, Tail(res.Console, 40)
		}
		return err
	}
	res.Env.Verified = ok
	return nil
}
