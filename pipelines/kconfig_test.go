package pipelines

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
)

// Every kernel a shipped pipeline asks for, configured (olddefconfig, no
// compile) on each Debian release patcheval supports, resolves as the
// pipeline intends there: the requested symbols hold and the symbols
// that carry the variant's meaning (the preemption model, PREEMPT_RCU)
// have the values of intents, or the variant is refused before compiling
// with the Kconfig rule that blocks it. 6.1 is Debian's 6.1 tree (the
// variants that apply the series get the v6.1 backport of "powerpc:
// enable dynamic preemption"); the later releases are imported by
// testenv.LinuxRelease and configured without the series (it does not
// apply to 6.12 as posted and is merged in 7.x).
//
// The default suite configures 6.1 and 7.2.13; PATCHEVAL_LONG_TESTS=1
// adds 6.12.117 and 7.3.4.
var (
	configReleases     = []string{"6.1", "7.2.13"}
	configReleasesLong = []string{"6.12.117", "7.3.4"}
)

// intent is what one variant's kernel is on one release: refused (a
// substring of the refusal; "" when it configures) or the final values
// that carry its meaning.
type intent struct {
	refused string
	holds   map[string]string
}

// Refusals, as the build explains them from the release's Kconfig.
const (
	noVoluntary = "PREEMPT_VOLUNTARY depends on !ARCH_HAS_PREEMPT_LAZY (ARCH_HAS_PREEMPT_LAZY = y) [kernel/Kconfig.preempt:40]"
	noLazy      = "CONFIG_PREEMPT_LAZY=y: missing"
	noDynamic   = "PREEMPT_DYNAMIC depends on HAVE_PREEMPT_DYNAMIC"
)

func holds(kv ...string) intent {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return intent{holds: m}
}

// intents[pipeline][release][variant]. A pipeline or release missing here
// fails the test: a new shipped pipeline says what it is on each release.
var intents = map[string]map[string]map[string]intent{
	"ppc-preempt-dynamic": {
		"6.1": {"voluntary": holds("PREEMPT_VOLUNTARY", "y", "PREEMPT_RCU", "n"),
			"voluntary+dyn": holds("PREEMPT_VOLUNTARY", "y", "PREEMPT_RCU", "y"),
			"full":          holds("PREEMPT", "y", "PREEMPT_RCU", "y")},
		// powerpc has no PREEMPT_DYNAMIC before the series (merged in 6.16).
		"6.12.117": {"voluntary": holds("PREEMPT_VOLUNTARY", "y", "PREEMPT_RCU", "n"),
			"voluntary+dyn": {refused: noDynamic},
			"full":          holds("PREEMPT", "y", "PREEMPT_RCU", "y")},
		// PREEMPT_VOLUNTARY is gone on powerpc: ppc-preempt-lazy is the 7.x experiment.
		"7.2.13": {"voluntary": {refused: noVoluntary}, "voluntary+dyn": {refused: noVoluntary},
			"full": holds("PREEMPT", "y", "PREEMPT_RCU", "y")},
		"7.3.4": {"voluntary": {refused: noVoluntary}, "voluntary+dyn": {refused: noVoluntary},
			"full": holds("PREEMPT", "y", "PREEMPT_RCU", "y")},
	},
	"ppc-preempt-lazy": {
		"6.1":      {"lazy": {refused: noLazy}, "lazy+dyn": {refused: noLazy}, "full": holds("PREEMPT", "y", "PREEMPT_RCU", "y")},
		"6.12.117": {"lazy": {refused: noLazy}, "lazy+dyn": {refused: noLazy}, "full": holds("PREEMPT", "y", "PREEMPT_RCU", "y")},
		"7.2.13":   lazyIntent,
		"7.3.4":    lazyIntent,
	},
	// Its variants are pinned to their releases (ref): each is configured
	// on its own release only.
	"ppc-preempt-releases": {
		"6.12.117": {"6.12": holds("PREEMPT_VOLUNTARY", "y", "PREEMPT_DYNAMIC", "n", "PREEMPT_RCU", "n")},
		"7.2.13": {"7.2": holds("PREEMPT_LAZY", "y", "PREEMPT_DYNAMIC", "n", "PREEMPT_RCU", "n"),
			"7.2-lazy+dyn": holds("PREEMPT_LAZY", "y", "PREEMPT_DYNAMIC", "y", "PREEMPT_RCU", "y"),
			"7.2-full":     holds("PREEMPT", "y", "PREEMPT_RCU", "y")},
	},
	"arm64-kill": {
		"6.1":      volArm64,
		"6.12.117": volArm64,
		// arm64 selects ARCH_HAS_PREEMPT_LAZY on 7.x: the fragment's
		// PREEMPT_VOLUNTARY does not hold (a warning) and the model is
		// lazy; the contrast the pipeline measures, PREEMPT_RCU n vs y,
		// holds.
		"7.2.13": lazyArm64,
		"7.3.4":  lazyArm64,
	},
	"bridge-loop": sameOnAll(map[string]intent{"base": holds("BRIDGE", "y")}),
	"rcu-gp-qs": sameOnAll(map[string]intent{"base": holds("MEMBARRIER", "y", "HZ_1000", "y"),
		"patched": holds("MEMBARRIER", "y", "HZ_1000", "y")}),
	"rcu-sync-latency": sameOnAll(map[string]intent{"base": holds("MEMBARRIER", "y", "HZ_1000", "y")}),
	"selinux-tax":      sameOnAll(map[string]intent{"disabled": holds("SECURITY_SELINUX", "y", "SECURITY_SELINUX_BOOTPARAM", "y")}),
}

