package pipelines

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
)

// Every kernel a shipped pipeline asks for is configurable on Debian's 6.1
// tree (a pipeline of onRelease: on that Debian release, imported by
// testenv.LinuxRelease): after olddefconfig each requested symbol holds (build verifies it
// and fails otherwise). Variants that apply the series are configured on
// the tree with the v6.1 backport of "powerpc: enable dynamic preemption",
// the series the pipelines are written for. Config only: no compile.
// onRelease are the shipped pipelines written for a later kernel than
// 6.1: ppc-preempt-lazy measures 7.x's preemption models.
var onRelease = map[string]string{"ppc-preempt-lazy": "7.2.13"}

func TestShippedPipelinesConfigure(t *testing.T) {
	buildtest.SkipIfSlow(t)
	repo := buildtest.Repo(t)
	archOf := map[string]string{}
	for _, a := range arch.All() {
		archOf[a.BootConfig] = a.Name
	}
	for _, name := range List() {
		p, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range p.Builds() {
			t.Run(name+"/"+spec.Variant, func(t *testing.T) {
				repo, commit := repo, buildtest.BaseCommit
				if spec.ApplySeries {
					commit = buildtest.PatchedCommit(t)
				}
				if v := onRelease[name]; v != "" {
					repo, commit = testenv.LinuxRelease(t, v), "v"+v
				}
				req := build.Request{Repo: repo, Commit: commit, Arch: spec.Arch, BaseConfig: spec.BaseConfig,
					Symbols: spec.Symbols, Variant: name + "-" + spec.Variant}
				for _, f := range spec.Fragments {
					path := f.Path
					if f.Name != "" {
						path, err = build.WriteBootConfig(archOf[f.Name], filepath.Join(xdg.CacheDir(), "boot-configs"))
						if err != nil {
							t.Fatal(err)
						}
					}
					req.Fragments = append(req.Fragments, path)
				}
				opts := buildtest.Options(t)
				opts.ConfigOnly = true
				var a *build.Artifact
				buildtest.Serialize(t, func() { a, err = build.Build(context.Background(), req, opts) })
				if err != nil {
					t.Fatalf("%s variant %s does not configure: %v", p.File, spec.Variant, err)
				}
				cfg, err := build.ReadConfigFile(a.Config)
				if err != nil {
					t.Fatal(err)
				}
				for sym, want := range spec.Symbols {
					got := cfg[sym]
					if want == "n" && got == "" {
						continue
					}
					if got != want {
						t.Errorf("%s: CONFIG_%s=%q, pipeline asks %q", spec.Variant, sym, got, want)
					}
				}
			})
		}
	}
}

// TestLayoutControlConfigures: the layout control's aligned rebuild
// (AlignSymbols on a variant) configures on every architecture of
// internal/arch from tinyconfig and its boot config: olddefconfig keeps
// CONFIG_DEBUG_FORCE_FUNCTION_ALIGN_64B=y (which makes the kernel's
// Makefile add -falign-functions=64). Config only: no compile.
func TestLayoutControlConfigures(t *testing.T) {
	buildtest.SkipIfSlow(t)
	repo := buildtest.Repo(t)
	for _, a := range arch.All() {
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
