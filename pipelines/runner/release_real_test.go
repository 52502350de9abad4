package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines"
)

// releasePipeline is the preemption seed across releases on ppc64le, as
// the shipped ppc pipelines configure it (tinyconfig and the pseries
// boot fragment, whose PREEMPT_VOLUNTARY=y is 6.x's model): one config
// intent on v6.12.117 and v7.2.13, then full preemption on v7.2.13.
const releasePipeline = `name = "release-ab"
[series]
apply = false
[build]
arch = "ppc64le"
config = "tinyconfig"
fragments = ["ppc64le-pseries"]

[[variant]]
name = "6.12"
ref = "v6.12.117"
symbols = { PREEMPT_DYNAMIC = "n" }

[[variant]]
name = "7.2"
ref = "v7.2.13"
symbols = { PREEMPT_DYNAMIC = "n" }

[[variant]]
name = "7.2-full"
ref = "v7.2.13"
symbols = { PREEMPT = "y", PREEMPT_DYNAMIC = "n" }

[[comparison]]
base = "6.12"
other = "7.2"

[[comparison]]
base = "7.2"
other = "7.2-full"

[[chain]]
variants = ["6.12", "7.2", "7.2-full"]

[[benchmark]]
name = "kill"
`

// TestReleaseConfoundReal runs the confound report across releases on
// Debian's real 6.12.117 and 7.2.13 trees (configured with olddefconfig,
// nothing compiled) through the report's own confounds: 6.12 -> 7.2 with
// one config intent is made of release-rule changes (nothing requested):
// voluntary preemption gone by v7.2.13's kernel/Kconfig.preempt:40, the
// /proc/pid/mem choice's default changed with its line in each release;
// the comparison carries the note that the code between the releases is
// not attributable to one patch. 7.2 -> 7.2 full on one tree has a
// requested PREEMPT and derived changes (PREEMPT_RCU by
// kernel/rcu/Kconfig:21), no release rule and no such note. Every
// release rule's file:line is read back from its release's tag.
// PATCHEVAL_RELEASE_CONFOUND_OUT=FILE writes the rendered report there.
func TestReleaseConfoundReal(t *testing.T) {
	testenv.SkipUnlessLong(t, "imports Debian's 6.12.117 beside 7.2.13 and configures three ppc64le kernels (no compile)")
	buildtest.SkipIfSlow(t)
	repo := testenv.LinuxRelease(t, "6.12.117")
	testenv.LinuxRelease(t, "7.2.13")
	p, err := pipelines.Parse([]byte(releasePipeline), "release-ab.toml")
	if err != nil {
		t.Fatal(err)
	}
	specOf := map[string]pipelines.BuildSpec{}
	byKey := map[string]*build.Artifact{}
	for _, s := range p.Builds() {
		byKey[s.Key] = configureSpec(t, repo, p.Name, s)
		for _, v := range s.Variants {
			specOf[v] = s
		}
	}
	cfs, notes, err := confounds(p, repo, specOf, byKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfs) != 2 || cfs[0].Base != "6.12" || cfs[1].Other != "7.2-full" {
		t.Fatalf("confounds %+v, want 6.12 -> 7.2 and 7.2 -> 7.2-full", cfs)
	}
	checkAcrossReleases(t, cfs[0])
	checkOneRelease(t, cfs[1])
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "6.12 -> 7.2 compares two releases (v6.12.117 vs v7.2.13): the code changed between them is not attributable to one patch") {
		t.Errorf("notes %q, want one: 6.12 -> 7.2's code is not attributable to one patch", notes)
	}
	checked := checkRuleLines(t, repo, cfs[0])
	t.Logf("%d release rules read back at their file:line", checked)
	if checked < 10 {
		t.Errorf("only %d release rules with a release's file:line", checked)
	}
	r := &report.Report{Title: "release-ab", Arch: "ppc64le", Confounds: cfs, Notes: notes}
	var out bytes.Buffer
	if err := report.WriteTextWith(&out, r, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(out.String()), " ") // the notes are wrapped
	for _, want := range []string{"6.12 -> 7.2: 64 changed by the release's Kconfig rules", "7.2 -> 7.2-full: 1 requested, 2 derived",
		"Note: 6.12 -> 7.2 compares two releases (v6.12.117 vs v7.2.13): the code changed between them is not attributable to one patch"} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered report lacks %q", want)
		}
	}
	t.Logf("\n%s", out.String())
	if f := os.Getenv("PATCHEVAL_RELEASE_CONFOUND_OUT"); f != "" {
		writeConfounds(t, f, cfs, out.Bytes())
	}
}

