package qemu

import (
	"os"
	"testing"
)

// kernel returns a built ppc64le kernel image of the variant.
func kernel(t *testing.T, variant string) string {
	t.Helper()
	if p := os.Getenv("PATCHEVAL_TEST_PPC64LE_VMLINUX"); p != "" {
		return p
	}
	t.Fatal("no kernel: set PATCHEVAL_TEST_PPC64LE_VMLINUX")
	return ""
}
