package target

import (
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/target/qemu"
	"github.com/patcheval/patcheval/internal/fail"
)

// TestNew: one constructor gives QEMU with the settings it was given, or
// an ssh machine, and refuses what cannot run with a clear input error.
func TestNew(t *testing.T) {
	for _, where := range []string{"", QEMU} {
		tg, err := New(Config{Where: where, Deterministic: true, SMP: 2, MemoryMiB: 768, Cmdline: "selinux=0"})
		if err != nil {
			t.Fatalf("%q: %v", where, err)
		}
		q, ok := tg.(*qemu.Target)
		if !ok || tg.Name() != "qemu" {
			t.Fatalf("%q: %T %s, want QEMU", where, tg, tg.Name())
		}
		argv, cmdline, _, err := q.Command(evaluate.Kernel{Arch: "ppc64le", Image: "vmlinux"}, "initrd")
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Join(argv, " ")
		if !strings.Contains(s, "-smp 2") || !strings.Contains(s, "-m 768") || !strings.Contains(s, "-icount shift=0,sleep=off") || !strings.Contains(cmdline, "selinux=0") {
			t.Errorf("%q: QEMU %s, cmdline %q: the config did not arrive", where, s, cmdline)
		}
	}
	tg, err := New(Config{Where: "ssh://me@127.0.0.1:2222", BootHook: "true"})
	if err != nil || tg.Name() != "ssh://me@127.0.0.1:2222" {
		t.Fatalf("ssh target: %v %v", tg, err)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Where: "mips"}, `target "mips": want qemu or ssh://`},
		{Config{Where: "ssh://"}, "want ssh://user@host[:port]"},
		{Config{Where: "ssh://me@127.0.0.1", Deterministic: true}, "deterministic timing needs QEMU"},
	} {
		_, err := New(c.cfg)
		if fail.KindOf(err) != fail.KindInput || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an input error saying %q", c.cfg, err, c.want)
		}
	}
}