var (
	lazyIntent = map[string]intent{
		"lazy":     holds("PREEMPT_LAZY", "y", "PREEMPT_DYNAMIC", "n", "PREEMPT_RCU", "n"),
		"lazy+dyn": holds("PREEMPT_LAZY", "y", "PREEMPT_DYNAMIC", "y", "PREEMPT_RCU", "y"),
		"full":     holds("PREEMPT", "y", "PREEMPT_RCU", "y"),
	}
	volArm64 = map[string]intent{
		"vol-nodynamic": holds("PREEMPT_VOLUNTARY", "y", "PREEMPT_DYNAMIC", "n", "PREEMPT_RCU", "n"),
		"vol-dynamic":   holds("PREEMPT_VOLUNTARY", "y", "PREEMPT_DYNAMIC", "y", "PREEMPT_RCU", "y"),
	}
	lazyArm64 = map[string]intent{
		"vol-nodynamic": holds("PREEMPT_LAZY", "y", "PREEMPT_DYNAMIC", "n", "PREEMPT_RCU", "n"),
		"vol-dynamic":   holds("PREEMPT_LAZY", "y", "PREEMPT_DYNAMIC", "y", "PREEMPT_RCU", "y"),
	}
)

func sameOnAll(m map[string]intent) map[string]map[string]intent {
	out := map[string]map[string]intent{}
	for _, r := range append(append([]string{}, configReleases...), configReleasesLong...) {
		out[r] = m
	}
	return out
}

