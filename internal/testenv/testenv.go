// Package testenv is what patcheval's tests share about their environment:
// whether slow tests run (PATCHEVAL_SKIP_SLOW, read here and nowhere
// else), the imported Debian 6.1 kernel tree (scripts/linux-tree.sh, once
// per test process, in the shared cache), Debian's later releases in one
// release-history tree (LinuxRelease: 7.2.13), and the one copy of the real
// mail threads the tests use (mbox/testdata/threads), among them the v6.1
// backport of "powerpc: enable dynamic preemption".
//
// Only tests import it.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/patcheval/patcheval/internal/linuxtree"
	"github.com/patcheval/patcheval/internal/xdg"
)

// BaseCommit is the tag of the imported 6.1 tree.
const BaseCommit = "v6.1-debian"

// SkipSlow reports whether PATCHEVAL_SKIP_SLOW=1 asks to skip the tests
// that need a kernel tree, a kernel build, public-inbox or the network of
// a package mirror.
func SkipSlow() bool { return os.Getenv("PATCHEVAL_SKIP_SLOW") == "1" }

// SkipIfSlow skips tb when SkipSlow; what says what the test needs.
func SkipIfSlow(tb testing.TB, what string) {
	tb.Helper()
	if SkipSlow() {
		tb.Skip("PATCHEVAL_SKIP_SLOW=1: skipping a test that needs " + what)
	}
}

// LongTests reports whether PATCHEVAL_LONG_TESTS=1 asks for the
// end-to-end tests whose kernel builds do not fit the default suite's
// budget (CI: 2 cores, under 60 minutes for everything).
func LongTests() bool { return os.Getenv("PATCHEVAL_LONG_TESTS") == "1" && !SkipSlow() }

// SkipUnlessLong skips tb unless LongTests; cost says what the test
// builds, so that the skip message tells what running it costs.
func SkipUnlessLong(tb testing.TB, cost string) {
	tb.Helper()
	if !LongTests() {
		tb.Skip("set PATCHEVAL_LONG_TESTS=1 to run this end-to-end test (" + cost + "; outside the default suite's budget)")
	}
}

// ModuleRoot is the repository root (this file is internal/testenv/).
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// ThreadsDir holds the real mail threads (mboxrd) the tests share; see its
// README.md.
func ThreadsDir() string { return filepath.Join(ModuleRoot(), "mbox", "testdata", "threads") }

// BackportMbox is the thread of the v6.1 backport series ("[PATCH 6.1 v4
// 0/1] powerpc: Enable dynamic preemption"), which applies to BaseCommit.
func BackportMbox() string {
	return filepath.Join(ThreadsDir(), "ppc-dynamic-preempt-v6.1-backport.mbox")
}

var (
	treeOnce sync.Once
	treePath string
	treeErr  error
)

// LinuxTree returns the bare repository of Debian's linux-source-6.1 made
// by scripts/linux-tree.sh in the shared cache (imported on first use; once
// per test process). It is shared: clone it before writing to it. Skipped
// when SkipSlow.
func LinuxTree(tb testing.TB) string {
	tb.Helper()
	SkipIfSlow(tb, "the imported 6.1 kernel tree")
	treeOnce.Do(func() {
		script := filepath.Join(ModuleRoot(), "scripts", "linux-tree.sh")
		var stderr bytes.Buffer
		cmd := exec.Command("bash", script)
		cmd.Stderr = io.MultiWriter(os.Stderr, &stderr) // the first import takes minutes: show its progress
		out, err := cmd.Output()
		if err != nil {
			treeErr = fmt.Errorf("scripts/linux-tree.sh: %v\n%s", err, stderr.String())
			return
		}
		treePath = strings.TrimSpace(string(out))
	})
	if treeErr != nil {
		tb.Fatal(treeErr)
	}
	return treePath
}

// ReleaseVersions are the Debian releases tests may ask LinuxRelease for:
// the exact Debian package versions, so that every machine imports the
// same trees.
var ReleaseVersions = map[string]string{
	"7.2.13": "7.2.13-1", // sid
	// Only PATCHEVAL_LONG_TESTS=1 tests ask for these two.
	"6.12.117": "6.12.117-1",      // trixie
	"7.3.4":    "7.3.4-1~bpo13+1", // trixie-backports
}

var (
	releaseMu   sync.Mutex
	releaseDone = map[string]error{}
)

// ReleaseTree is the release-history repository (internal/linuxtree, what
// `patcheval tree import` makes) that LinuxRelease imports into, in the
// shared cache.
func ReleaseTree() string { return filepath.Join(xdg.CacheDir(), "trees", "linux-releases.git") }

// LinuxRelease returns ReleaseTree with Debian's release of version (a key
// of ReleaseVersions, e.g. "7.2.13") imported, tagged "v"+version: the
// package is fetched from the machine's Debian mirror into the shared cache
// once (internal/debian), imported once, then reused. It is shared: clone it
// before writing to it, and name releases by tag (importing an older release
// relinks the newer ones). Skipped when SkipSlow.
func LinuxRelease(tb testing.TB, version string) string {
	tb.Helper()
	SkipIfSlow(tb, "Debian's linux-source-"+version+" from the mirror")
	deb, ok := ReleaseVersions[version]
	if !ok {
		tb.Fatalf("testenv.LinuxRelease: %q is not one of ReleaseVersions", version)
	}
	releaseMu.Lock()
	defer releaseMu.Unlock()
	err, done := releaseDone[version]
	if !done {
		err = importRelease(deb)
		releaseDone[version] = err
	}
	if err != nil {
		tb.Fatalf("importing Debian's %s: %v", deb, err)
	}
	return ReleaseTree()
}

func importRelease(debVersion string) error {
	req, err := linuxtree.ParseRequest(debVersion)
	if err != nil {
		return err
	}
	cache := xdg.CacheDir()
	repo := &linuxtree.Repo{Path: ReleaseTree(), Log: os.Stderr} // the first import takes a minute: show its progress
	_, err = repo.ImportDebian(context.Background(), linuxtree.NewApt(cache, os.Stderr), linuxtree.DebsDir(cache), req)
	return err
}

// PrivateDirs points PATCHEVAL_STATE_DIR and PATCHEVAL_CONFIG_DIR, where the
// caller has not set them, at a fresh directory of this test binary (its
// child processes inherit them), so that no test reads the user's
// settings or writes its state into ~/.local/share/patcheval; a serve on
// Postgres, for one, keeps its report files in the state directory. The
// cache directory is left alone: it is meant to be shared. Call it from
// TestMain and the returned function after m.Run.
func PrivateDirs() (cleanup func()) {
	dir, err := os.MkdirTemp("", "patcheval-test-home-")
	if err != nil {
		panic(fmt.Sprintf("testenv: a private state directory: %v", err))
	}
	for env, sub := range map[string]string{"PATCHEVAL_STATE_DIR": "state", "PATCHEVAL_CONFIG_DIR": "config"} {
		if os.Getenv(env) == "" {
			os.Setenv(env, filepath.Join(dir, sub))
		}
	}
	return func() { os.RemoveAll(dir) }
}
