package build_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
)

// smallFS mounts a tmpfs of size on a temporary directory (root only:
// a real file system that fills up, not a simulated error).
func smallFS(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// TestDiskFullDuringBuild builds into a cache on a 64 MiB file system:
// the sources of the 6.1 tree do not fit, the build stops with an
// infrastructure error that says the disk is full (exit 3) and names the
// file, and nothing is cached as an artifact. (That a half-written
// checkout is repaired by the next one is internal/gittree's
// TestCheckoutResumesInterrupted; that the compiler's "No space left on
// device" is classified the same is TestClassifyLinkAndInfra.)
func TestDiskFullDuringBuild(t *testing.T) {
	req := buildtest.Request(t, "base-voluntary")
	cache := smallFS(t, "64m")
	opts := build.Options{CacheDir: cache, Jobs: 1, Nice: 10, NoNetwork: true, Progress: progress.New(os.Stderr), Timeout: 10 * time.Minute}
	ctx := context.Background()
	start := time.Now()
	a, err := build.Build(ctx, req, opts)
	var ie *build.InfraError
	if !errors.As(err, &ie) || ie.Reason != "disk full" || fail.KindOf(err) != fail.KindInfra || fail.Code(err) != 3 {
		t.Fatalf("build on a full disk: %v (artifact %v), want an infrastructure error, reason disk full", err, a != nil)
	}
	if !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("the error does not say what happened: %v", err)
	}
	t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
	if c, err := build.Cached(ctx, req, opts); c != nil || err != nil {
		t.Errorf("a failed build left a cached artifact: %v %v", c, err)
	}
}
