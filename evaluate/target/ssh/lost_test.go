package ssh

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/internal/fail"
)

// labPanic is the end of the emulated lab host's serial console when its
// 6.1 kernel, kexec'd with an init that does not exist, panicked
// (TestLabKexec's "kernel that panics on the way up"; panic=-1 rebooted
// the machine at once, -no-reboot stopped it, the boot hook powered it on).
const labPanic = `Freeing unused kernel image (rodata/data gap) memory: 1540K
Run /nonexistent as init process
Kernel panic - not syncing: Requested init /nonexistent failed (error -2).
Kernel Offset: 0x3e00000 from 0xffffffff81000000 (relocation range: 0xffffffff80000000-0xffffffffbfffffff)
=== lab: power on (recover) ===
Linux version 6.1.192 (patcheval@patcheval) (x86_64-linux-gnu-gcc (Debian 12.2.0-14+deb12u1) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP Sun Dec 11 14:15:00 UTC 2022
Command line: console=ttyS0 panic=-1 rdinit=/init ip=10.0.2.15::10.0.2.2:255.255.255.0::eth0:off
`

// powerProxy is the network between this host and a machine (the test's
// sshd): its power is a file the boot hook creates (what IPMI's power on
// is to a real lab). cut powers the machine off: every connection through
// it is dropped and none is forwarded until the hook powers it on again.
type powerProxy struct {
	addr, power string
	mu          sync.Mutex
	conns       []net.Conn
}

