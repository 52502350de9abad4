package build_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/internal/fail"
)

// These tests build real ppc64le kernels of Debian's 6.1 tree (about 5
// minutes each on 2 cores; cached by content under PATCHEVAL_CACHE_DIR, so
// a second run takes seconds). Here: base-voluntary (clean),
// patched-voluntary (incremental over it), patched-dynamic (clean), the
// broken commit (incremental over patched-voluntary), and config-only runs;
// evaluate's tests add patched-full through the same buildtest helper.

func TestBaseThenPatchedIsIncremental(t *testing.T) {
	base := buildtest.PPC64(t, "base-voluntary")
	checkArtifact(t, base, "base-voluntary")
	patched := buildtest.PPC64(t, "patched-voluntary")
	checkArtifact(t, patched, "patched-voluntary")
	if base.Meta.Git.Commit == patched.Meta.Git.Commit {
		t.Fatal("base and patched have the same commit")
	}
	if base.Dir == patched.Dir {
		t.Fatal("base and patched share an artifact")
	}
	for _, a := range []*build.Artifact{base, patched} {
		r := a.Meta.Results
		t.Logf("%s: %d objects made (%d from %s, %d verified) in %.0fs, incremental=%v, cache hit now=%v",
			a.Meta.Patcheval.Variant, r.ObjectsCompiled, r.CCacheHits, a.Meta.Build.CompilerCache, r.CompilerCacheVerified,
			r.Duration["build"], a.Meta.Build.Incremental, a.CacheHit)
	}
	// The second of the two (normally patched) ran in the first's O=
	// directory. kbuild remakes nearly every object, and rightly: the
	// Series adds arch/powerpc/include/asm/preempt.h, which shadows the
	// generated asm/preempt.h every file includes, and turns on
	// HAVE_PREEMPT_DYNAMIC_KEY, which include/linux/kernel.h mentions.
	// ccache would miss on all of them (the preprocessed text's line
	// markers change); kcc finds that the tokens did not change except in
	// the objects the Series really touches (interrupt.c, vmx-helper.c),
	// and the build recompiled a sample of its answers to prove them.
	second := patched
	if patched.Meta.Results.ObjectsCompiled > base.Meta.Results.ObjectsCompiled {
		second = base // another test package asked for patched first
	}
	if !second.Meta.Build.Incremental {
		t.Errorf("%s was not built in the kept O= directory", second.Meta.Patcheval.Variant)
	}
	r := second.Meta.Results
	if second.Meta.Build.CompilerCache != "kcc" {
		t.Errorf("%s: compiler cache %q, want kcc", second.Meta.Patcheval.Variant, second.Meta.Build.CompilerCache)
	}
	if r.CCacheMisses > 20 || r.CCacheHits < 9*(r.CCacheHits+r.CCacheMisses)/10 || r.CCacheHits < 500 {
		t.Errorf("%s: kcc answered %d of %d compiles (%d objects made); want all but the few the Series changes",
			second.Meta.Patcheval.Variant, r.CCacheHits, r.CCacheHits+r.CCacheMisses, r.ObjectsCompiled)
	}
	if r.CompilerCacheVerified < 10 {
		t.Errorf("%s: only %d kcc answers were recompiled and compared", second.Meta.Patcheval.Variant, r.CompilerCacheVerified)
	}
	cfg, err := build.ReadConfigFile(patched.Config)
	if err != nil {
		t.Fatal(err)
	}
	if cfg["HAVE_PREEMPT_DYNAMIC_KEY"] != "y" || cfg["PREEMPT_DYNAMIC"] == "y" {
		t.Errorf("patched-voluntary: HAVE_PREEMPT_DYNAMIC_KEY=%q PREEMPT_DYNAMIC=%q", cfg["HAVE_PREEMPT_DYNAMIC_KEY"], cfg["PREEMPT_DYNAMIC"])
	}
}