// checkAcrossReleases: 6.12 -> 7.2 with one config intent.
func checkAcrossReleases(t *testing.T, cf report.Confound) {
	t.Helper()
	kinds := kindsOf(cf)
	t.Logf("6.12 -> 7.2: %v", kinds)
	if kinds[report.KindRequested] != 0 || kinds[report.KindDerived] != 0 || kinds[report.KindRelease] < 10 {
		t.Errorf("6.12 -> 7.2 (one intent): %v, want release-rule changes, nothing requested, nothing derived on the same rules", kinds)
	}
	want := map[string][]string{
		// Voluntary preemption is gone where the arch has lazy.
		"PREEMPT_VOLUNTARY": {"y", "n", "v7.2.13 kernel/Kconfig.preempt:40: depends on !ARCH_HAS_PREEMPT_LAZY (line added)"},
		"PREEMPT_LAZY":      {"n", "y", "v7.2.13 kernel/Kconfig.preempt:78: config PREEMPT_LAZY (line added)"},
		// A choice's default changed: its line in each release.
		"PROC_MEM_FORCE_PTRACE": {"n", "y", "v7.2.13 security/Kconfig:24: default PROC_MEM_FORCE_PTRACE (line added)",
			"v6.12.117 security/Kconfig:24: default PROC_MEM_ALWAYS_FORCE (line removed)"},
		// A symbol 7.2 no longer has, placed in 6.12.
		"SCHED_DEBUG": {"y", "n", "v6.12.117 lib/Kconfig.debug:1303: config SCHED_DEBUG (line removed)"},
	}
	for sym, w := range want {
		d := deltaOf(cf, sym)
		if d == nil {
			t.Errorf("6.12 -> 7.2: no %s", sym)
			continue
		}
		rules := strings.Join(d.ReleaseRules, "\n")
		if d.From != w[0] || d.To != w[1] || d.Kind() != report.KindRelease || d.Where == ":0" {
			t.Errorf("%s: %s -> %s [%s] at %q, want %s -> %s by a release rule", sym, d.From, d.To, d.Kind(), d.Where, w[0], w[1])
		}
		for _, line := range w[2:] {
			if !strings.Contains(rules, line) {
				t.Errorf("%s's release rules %q lack %q", sym, d.ReleaseRules, line)
			}
		}
	}
	// Derived from a symbol whose rule the release changed.
	if d := deltaOf(cf, "PREEMPTION"); d == nil || d.Kind() != report.KindRelease || strings.Join(d.Via, " > ") != "PREEMPT_BUILD" {
		t.Errorf("PREEMPTION: %+v, want y via PREEMPT_BUILD, whose rule the release changed", d)
	}
}

// checkOneRelease: 7.2 -> 7.2 full on one tree.
func checkOneRelease(t *testing.T, cf report.Confound) {
	t.Helper()
	kinds := kindsOf(cf)
	t.Logf("7.2 -> 7.2-full: %v", kinds)
	if kinds[report.KindRelease] != 0 || kinds[report.KindRequested] != 1 || kinds[report.KindDerived] == 0 {
		t.Errorf("7.2 -> 7.2-full (one tree): %v, want PREEMPT requested, derived changes, no release rule", kinds)
	}
	if d := deltaOf(cf, "PREEMPT"); d == nil || d.Kind() != report.KindRequested || d.To != "y" {
		t.Errorf("PREEMPT: %+v, want requested n -> y", d)
	}
	if d := deltaOf(cf, "PREEMPT_RCU"); d == nil || d.Kind() != report.KindDerived || d.Where != "kernel/rcu/Kconfig:21" ||
		!strings.HasPrefix(d.Rule, "default y if (PREEMPT || PREEMPT_RT || PREEMPT_DYNAMIC)") {
		t.Errorf("PREEMPT_RCU: %+v, want derived by v7.2.13's kernel/rcu/Kconfig:21", d)
	}
}

