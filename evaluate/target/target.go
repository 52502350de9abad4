// Package target makes the evaluate.Target a run boots on from one Config,
// like syzkaller's vmimpl.Create: QEMU (evaluate/target/qemu) or a machine over
// ssh (evaluate/target/ssh). `patcheval run` and the pipeline runner both make
// their targets with New.
package target

import (
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest/userland"
	"github.com/patcheval/patcheval/evaluate/target/qemu"
	"github.com/patcheval/patcheval/evaluate/target/ssh"
	"github.com/patcheval/patcheval/internal/fail"
)

// QEMU is Config.Where for QEMU (also the default).
const QEMU = "qemu"

// Config says where and how to boot.
type Config struct {
	// Where is "qemu" ("" too) or ssh://user@host[:port]: that machine's
	// running kernel, or the one BootHook boots.
	Where string
	// Deterministic runs QEMU with -icount (timings count instructions);
	// a machine over ssh cannot.
	Deterministic bool
	// Timeout bounds one boot (a hang is killed and reported).
	Timeout time.Duration
	// CacheDir is patcheval's cache directory: guest agents are built into
	// its agents/ ("" = the XDG cache).
	CacheDir string

	// QEMU: CPUs, memory, KVM ("off", "auto", "on"), a command line
	// appended to every boot, a copy of the console as it arrives, and
	// the users' tools (stress-ng, perf) added to the initramfs.
	SMP       int
	MemoryMiB int
	KVM       string
	Cmdline   string
	Console   io.Writer
	Userland  *userland.Userland

	// ssh: the boot method (ssh.BootNone, BootHook, BootKexec; "" is
	// the hook when BootHook is set), the hook (the boot itself, or
	// kexec's fallback that brings a lost machine back), the initramfs a
	// kexec boots with, then ssh's identity file and -o options. Cmdline
	// is added to a kexec'd kernel's command line. ConsoleLog is the
	// file this host logs the machine's console to: a crash there is the
	// kernel's failure, silence without one a lost machine (ssh.Config).
	Boot         string
	BootHook     string
	Initrd       string
	IdentityFile string
	SSHOptions   []string
	ConsoleLog   string
}

// New returns the target cfg describes; a Where that is neither QEMU nor
// an ssh URL, or a deterministic ssh target, is an input error.
func New(cfg Config) (evaluate.Target, error) {
	agents := ""
	if cfg.CacheDir != "" {
		agents = filepath.Join(cfg.CacheDir, "agents")
	}
	switch {
	case cfg.Where == "" || cfg.Where == QEMU:
		if cfg.ConsoleLog != "" {
			return nil, fail.Inputf("target qemu: a console log (%s) is for an ssh target: QEMU's console is read by patcheval itself", cfg.ConsoleLog)
		}
		qc := qemu.Config{SMP: cfg.SMP, MemoryMB: cfg.MemoryMiB, Deterministic: cfg.Deterministic, KVM: cfg.KVM,
			Timeout: cfg.Timeout, Cmdline: cfg.Cmdline, Console: cfg.Console, CacheDir: agents}
		if cfg.Userland != nil {
			qc.Userland, qc.UserlandLibPath = cfg.Userland.Archive, cfg.Userland.LibPath()
		}
		return qemu.New(qc), nil
	case strings.HasPrefix(cfg.Where, "ssh://"):
		if cfg.Deterministic {
			return nil, fail.Inputf("target %s: deterministic timing needs QEMU (-icount); a machine over ssh runs in real time", cfg.Where)
		}
		return ssh.New(ssh.Config{URL: cfg.Where, Boot: cfg.Boot, BootHook: cfg.BootHook, Initrd: cfg.Initrd, Cmdline: cfg.Cmdline,
			IdentityFile: cfg.IdentityFile, Options: cfg.SSHOptions, Timeout: cfg.Timeout, CacheDir: agents, ConsoleLog: cfg.ConsoleLog})
	}
	return nil, fail.Inputf("target %q: want qemu or ssh://user@host[:port]", cfg.Where)
}
