package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/xdg"
)

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func init() {
	register(&command{
		name:    "build",
		summary: "build kernels (one per Kconfig variant), verify their configs, cache the artifacts",
		usage: "patcheval build --tree PATH --commit REF --arch ppc64le|arm64|x86_64 --config BASE " +
			"[--fragment FILE]... [--variant NAME:SYM=val,SYM=val]... [-j N] [--json]",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			tree := new(string)
			fs.Var(absPathValue{tree}, "tree", "kernel git `repository` (bare or not)")
			commit := fs.String("commit", "HEAD", "revision to build")
			archFlag := fs.String("arch", "", "target architecture: ppc64le, arm64 or x86_64")
			base := fs.String("config", "", "base config: a make target (tinyconfig, defconfig, ...) or a config file")
			boot := fs.Bool("boot-config", false, "merge the arch's shipped QEMU boot fragment (build/configs) after the base")
			var frags, variants, targets listFlag
			fs.Var(&frags, "fragment", "config fragment merged over the base (repeatable)")
			fs.Var(&variants, "variant", "NAME:SYM=val,SYM=val — one kernel per variant (repeatable)")
			fs.Var(&targets, "target", "make target (repeatable; default: the arch's boot image)")
			jobs := fs.Int("j", 0, "make -j budget shared by all builds (default: CPUs)")
			llvm := fs.Bool("llvm", false, "build with LLVM=1 (clang, lld)")
			asJSON := fs.Bool("json", false, "print the artifacts as JSON")
			cacheDir := fs.String("cache-dir", "", "cache directory (default $PATCHEVAL_CACHE_DIR or ~/.cache/patcheval)")
			timeout := fs.Duration("timeout", 0, "time limit per build (0: none)")
			nice := fs.Int("nice", 0, "run make under nice -n N")
			noCache := fs.Bool("no-cache", false, "rebuild even when a cached artifact exists")
			configOnly := fs.Bool("config-only", false, "stop after the verified .config (no compile)")
			ccache := fs.String("compiler-cache", "kcc", "compiler cache: kcc (patcheval's, keyed by preprocessed tokens), ccache or none")
			verify := fs.Int("verify-cache", 0, "recompile up to N objects kcc answered and require identical objects")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return fail.Inputf("unexpected arguments %q", args)
				}
				if *tree == "" || *archFlag == "" || *base == "" {
					return fail.Inputf("--tree, --arch and --config are required")
				}
				a, err := arch.Normalize(*archFlag)
				if err != nil {
					return err
				}
				fragments := []string(frags)
				if *boot {
					p, err := build.WriteBootConfig(a, cacheSubdir(*cacheDir, "boot-configs"))
					if err != nil {
						return err
					}
					fragments = append([]string{p}, fragments...)
				}
				reqs, err := variantRequests(variants)
				if err != nil {
					return err
				}
				for i := range reqs {
					reqs[i].Repo, reqs[i].Commit, reqs[i].Arch = *tree, *commit, a
					reqs[i].BaseConfig, reqs[i].Fragments = *base, fragments
					reqs[i].LLVM, reqs[i].Targets = *llvm, targets
				}
				opts := build.Options{CacheDir: *cacheDir, Jobs: *jobs, Progress: progress.New(env.Stderr),
					Timeout: *timeout, NoNetwork: true, Nice: *nice, NoCache: *noCache, ConfigOnly: *configOnly,
					CompilerCache: *ccache, VerifyCompilerCache: *verify}
				start := time.Now()
				arts, errs := build.BuildAll(ctx, reqs, opts)
				opts.Progress.Done()
				var first error
				for i, err := range errs {
					if err != nil && first == nil {
						first = err
					}
					if err != nil && len(errs) > 1 {
						fmt.Fprintf(env.Stderr, "%s: %v\n", variantName(reqs[i]), err)
					}
				}
				if err := printBuilds(env, reqs, arts, errs, *asJSON, start); err != nil {
					return err
				}
				if len(errs) == 1 {
					return first
				}
				if first != nil {
					return withKind(fail.KindOf(first), fmt.Errorf("%d of %d builds failed", countErrs(errs), len(errs)))
				}
				return nil
			}
		},
	})
}

// printBuilds prints what `patcheval build` built: as JSON, or one line
// per kernel (and its config warnings) and the time taken.
func printBuilds(env *Env, reqs []build.Request, arts []*build.Artifact, errs []error, asJSON bool, start time.Time) error {
	if asJSON {
		type out struct {
			Variant  string          `json:"variant"`
			Artifact *build.Artifact `json:"artifact,omitempty"`
			Error    string          `json:"error,omitempty"`
			Kind     string          `json:"error_kind,omitempty"`
		}
		var o []out
		for i := range reqs {
			x := out{Variant: variantName(reqs[i]), Artifact: arts[i]}
			if errs[i] != nil {
				x.Error, x.Kind = errs[i].Error(), fail.KindOf(errs[i]).String()
			}
			o = append(o, x)
		}
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(o); err != nil {
			return err
		}
	} else {
		for i, a := range arts {
			if a == nil || errs[i] != nil {
				continue
			}
			hit := ""
			if a.CacheHit {
				hit = " (cached)"
			}
			img := a.Image
			if img == "" {
				img = a.Config
			}
			for _, w := range a.Meta.Patcheval.ConfigWarnings {
				fmt.Fprintf(env.Stderr, "%s: warning: %s\n", variantName(reqs[i]), w)
			}
			fmt.Fprintf(env.Stdout, "%s\t%s\tconfig %s\t%s%s\n", variantName(reqs[i]), img,
				a.ConfigHash()[:12], a.Meta.Source.KernelRelease, hit)
		}
		fmt.Fprintf(env.Stderr, "%d build(s) in %s\n", len(reqs), time.Since(start).Round(time.Second))
	}
	return nil
}

func countErrs(errs []error) int {
	n := 0
	for _, e := range errs {
		if e != nil {
			n++
		}
	}
	return n
}

func variantName(r build.Request) string {
	if r.Variant == "" {
		return r.Arch
	}
	return r.Arch + "/" + r.Variant
}

// variantRequests parses --variant NAME:SYM=val,SYM=val flags; none gives
// one request without symbols.
func variantRequests(vs []string) ([]build.Request, error) {
	if len(vs) == 0 {
		return []build.Request{{}}, nil
	}
	seen := map[string]bool{}
	var reqs []build.Request
	for _, v := range vs {
		name, syms, ok := strings.Cut(v, ":")
		if !ok {
			name, syms = v, ""
		}
		name = strings.TrimSpace(name)
		if name == "" || strings.ContainsAny(name, "/ ") {
			return nil, fail.Inputf("--variant %q: want NAME:SYM=val,SYM=val", v)
		}
		if seen[name] {
			return nil, fail.Inputf("--variant %q given twice", name)
		}
		seen[name] = true
		m, err := build.ParseSymbols(syms)
		if err != nil {
			return nil, fail.Inputf("--variant %s: %w", name, err)
		}
		reqs = append(reqs, build.Request{Variant: name, Symbols: m})
	}
	return reqs, nil
}

// withKind classifies err as kind.
func withKind(kind fail.Kind, err error) error {
	switch kind {
	case fail.KindInput:
		return fail.Input(err)
	case fail.KindFailed:
		return fail.Failed(err)
	default:
		return fail.Infra(err)
	}
}

// cacheSubdir is dir under the cache directory (flag, else XDG).
func cacheSubdir(cacheDir, dir string) string {
	if cacheDir == "" {
		cacheDir = xdg.CacheDir()
	}
	return filepath.Join(cacheDir, dir)
}
