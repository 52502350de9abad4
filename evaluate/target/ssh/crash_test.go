package ssh

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// labConsole is a serial console as the emulated lab host logs it: the
// machine's own boot (with a non-fatal BUG), the kexec, and the kexec'd
// kernel (nonce 5eed) panicking because its init does not exist.
const labConsole = `Linux version 6.1.0 (patcheval@lab) #1 SMP PREEMPT_DYNAMIC
Command line: console=ttyS0 panic=-1 rdinit=/init
BUG: using smp_processor_id() in preemptible [00000000] code: swapper/0/1
lab: up 6.1.0 console=ttyS0 panic=-1 rdinit=/init
[   61.200000] kexec_core: Starting new kernel
Linux version 6.1.0 (patcheval@lab) #1 SMP PREEMPT_DYNAMIC
Command line: console=ttyS0 panic=-1 rdinit=/init patcheval.boot=5eed rdinit=/nonexistent init=/nonexistent
Kernel command line: console=ttyS0 panic=-1 rdinit=/init patcheval.boot=5eed rdinit=/nonexistent init=/nonexistent
Run /nonexistent as init process
[    2.315201] Kernel panic - not syncing: Requested init /nonexistent failed (error -2).
[    2.316000] CPU: 0 PID: 1 Comm: swapper/0 Not tainted 6.1.0 #1
[    2.316400] Call Trace:
[    2.316500]  <TASK>
[    2.316800]  panic+0x11b/0x2b4
[    2.318000] ---[ end Kernel panic - not syncing: Requested init /nonexistent failed (error -2). ]---
SeaBIOS (version 1.16.2-debian-1.16.2-1)
`

// TestFindCrash reads a crash from a console: only after the boot's own
// command line (its nonce), the panic's cause as the line, the report
// ending at the panic's end marker; and none in a console that only
// shows a non-fatal BUG before the boot.
func TestFindCrash(t *testing.T) {
	c := findCrash([]byte(labConsole), NonceParam+"=5eed")
	if c == nil {
		t.Fatal("no crash found")
	}
	if c.Line != "Kernel panic - not syncing: Requested init /nonexistent failed (error -2)." {
		t.Errorf("line %q", c.Line)
	}
	if !strings.HasPrefix(c.Report, "Run /nonexistent as init process") || !strings.HasSuffix(c.Report, "(error -2). ]---") {
		t.Errorf("report:\n%s", c.Report)
	}
	boot := labConsole[:strings.Index(labConsole, "[   61.2")]
	if c := findCrash([]byte(boot+"Command line: patcheval.boot=5eed\nlab: up\n"), NonceParam+"=5eed"); c != nil {
		t.Errorf("a BUG before the boot's command line taken for its crash: %+v", c)
	}
	oops := "patcheval.boot=77\n[ 9.1] BUG: kernel NULL pointer dereference, address: 0000000000000000\n[ 9.1] Oops: 0002 [#1] PREEMPT SMP\n[ 9.2] RIP: 0010:getppid+0x5/0x10\n"
	if c := findCrash([]byte(oops), NonceParam+"=77"); c == nil || c.Line != "BUG: kernel NULL pointer dereference, address: 0000000000000000" {
		t.Errorf("oops: %+v", c)
	}
}

// TestCrashSinceMark reads only what the console log gained after the
// mark, and the boot hook's output when the log shows nothing.
func TestCrashSinceMark(t *testing.T) {
	log := filepath.Join(t.TempDir(), "console.log")
	before := labConsole[strings.Index(labConsole, "Run /nonexistent"):]
	os.WriteFile(log, []byte(before), 0o644)
	tg, err := New(Config{URL: "ssh://root@127.0.0.1:1", ConsoleLog: log})
	if err != nil {
		t.Fatal(err)
	}
	mark := tg.markConsole()
	if c := tg.crashSince(mark, "5eed", nil); c != nil {
		t.Fatalf("a panic from before the mark: %+v", c)
	}
	if c := tg.crashSince(mark, "5eed", []byte("SOL: Kernel panic - not syncing: Fatal exception\n")); c == nil || c.Source != "the boot hook's output" {
		t.Errorf("hook output: %+v", c)
	}
	f, _ := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(labConsole)
	f.Close()
	c := tg.crashSince(mark, "5eed", nil)
	if c == nil || !strings.Contains(c.Source, log) || !strings.Contains(c.Line, "Requested init /nonexistent") {
		t.Errorf("after the mark: %+v", c)
	}
}
