package kconfig

// The reader against every kernel release patcheval builds: Debian's 6.1
// (linuxTree) and the releases of testenv.LinuxRelease (7.2.13 in the
// default suite; 6.12.117 and 7.3.4 with PATCHEVAL_LONG_TESTS=1). Each
// release's Kconfig must parse for every SRCARCH patcheval builds (and
// riscv), and the reader's evaluation must agree, symbol by symbol, with
// the final .config the kernel's own scripts/kconfig makes for each boot
// config of build/configs (tinyconfig, the fragment, olddefconfig).

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/testenv"
)

// defaultReleases run in the default suite; longReleases only with
// PATCHEVAL_LONG_TESTS=1 (each is one more Debian package to import).
var (
	defaultReleases = []string{"6.1", "7.2.13"}
	longReleases    = []string{"6.12.117", "7.3.4"}
)

func releasesUnderTest() []string {
	if testenv.LongTests() {
		return append(append([]string{}, defaultReleases...), longReleases...)
	}
	return defaultReleases
}

var (
	relMu   sync.Mutex
	relDirs = map[string]string{}
)

// releaseTree is the extracted Kconfig part (extractPatterns) of a
// release: linuxTree for 6.1, else testenv.LinuxRelease's tag
// "v"+version written out with git archive, once, into the cache.
func releaseTree(t testing.TB, version string) string {
	t.Helper()
	if version == "6.1" {
		return linuxTree(t)
	}
	repo := testenv.LinuxRelease(t, version)
	relMu.Lock()
	defer relMu.Unlock()
	if d, ok := relDirs[version]; ok {
		return d
	}
	tag := "v" + version
	dir, err := cached("linux-"+version+"-kconfig-test-v1", func(dir string) error {
		archive := exec.Command("git", "--git-dir", repo, "archive", "--prefix=linux/", tag)
		extract := exec.Command("tar", append([]string{"-x", "-C", dir, "--strip-components=1", "--wildcards"}, extractPatterns...)...)
		pipe, err := archive.StdoutPipe()
		if err != nil {
			return err
		}
		extract.Stdin = pipe
		var aerr, xerr strings.Builder
		archive.Stderr, extract.Stderr = &aerr, &xerr
		if err := archive.Start(); err != nil {
			return err
		}
		if err := extract.Run(); err != nil {
			archive.Process.Kill()
			archive.Wait()
			return fmt.Errorf("tar -x of git archive %s: %v\n%s", tag, err, xerr.String())
		}
		if err := archive.Wait(); err != nil {
			return fmt.Errorf("git archive %s in %s: %v\n%s", tag, repo, err, aerr.String())
		}
		if _, err := os.Stat(filepath.Join(dir, "arch/powerpc/Kconfig")); err != nil {
			return fmt.Errorf("git archive %s extracted no arch/powerpc/Kconfig: %v", tag, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("release %s: %v", version, err)
	}
	relDirs[version] = dir
	return dir
}

// TestParseReleases: every Kconfig file that the arches patcheval builds
// (and riscv) read parses, in every release; files read by no
// architecture are parsed on their own, except the kernel's documentation
// examples and its kconfig self-tests of errors.
func TestParseReleases(t *testing.T) {
	for _, v := range releasesUnderTest() {
		tree := releaseTree(t, v)
		read := map[string]bool{}
		for _, a := range []string{"powerpc", "arm64", "x86", "riscv"} {
			kc, err := Parse(tree, a)
			if err != nil {
				t.Errorf("%s %s: %v", v, a, err)
				continue
			}
			if len(kc.Files) < 1000 || len(kc.Symbols) < 10000 {
				t.Errorf("%s %s: only %d files, %d symbols", v, a, len(kc.Files), len(kc.Symbols))
			}
			for _, f := range kc.Files {
				read[f] = true
			}
			t.Logf("%s %s: %d files, %d lines, %d symbols", v, a, len(kc.Files), kc.Lines, len(kc.Symbols))
		}
		var alone []string
		fs.WalkDir(os.DirFS(tree), ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), "Kconfig") || read[p] || notKconfig(p) {
				return nil
			}
			alone = append(alone, p)
			return nil
		})
		sort.Strings(alone)
		for _, f := range alone {
			if err := parseAlone(tree, f); err != nil {
				t.Errorf("%s: %s on its own: %v", v, f, err)
			}
		}
		t.Logf("%s: %d Kconfig files read by the four arches, %d more parsed on their own", v, len(read), len(alone))
	}
}

