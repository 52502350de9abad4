package qemu

import (
	"os"
	"testing"

	"github.com/patcheval/patcheval/build/buildtest"
)

// kernel returns a built ppc64le kernel image of a buildtest variant
// (base-voluntary, patched-voluntary, patched-dynamic, patched-full),
// from the shared build cache. PATCHEVAL_TEST_PPC64LE_VMLINUX overrides
// base-voluntary with a prebuilt image (development only).
func kernel(t *testing.T, variant string) string {
	t.Helper()
	buildtest.SkipIfSlow(t)
	if p := os.Getenv("PATCHEVAL_TEST_PPC64LE_VMLINUX"); p != "" && variant == "base-voluntary" {
		return p
	}
	return buildtest.PPC64(t, variant).Image
}