func kindsOf(cf report.Confound) map[string]int {
	kinds := map[string]int{}
	for _, d := range cf.Deltas {
		kinds[d.Kind()]++
	}
	return kinds
}

var releaseRuleRE = regexp.MustCompile(`^(v\S+) (\S+):(\d+): (?:[A-Z0-9_]+: )?(.*) \(line (?:added|removed)\)$`)

// checkRuleLines reads every release rule of cf ("v7.2.13 file:line:
// text (line added)") back from its release's tag: the line must be
// there. It returns how many it checked.
func checkRuleLines(t *testing.T, repo string, cf report.Confound) int {
	t.Helper()
	files := map[string][]string{}
	n := 0
	for _, d := range cf.Deltas {
		for _, rule := range d.ReleaseRules {
			m := releaseRuleRE.FindStringSubmatch(rule)
			if m == nil {
				continue
			}
			key := m[1] + ":" + m[2]
			if _, ok := files[key]; !ok {
				out, err := exec.Command("git", "--git-dir", repo, "show", key).Output()
				if err != nil {
					t.Fatalf("git show %s: %v", key, err)
				}
				files[key] = strings.Split(string(out), "\n")
			}
			line, _ := strconv.Atoi(m[3])
			if line < 1 || line > len(files[key]) {
				t.Errorf("%s: %s has %d lines", rule, key, len(files[key]))
				continue
			}
			src := strings.TrimPrefix(strings.TrimSpace(files[key][line-1]), "menu")
			if src != m[4] {
				t.Errorf("%s: %s line %d is %q", rule, key, line, src)
			}
			n++
		}
	}
	return n
}

func writeConfounds(t *testing.T, file string, cfs []report.Confound, rendered []byte) {
	t.Helper()
	var all bytes.Buffer
	for _, cf := range cfs {
		fmt.Fprintf(&all, "%s -> %s\n", cf.Base, cf.Other)
		for _, d := range cf.Deltas {
			fmt.Fprintf(&all, "  %-28s %s -> %s  [%s] %s %s %s\n", d.Symbol, d.From, d.To, d.Kind(), d.Where, d.Rule, strings.Join(d.ReleaseRules, "; "))
		}
	}
	all.WriteString("\n")
	all.Write(rendered)
	if err := os.WriteFile(file, all.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func deltaOf(cf report.Confound, sym string) *report.ConfigDelta {
	for i := range cf.Deltas {
		if cf.Deltas[i].Symbol == sym {
			return &cf.Deltas[i]
		}
	}
	return nil
}

// configureSpec configures s on its ref of repo (olddefconfig, no
// compile) as the build stage would.
func configureSpec(t *testing.T, repo, pipeline string, s pipelines.BuildSpec) *build.Artifact {
	t.Helper()
	archOf := map[string]string{}
	for _, a := range arch.All() {
		archOf[a.BootConfig] = a.Name
	}
	req := build.Request{Repo: repo, Commit: s.Ref, Arch: s.Arch, BaseConfig: s.BaseConfig,
		Symbols: s.Symbols, Variant: pipeline + "-" + s.Variant}
	for _, f := range s.Fragments {
		path := f.Path
		if f.Name != "" {
			var err error
			if path, err = build.WriteBootConfig(archOf[f.Name], filepath.Join(xdg.CacheDir(), "boot-configs")); err != nil {
				t.Fatal(err)
			}
		}
		req.Fragments = append(req.Fragments, path)
	}
	opts := buildtest.Options(t)
	opts.ConfigOnly = true
	a, err := build.Build(context.Background(), req, opts)
	if err != nil {
		t.Fatalf("%s on %s does not configure: %v", s.Variant, s.Ref, err)
	}
	return a
}