// notKconfig: files named Kconfig* that are not meant to parse: the
// documentation's examples, the kconfig self-tests of errors (one of
// which, circular_expansion, has no err_ prefix) and rvgen's Python
// templates.
func notKconfig(p string) bool {
	return strings.HasPrefix(p, "Documentation/") || strings.Contains(p, "/tests/err_") ||
		strings.HasSuffix(p, "/tests/preprocess/circular_expansion/Kconfig") ||
		strings.HasPrefix(p, "tools/verification/rvgen/rvgen/templates/")
}

// parseAlone parses one Kconfig file of tree as the top file (what it
// sources is read from the tree). Files of other arches are parsed with
// their SRCARCH.
func parseAlone(tree, file string) error {
	srcArch := "powerpc"
	if rest, ok := strings.CutPrefix(file, "arch/"); ok {
		srcArch, _, _ = strings.Cut(rest, "/")
	}
	data, err := os.ReadFile(filepath.Join(tree, file))
	if err != nil {
		return err
	}
	_, err = ParseFS(topFS{os.DirFS(tree), data}, srcArch)
	return err
}

// topFS is a tree whose top Kconfig is replaced by one file's text.
type topFS struct {
	fs.FS
	top []byte
}

func (f topFS) ReadFile(name string) ([]byte, error) {
	if name == "Kconfig" {
		return f.top, nil
	}
	return fs.ReadFile(f.FS, name)
}

// TestReleaseConfigsAgree runs the kernel's own tinyconfig + boot
// fragment + olddefconfig for each boot config of build/configs on each
// release, and checks every symbol of the result against the parsed
// Kconfig: each hidden bool/tristate has the value its defaults, depends
// and selects give, no symbol is on with its dependencies unmet unless a
// select forces it, none is below an active select, and each choice has at
// most one member y.
func TestReleaseConfigsAgree(t *testing.T) {
	for _, v := range releasesUnderTest() {
		tree := releaseTree(t, v)
		for _, a := range arch.All() {
			name := a.BootConfig
			path, err := filepath.Abs(filepath.Join("..", "configs", name+".config"))
			if err != nil {
				t.Fatal(err)
			}
			frag, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			kc := treeKconfig(t, tree, a.KArch)
			final := finalConfigArch(t, tree, a.KArch, a.Cross, path)
			checked, bad := agreement(t, kc, final, v+" "+name)
			t.Logf("%s %s: %d symbols in the final config, %d hidden symbols predicted, %d disagreements; boot fragment: %v",
				v, name, len(final), checked, bad, Verify(kc, final, mustParse(t, frag)))
			if checked < 1500 {
				t.Errorf("%s %s: only %d hidden symbols predicted", v, name, checked)
			}
		}
	}
}