func checkArtifact(t *testing.T, a *build.Artifact, variant string) {
	t.Helper()
	for _, p := range []string{a.Image, a.SystemMap, a.Config, a.Log, a.MetadataPath} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("%s: artifact file %q missing or empty (%v)", variant, p, err)
		}
	}
	if !strings.HasSuffix(a.Image, "/vmlinux") {
		t.Errorf("ppc64le image %s, want vmlinux", a.Image)
	}
	m := a.Meta
	if m.Results.Status != "PASS" || m.Build.TargetArch != "ppc64le" || m.Build.KernelArch != "powerpc" ||
		!strings.HasPrefix(m.Build.Toolchain, "gcc-") || m.Compiler.VersionFull == "" || m.Tools["ld"] == "" ||
		len(m.Git.Commit) != 40 || len(m.Patcheval.ConfigHash) != 64 || !strings.HasPrefix(m.Source.KernelRelease, "6.1") {
		t.Errorf("%s: metadata %+v", variant, m)
	}
	if len(m.Build.MakeCommand) == 0 || m.Build.MakeCommand[0] != "make" {
		t.Errorf("%s: make command %q", variant, m.Build.MakeCommand)
	}
	if !m.Patcheval.Isolation.ScrubbedEnv {
		t.Errorf("%s: environment not scrubbed", variant)
	}
	for _, e := range m.Patcheval.Isolation.Env {
		if strings.Contains(e, "TOKEN") || strings.Contains(e, "SSH_AUTH") || e == "GOPATH" {
			t.Errorf("%s: build saw %s", variant, e)
		}
	}
	want := buildtest.Variants[variant].Symbols
	cfg, err := build.ReadConfigFile(a.Config)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if cfg[k] != v {
			t.Errorf("%s: CONFIG_%s=%q, want %q", variant, k, cfg[k], v)
		}
		if m.Patcheval.RequestedSymbols[k] != v {
			t.Errorf("%s: metadata requested %s=%q", variant, k, m.Patcheval.RequestedSymbols[k])
		}
	}
	if build.ConfigHash(mustRead(t, a.Config)) != a.ConfigHash() {
		t.Errorf("%s: config hash does not match the stored config", variant)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRepeatIsCacheHit(t *testing.T) {
	buildtest.PPC64(t, "base-voluntary")
	req := buildtest.Request(t, "base-voluntary")
	start := time.Now()
	a, err := build.Build(context.Background(), req, buildtest.Options(t))
	d := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if !a.CacheHit {
		t.Fatal("repeat request was not a cache hit")
	}
	if d > 5*time.Second {
		t.Errorf("cache hit took %s, want < 5s", d)
	}
	t.Logf("repeat request: cache hit in %s", d.Round(time.Millisecond))
	// The same request under another Variant name is the same kernel.
	req.Variant = "renamed"
	b, err := build.Build(context.Background(), req, buildtest.Options(t))
	if err != nil || !b.CacheHit || b.Dir != a.Dir || b.Meta.Patcheval.Variant != "renamed" {
		t.Errorf("renamed variant: %v hit=%v dir=%s", err, b != nil && b.CacheHit, b.Dir)
	}
}

// Without the series, PREEMPT_DYNAMIC=y cannot hold on powerpc 6.1, and a
// symbol the tree lacks cannot either: both fail before compiling.
func TestUnmetAndMissingSymbolsFailBeforeCompiling(t *testing.T) {
	req := buildtest.Request(t, "base-voluntary")
	req.Variant = "base-dynamic-lazy"
	req.Symbols["PREEMPT_DYNAMIC"] = "y"
	req.Symbols["PREEMPT_LAZY"] = "y"
	var a *build.Artifact
	var err error
	buildtest.Serialize(t, func() { a, err = build.Build(context.Background(), req, buildtest.Options(t)) })
	var ce *build.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a *build.ConfigError", err)
	}
	t.Logf("error:\n%v", err)
	if fail.Code(err) != 2 {
		t.Errorf("exit code %d, want 2", fail.Code(err))
	}
	probs := map[string]build.ConfigProblem{}
	for _, p := range ce.Problems {
		probs[p.Symbol] = p
	}
	if len(probs) != 2 {
		t.Errorf("problems %+v, want PREEMPT_DYNAMIC and PREEMPT_LAZY", ce.Problems)
	}
	if p := probs["PREEMPT_DYNAMIC"]; p.Kind != "dropped" || !strings.Contains(p.Why, "HAVE_PREEMPT_DYNAMIC") {
		t.Errorf("PREEMPT_DYNAMIC: %+v, want dropped because HAVE_PREEMPT_DYNAMIC is missing", p)
	}
	if p := probs["PREEMPT_LAZY"]; p.Kind != "missing" {
		t.Errorf("PREEMPT_LAZY: %+v, want missing", p)
	}
	if a == nil || a.Meta.Results.ErrorKind != "input" || a.Meta.Results.Status != "FAIL" {
		t.Fatalf("failure artifact %+v", a)
	}
	if _, compiled := a.Meta.Results.Duration["build"]; compiled {
		t.Error("make ran the build after the config failed verification")
	}
	if log := string(mustRead(t, a.Log)); strings.Contains(log, " vmlinux\n") || strings.Contains(log, "  CC      ") {
		t.Error("the build log shows compilation")
	}
}

