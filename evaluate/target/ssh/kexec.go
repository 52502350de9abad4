package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/fail"
)

// kexecBoot boots k by kexec, up to 1+BootRetries times: a machine that
// is lost (does not come back) is brought back by the boot hook, when one
// is configured, and the kexec tried again; one that comes back in
// another kernel is kexec'd again. Those are infrastructure errors. A
// kexec'd kernel that crashed (its panic on the console log or in the
// recovering hook's output) is the kernel's failure, returned at once;
// the hook then brings the machine back for the next boot. Nothing is
// measured on a kernel that was not verified.
func (t *Target) kexecBoot(ctx context.Context, k evaluate.Kernel, console *bytes.Buffer) (*probe, error) {
	if k.Image == "" {
		return nil, fail.Inputf("ssh target %s: variant %s: a kexec boot needs the kernel image", t.cfg.URL, k.Variant)
	}
	var last error
	for attempt := 0; attempt <= t.cfg.BootRetries; attempt++ {
		if attempt > 0 {
			fmt.Fprintf(console, "--- kexec boot attempt %d of %d (after: %s) ---\n", attempt+1, t.cfg.BootRetries+1, firstLine(last.Error()))
		}
		p, lost, err := t.kexecOnce(ctx, k, console)
		if err == nil {
			return p, nil
		}
		last = err
		fmt.Fprintf(console, "--- kexec boot failed: %s ---\n", firstLine(err.Error()))
		var ae *AccessError
		var be *evaluate.BootError
		if errors.As(err, &be) && be.Phase == evaluate.PhaseKernelPanic {
			t.bringBack(ctx, k, console)
			return nil, err
		}
		if ctx.Err() != nil || errors.As(err, &ae) || fail.KindOf(err) == fail.KindInput ||
			(errors.As(err, &be) && be.Phase == evaluate.PhaseInfra && !lost) {
			return nil, err // retrying cannot help
		}
		if lost {
			if t.cfg.BootHook == "" {
				return nil, err // nothing here brings it back: a resumed run tries again
			}
			before := console.Len()
			if herr := t.runHook(ctx, k, "", "recover", console); herr != nil {
				return nil, errors.Join(err, herr)
			}
			if c := findCrash(console.Bytes()[before:], ""); c != nil {
				c.Source = "the boot hook's output"
				return nil, t.crashError(k, "on the way up", c, console)
			}
			if werr := t.WaitUp(ctx, t.cfg.BootWait); werr != nil {
				return nil, &evaluate.BootError{Variant: k.Variant, Phase: evaluate.PhaseInfra, Kind: fail.KindInfra,
					Msg: fmt.Sprintf("the machine was lost and the boot hook did not bring it back: %v", werr)}
			}
		}
	}
	return nil, last
}

// kexecOnce copies, loads and starts k and waits for the machine to come
// back in it. lost says the machine did not come back at all.
func (t *Target) kexecOnce(ctx context.Context, k evaluate.Kernel, console *bytes.Buffer) (_ *probe, lost bool, _ error) {
	infra := func(phase, format string, a ...any) error {
		return &evaluate.BootError{Variant: k.Variant, Phase: phase, Kind: fail.KindInfra, Msg: fmt.Sprintf(format, a...)}
	}
	cur, err := t.probe(ctx)
	if err != nil {
		var ae *AccessError
		if errors.As(err, &ae) {
			return nil, false, err
		}
		return nil, true, infra(evaluate.PhaseMachineLost, "the machine does not answer before the kexec: %v", err)
	}
	if !cur.HasKexec {
		return nil, false, infra(evaluate.PhaseInfra, "ssh target %s has no %s (install kexec-tools on the machine, or set the kexec program)", t.cfg.URL, t.cfg.Kexec)
	}
	img, err := t.copyFile(ctx, k.Image)
	if err != nil {
		return nil, false, err
	}
	load := []string{shellQuote(t.cfg.Kexec), "-l", shellQuote(img)}
	if t.cfg.Initrd != "" {
		rd, err := t.copyFile(ctx, t.cfg.Initrd)
		if err != nil {
			return nil, false, err
		}
		load = append(load, "--initrd="+shellQuote(rd))
	}
	nonce := newNonce()
	cmdline := t.kexecCmdline(cur.Cmdline, nonce, k)
	mark := t.markConsole()
	load = append(load, "--command-line="+shellQuote(cmdline))
	fmt.Fprintf(console, "--- kexec %s (build-id %s) from %s (build-id %s): %s ---\n", imageName(k), orNone(k.BuildID), cur.Release, orNone(cur.BuildID), cmdline)
	if o, e, err := t.Run(ctx, nil, strings.Join(load, " ")); err != nil {
		console.Write(o)
		console.Write(e)
		return nil, false, infra(evaluate.PhaseInfra, "%s -l %s on the machine failed: %s", t.cfg.Kexec, imageName(k), lastLine(string(e)+"\n"+err.Error()))
	}
	// Started in its own session after this ssh exits: the connection
	// goes down with the old kernel. systemd shuts down cleanly first.
	start := fmt.Sprintf(`if [ -d /run/systemd/system ]; then go='systemctl kexec'; else go='%s -e'; fi
if command -v setsid >/dev/null 2>&1; then setsid sh -c "sleep 1; $go" </dev/null >/dev/null 2>&1 &
else nohup sh -c "sleep 1; $go" </dev/null >/dev/null 2>&1 & fi`, t.cfg.Kexec)
	if _, _, err := t.Run(ctx, nil, start); err != nil {
		return nil, false, infra(evaluate.PhaseInfra, "starting the kexec: %v", err)
	}
	return t.waitKexec(ctx, k, nonce, mark, console)
}

