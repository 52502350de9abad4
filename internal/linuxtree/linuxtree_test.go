package linuxtree

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testgit"
)

// tarball writes a small kernel.org-style tarball (one top directory,
// every entry at date) holding files.
func tarball(t *testing.T, dir, name string, date time.Time, files map[string]string) string {
	t.Helper()
	return testgit.Tarball(t, dir, name, date, files)
}

func rev(t *testing.T, repo, what string) string {
	t.Helper()
	out, err := exec.Command("git", "--git-dir="+repo, "rev-parse", what).CombinedOutput()
	if err != nil {
		t.Fatalf("rev-parse %s: %v %s", what, err, out)
	}
	return strings.TrimSpace(string(out))
}

func importTarball(t *testing.T, repo *Repo, file, tag string) Result {
	t.Helper()
	src, err := TarballSource(file, tag)
	if err != nil {
		t.Fatal(err)
	}
	res, err := repo.ImportSource(context.Background(), src)
	if err != nil {
		t.Fatalf("import %s: %v", tag, err)
	}
	return res
}

// TestSameSetSameHistory: the history is a function of the set of
// releases: imported in any order, the same commit ids, the releases
// chained oldest first by version (1.2 < 1.3 < 1.10, not as strings),
// master at the newest, and an older release imported later relinks the
// newer ones.
func TestSameSetSameHistory(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"v1.2":  tarball(t, dir, "linux-1.2.tar.gz", time.Unix(1e9, 0), map[string]string{"Makefile": "SUBLEVEL = 2\n", "a.c": "a\n"}),
		"v1.3":  tarball(t, dir, "linux-1.3.tar.gz", time.Unix(1.1e9, 0), map[string]string{"Makefile": "SUBLEVEL = 3\n", "a.c": "a\n"}),
		"v1.10": tarball(t, dir, "linux-1.10.tar.gz", time.Unix(1.2e9, 0), map[string]string{"Makefile": "SUBLEVEL = 10\n", "b.c": "b\n"}),
	}
	a := &Repo{Path: filepath.Join(dir, "a.git")}
	b := &Repo{Path: filepath.Join(dir, "b.git")}
	for _, tag := range []string{"v1.10", "v1.2"} {
		importTarball(t, a, files[tag], tag)
	}
	res := importTarball(t, a, files["v1.3"], "v1.3")
	if !res.Imported || len(res.Moved) != 1 || res.Moved[0] != "v1.10" {
		t.Errorf("importing v1.3 between v1.2 and v1.10: %+v, want imported and v1.10 relinked", res)
	}
	for _, tag := range []string{"v1.3", "v1.2", "v1.10"} {
		importTarball(t, b, files[tag], tag)
	}
	for _, tag := range []string{"v1.2", "v1.3", "v1.10", "master"} {
		if x, y := rev(t, a.Path, tag), rev(t, b.Path, tag); x != y {
			t.Errorf("%s: %s in one order, %s in another", tag, x, y)
		}
	}
	if rev(t, a.Path, "v1.10^") != rev(t, a.Path, "v1.3") || rev(t, a.Path, "v1.3^") != rev(t, a.Path, "v1.2") || rev(t, a.Path, "master") != rev(t, a.Path, "v1.10") {
		t.Errorf("chain is not v1.2 <- v1.3 <- v1.10 = master")
	}
	if _, err := exec.Command("git", "--git-dir="+a.Path, "rev-parse", "-q", "--verify", "v1.2^").Output(); err == nil {
		t.Errorf("v1.2, the oldest, has a parent")
	}
	out, _ := exec.Command("git", "--git-dir="+a.Path, "log", "-1", "--format=%an <%ae> %at%n%B", "v1.3").Output()
	for _, want := range []string{"patcheval import <import@patcheval.invalid> 1100000000", "Linux 1.3 (linux-1.3.tar.gz)", "Patcheval-Source: tarball linux-1.3.tar.gz"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("v1.3's commit lacks %q:\n%s", want, out)
		}
	}
	rels, err := a.Releases(context.Background())
	if err != nil || len(rels) != 3 || rels[0].Tag != "v1.2" || rels[2].Tag != "v1.10" {
		t.Errorf("Releases = %+v, %v", rels, err)
	}
}