// A Patch with a syntax error is the tree's fault: a KernelError (exit 1)
// with the file:line excerpt. Built incrementally over patched-voluntary.
func TestCompileErrorIsKernelError(t *testing.T) {
	buildtest.PPC64(t, "patched-voluntary")
	commit, line := buildtest.BrokenCommit(t)
	req := buildtest.Request(t, "patched-voluntary")
	req.Commit = commit
	req.Variant = "broken"
	var a *build.Artifact
	var err error
	start := time.Now()
	buildtest.Serialize(t, func() { a, err = build.Build(context.Background(), req, buildtest.Options(t)) })
	t.Logf("broken build failed in %s: %v", time.Since(start).Round(time.Second), err)
	var ke *build.KernelError
	if !errors.As(err, &ke) {
		t.Fatalf("got %T %v, want *build.KernelError", err, err)
	}
	if fail.Code(err) != 1 {
		t.Errorf("exit code %d, want 1", fail.Code(err))
	}
	if ke.File != "kernel/sched/core.c" || ke.Line != line || ke.Stage != "compile" {
		t.Errorf("error at %s:%d (%s), want kernel/sched/core.c:%d", ke.File, ke.Line, ke.Stage, line)
	}
	ex := strings.Join(ke.Excerpt, "\n")
	if !strings.Contains(ex, fmt.Sprintf("kernel/sched/core.c:%d:", line)) || !strings.Contains(ex, "patcheval_broken") {
		t.Errorf("excerpt lacks file:line and the source line:\n%s", ex)
	}
	if a == nil || a.Meta.Results.ErrorKind != "kernel" || a.Meta.Results.ErrorFile != "kernel/sched/core.c" {
		t.Fatalf("failure metadata %+v", a)
	}
	// Incremental over patched-voluntary's O= directory: only the changed
	// file is compiled.
	if !a.Meta.Build.Incremental || a.Meta.Results.ObjectsCompiled > 3 {
		t.Errorf("broken build: incremental=%v, %d objects compiled; want only kernel/sched/core.c",
			a.Meta.Build.Incremental, a.Meta.Results.ObjectsCompiled)
	}
	if _, err := os.Stat(ke.Log); err != nil {
		t.Errorf("error's log %s: %v", ke.Log, err)
	}
}

// The shipped arm64, x86_64 and riscv64 boot fragments hold entirely over
// 6.1's tinyconfig, riscv64 but for RISCV_ISA_FALLBACK, which 6.1 does not
// have (config only; H6's boot tests build them).
func TestBootConfigsHold(t *testing.T) {
	for _, arch := range []string{"arm64", "x86_64", "riscv64", "ppc64le"} {
		t.Run(arch, func(t *testing.T) {
			req := build.Request{Repo: buildtest.Repo(t), Commit: buildtest.BaseCommit, Arch: arch,
				BaseConfig: build.BootConfigBase, Fragments: []string{buildtest.BootFragment(t, arch)}, Variant: "boot"}
			a, err := configOnly(t, req)
			if err != nil {
				var ie *build.InfraError
				if errors.As(err, &ie) && ie.Reason == "toolchain" {
					t.Skipf("no %s toolchain: %v", arch, err)
				}
				t.Fatal(err)
			}
			w := a.Meta.Patcheval.ConfigWarnings
			if arch == "ppc64le" {
				baseConfigReused(t, req, a)
				// The pseries fragment is shipped as measured; SELinux
				// needs SECURITY_NETWORK, which it does not set.
				for _, x := range w {
					if !strings.Contains(x, "SECURITY_SELINUX") {
						t.Errorf("unexpected warning: %s", x)
					}
				}
				return
			}
			if arch == "riscv64" {
				// RISCV_ISA_FALLBACK is for 6.6 and later (7.x boots on
				// bookworm's QEMU need it); 6.1 has no such symbol.
				w = slices.DeleteFunc(slices.Clone(w), func(x string) bool {
					return x == "riscv64-virt.config: CONFIG_RISCV_ISA_FALLBACK=y did not make it into the final config (dropped, final: absent)"
				})
			}
			if len(w) > 0 {
				t.Errorf("boot fragment lines that do not hold:\n%s", strings.Join(w, "\n"))
			}
		})
	}
}

