package testlab

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/buildtest"
)

// KernelSymbols are the lab kernel's own symbols (every lab kernel of a
// test sets them, so the base kernel is one cached build).
var KernelSymbols = map[string]string{"PREEMPT_VOLUNTARY": "y"}

// FragmentFile writes Fragment into dir and returns its path.
func FragmentFile(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "lab-x86_64.config")
	if err := os.WriteFile(p, Fragment, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Kernel is the lab's x86_64 kernel of Debian's 6.1 tree (tinyconfig, the
// q35 boot config, Fragment, KernelSymbols), built once into the shared
// cache (886 objects (measured: 2 h 3 min at nice 10, load ~35 on 2 cores)).
func Kernel(t testing.TB) *build.Artifact {
	t.Helper()
	syms := map[string]string{}
	for k, v := range KernelSymbols {
		syms[k] = v
	}
	return buildtest.Build(t, build.Request{Repo: buildtest.Repo(t), Commit: buildtest.BaseCommit, Arch: "x86_64",
		BaseConfig: build.BootConfigBase, Fragments: []string{buildtest.BootFragment(t, "x86_64"), FragmentFile(t, t.TempDir())},
		Symbols: syms, Variant: "lab-voluntary"})
}
