// Package qemu is the QEMU Target: it packs the guest agent and the plan
// into an initramfs, boots a Kernel with per-architecture defaults from
// internal/arch (ppc64le pseries/POWER9 on hvc0, arm64 virt/max on ttyAMA0, x86_64 q35
// on ttyS0, riscv64 virt through OpenSBI on ttyS0), watches the console, and classifies panics, hangs and agent
// failures. Deterministic mode adds -icount shift=0,sleep=off: guest time
// then counts executed instructions, and every result says so.
package qemu

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/guest/initramfs"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/sandbox"
	"github.com/patcheval/patcheval/internal/xdg"
)

// Config shapes every boot of the target.
type Config struct {
	SMP      int // default 1
	MemoryMB int // default 512
	// Deterministic adds -icount shift=0,sleep=off (and disables KVM).
	Deterministic bool
	// KVM is "off" (default: TCG), "auto" (when /dev/kvm opens and the
	// guest arch is the host's) or "on". Off by default because nested
	// KVM can hang silently (seen in a Firecracker VM: the x86_64 kernel
	// never decompresses), and TCG timings are what deterministic mode
	// and cross-arch comparisons use.
	KVM string
	// Timeout kills a boot that has not powered off (default 10 min).
	Timeout time.Duration
	// Cmdline is appended to every boot's kernel command line.
	Cmdline string
	// ExtraArgs are appended to QEMU's arguments.
	ExtraArgs []string
	// CacheDir holds built agents (default $PATCHEVAL_CACHE_DIR/agents).
	CacheDir string
	// Agent is a prebuilt agent binary for the guest arch; empty: build it.
	Agent string
	// Gzip compresses the initramfs (needs RD_GZIP in the kernel).
	Gzip bool
	// SLOF boots ppc64le through the SLOF firmware (QEMU's default,
	// about 12 s slower under TCG) instead of x-vof=on.
	SLOF bool
	// Unsandboxed runs QEMU without the sandbox (internal/sandbox; also
	// PATCHEVAL_SANDBOX=off): only for kernels the operator trusts.
	// Otherwise a machine that cannot sandbox refuses to boot (exit 3).
	Unsandboxed bool
	// Console, when set, receives the console as it arrives.
	Console io.Writer
	// Userland is a newc archive with the users' tools (evaluate/guest/userland)
	// appended to every boot's initramfs; UserlandLibPath is their
	// LD_LIBRARY_PATH in the guest.
	Userland        string
	UserlandLibPath string
}

// Target boots kernels in QEMU.
type Target struct{ cfg Config }

