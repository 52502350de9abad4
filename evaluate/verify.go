package evaluate

import (
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
	if err := ExpectFor(k, want...).Check(info); err != nil {
		return false, &BootError{Variant: k.Variant, Phase: PhaseWrongKernel, Kind: fail.KindInfra, Msg: err.Error()}
	}
	return k.BuildID != "", nil
}

// ExpectFor is what a boot of k must run, for the agent to check before
// its first benchmark (guest.Plan.Expect): k's build-id and every word of
// k's command line plus want (a target's own words: the full command
// line it booted with, a boot nonce).
func ExpectFor(k Kernel, want ...string) *guest.Expect {
	e := &guest.Expect{BuildID: k.BuildID, Image: imageName(k)}
	for _, w := range append(strings.Fields(k.Cmdline), want...) {
		e.Cmdline = append(e.Cmdline, strings.Fields(w)...)
	}
	return e
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
	if res == nil || res.Output == nil {
		return nil
	}
	if res.Output.Info == nil {
		// An agent that refused the kernel always sent its info first;
		// a boot with no info has no sample to protect.
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
