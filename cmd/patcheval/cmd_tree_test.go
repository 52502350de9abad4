package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testenv"
)

// TestTreeImportExitCodes: a version that is no version and flags that
// do not go together are bad input (2), an unreachable mirror is
// infrastructure (3) and imports nothing, a kernel.org-style tarball is
// imported under its tag and listed.
func TestTreeImportExitCodes(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATCHEVAL_CACHE_DIR", filepath.Join(dir, "cache"))
	t.Setenv("PATCHEVAL_DEBIAN_MIRROR", "http://127.0.0.1:1/debian")
	tree := filepath.Join(dir, "rel.git")
	tr := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, append([]string{"tree"}, args...))
		return code, out.String(), errb.String()
	}
	if code, _, errb := tr("import", "--tree", tree, "7.2.13x"); code != 2 || !strings.Contains(errb, `unknown kernel version "7.2.13x"`) {
		t.Errorf("unknown version: exit %d, %s", code, errb)
	}
	if code, _, errb := tr("import", "--tree", tree, "--tarball", "x.tar.xz"); code != 2 || !strings.Contains(errb, "go together") {
		t.Errorf("--tarball without --tag: exit %d, %s", code, errb)
	}
	code, _, errb := tr("import", "--tree", tree, "7.2")
	if code != 3 || !strings.Contains(errb, "network or mirror") || strings.Count(strings.TrimSpace(errb), "\n") > 1 {
		t.Errorf("unreachable mirror: exit %d, want 3 and one line naming the network:\n%s", code, errb)
	}
	if _, err := os.Stat(filepath.Join(tree, "refs", "tags", "v7.2")); err == nil {
		t.Errorf("a failed import left a tag")
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	when := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	tw.WriteHeader(&tar.Header{Name: "linux-7.4-rc1/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: when})
	tw.WriteHeader(&tar.Header{Name: "linux-7.4-rc1/Makefile", Typeflag: tar.TypeReg, Mode: 0o644, Size: 12, ModTime: when})
	tw.Write([]byte("VERSION = 7\n"))
	tw.Close()
	tarball := filepath.Join(dir, "linux-7.4-rc1.tar")
	os.WriteFile(tarball, buf.Bytes(), 0o644)
	if code, out, errb := tr("import", "--tree", tree, "--tarball", tarball, "--tag", "v7.4-rc1"); code != 0 || !strings.Contains(out, "v7.4-rc1") {
		t.Fatalf("tarball import: exit %d\n%s\n%s", code, out, errb)
	}
	code, out, errb := tr("list", "--tree", tree, "--json")
	var list struct {
		Releases []struct{ Tag, Version, Origin string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Releases) != 1 ||
		list.Releases[0].Version != "7.4~rc1" || list.Releases[0].Origin != "tarball linux-7.4-rc1.tar" {
		t.Errorf("tree list --json: exit %d %+v\n%s%s", code, list, out, errb)
	}
}

// TestTreeImportDebianCached: a Debian release already in the tree is
// not fetched again: `tree import 7.2.13` answers from the tree, with no
// mirror reachable.
func TestTreeImportDebianCached(t *testing.T) {
	tree := testenv.LinuxRelease(t, "7.2.13")
	t.Setenv("PATCHEVAL_DEBIAN_MIRROR", "http://127.0.0.1:1/debian")
	var out, errb bytes.Buffer
	code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"tree", "import", "--tree", tree, "7.2.13"})
	if code != 0 || !strings.Contains(out.String(), "v7.2.13") || !strings.Contains(out.String(), "already imported") {
		t.Errorf("exit %d\n%s%s", code, out.String(), errb.String())
	}
}
