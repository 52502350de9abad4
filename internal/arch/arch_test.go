package arch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
)

func TestSrcArch(t *testing.T) {
	for in, want := range map[string]string{"ppc64le": "powerpc", "x86_64": "x86", "arm64": "arm64", "aarch64": "arm64", "riscv": "riscv",
		"i386": "x86", "riscv64": "riscv", "ppc64": "powerpc", "sparc64": "sparc"} {
		if got := SrcArch(in); got != want {
			t.Errorf("SrcArch(%s) = %s", in, got)
		}
	}
}

// Every alias finds its architecture, names are unique across the table,
// and an unknown name is bad input that names the supported ones.
func TestLookup(t *testing.T) {
	seen := map[string]string{}
	for _, a := range All() {
		for _, n := range append([]string{a.Name}, a.Aliases...) {
			if other, dup := seen[n]; dup {
				t.Errorf("%q names both %s and %s", n, other, a.Name)
			}
			seen[n] = a.Name
			for _, spelling := range []string{n, strings.ToUpper(n), " " + n + "\n"} {
				got, err := Normalize(spelling)
				if err != nil || got != a.Name {
					t.Errorf("Normalize(%q) = %q, %v; want %s", spelling, got, err, a.Name)
				}
			}
		}
	}
	for in, want := range map[string]string{"powerpc": "ppc64le", "ppc64el": "ppc64le", "aarch64": "arm64", "amd64": "x86_64", "x86-64": "x86_64"} {
		if got, _ := Normalize(in); got != want {
			t.Errorf("Normalize(%s) = %s, want %s", in, got, want)
		}
	}
	_, err := Lookup("mips")
	if err == nil || fail.Code(err) != 2 || !strings.Contains(err.Error(), `"mips"`) || !strings.Contains(err.Error(), "ppc64le, arm64, x86_64") {
		t.Errorf("Lookup(mips): %v", err)
	}
}

// Every row is complete, and its boot fragment is shipped in build/configs.
func TestTableComplete(t *testing.T) {
	for _, a := range All() {
		if a.KArch == "" || a.SrcArch == "" || a.Cross == "" || a.CrossPkg == "" || len(a.Targets) == 0 || a.Image == "" ||
			a.BootConfig == "" || a.QEMU.Binary == "" || len(a.QEMU.Args) == 0 || a.QEMU.Console == "" || a.GoArch == "" || a.HostGoArch == "" {
			t.Errorf("%s: incomplete row %+v", a.Name, a)
		}
		if !strings.HasSuffix(a.CrossPkg, strings.TrimSuffix(strings.ReplaceAll(a.Cross, "_", "-"), "-")) {
			t.Errorf("%s: package %s does not provide %sgcc", a.Name, a.CrossPkg, a.Cross)
		}
		if _, err := os.Stat(filepath.Join("..", "..", "build", "configs", a.BootConfig+".config")); err != nil {
			t.Errorf("%s: boot config: %v", a.Name, err)
		}
		if b, ok := ByBootConfig(a.BootConfig); !ok || b.Name != a.Name {
			t.Errorf("ByBootConfig(%s) = %s", a.BootConfig, b.Name)
		}
	}
}

// GoArch takes patcheval's names, aliases and what uname -m prints.
func TestGoArch(t *testing.T) {
	for in, want := range map[string]string{"ppc64le": "ppc64le", "aarch64": "arm64", "arm64": "arm64", "x86_64": "amd64", "amd64": "amd64", "riscv64": "riscv64", "s390x": "s390x"} {
		if got, err := GoArch(in); err != nil || got != want {
			t.Errorf("GoArch(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := GoArch("mips"); err == nil {
		t.Error("GoArch(mips) succeeded")
	}
}
