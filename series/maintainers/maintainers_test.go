package maintainers

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series"
)

// perlTree is a directory holding the 6.1 tree's MAINTAINERS and
// scripts/get_maintainer.pl, every directory of the tree (the script
// decides from them which F: patterns are directories) and empty files
// for the paths asked about (-f wants them to exist).
type perlTree struct {
	dir string
	t   *testing.T
}

func newPerlTree(t *testing.T, tree string) *perlTree {
	t.Helper()
	if _, err := exec.LookPath("perl"); err != nil {
		t.Fatalf("perl is needed to run get_maintainer.pl: %v", err)
	}
	dir := t.TempDir()
	arch := exec.Command("sh", "-c", `git --git-dir="$1" archive "$2" MAINTAINERS scripts/get_maintainer.pl | tar -x -C "$3"`,
		"sh", tree, testenv.BaseCommit, dir)
	if out, err := arch.CombinedOutput(); err != nil {
		t.Fatalf("git archive: %v\n%s", err, out)
	}
	out, err := exec.Command("git", "--git-dir="+tree, "ls-tree", "-r", "-d", "--name-only", testenv.BaseCommit).Output()
	if err != nil {
		t.Fatalf("git ls-tree: %v", err)
	}
	for _, d := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &perlTree{dir, t}
}