func TestShippedPipelinesConfigure(t *testing.T) {
	buildtest.SkipIfSlow(t)
	releases := configReleases
	if testenv.LongTests() {
		releases = append(append([]string{}, configReleases...), configReleasesLong...)
	}
	for _, rel := range releases {
		for _, name := range List() {
			p, err := Builtin(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, spec := range p.Builds() {
				if spec.Ref != "" && spec.Ref != "v"+rel {
					continue // pinned to another release
				}
				t.Run(rel+"/"+name+"/"+spec.Variant, func(t *testing.T) {
					want, ok := intents[name][rel][spec.Variant]
					if !ok {
						t.Fatalf("intents has no entry for %s variant %s on %s: say what it is there", name, spec.Variant, rel)
					}
					configureAndCheck(t, p, rel, spec, want)
				})
			}
		}
	}
}

// configureAndCheck configures spec of p on release rel (config only)
// and checks the outcome against want.
func configureAndCheck(t *testing.T, p *Pipeline, rel string, spec BuildSpec, want intent) {
	archOf := map[string]string{}
	for _, a := range arch.All() {
		archOf[a.BootConfig] = a.Name
	}
	repo, commit := buildtest.Repo(t), buildtest.BaseCommit
	switch {
	case rel != "6.1":
		repo, commit = testenv.LinuxRelease(t, rel), "v"+rel
	case spec.ApplySeries:
		commit = buildtest.PatchedCommit(t)
	}
	req := build.Request{Repo: repo, Commit: commit, Arch: spec.Arch, BaseConfig: spec.BaseConfig,
		Symbols: spec.Symbols, Variant: p.Name + "-" + spec.Variant}
	for _, f := range spec.Fragments {
		path := f.Path
		if f.Name != "" {
			var err error
			path, err = build.WriteBootConfig(archOf[f.Name], filepath.Join(xdg.CacheDir(), "boot-configs"))
			if err != nil {
				t.Fatal(err)
			}
		}
		req.Fragments = append(req.Fragments, path)
	}
	opts := buildtest.Options(t)
	opts.ConfigOnly = true
	// Config only: no compile, so no need to wait for the test build
	// lock (buildtest.Serialize); the build's own locks keep concurrent
	// configures of one request apart.
	a, err := build.Build(context.Background(), req, opts)
	if want.refused != "" {
		var ce *build.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), want.refused) {
			t.Fatalf("%s on %s: want a refusal naming %q before compiling, got %v", spec.Variant, rel, want.refused, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s variant %s does not configure on %s: %v", p.File, spec.Variant, rel, err)
	}
	cfg, err := build.ReadConfigFile(a.Config)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, m map[string]string) {
		for sym, v := range m {
			got := cfg[sym]
			if got == "" {
				got = "n"
			}
			if got != v {
				t.Errorf("%s on %s: CONFIG_%s=%q, %s %q", spec.Variant, rel, sym, got, what, v)
			}
		}
	}
	check("pipeline asks", spec.Symbols)
	check("its intent is", want.holds)
}

// TestLayoutControlConfigures: the layout control's aligned rebuild
// (AlignSymbols on a variant) configures on every architecture of
// LayoutArches from tinyconfig and its boot config: olddefconfig keeps
// CONFIG_DEBUG_FORCE_FUNCTION_ALIGN_64B=y (which makes the kernel's
// Makefile add -falign-functions=64). Config only: no compile.
func TestLayoutControlConfigures(t *testing.T) {
	buildtest.SkipIfSlow(t)
	repo := buildtest.Repo(t)
	for _, a := range arch.All() {
		if !LayoutArches[a.Name] {
			continue // refused at load: TestLayoutControlRefusedWithoutTheSymbol
		}
		t.Run(a.Name, func(t *testing.T) {
			frag, err := build.WriteBootConfig(a.Name, filepath.Join(xdg.CacheDir(), "boot-configs"))
			if err != nil {
				t.Fatal(err)
			}
			req := build.Request{Repo: repo, Commit: buildtest.BaseCommit, Arch: a.Name, BaseConfig: "tinyconfig",
				Fragments: []string{frag}, Symbols: AlignSymbols, Variant: "layout-control-" + a.Name}
			opts := buildtest.Options(t)
			opts.ConfigOnly = true
			var art *build.Artifact
			buildtest.Serialize(t, func() { art, err = build.Build(context.Background(), req, opts) })
			if err != nil {
				t.Fatalf("the aligned rebuild does not configure on %s: %v", a.Name, err)
			}
			cfg, err := build.ReadConfigFile(art.Config)
			if err != nil {
				t.Fatal(err)
			}
			for sym, want := range AlignSymbols {
				if cfg[sym] != want {
					t.Errorf("%s: CONFIG_%s=%q, want %q", a.Name, sym, cfg[sym], want)
				}
			}
		})
	}
}
