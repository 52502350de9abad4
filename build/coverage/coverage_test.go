package coverage_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/build/buildtest"
	. "github.com/patcheval/patcheval/build/coverage"
)

// writeCmd writes a .o.cmd file in kbuild's format.
func writeCmd(t *testing.T, out, obj, src string, deps ...string) {
	t.Helper()
	dir := filepath.Join(out, filepath.Dir(obj))
	os.MkdirAll(dir, 0o755)
	s := "cmd_" + obj + " := gcc -c -o " + obj + " " + src + "\n\nsource_" + obj + " := " + src + "\n\ndeps_" + obj + " := \\\n"
	for _, d := range deps {
		s += "  " + d + " \\\n"
	}
	s += "    $(wildcard include/config/FOO) \\\n\n" + obj + ": $(deps_" + obj + ")\n\n$(deps_" + obj + "):\n"
	if err := os.WriteFile(filepath.Join(dir, "."+filepath.Base(obj)+".cmd"), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCheckAgainstRealMakefiles follows the Makefiles of Debian's 6.1 tree
// for files a series might change, against a record of what was compiled.
func TestCheckAgainstRealMakefiles(t *testing.T) {
	repo := buildtest.Repo(t)
	src, out := t.TempDir(), t.TempDir()
	writeCmd(t, out, "kernel/signal.o", filepath.Join(src, "kernel/signal.c"),
		filepath.Join(src, "include/linux/signal.h"), "include/generated/autoconf.h", "/usr/lib/gcc/x/include/stddef.h")
	writeCmd(t, out, "arch/powerpc/kernel/interrupt.o", "../"+filepath.Base(src)+"/arch/powerpc/kernel/interrupt.c")
	// kbuild writes sources outside O= relative to O= when it can.
	rec, err := FromObjDir(src, out)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Compiled["kernel/signal.c"] || !rec.Compiled["arch/powerpc/kernel/interrupt.c"] || !rec.Included["include/linux/signal.h"] || len(rec.Included) != 1 {
		t.Fatalf("record: %+v", rec)
	}
	back, err := Decode(rec.Encode())
	if err != nil || len(back.Compiled) != len(rec.Compiled) || len(back.Included) != 1 {
		t.Fatalf("Encode/Decode: %+v %v", back, err)
	}
	read := func(p string) ([]byte, error) {
		return exec.Command("git", "--git-dir="+repo, "show", buildtest.BaseCommit+":"+p).Output()
	}
	cov := Check([]string{"kernel/signal.c", "include/linux/signal.h", "drivers/net/bonding/bond_main.c",
		"include/linux/netdevice.h", "Documentation/x.rst", "arch/powerpc/Kconfig", "kernel/old.c"}, rec, read,
		func(p string) bool { return p == "kernel/old.c" })
	got := map[string]File{}
	for _, c := range cov {
		got[c.Path] = c
	}
	for f, want := range map[string]string{"kernel/signal.c": Compiled, "include/linux/signal.h": Included,
		"drivers/net/bonding/bond_main.c": NotBuilt, "include/linux/netdevice.h": NotBuilt, "Documentation/x.rst": NoCode,
		"arch/powerpc/Kconfig": NoCode, "kernel/old.c": Deleted} {
		if got[f].Status != want {
			t.Errorf("%s: %s, want %s (%+v)", f, got[f].Status, want, got[f])
		}
	}
	b := got["drivers/net/bonding/bond_main.c"]
	if strings.Join(b.Symbols, " ") != "CONFIG_BONDING" || len(b.Why) < 2 || !strings.Contains(b.Why[0], "bonding-objs := bond_main.o") {
		t.Errorf("bond_main.c: %+v", b)
	}
	frag := string(Fragment(cov))
	if frag != "# builds drivers/net/bonding/bond_main.c\nCONFIG_BONDING=y\n" {
		t.Errorf("fragment:\n%s", frag)
	}
	t.Logf("%+v", b)
}