// run is `get_maintainer.pl --no-git --no-git-fallback --no-tree
// --nomailmap args...` (roles on), one output line per address, with a
// fixed Perl hash seed.
func (p *perlTree) run(args ...string) []string {
	p.t.Helper()
	cmd := exec.Command("perl", append([]string{"scripts/get_maintainer.pl", "--no-git", "--no-git-fallback",
		"--no-tree", "--nomailmap"}, args...)...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "PERL_HASH_SEED=0", "PERL_PERTURB_KEYS=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		p.t.Fatalf("get_maintainer.pl %v: %v\n%s", args, err, stderr.String())
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// check compares got with the script's answer for args. The script puts
// sections that match at equal depth in Perl's hash order (ForFiles: the
// more literal pattern first); when tied says the files have such
// sections, the same addresses in another order or with the role of the
// other section are accepted.
func (p *perlTree) check(name string, got []string, tied bool, args ...string) bool {
	p.t.Helper()
	want := p.run(args...)
	if strings.Join(got, "\n") == strings.Join(want, "\n") {
		return true
	}
	if tied && strings.Join(addrs(got), "\n") == strings.Join(addrs(want), "\n") {
		p.t.Logf("%s: sections of equal depth ordered differently than get_maintainer.pl:\n got:\n  %s\n get_maintainer.pl:\n  %s",
			name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		return true
	}
	p.t.Errorf("%s:\n got:\n  %s\n want (get_maintainer.pl):\n  %s", name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	return false
}

func (p *perlTree) touch(path string) {
	p.t.Helper()
	full := filepath.Join(p.dir, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(full, nil, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// addrs are output lines without roles, sorted.
func addrs(lines []string) []string {
	var out []string
	for _, l := range lines {
		if i := strings.LastIndex(l, " ("); i >= 0 {
			l = l[:i]
		}
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

func lines(rs []Recipient) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.String())
	}
	return out
}

func loadTree(t *testing.T) (*File, string) {
	t.Helper()
	tree := testenv.LinuxTree(t)
	r, st, _, err := gittree.Open(tree, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := gittree.ResolveIn(r, testenv.BaseCommit)
	if err != nil {
		t.Fatal(err)
	}
	f, err := FromCommit(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range f.Warnings {
		t.Errorf("warning on the 6.1 MAINTAINERS: %s", w)
	}
	return f, tree
}

// TestForFilesMatchesGetMaintainer compares ForFiles with the 6.1 tree's
// own scripts/get_maintainer.pl on a table of paths: sections matched by
// F: at several depths, an X: exclusion, N: regexes, THE REST, moderated
// lists, supporters, and every 2000th file of the tree.
func TestForFilesMatchesGetMaintainer(t *testing.T) {
	f, tree := loadTree(t)
	pt := newPerlTree(t, tree)
	paths := []string{
		"arch/powerpc/kernel/interrupt.c",
		"arch/powerpc/Kconfig",
		"kernel/sched/core.c",
		"security/selinux/hooks.c",
		"drivers/net/ethernet/intel/e1000/e1000_main.c", // moderated list, two sections
		"drivers/char/random.c",                         // X: in CHAR and MISC DRIVERS
		"arch/x86/net/bpf_jit_comp32.c",                 // X: in BPF JIT for X86 64-BIT
		"drivers/clk/sunxi-ng/ccu-sun50i-h6.c",          // N: sun50i
		"arch/arm64/boot/dts/rockchip/rk3399.dtsi",      // N: rockchip, X: arch/arm64/boot/dts/
		"init/main.c",                                   // THE REST only
		"include/linux/sched.h",
		"mm/memory.c",
		"Documentation/admin-guide/kernel-parameters.txt",
		"kernel/rcu/tree.c",
	}
	out, err := exec.Command("git", "--git-dir="+tree, "ls-tree", "-r", "--name-only", testenv.BaseCommit).Output()
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := 0; i < len(all); i += 4000 {
		paths = append(paths, all[i])
	}
	for _, p := range paths {
		pt.touch(p)
		pt.check(p, lines(f.ForFiles([]string{p})), f.tied(p), "-f", p)
	}
	// The table's claims hold, so the table tests what it says.
	has := func(p, line string) {
		t.Helper()
		for _, l := range lines(f.ForFiles([]string{p})) {
			if strings.Contains(l, line) {
				return
			}
		}
		t.Errorf("%s: no %q", p, line)
	}
	hasNot := func(p, line string) {
		t.Helper()
		for _, l := range lines(f.ForFiles([]string{p})) {
			if strings.Contains(l, line) {
				t.Errorf("%s: %q", p, l)
			}
		}
	}
	has("drivers/char/char_dev.c", "CHAR and MISC DRIVERS")
	hasNot("drivers/char/random.c", "CHAR and MISC DRIVERS")
	has("drivers/clk/sunxi-ng/ccu-sun50i-h6.c", "ARM/Allwinner sunXi SoC support")
	has("drivers/net/ethernet/intel/e1000/e1000_main.c", "moderated list:INTEL ETHERNET DRIVERS")
	has("init/main.c", "linux-kernel@vger.kernel.org (open list)")
	has("arch/x86/net/bpf_jit_comp32.c", "bpf@vger.kernel.org (open list:BPF JIT for X86 32-BIT)")
	has("sound/soc/samsung/smdk_wm8994.c", "(supporter:SOUND - SOC LAYER / DYNAMIC AUDIO POWER MANAGEM...)")
}

// TestForPatchMatchesGetMaintainer runs a real series' patches and
// hand-made ones whose text matches K: keywords (in the commit message,
// in added lines, and one only in context lines, which must not count)
// through ForPatch and get_maintainer.pl.
func TestForPatchMatchesGetMaintainer(t *testing.T) {
	f, tree := loadTree(t)
	pt := newPerlTree(t, tree)
	patches := map[string]string{
		"keyword-in-message": "From: A <a@example.org>\nSubject: [PATCH] x: use clone3\n\nThis touches clone3 and riscv.\n---\n" +
			"diff --git a/init/main.c b/init/main.c\n--- a/init/main.c\n+++ b/init/main.c\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n d\n",
		"keyword-in-diff": "Subject: [PATCH] y\n\nNothing.\n---\n" +
			"diff --git a/init/main.c b/init/main.c\n--- a/init/main.c\n+++ b/init/main.c\n@@ -1,3 +1,3 @@\n a\n-b\n+\treturn pidfd_create(p);\n d\n",
		"keyword-in-context": "Subject: [PATCH] z\n\nNothing.\n---\n" +
			"diff --git a/init/main.c b/init/main.c\n--- a/init/main.c\n+++ b/init/main.c\n@@ -1,3 +1,3 @@\n landlock\n-b\n+c\n d\n",
		"rename": "Subject: [PATCH] r\n\n---\ndiff --git a/kernel/sched/core.c b/security/selinux/core.c\nsimilarity index 100%\n" +
			"rename from kernel/sched/core.c\nrename to security/selinux/core.c\n",
	}
	data, err := os.ReadFile(testenv.BackportMbox())
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := mbox.ParseBytes(data, "backport")
	if err != nil {
		t.Fatal(err)
	}
	s, err := series.Resolve(mbox.NewThread(msgs, "backport"), series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range s.Patches {
		patches["backport-"+string(rune('1'+i))] = string(p.Msg.Raw)
	}
	for name, text := range patches {
		file := filepath.Join(pt.dir, name+".patch")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		rs, info := f.ForPatch([]byte(text))
		tied := len(info.Keywords) > 0
		for _, file := range info.Files {
			tied = tied || f.tied(file)
		}
		pt.check(fmt.Sprintf("%s (files %v, keyword sections %v)", name, info.Files, info.Keywords), lines(rs), tied, name+".patch")
		switch name {
		case "keyword-in-message", "keyword-in-diff":
			if len(info.Keywords) == 0 {
				t.Errorf("%s: no keyword section matched", name)
			}
		case "keyword-in-context":
			if len(info.Keywords) != 0 {
				t.Errorf("%s: a context line matched %v", name, info.Keywords)
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	_, err := Parse(strings.NewReader("Some text\n\nmore text\n"), "EMPTY", nil)
	if err == nil || !strings.Contains(err.Error(), "EMPTY: no MAINTAINERS sections") {
		t.Errorf("a file without entries: %v", err)
	}
	f, err := Parse(strings.NewReader("FOO\nM:\tA <a@example.org>\nK:\t(?<=x)y\nF:\tfoo/\n"), "M", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Warnings) != 1 || !strings.Contains(f.Warnings[0], "M:3: K:") {
		t.Errorf("warnings %q: want one naming M:3's K: entry", f.Warnings)
	}
	if got := lines(f.ForFiles([]string{"foo/bar.c"})); len(got) != 1 || got[0] != "A <a@example.org> (unknown:FOO)" {
		t.Errorf("ForFiles = %q", got)
	}
}

func TestExtended(t *testing.T) {
	for in, want := range map[string]string{
		`struct\s+phylink`: `struct\s+phylink`,
		`a b # comment`:    `ab`,
		`[ ]x\ y`:          `[ ]x\ y`,
		`[]a ]b`:           `[]a ]b`,
	} {
		if got := extended(in); got != want {
			t.Errorf("extended(%q) = %q, want %q", in, got, want)
		}
	}
}