// TestImportIdempotentAndRefusals: the same source again imports
// nothing; another source under the same tag, a tag the import did not
// make and a truncated tarball are refused as bad input, leaving the refs
// as they were and no quarantine behind.
func TestImportIdempotentAndRefusals(t *testing.T) {
	dir := t.TempDir()
	repo := &Repo{Path: filepath.Join(dir, "r.git")}
	one := tarball(t, dir, "linux-2.0.tar.gz", time.Unix(1e9, 0), map[string]string{"Makefile": strings.Repeat("x", 1<<16)})
	importTarball(t, repo, one, "v2.0")
	before := rev(t, repo.Path, "master")
	if res := importTarball(t, repo, one, "v2.0"); res.Imported {
		t.Errorf("second import of the same tarball imported again")
	}
	other := tarball(t, dir, "other-2.0.tar.gz", time.Unix(1e9, 0), map[string]string{"Makefile": "y"})
	src, _ := TarballSource(other, "v2.0")
	if _, err := repo.ImportSource(context.Background(), src); fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "already holds") {
		t.Errorf("another tarball under v2.0: %v, want bad input 'already holds'", err)
	}
	exec.Command("git", "--git-dir="+repo.Path, "tag", "v2.1", "master").Run()
	src, _ = TarballSource(other, "v2.1")
	if _, err := repo.ImportSource(context.Background(), src); fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "not made by") {
		t.Errorf("a user's tag v2.1: %v, want bad input", err)
	}
	data, _ := os.ReadFile(tarball(t, dir, "linux-2.2.tar.gz", time.Unix(1e9, 0), map[string]string{"Makefile": strings.Repeat("z\n", 1<<18)}))
	cut := filepath.Join(dir, "cut-2.2.tar.gz")
	os.WriteFile(cut, data[:len(data)/2], 0o644)
	src, err := TarballSource(cut, "v2.2")
	if err != nil {
		t.Fatal(err)
	}
	_, err = repo.ImportSource(context.Background(), src)
	if fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "cut-2.2.tar.gz") {
		t.Errorf("truncated tarball: %v, want bad input naming the file", err)
	}
	if rev(t, repo.Path, "master") != before {
		t.Errorf("master moved after failed imports")
	}
	if out, _ := exec.Command("git", "--git-dir="+repo.Path, "tag", "-l", "v2.2").Output(); len(out) != 0 {
		t.Errorf("truncated import left tag v2.2")
	}
	if left, _ := filepath.Glob(filepath.Join(repo.Path, "import-*")); len(left) != 0 {
		t.Errorf("quarantine left behind: %v", left)
	}
	for _, bad := range []string{"2.2", "v2", "v2.2-foo"} {
		if _, err := TarballSource(one, bad); fail.KindOf(err) != fail.KindInput {
			t.Errorf("tag %q: %v, want bad input", bad, err)
		}
	}
}

func TestParseRequest(t *testing.T) {
	for in, want := range map[string]Request{
		"6.1":              {Series: "6.1"},
		"v7.2":             {Series: "7.2"},
		"7.2.13":           {Series: "7.2", Upstream: "7.2.13"},
		"7.2.12-1~bpo13+1": {Series: "7.2", Upstream: "7.2.12", Debian: "7.2.12-1~bpo13+1"},
		"7.3-rc2":          {Series: "7.3", Upstream: "7.3~rc2"},
	} {
		got, err := ParseRequest(in)
		if err != nil || got != want {
			t.Errorf("ParseRequest(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "7", "latest", "7.2.13x", "linux-7.2"} {
		if _, err := ParseRequest(bad); fail.KindOf(err) != fail.KindInput {
			t.Errorf("ParseRequest(%q): %v, want bad input", bad, err)
		}
	}
	if tag := VersionTag("7.3~rc2"); tag != "v7.3-rc2" {
		t.Errorf("VersionTag(7.3~rc2) = %s", tag)
	}
}
