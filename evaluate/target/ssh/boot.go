package ssh

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/internal/buildid"
	"github.com/patcheval/patcheval/internal/fail"
)

// Boot methods (Config.Boot).
const (
	// BootNone measures the kernel the machine runs; it must be the one
	// asked for (its build-id), so a pipeline can only compare several
	// kernels on a machine that boots them.
	BootNone = "none"
	// BootHook runs Config.BootHook, which boots the kernel (its
	// environment says which: HookEnv), then waits for ssh.
	BootHook = "hook"
	// BootKexec copies the image (and Config.Initrd) to the machine, loads
	// it with kexec -l and the command line, starts it with kexec -e (or
	// systemctl kexec where systemd runs) and waits for the machine to
	// come back in it.
	BootKexec = "kexec"
)

// NonceParam is the kernel parameter a kexec boot adds with a fresh
// random value: a machine that shows it in /proc/cmdline has booted this
// time, not earlier. Everything patcheval adds comes after it, so the
// machine's own command line is what precedes it.
const NonceParam = "patcheval.boot"

// RemoteDir is where the kexec boot keeps images on the machine.
const RemoteDir = "/tmp/patcheval-kexec"

// probe is what the machine shows of its running kernel.
type probe struct {
	Cmdline, Release, BuildID string
	HasKexec                  bool
}

func (p *probe) info() *guest.Info {
	return &guest.Info{Release: p.Release, Cmdline: p.Cmdline, BuildID: p.BuildID}
}

// evidence is the verify step's line in the console: what the machine
// showed and what it was compared with.
func (p *probe) evidence(k evaluate.Kernel) string {
	want := "no build-id recorded for this kernel: command line only"
	if k.BuildID != "" {
		want = "= " + k.BuildID + " of " + filepath.Base(k.Image)
	}
	return fmt.Sprintf("running %s, build-id %s (%s), /proc/cmdline %q", p.Release, orNone(p.BuildID), want, p.Cmdline)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// probeScript prints the running kernel's command line, release, notes
// (hex, as od prints them: busybox and coreutils alike) and whether the
// kexec program is there.
func (t *Target) probeScript() string {
	return fmt.Sprintf(`cat /proc/cmdline; echo @@; uname -r; echo @@; od -An -v -tx1 %s 2>/dev/null | tr -d ' \n'; echo; echo @@; command -v %s >/dev/null 2>&1 && echo kexec; true`,
		guest.NotesPath, shellQuote(t.cfg.Kexec))
}

// probe asks the machine which kernel it runs.
func (t *Target) probe(ctx context.Context) (*probe, error) {
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	o, _, err := t.Run(c, nil, t.probeScript())
	if err != nil {
		return nil, err
	}
	f := strings.Split(string(o), "@@\n")
	for len(f) < 4 {
		f = append(f, "")
	}
	p := &probe{Cmdline: strings.TrimSpace(f[0]), Release: strings.TrimSpace(f[1]), HasKexec: strings.TrimSpace(f[3]) == "kexec"}
	if raw, err := hex.DecodeString(strings.TrimSpace(f[2])); err == nil {
		p.BuildID = buildid.ParseNotesAny(raw)
	}
	return p, nil
}

// bootKernel boots k with the configured method and returns the verified
// probe of the running kernel.
func (t *Target) bootKernel(ctx context.Context, k evaluate.Kernel, console *bytes.Buffer) (*probe, error) {
	switch t.cfg.Boot {
	case BootHook:
		mark, before := t.markConsole(), console.Len()
		if err := t.runHook(ctx, k, "", "boot", console); err != nil {
			return nil, err
		}
		if err := t.waitUp(ctx, k, true); err != nil {
			var ae *AccessError
			if !errors.As(err, &ae) && ctx.Err() == nil {
				if c := t.awaitCrash(mark, "", console.Bytes()[before:], 5*time.Second); c != nil {
					return nil, t.crashError(k, "on the way up", c, console)
				}
			}
			return nil, err
		}
		return t.verify(ctx, k, "")
	case BootKexec:
		return t.kexecBoot(ctx, k, console)
	}
	if err := t.waitUp(ctx, k, false); err != nil {
		return nil, err
	}
	return t.verify(ctx, k, "")
}

// waitUp waits for ssh; after a boot, a machine that does not answer is
// lost (a crash it showed is the caller's to find).
func (t *Target) waitUp(ctx context.Context, k evaluate.Kernel, booted bool) error {
	wait := t.cfg.BootWait
	if !booted {
		wait = min(wait, 30*time.Second)
	}
	err := t.WaitUp(ctx, wait)
	if err == nil {
		return nil
	}
	var ae *AccessError
	if errors.As(err, &ae) || !booted {
		return &evaluate.BootError{Variant: k.Variant, Phase: evaluate.PhaseInfra, Kind: fail.KindInfra, Msg: err.Error()}
	}
	return &evaluate.BootError{Variant: k.Variant, Phase: evaluate.PhaseMachineLost, Kind: fail.KindInfra,
		Msg: fmt.Sprintf("the machine did not come back within %v after booting %s, %s: %v", wait, imageName(k), t.noCrashSeen(), err)}
}

// verify probes the running kernel and checks it is k (evaluate.Verify),
// with nonce in its command line when one was set.
func (t *Target) verify(ctx context.Context, k evaluate.Kernel, nonce string) (*probe, error) {
	p, err := t.probe(ctx)
	if err != nil {
		return nil, err
	}
	var want []string
	if nonce != "" {
		want = append(want, NonceParam+"="+nonce)
	}
	if _, err := evaluate.Verify(k, p.info(), want...); err != nil {
		return p, err
	}
	return p, nil
}

func imageName(k evaluate.Kernel) string {
	if k.Image == "" {
		return "variant " + k.Variant
	}
	return filepath.Base(k.Image)
}

// HookEnv is the whole environment a boot hook gets: PATH, HOME, USER,
// LOGNAME, LANG, LC_ALL, TZ, TMPDIR and SSH_AUTH_SOCK (to reach the
// machine or its BMC) as patcheval has them, and PATCHEVAL_HOST, _PORT,
// _USER, _URL, _IDENTITY_FILE, _VARIANT, _KERNEL_IMAGE, _INITRD,
// _CMDLINE, _BUILD_ID and _REASON ("boot", or "recover" when the
// machine was lost). Nothing else: no token, no password
// (PATCHEVAL_SMTP_PASSWORD), no other variable of patcheval's.
func (t *Target) HookEnv(k evaluate.Kernel, cmdline, reason string) []string {
	var env []string
	for _, name := range []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SSH_AUTH_SOCK"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	if _, ok := os.LookupEnv("PATH"); !ok {
		env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
	}
	if cmdline == "" {
		cmdline = k.Cmdline
	}
	return append(env, "PATCHEVAL_HOST="+t.host, "PATCHEVAL_PORT="+t.port, "PATCHEVAL_USER="+t.user, "PATCHEVAL_URL="+t.cfg.URL,
		"PATCHEVAL_IDENTITY_FILE="+t.cfg.IdentityFile, "PATCHEVAL_VARIANT="+k.Variant, "PATCHEVAL_KERNEL_IMAGE="+k.Image,
		"PATCHEVAL_INITRD="+t.cfg.Initrd, "PATCHEVAL_CMDLINE="+cmdline, "PATCHEVAL_BUILD_ID="+k.BuildID, "PATCHEVAL_REASON="+reason)
}