// New returns a QEMU target.
func New(cfg Config) *Target {
	if cfg.SMP <= 0 {
		cfg.SMP = 1
	}
	if cfg.MemoryMB <= 0 {
		cfg.MemoryMB = 512
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.KVM == "" {
		cfg.KVM = "off"
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(xdg.CacheDir(), "agents")
	}
	return &Target{cfg: cfg}
}

// Name is "qemu".
func (t *Target) Name() string { return "qemu" }

// Machine is an architecture's QEMU defaults: its row of internal/arch.
type Machine struct {
	arch.QEMU
	GoArch   string
	HostArch string // runtime.GOARCH for which KVM can be used
}

// MachineFor returns the defaults for arch (aliases: aarch64, amd64,
// powerpc; "" is ppc64le).
func MachineFor(name string) (Machine, error) {
	if name == "" {
		name = "ppc64le"
	}
	a, ok := arch.Find(name)
	if !ok {
		return Machine{}, fail.Inputf("qemu: unknown architecture %q (want %s)", name, strings.Join(arch.Names(), ", "))
	}
	return Machine{QEMU: a.QEMU, GoArch: a.GoArch, HostArch: a.HostGoArch}, nil
}

// KVMUsable reports whether /dev/kvm opens read-write.
func KVMUsable() bool {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// Command returns QEMU's argv (binary first) and the full kernel command
// line for booting kernel with initrd, and whether KVM is used.
func (t *Target) Command(k evaluate.Kernel, initrd string) (argv []string, cmdline string, kvm bool, err error) {
	m, err := MachineFor(k.Arch)
	if err != nil {
		return nil, "", false, err
	}
	cmdline = strings.Join(strings.Fields("console="+m.Console+" panic=-1 rdinit=/init "+k.Cmdline+" "+t.cfg.Cmdline), " ")
	argv = append([]string{m.Binary}, m.Args...)
	if t.cfg.SLOF {
		for i, a := range argv {
			if a == "pseries,x-vof=on" {
				argv[i] = "pseries"
			}
		}
	}
	switch t.cfg.KVM {
	case "on":
		kvm = true
	case "auto":
		kvm = !t.cfg.Deterministic && m.HostArch == runtime.GOARCH && KVMUsable()
	}
	if kvm && t.cfg.Deterministic {
		return nil, "", false, fail.Inputf("qemu: deterministic mode (-icount) cannot use KVM")
	}
	if kvm {
		argv = append(argv, "-accel", "kvm")
		if m.KVMHostCPU {
			argv = append(argv, "-cpu", "host")
		}
	} else {
		argv = append(argv, "-accel", "tcg")
	}
	if t.cfg.Deterministic {
		argv = append(argv, "-icount", "shift=0,sleep=off")
	}
	argv = append(argv,
		"-smp", fmt.Sprint(t.cfg.SMP), "-m", fmt.Sprint(t.cfg.MemoryMB),
		"-nographic", "-monitor", "none", "-no-reboot", "-nic", "none",
		"-kernel", k.Image, "-initrd", initrd, "-append", cmdline)
	argv = append(argv, t.cfg.ExtraArgs...)
	return argv, cmdline, kvm, nil
}

// RecordedArgs is argv as a boot's Environment records it: the per-boot
// initramfs initrd (removed when the boot ends) named
// evaluate.BootInitramfs.
func RecordedArgs(argv []string, initrd string) []string {
	out := slices.Clone(argv)
	for i, a := range out {
		if a == initrd {
			out[i] = evaluate.BootInitramfs
		}
	}
	return out
}

// Boot boots k once and runs plan p in it.
func (t *Target) Boot(ctx context.Context, k evaluate.Kernel, p guest.Plan) (*evaluate.BootResult, error) {
	m, agent, err := t.bootInputs(ctx, k)
	if err != nil {
		return nil, err
	}
	p.Restart = p.Restart || m.Restart
	if p.LibPath == "" {
		p.LibPath = t.cfg.UserlandLibPath
	}
	dir, err := os.MkdirTemp("", "patcheval-boot-")
	if err != nil {
		return nil, fail.Infra(err)
	}
	defer os.RemoveAll(dir)
	initrd := filepath.Join(dir, "initramfs.cpio")
	argv, cmdline, kvm, err := t.Command(k, initrd)
	if err != nil {
		return nil, err
	}
	if err := t.writeInitramfs(initrd, agent, k, p, cmdline); err != nil {
		return nil, err
	}
	b := &qemuBoot{t: t, k: k, res: t.newBootResult(k, argv, initrd, cmdline, kvm)}
	bctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	stdout, err := b.start(argv, dir, kvm)
	if err != nil {
		return nil, err
	}
	go b.readConsole(stdout)
	timedOut := b.waitForEnd(ctx, bctx)
	waitErr := b.reap()
	return b.res, b.finish(ctx, waitErr, timedOut)
}

// bootInputs checks what booting k needs (its machine, its image, the
// QEMU binary) and reads the guest agent (built for the machine unless
// the config names one).
func (t *Target) bootInputs(ctx context.Context, k evaluate.Kernel) (m Machine, agent []byte, err error) {
	m, err = MachineFor(k.Arch)
	if err != nil {
		return m, nil, err
	}
	if _, err := os.Stat(k.Image); err != nil {
		return m, nil, fail.Inputf("qemu: kernel image of variant %s: %w", k.Variant, err)
	}
	if _, err := exec.LookPath(m.Binary); err != nil {
		return m, nil, fail.Infraf("qemu: %s not found (install qemu-system for %s): %w", m.Binary, k.Arch, err)
	}
	agentPath := t.cfg.Agent
	if agentPath == "" {
		if agentPath, err = guest.Build(ctx, m.GoArch, t.cfg.CacheDir); err != nil {
			return m, nil, fail.Infra(err)
		}
	}
	agent, err = os.ReadFile(agentPath)
	if err != nil {
		return m, nil, fail.Infra(err)
	}
	return m, agent, nil
}

// writeInitramfs writes the boot's initramfs: the agent as init, plan p
// (expecting k booted with cmdline: the agent proves the kernel, its
// build-id and the whole command line QEMU passes, before its first
// benchmark, and runs none on another one) and the userland archive.
func (t *Target) writeInitramfs(initrd string, agent []byte, k evaluate.Kernel, p guest.Plan, cmdline string) error {
	var appendArchives []string
	if t.cfg.Userland != "" {
		appendArchives = append(appendArchives, t.cfg.Userland)
	}
	p.Expect = evaluate.ExpectFor(k, cmdline)
	planJSON, err := json.Marshal(p)
	if err != nil {
		return fail.Input(err)
	}
	if err := initramfs.WriteFile(initrd, initramfs.Spec{Init: agent, Gzip: t.cfg.Gzip, Append: appendArchives,
		Files: map[string][]byte{strings.TrimPrefix(guest.PlanPath, "/"): planJSON}}); err != nil {
		return fail.Infra(err)
	}
	return nil
}

// newBootResult is the result of booting k with argv, its environment
// recorded before the boot.
func (t *Target) newBootResult(k evaluate.Kernel, argv []string, initrd, cmdline string, kvm bool) *evaluate.BootResult {
	host, _ := os.Hostname()
	return &evaluate.BootResult{
		Output: &guest.Output{},
		Env: evaluate.Environment{
			ConfigHash: k.ConfigHash, Cmdline: cmdline, Target: "qemu", QEMUArgs: RecordedArgs(argv, initrd),
			Host: host, AgentVersion: guest.Version, Deterministic: t.cfg.Deterministic, KVM: kvm,
		},
	}
}

// qemuBoot is one QEMU process booting a kernel: its console as it is
// read, the agent's output parsed from it.
type qemuBoot struct {
	t   *Target
	k   evaluate.Kernel
	res *evaluate.BootResult
	cmd *exec.Cmd

	stderr bytes.Buffer

	mu      sync.Mutex
	console bytes.Buffer
	perr    error // the first agent line that did not parse

	done    chan struct{} // closed when the console is read to its end
	doneRec chan struct{} // the agent's last record was read
}

// start starts QEMU (sandboxed) and returns its console.
func (b *qemuBoot) start(argv []string, dir string, kvm bool) (io.ReadCloser, error) {
	cmd, err := b.t.sandboxed(argv, b.k.Image, dir, kvm)
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fail.Infra(err)
	}
	cmd.Stderr = &b.stderr
	b.res.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fail.Infraf("qemu: starting %s: %w", argv[0], err)
	}
	b.cmd = cmd
	b.done = make(chan struct{})
	b.doneRec = make(chan struct{}, 1)
	return stdout, nil
}