func mustParse(t testing.TB, b []byte) Config {
	t.Helper()
	c, err := ParseConfig(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// agreement compares the parsed Kconfig's evaluation with a final config
// the kernel made: see TestReleaseConfigsAgree. It returns how many
// hidden symbols it predicted and how many checks failed.
func agreement(t testing.TB, kc *Kconfig, final Config, what string) (checked, bad int) {
	t.Helper()
	report := func(format string, a ...any) {
		bad++
		if bad <= 20 {
			t.Errorf("%s: "+format, append([]any{what}, a...)...)
		}
	}
	for name, s := range kc.Symbols {
		if !s.Defined() || (s.Type != TypeBool && s.Type != TypeTristate) {
			continue
		}
		got := final.Tristate(name)
		if !s.HasPrompt() && s.Choice == nil {
			if want, ok := predictHidden(kc, s, final); ok {
				checked++
				if got != want {
					report("%s is %s in the real config, the parsed Kconfig gives %s", name, got, want)
				}
			}
		}
		// Never below an active select.
		for _, p := range s.SelectedBy {
			if hasMacro(p.Cond) {
				continue
			}
			if sel := kc.Eval(And(Sym(p.Owner), p.Cond), final); got < sel && !(s.Type == TypeBool && sel == Mod && got == Yes) {
				report("%s is %s but %s selects it (%s = %s) [%s]", name, got, p.Owner, p.Owner, final.Value(p.Owner), p.Pos)
			}
		}
	}
	// Every symbol that is on has its dependencies met or is selected.
	for name, v := range final {
		s := kc.Symbols[name]
		if v == "n" || !s.Defined() || kc.depValue(s, final) > No {
			continue
		}
		macro := false
		for _, d := range s.Defs {
			macro = macro || hasMacro(depsExpr(d))
		}
		selected := false
		for _, p := range s.SelectedBy {
			selected = selected || kc.Eval(And(Sym(p.Owner), p.Cond), final) > No || hasMacro(p.Cond)
		}
		if !macro && !selected {
			report("CONFIG_%s=%s but its parsed dependencies are n and nothing selects it", name, v)
		}
	}
	for _, c := range kc.Choices {
		var on []string
		for _, m := range c.Members {
			if final[m.Name] == "y" {
				on = append(on, m.Name)
			}
		}
		if len(on) > 1 {
			report("choice %s has %d members y: %v", c.Pos, len(on), on)
		}
	}
	return checked, bad
}

// TestRefusal72: on 7.2 a ppc64le request for PREEMPT_VOLUNTARY (the boot
// config's, as on 6.1) is refused with the rule that blocks it and the
// line that sets the blocker.
func TestRefusal72(t *testing.T) {
	tree := releaseTree(t, "7.2.13")
	path, err := filepath.Abs(filepath.Join("..", "configs", "ppc64le-pseries.config"))
	if err != nil {
		t.Fatal(err)
	}
	kc := treeKconfig(t, tree, "powerpc")
	final := finalConfigArch(t, tree, "powerpc", "powerpc64le-linux-gnu-", path)
	probs := Verify(kc, final, map[string]string{"PREEMPT_VOLUNTARY": "y"})
	want := "PREEMPT_VOLUNTARY depends on !ARCH_HAS_PREEMPT_LAZY (ARCH_HAS_PREEMPT_LAZY = y) [kernel/Kconfig.preempt:40]; " +
		"ARCH_HAS_PREEMPT_LAZY is y because it is selected by PPC (= y) [arch/powerpc/Kconfig:149: select ARCH_HAS_PREEMPT_LAZY]"
	if len(probs) != 1 || probs[0].Kind != "depends" || probs[0].Reason != want {
		t.Fatalf("problems %v, want one: %s", probs, want)
	}
	// The choice's default on 7.2 is PREEMPT_LAZY, and without
	// PREEMPT_DYNAMIC that keeps RCU non-preemptible.
	if final["PREEMPT_LAZY"] != "y" || final.Value("PREEMPT_DYNAMIC") != "n" || final.Value("PREEMPT_RCU") != "n" {
		t.Errorf("7.2 ppc64le boot config: PREEMPT_LAZY=%s PREEMPT_DYNAMIC=%s PREEMPT_RCU=%s, want y n n",
			final.Value("PREEMPT_LAZY"), final.Value("PREEMPT_DYNAMIC"), final.Value("PREEMPT_RCU"))
	}
}