// runHook runs the boot hook with HookEnv; its output goes to the console.
func (t *Target) runHook(ctx context.Context, k evaluate.Kernel, cmdline, reason string, console *bytes.Buffer) error {
	hook := exec.CommandContext(ctx, "sh", "-c", t.cfg.BootHook)
	hook.Env = t.HookEnv(k, cmdline, reason)
	out, err := hook.CombinedOutput()
	fmt.Fprintf(console, "--- boot hook (%s): %s ---\n%s", reason, t.cfg.BootHook, out)
	if err != nil {
		return &evaluate.BootError{Variant: k.Variant, Phase: evaluate.PhaseInfra, Kind: fail.KindInfra,
			Msg: fmt.Sprintf("boot hook %q (%s): %v: %s", t.cfg.BootHook, reason, err, lastLine(string(out)))}
	}
	return nil
}

// copyFile puts a local file on the machine under RemoteDir, named by its
// content, unless it is there already; it returns the remote path.
func (t *Target) copyFile(ctx context.Context, local string) (string, error) {
	data, err := os.ReadFile(local)
	if err != nil {
		return "", fail.Inputf("ssh target %s: %v", t.cfg.URL, err)
	}
	sum := sha256.Sum256(data)
	remote := RemoteDir + "/" + hex.EncodeToString(sum[:8]) + "-" + safeBase(local)
	install := fmt.Sprintf("mkdir -p %[2]s && { test -s %[1]s || { cat > %[1]s.$$ && mv %[1]s.$$ %[1]s; }; }", remote, RemoteDir)
	if _, _, err := t.Run(ctx, data, install); err != nil {
		return "", fmt.Errorf("copying %s to the machine: %w", filepath.Base(local), err)
	}
	return remote, nil
}

func safeBase(p string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, filepath.Base(p))
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// kexecCmdline is the command line of a kexec boot: the machine's own
// (what precedes an earlier boot's NonceParam; BOOT_IMAGE= and initrd=
// of its boot loader left out), the nonce, Config.Cmdline and the
// variant's.
func (t *Target) kexecCmdline(current, nonce string, k evaluate.Kernel) string {
	var own []string
	for _, f := range strings.Fields(current) {
		if strings.HasPrefix(f, NonceParam+"=") {
			break
		}
		if strings.HasPrefix(f, "BOOT_IMAGE=") || strings.HasPrefix(f, "initrd=") {
			continue
		}
		own = append(own, f)
	}
	return strings.Join(append(own, strings.Fields(NonceParam+"="+nonce+" "+t.cfg.Cmdline+" "+k.Cmdline)...), " ")
}

func newNonce() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