// readConsole reads the console to its end, keeping it, copying it to
// the config's Console and parsing the agent's lines; done is closed at
// the end, doneRec signalled when the agent's output is complete.
func (b *qemuBoot) readConsole(stdout io.Reader) {
	defer close(b.done)
	res := b.res
	rd := bufio.NewReaderSize(stdout, 1<<16)
	for {
		line, err := rd.ReadString('\n')
		if len(line) > 0 {
			b.mu.Lock()
			b.console.WriteString(line)
			if b.t.cfg.Console != nil {
				io.WriteString(b.t.cfg.Console, line)
			}
			n := len(res.Output.Results)
			if e := res.Output.Add(strings.TrimRight(line, "\r\n")); e != nil && b.perr == nil {
				b.perr = e
			}
			if n == 0 && len(res.Output.Results) == 1 {
				res.FirstResult = time.Since(res.Started)
			}
			if res.Output.Done {
				select {
				case b.doneRec <- struct{}{}:
				default:
				}
			}
			b.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// waitForEnd waits for the console to end, killing QEMU when bctx is
// done (timedOut when that was the boot's timeout, not ctx) or 5 s after
// the agent finished (the guest's moment to power off).
func (b *qemuBoot) waitForEnd(ctx, bctx context.Context) (timedOut bool) {
	kill := func() { syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL) }
	select {
	case <-b.done:
	case <-bctx.Done():
		timedOut = ctx.Err() == nil
		kill()
		<-b.done
	case <-b.doneRec:
		// The agent finished; give the guest a moment to power off.
		select {
		case <-b.done:
		case <-time.After(5 * time.Second):
			kill()
			<-b.done
		case <-bctx.Done():
			kill()
			<-b.done
		}
	}
	return timedOut
}

// reap waits for QEMU and releases its sandbox; a release that fails is
// on stderr, and the error when QEMU's was none.
func (b *qemuBoot) reap() error {
	waitErr := b.cmd.Wait()
	if merr := sandbox.Release(b.cmd); merr != nil {
		b.stderr.WriteString(merr.Error() + "\n")
		if waitErr == nil {
			waitErr = merr
		}
	}
	b.res.Duration = time.Since(b.res.Started)
	return waitErr
}

// finish fills in the result (the console with QEMU's stderr, what the
// agent saw of the kernel) and classifies the boot: interrupted (ctx),
// failed (evaluate.Classify), or an agent line that did not parse.
func (b *qemuBoot) finish(ctx context.Context, waitErr error, timedOut bool) error {
	res, k, stderr := b.res, b.k, &b.stderr
	b.mu.Lock()
	defer b.mu.Unlock()
	res.Console = b.console.Bytes()
	if stderr.Len() > 0 {
		res.Console = append(res.Console, []byte("\n--- qemu stderr ---\n"+stderr.String())...)
	}
	if res.Output.Info != nil {
		res.Env.KernelRelease = res.Output.Info.Release
		res.Env.Cmdline = res.Output.Info.Cmdline
		if pe := res.Output.Info.PerfEvents; pe != nil {
			res.Env.PerfEvents = pe.String()
		}
	}
	if err := ctx.Err(); err != nil {
		return fail.Infraf("qemu: boot of %s interrupted: %w", k.Variant, err)
	}
	if waitErr != nil && stderr.Len() > 0 {
		waitErr = fmt.Errorf("%w: %s", waitErr, strings.TrimSpace(stderr.String()))
	}
	if err := evaluate.Classify(k.Variant, res.Console, res.Output, waitErr, timedOut); err != nil {
		return err
	}
	if b.perr != nil {
		return fail.Infra(fmt.Errorf("qemu: %s: %w", k.Variant, b.perr))
	}
	return nil
}

// sandboxed is QEMU's command: in the sandbox (internal/sandbox) as the
// build user, with the kernel image and the boot's directory (the
// initramfs) read-only, a private /tmp, no network (the guest has none:
// -nic none), /dev/kvm only when KVM is used, and a scrubbed
// environment. The booted kernel is the series' code, and QEMU's device
// models and TCG are what stands between it and the host: a guest that
// breaks out of QEMU lands in the sandbox, not in patcheval's user.
func (t *Target) sandboxed(argv []string, image, bootDir string, kvm bool) (*exec.Cmd, error) {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "TMPDIR=/tmp", "LANG=C", "LC_ALL=C"}
	if t.cfg.Unsandboxed || sandbox.Disabled() {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		return cmd, nil
	}
	if err := sandbox.Check(); err != nil {
		return nil, fail.Infraf("qemu: %v: refusing to boot unsandboxed (%s=off boots trusted kernels without it)", err, sandbox.EnvSwitch)
	}
	// The boot directory is the build user's to read.
	if err := os.Chmod(bootDir, 0o755); err != nil {
		return nil, fail.Infra(err)
	}
	ents, _ := os.ReadDir(bootDir)
	for _, e := range ents {
		os.Chmod(filepath.Join(bootDir, e.Name()), 0o644)
	}
	spec := sandbox.Spec{ReadOnly: []string{image, bootDir}, Dir: "/tmp",
		// Guest RAM, TCG's code buffer (1 GiB) and QEMU itself.
		Limits: sandbox.Limits{AddressSpace: int64(t.cfg.MemoryMB)<<20 + 8<<30}}
	// Files the operator's extra arguments name (-drive file=..., -bios).
	for _, a := range t.cfg.ExtraArgs {
		for _, f := range strings.Split(a, ",") {
			_, v, ok := strings.Cut(f, "=")
			if !ok {
				v = f
			}
			if filepath.IsAbs(v) {
				if _, err := os.Stat(v); err == nil && !slices.Contains(spec.ReadOnly, v) {
					spec.ReadOnly = append(spec.ReadOnly, v)
				}
			}
		}
	}
	if kvm {
		spec.Devices = append(spec.Devices, "/dev/kvm")
	}
	cmd, err := spec.Command(context.Background(), argv)
	if err != nil {
		return nil, fail.Infra(err)
	}
	cmd.Env = env
	return cmd, nil
}
