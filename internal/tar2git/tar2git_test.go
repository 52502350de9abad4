package tar2git

import (
	"archive/tar"
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// archive builds a tar with the kinds of entries a source tarball has, and
// some it rarely has (hard link, FIFO, a replaced entry, long names).
func archive(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	long := "top/" + strings.Repeat("deep/", 30) + "file.c"
	add := func(h *tar.Header, body string) {
		h.ModTime = time.Unix(1670768100, 0)
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if body != "" && h.Typeflag == tar.TypeReg {
			tw.Write([]byte(body))
		}
	}
	add(&tar.Header{Name: "top/", Typeflag: tar.TypeDir, Mode: 0o755}, "")
	add(&tar.Header{Name: "top/Makefile", Typeflag: tar.TypeReg, Mode: 0o644}, "all:\n")
	add(&tar.Header{Name: "top/scripts/", Typeflag: tar.TypeDir, Mode: 0o755}, "")
	add(&tar.Header{Name: "top/scripts/run.sh", Typeflag: tar.TypeReg, Mode: 0o755}, "#!/bin/sh\n")
	add(&tar.Header{Name: "top/scripts/exec-owner-only", Typeflag: tar.TypeReg, Mode: 0o744}, "x\n")
	add(&tar.Header{Name: "top/empty", Typeflag: tar.TypeReg, Mode: 0o644}, "")
	add(&tar.Header{Name: "top/.gitignore", Typeflag: tar.TypeReg, Mode: 0o644}, "*\n")
	add(&tar.Header{Name: "top/link", Typeflag: tar.TypeSymlink, Linkname: "scripts/run.sh"}, "")
	add(&tar.Header{Name: "top/dangling", Typeflag: tar.TypeSymlink, Linkname: "../nowhere"}, "")
	add(&tar.Header{Name: "top/hard", Typeflag: tar.TypeLink, Linkname: "top/Makefile"}, "")
	add(&tar.Header{Name: "top/fifo", Typeflag: tar.TypeFifo, Mode: 0o644}, "")
	add(&tar.Header{Name: long, Typeflag: tar.TypeReg, Mode: 0o644}, "int x;\n")
	add(&tar.Header{Name: "top/with space.txt", Typeflag: tar.TypeReg, Mode: 0o644}, "s\n")
	add(&tar.Header{Name: "top/Makefile", Typeflag: tar.TypeReg, Mode: 0o644}, "all: again\n")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func git(t *testing.T, dir string, stdin []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=patcheval import", "GIT_AUTHOR_EMAIL=import@patcheval.invalid",
		"GIT_COMMITTER_NAME=patcheval import", "GIT_COMMITTER_EMAIL=import@patcheval.invalid",
		"GIT_AUTHOR_DATE=2022-12-11T14:15:00Z", "GIT_COMMITTER_DATE=2022-12-11T14:15:00Z")
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestSameCommitAsGitAdd: the fast-import stream makes the very commit that
// extracting the archive and `git add -f -A` + `git commit` make (what
// scripts/linux-tree.sh did before), tag and branch included.
func TestSameCommitAsGitAdd(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	data := archive(t)
	tmp := t.TempDir()

	src := filepath.Join(tmp, "src")
	os.MkdirAll(src, 0o755)
	tarCmd := exec.Command("tar", "-x", "-C", src)
	tarCmd.Stdin = bytes.NewReader(data)
	if out, err := tarCmd.CombinedOutput(); err != nil {
		t.Fatalf("tar -x: %v\n%s", err, out)
	}
	ref := filepath.Join(tmp, "ref.git")
	git(t, tmp, nil, "init", "-q", "--bare", ref)
	work := filepath.Join(src, "top")
	git(t, work, nil, "--git-dir="+ref, "--work-tree="+work, "add", "-f", "-A", ".")
	git(t, work, nil, "--git-dir="+ref, "--work-tree="+work, "commit", "-q", "-m", "Linux test (archive)")
	want := git(t, tmp, nil, "--git-dir="+ref, "rev-parse", "HEAD")

	var stream bytes.Buffer
	w := bufio.NewWriter(&stream)
	o := Options{Branch: "master", Tag: "v-test", Message: "Linux test (archive)",
		Name: "patcheval import", Email: "import@patcheval.invalid",
		Date: time.Unix(1670768100, 0), Strip: true}
	res, err := Convert(bytes.NewReader(data), w, o)
	n := res.Files
	if err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if n != 10 {
		t.Errorf("convert: %d paths, want 10 (FIFO and directories left out, Makefile once)", n)
	}
	got := filepath.Join(tmp, "got.git")
	git(t, tmp, nil, "init", "-q", "--bare", got)
	git(t, tmp, stream.Bytes(), "--git-dir="+got, "fast-import", "--quiet", "--done")
	for _, ref := range []string{"refs/heads/master", "refs/tags/v-test"} {
		if id := git(t, tmp, nil, "--git-dir="+got, "rev-parse", ref); id != want {
			t.Errorf("%s = %s, want the git add commit %s\n%s\nwant tree:\n%s", ref, id, want,
				git(t, tmp, nil, "--git-dir="+got, "ls-tree", "-r", id),
				git(t, tmp, nil, "--git-dir="+ref, "ls-tree", "-r", want))
		}
	}
}

func TestRefusesEscapesAndStrays(t *testing.T) {
	for name, entries := range map[string][]string{
		"parent":        {"top/../../etc/passwd"},
		"absolute":      {"/etc/passwd"},
		"git dir":       {"top/.git/config"},
		"second top":    {"top/a", "other/b"},
		"file as dir":   {"top/a", "top/a/b"},
		"empty archive": {},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, e := range entries {
			tw.WriteHeader(&tar.Header{Name: e, Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
			tw.Write([]byte("x"))
		}
		tw.Close()
		var out bytes.Buffer
		if _, err := Convert(&buf, bufio.NewWriter(&out), Options{Message: "m", Strip: true}); err == nil {
			t.Errorf("%s: converted without error", name)
		}
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"a/b c.txt":  "a/b c.txt",
		`"q`:         `"\"q"`,
		"new\nline":  `"new\012line"`,
		`back\slash`: `"back\\slash"`,
	} {
		if got := quote(in); got != want {
			t.Errorf("quote(%q) = %s, want %s", in, got, want)
		}
	}
}
