package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A DEBUG_INFO_BTF request refused because Kconfig found no pahole says
// so: PAHOLE_VERSION is 0 because the tool is missing, not because of
// another symbol.
func TestExplainMissingPahole(t *testing.T) {
	src := t.TempDir()
	kconfigText := `config PAHOLE_VERSION
	int
	default 0

config BPF_SYSCALL
	bool "bpf"
	default y

config DEBUG_INFO_BTF
	bool "Generate BTF type information"
	depends on BPF_SYSCALL
	depends on PAHOLE_VERSION >= 122
`
	if err := os.WriteFile(filepath.Join(src, "Kconfig"), []byte(kconfigText), 0o644); err != nil {
		t.Fatal(err)
	}
	final := []byte("CONFIG_PAHOLE_VERSION=0\nCONFIG_BPF_SYSCALL=y\n")
	probs := []ConfigProblem{{Symbol: "DEBUG_INFO_BTF", Requested: "y", Kind: "dropped"}}
	explainProblems(src, "powerpc", final, map[string]string{"DEBUG_INFO_BTF": "y"}, probs)
	why := probs[0].Why
	for _, want := range []string{"PAHOLE_VERSION >= 122", "PAHOLE_VERSION is 0: pahole is not installed on this machine (Debian's dwarves package"} {
		if !strings.Contains(why, want) {
			t.Errorf("why lacks %q:\n%s", want, why)
		}
	}
	// With pahole found, no such hint.
	probs = []ConfigProblem{{Symbol: "DEBUG_INFO_BTF", Requested: "y", Kind: "dropped"}}
	explainProblems(src, "powerpc", []byte("CONFIG_PAHOLE_VERSION=121\nCONFIG_BPF_SYSCALL=y\n"), map[string]string{"DEBUG_INFO_BTF": "y"}, probs)
	if strings.Contains(probs[0].Why, "not installed") {
		t.Errorf("pahole 1.21 called missing:\n%s", probs[0].Why)
	}
}
