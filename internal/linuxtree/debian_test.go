package linuxtree_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/linuxtree"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
)

func gitOut(t *testing.T, repo string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"--git-dir=" + repo}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestDebianRelease imports Debian's linux-source-7.2 7.2.13-1 (sid) from
// the machine's mirror through testenv (once per cache), then checks the
// release: its tag, the Debian version in the message, the tree's own
// Makefile version; it refuses a damaged and a truncated copy of the
// package, and versions Debian does not serve, importing nothing.
func TestDebianRelease(t *testing.T) {
	repo := testenv.LinuxRelease(t, "7.2.13")
	msg := gitOut(t, repo, "log", "-1", "--format=%an <%ae>%n%B", "v7.2.13")
	for _, want := range []string{"patcheval import <import@patcheval.invalid>", "Linux 7.2.13 (Debian linux-source-7.2 7.2.13-1)", "Patcheval-SHA256: 30a8c5fc63f9028a62e6d7b3f7f43bee67425dbce2a05fceba83f9b87c92083d"} {
		if !strings.Contains(msg, want) {
			t.Errorf("v7.2.13's commit lacks %q:\n%s", want, msg)
		}
	}
	mk := gitOut(t, repo, "show", "v7.2.13:Makefile")
	for _, want := range []string{"VERSION = 7\n", "PATCHLEVEL = 2\n", "SUBLEVEL = 13\n"} {
		if !strings.Contains(mk, want) {
			t.Errorf("v7.2.13:Makefile lacks %q", want)
		}
	}

	ctx := context.Background()
	cache := xdg.CacheDir()
	apt := linuxtree.NewApt(cache, io.Discard)
	debs, _ := filepath.Glob(filepath.Join(linuxtree.DebsDir(cache), "*-linux-source-7.2_7.2.13-1_all.deb"))
	if len(debs) != 1 {
		t.Fatalf("the downloaded package is not in the cache: %v", debs)
	}
	data, err := os.ReadFile(debs[0])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	scratch := &linuxtree.Repo{Path: filepath.Join(dir, "scratch.git")}
	damaged := filepath.Join(dir, "damaged_linux-source-7.2_7.2.13-1_all.deb")
	bad := append([]byte(nil), data...)
	bad[len(bad)/2] ^= 0x55
	os.WriteFile(damaged, bad, 0o644)
	if _, err := scratch.ImportDeb(ctx, apt, damaged); fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "SHA256") {
		t.Errorf("damaged package: %v, want bad input naming the SHA256", err)
	}
	truncated := filepath.Join(dir, "truncated.deb")
	os.WriteFile(truncated, data[:len(data)/3], 0o644)
	if _, err := scratch.ImportDeb(ctx, apt, truncated); fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated package: %v, want bad input saying truncated", err)
	}
	if rels, _ := scratch.Releases(ctx); len(rels) != 0 {
		t.Errorf("refused packages left releases: %v", rels)
	}
	for req, want := range map[string]string{"6.16": "Debian serves no linux-source-6.16", "7.2.7": "(it serves 7.2.13-1"} {
		r, _ := linuxtree.ParseRequest(req)
		_, err := linuxtree.Resolve(ctx, apt, r)
		if fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), want) {
			t.Errorf("Resolve(%s): %v, want bad input %q", req, err, want)
		}
	}
}
