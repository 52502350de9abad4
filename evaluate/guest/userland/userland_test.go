package userland

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
)

func TestParseDependsAlternativesVirtualAny(t *testing.T) {
	out := `linux-perf:ppc64el
  Depends: libc6:ppc64el
 |Depends: libfoo1:ppc64el
  Depends: libbar1:ppc64el
  Depends: <perl:any>
    perl:arm64
    perl:ppc64el
  Depends: <libvirt1>
    libvirtimpl:arm64
    libvirtimpl:ppc64el
  PreDepends: libzstd1:ppc64el
  Depends: libnative1
  Conflicts: <linux-tools-6.1:ppc64el>
stress-ng:ppc64el
  Depends: libjudydebian1:ppc64el
`
	g := ParseDepends([]byte(out), "ppc64el", true)
	if got, want := strings.Join(g["linux-perf"], " "), "libc6 libfoo1 libvirtimpl libzstd1"; got != want {
		t.Errorf("linux-perf depends on %q, want %q", got, want)
	}
	if got := strings.Join(g["stress-ng"], " "); got != "libjudydebian1" {
		t.Errorf("stress-ng depends on %q", got)
	}
	if len(g) != 2 {
		t.Errorf("graph %v: want only the two ppc64el packages", g)
	}
	native := "stress-ng\n  Depends: libc6\n  Depends: libbsd0:i386\n  Depends: zlib1g\nlibbsd0:i386\n  Depends: libmd0:i386\n"
	if got := fmt.Sprint(ParseDepends([]byte(native), "amd64", false)); got != "map[stress-ng:[libc6 zlib1g]]" {
		t.Errorf("native ParseDepends = %s", got)
	}
}

// TestBuildPPC64el resolves, downloads (Debian's mirror through apt) and
// packs stress-ng and perf for ppc64el, then checks the archive holds
// both tools, the loader and libc, and that a second call is a cache hit.
func TestBuildPPC64el(t *testing.T) {
	testenv.SkipIfSlow(t, "apt and Debian's mirror")
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("no apt-get")
	}
	cache := xdg.CacheDir()
	ctx := context.Background()
	var log strings.Builder
	u, err := Build(ctx, "ppc64le", []string{"stress-ng", "perf"}, cache, &log)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(log.String())
	have := map[string]bool{}
	for _, f := range u.Files {
		have[f] = true
	}
	for _, f := range []string{"/usr/bin/stress-ng", "/usr/bin/perf", "/lib64/ld64.so.2", "/lib/powerpc64le-linux-gnu/libc.so.6"} {
		if !have[f] {
			t.Errorf("archive lacks %s; has %v", f, u.Files)
		}
	}
	if u.Versions["perf"] == "" || u.Versions["stress-ng"] == "" {
		t.Errorf("versions not recorded: %v", u.Versions)
	}
	// The second build names no cache directory: "" is the XDG cache
	// (the runner passes Env.CacheDir "" for it), never the working
	// directory.
	cwd := t.TempDir()
	t.Chdir(cwd)
	u2, err := Build(ctx, "ppc64le", []string{"perf", "stress-ng"}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !u2.Cached || u2.Archive != u.Archive {
		t.Errorf("second build: cached=%v archive %s vs %s", u2.Cached, u2.Archive, u.Archive)
	}
	if left, _ := os.ReadDir(cwd); len(left) > 0 {
		t.Errorf("Build with cacheDir \"\" wrote into the working directory: %v", left)
	}
	t.Logf("%d files, %d KiB, LD_LIBRARY_PATH=%s", len(u.Files), u.Bytes>>10, u.LibPath())
}