// configOnly builds req's verified .config only (no compile), under the
// test build lock.
func configOnly(t *testing.T, req build.Request) (a *build.Artifact, err error) {
	t.Helper()
	opts := buildtest.Options(t)
	opts.ConfigOnly = true
	buildtest.Serialize(t, func() { a, err = build.Build(context.Background(), req, opts) })
	return a, err
}

// baseConfigReused configures req again under another variant name: the
// base config target's .config comes from the cache (the log says so, no
// second `make tinyconfig`), and what olddefconfig makes of it over the
// same fragment is the .config of the first run.
func baseConfigReused(t *testing.T, req build.Request, first *build.Artifact) {
	t.Helper()
	c1, _ := build.ReadConfigFile(first.Config) // before the second run may rewrite it
	req.Variant = "boot-again"
	a, err := configOnly(t, req)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(a.Log)
	if !strings.Contains(string(log), "the .config made before from the same Kconfig inputs") {
		t.Errorf("second configuration of tree %s ran the base config target again:\n%s", a.Meta.Git.Tree, log)
	}
	c2, _ := build.ReadConfigFile(a.Config)
	if len(c1) == 0 || !maps.Equal(c1, c2) {
		t.Errorf("the .config from the cached base config differs from the first (%d vs %d symbols)", len(c1), len(c2))
	}
	// Another tree with the same Kconfig inputs (a bisection step that
	// touches only C code) reuses it too and gets the same .config.
	req.Commit = buildtest.CommentCommit(t)
	req.Variant = "boot-other-tree"
	a, err = configOnly(t, req)
	if err != nil {
		t.Fatal(err)
	}
	if a.Meta.Git.Tree == first.Meta.Git.Tree {
		t.Fatalf("commit %s has the first run's tree", req.Commit)
	}
	log, _ = os.ReadFile(a.Log)
	if !strings.Contains(string(log), "the .config made before from the same Kconfig inputs") {
		t.Errorf("configuration of tree %s (only C code changed) ran the base config target again:\n%s", a.Meta.Git.Tree, log)
	}
	if c3, _ := build.ReadConfigFile(a.Config); !maps.Equal(c1, c3) {
		t.Errorf("the .config of the other tree differs from the first (%d vs %d symbols)", len(c1), len(c3))
	}
}

// The seed thread's confound: voluntary vs voluntary+PREEMPT_DYNAMIC with
// the backport series silently turns on PREEMPT_RCU.
func TestConfoundReportNamesPreemptRCU(t *testing.T) {
	vol := buildtest.PPC64(t, "patched-voluntary")
	dyn := buildtest.PPC64(t, "patched-dynamic")
	checkArtifact(t, dyn, "patched-dynamic")
	rep, err := build.ConfigDiff(build.DiffInput{A: vol.Dir, B: dyn.Dir})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	rep.Format(&sb)
	t.Logf("confound report:\n%s", sb.String())
	if c := rep.Change("PREEMPT_DYNAMIC"); c == nil || !c.Requested || c.A != "n" || c.B != "y" {
		t.Errorf("PREEMPT_DYNAMIC change %+v", c)
	}
	for _, sym := range []string{"PREEMPT_RCU", "PREEMPT_BUILD", "PREEMPTION", "PREEMPT_COUNT"} {
		c := rep.Change(sym)
		if c == nil {
			t.Errorf("%s not in the report", sym)
			continue
		}
		if c.Requested || len(c.Rules) == 0 {
			t.Errorf("%s: requested=%v rules=%v, want derived with a rule", sym, c.Requested, c.Rules)
		}
	}
	if c := rep.Change("PREEMPT_RCU"); c != nil {
		found := false
		for _, r := range c.Rules {
			if r.Pos.File == "kernel/rcu/Kconfig" && strings.Contains(r.Text, "default y") {
				found = true
			}
		}
		if !found {
			t.Errorf("PREEMPT_RCU rules %v do not name kernel/rcu/Kconfig's default", c.Rules)
		}
		if !strings.Contains(sb.String(), "kernel/rcu/Kconfig") {
			t.Error("formatted report does not name kernel/rcu/Kconfig")
		}
	}
}
