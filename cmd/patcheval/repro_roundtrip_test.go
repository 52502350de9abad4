package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/gittree/gittest"
	"github.com/patcheval/patcheval/internal/testenv"
)

// TestReproRoundTrip evaluates the v6.1 backport with ppc-preempt-dynamic
// (one boot per variant, deterministic QEMU), writes its reproducer and
// runs its repro.sh as a reader would: a fresh cache and state directory
// (every kernel, the agent and kcc's store made again), then the rerun's
// samples compared with the original's within 1%. Kernel-backed and
// long: opt-in.
func TestReproRoundTrip(t *testing.T) {
	testenv.SkipUnlessLong(t, "builds 3 ppc64le kernels twice, once in a fresh cache, and boots 8 times")
	tree := testenv.LinuxTree(t)
	root := t.TempDir()
	clone := gittest.CloneBare(t, tree) // apply writes a branch: not into the shared tree
	bin := filepath.Join(root, "patcheval")
	if out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	db := filepath.Join(root, "state", "patcheval.db")
	run := func(env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	run(nil, bin, "lore", "-m", testenv.BackportMbox(), "--pipeline", "ppc-preempt-dynamic", "--boots", "1", "--tree", clone,
		"--db", db, "--out", filepath.Join(root, "out"), "--from", "T <t@example.org>", "20261102093000.4121-0-tester@example.org")
	dir := filepath.Join(root, "repro")
	run(nil, bin, "repro", "--db", db, "1", dir)
	// A reader's machine: nothing of ours but the tree and the binary.
	env := []string{"TREE=" + clone, "PATCHEVAL=" + bin, "PATCHEVAL_CACHE_DIR="}
	out := run(env, "sh", filepath.Join(dir, "repro.sh"))
	if !strings.Contains(out, "same samples within 1%") {
		t.Errorf("repro.sh:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "rerun", "cache", "builds")); err != nil {
		t.Errorf("the rerun did not build in a fresh cache: %v", err)
	}
}