// waitKexec waits for the machine to answer in the kernel booted with
// nonce and verifies it. While the machine does not answer, or when it
// answers in another kernel, a crash on the console log after mark (after
// the line with the nonce when it shows) is the kexec'd kernel's: it is
// returned at once, before the wait ends.
func (t *Target) waitKexec(ctx context.Context, k evaluate.Kernel, nonce string, mark consoleMark, console *bytes.Buffer) (_ *probe, lost bool, _ error) {
	started := time.Now()
	deadline := started.Add(t.cfg.BootWait)
	wentDown := false
	var last error
	for {
		p, err := t.probe(ctx)
		var ae *AccessError
		switch {
		case errors.As(err, &ae):
			return nil, false, err
		case err != nil:
			wentDown, last = true, err
			if c := t.crashSince(mark, nonce, nil); c != nil {
				return nil, false, t.crashError(k, "on the way up", c, console)
			}
		case strings.Contains(" "+p.Cmdline+" ", " "+NonceParam+"="+nonce+" "):
			p, err := t.verify(ctx, k, nonce)
			return p, false, err
		case wentDown:
			if c := t.crashSince(mark, nonce, nil); c != nil {
				// It crashed and its panic= rebooted it.
				return p, false, t.crashError(k, "on the way up (the machine then rebooted into "+p.Release+")", c, console)
			}
			return p, false, &evaluate.BootError{Variant: k.Variant, Phase: evaluate.PhaseWrongKernel, Kind: fail.KindInfra,
				Msg: fmt.Sprintf("the machine came back in another kernel than the kexec'd %s, %s: running %s, build-id %s, /proc/cmdline %q lacks %s=%s",
					imageName(k), t.noCrashSeen(), p.Release, orNone(p.BuildID), p.Cmdline, NonceParam, nonce)}
		case time.Since(started) > time.Minute:
			return p, false, &evaluate.BootError{Variant: k.Variant, Phase: evaluate.PhaseWrongKernel, Kind: fail.KindInfra,
				Msg: fmt.Sprintf("kexec -e did not take: after %v the machine still runs the previous kernel (%s, build-id %s)",
					time.Since(started).Round(time.Second), p.Release, orNone(p.BuildID))}
		}
		if ctx.Err() != nil {
			return nil, false, fail.Infraf("ssh %s: interrupted: %w", t.cfg.URL, ctx.Err())
		}
		if time.Now().After(deadline) {
			if c := t.awaitCrash(mark, nonce, nil, 5*time.Second); c != nil {
				return nil, false, t.crashError(k, "on the way up", c, console)
			}
			return nil, true, &evaluate.BootError{Variant: k.Variant, Phase: evaluate.PhaseMachineLost, Kind: fail.KindInfra,
				Msg: fmt.Sprintf("the machine did not come back within %v after the kexec into %s, %s (last: %s)", t.cfg.BootWait, imageName(k), t.noCrashSeen(), firstLine(fmt.Sprint(last)))}
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// bringBack brings a machine whose kernel crashed back for the next boot
// with the boot hook ("recover", e.g. a power cycle); without a hook, or
// when the hook fails, the next boot finds the machine lost. What happens
// is written to the console; the boot's failure stays the crash.
func (t *Target) bringBack(ctx context.Context, k evaluate.Kernel, console *bytes.Buffer) {
	if t.cfg.BootHook == "" || t.cfg.Boot != BootKexec {
		return
	}
	if _, err := t.probe(ctx); err == nil {
		return // its panic= rebooted it already
	}
	if err := t.runHook(ctx, k, "", "recover", console); err != nil {
		fmt.Fprintf(console, "--- the machine was not brought back: %s ---\n", firstLine(err.Error()))
		return
	}
	if err := t.WaitUp(ctx, t.cfg.BootWait); err != nil {
		fmt.Fprintf(console, "--- the machine did not come back after the boot hook: %s ---\n", firstLine(err.Error()))
		return
	}
	console.WriteString("--- the machine is back for the next boot ---\n")
}