func startPowerProxy(t *testing.T, to string) *powerProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &powerProxy{addr: l.Addr().String(), power: filepath.Join(t.TempDir(), "power")}
	t.Cleanup(func() { l.Close(); p.cut() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if _, err := os.Stat(p.power); err != nil {
				c.Close() // powered off: nothing answers
				continue
			}
			s, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

func (p *powerProxy) cut() {
	os.Remove(p.power)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// agentUnder reports whether the agent runs as a descendant of process
// pid (the test's own sshd: not another test's agent on this host).
func agentUnder(pid int) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, exe := range procs {
		target, err := os.Readlink(exe)
		if err != nil || !strings.Contains(target, "/tmp/patcheval-agent") {
			continue
		}
		p, _ := strconv.Atoi(filepath.Base(filepath.Dir(exe)))
		for i := 0; i < 20 && p > 1; i++ {
			if p == pid {
				return true
			}
			stat, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
			if err != nil {
				break
			}
			// pid (comm) state ppid ...: comm may hold spaces.
			f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
			if len(f) < 2 {
				break
			}
			p, _ = strconv.Atoi(f[1])
		}
	}
	return false
}

// whenAgentRuns calls do once the agent runs under sshd pid.
func whenAgentRuns(t *testing.T, pid int, do func()) <-chan bool {
	hit := make(chan bool, 1)
	go func() {
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if agentUnder(pid) {
				do()
				hit <- true
				return
			}
		}
		hit <- false
	}()
	return hit
}

// TestSSHLostOrCrashed tells a machine that was lost from a kernel that
// crashed, on a real sshd behind a network this test can power off, with
// the machine's console logged to a file as a console server does: lost
// during the benchmarks with a silent console is infra, and the boot is
// done again (booted by the hook, measured); the same loss with a panic
// on the console is the kernel's failed boot (exit 1), not retried, with
// the panic in the error; a boot after which the machine never answers
// is a lost machine when its console is silent and the kernel's crash
// when the console shows a panic after the boot began (not one from
// before).
func TestSSHLostOrCrashed(t *testing.T) {
	url, id, pid := sshdProc(t)
	host := strings.TrimPrefix(url, "ssh://")
	sshdAddr := host[strings.IndexByte(host, '@')+1:]
	user := host[:strings.IndexByte(host, '@')]
	plan := guest.Plan{Benchmarks: []guest.Bench{{Name: "getppid", Ops: 3000000}}}
	k := evaluate.Kernel{Variant: "v", Image: "/boot/vmlinuz-test"}
	setup := func(t *testing.T, wait time.Duration) (*Target, *powerProxy, string) {
		p := startPowerProxy(t, sshdAddr)
		console := filepath.Join(t.TempDir(), "console.log")
		os.WriteFile(console, []byte("lab: machine up\n"), 0o644)
		tg, err := New(Config{URL: "ssh://" + user + "@" + p.addr, IdentityFile: id, Options: noHostCheck,
			BootHook: "echo power on; touch " + p.power, BootWait: wait, Timeout: 5 * time.Minute, ConsoleLog: console})
		if err != nil {
			t.Fatal(err)
		}
		return tg, p, console
	}
	appendConsole := func(t *testing.T, path, text string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(text)
		f.Close()
	}
	ctx := context.Background()

	t.Run("lost during the benchmarks", func(t *testing.T) {
		tg, p, console := setup(t, time.Minute)
		hit := whenAgentRuns(t, pid, p.cut)
		res, err := tg.Boot(ctx, k, plan)
		if !<-hit {
			t.Fatal("the agent never ran")
		}
		if err != nil {
			t.Fatalf("not booted again after the loss: %v", err)
		}
		c := string(res.Console)
		if !strings.Contains(c, "--- lost: the machine stopped answering during the benchmarks of vmlinuz-test, with no crash on its console log "+console) ||
			!strings.Contains(c, "--- boot attempt 2 of 2") || len(res.Output.Results) != 1 {
			t.Errorf("%d results; the loss and the second boot not in the console:\n%s", len(res.Output.Results), c)
		}
	})

	t.Run("lost during the benchmarks and not back", func(t *testing.T) {
		tg, p, _ := setup(t, 3*time.Second)
		tg.cfg.ConsoleLog = ""
		// The second boot finds the machine off: the network is gone.
		tg.cfg.BootHook = "echo power on"
		os.WriteFile(p.power, nil, 0o644)
		hit := whenAgentRuns(t, pid, p.cut)
		res, err := tg.Boot(ctx, k, plan)
		<-hit
		var be *evaluate.BootError
		if !errors.As(err, &be) || fail.KindOf(err) != fail.KindInfra || be.Phase != evaluate.PhaseMachineLost ||
			!strings.Contains(be.Msg, "no console log is configured to tell a crash from a lost machine") {
			t.Fatalf("err %v", err)
		}
		if len(res.Output.Results) != 0 || !strings.Contains(string(res.Console), "--- lost: the machine stopped answering during the benchmarks") {
			t.Errorf("%d results, console:\n%s", len(res.Output.Results), res.Console)
		}
		t.Logf("lost: %s", firstLine(err.Error()))
	})

	t.Run("panic during the benchmarks", func(t *testing.T) {
		tg, p, console := setup(t, time.Minute)
		hit := whenAgentRuns(t, pid, func() { appendConsole(t, console, labPanic); p.cut() })
		res, err := tg.Boot(ctx, k, plan)
		if !<-hit {
			t.Fatal("the agent never ran")
		}
		var be *evaluate.BootError
		if !errors.As(err, &be) || fail.KindOf(err) != fail.KindFailed || be.Phase != evaluate.PhaseKernelPanic ||
			be.Msg != "vmlinuz-test crashed during the benchmarks: Kernel panic - not syncing: Requested init /nonexistent failed (error -2). (console log "+console+")" ||
			!strings.HasSuffix(be.Tail, "(relocation range: 0xffffffff80000000-0xffffffffbfffffff)\n=== lab: power on (recover) ===") ||
			!strings.Contains(err.Error(), "Run /nonexistent as init process") {
			t.Fatalf("err %v", err)
		}
		if strings.Contains(string(res.Console), "boot attempt 2") || len(res.Output.Results) != 0 {
			t.Errorf("a crashed kernel retried or measured:\n%s", res.Console)
		}
		t.Logf("crashed: %s", be.Msg)
	})

	t.Run("never answers after its boot", func(t *testing.T) {
		tg, p, console := setup(t, 3*time.Second)
		tg.cfg.BootHook = "echo booting"
		p.cut()
		// A panic from before the boot began is not this kernel's.
		appendConsole(t, console, labPanic)
		_, err := tg.Boot(ctx, k, plan)
		var be *evaluate.BootError
		if !errors.As(err, &be) || fail.KindOf(err) != fail.KindInfra || be.Phase != evaluate.PhaseMachineLost ||
			!strings.Contains(be.Msg, "with no crash on its console log") {
			t.Fatalf("silent console: %v", err)
		}
		tg.cfg.BootHook = "echo booting; printf '%s' '" + labPanic + "' >> " + console
		_, err = tg.Boot(ctx, k, plan)
		if !errors.As(err, &be) || fail.KindOf(err) != fail.KindFailed || be.Phase != evaluate.PhaseKernelPanic ||
			!strings.Contains(be.Msg, "crashed on the way up: Kernel panic - not syncing: Requested init /nonexistent failed (error -2).") {
			t.Fatalf("panic on the console: %v", err)
		}
	})
}
