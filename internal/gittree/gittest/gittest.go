// Package gittest is test support for code that touches git trees: small
// repositories made with the git CLI (NewRepo, WriteFiles, Run), and
// listings that compare a checkout directory with git ls-tree (LsTree,
// DirListing, DiffLists).
package gittest

import (
	"bytes"
	"crypto/sha1"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/patcheval/patcheval/internal/gittree"
)

// CloneBare makes a private bare clone (objects hard-linked) of src.
func CloneBare(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "linux.git")
	Run(t, "", "clone", "-q", "--bare", src, dst)
	return dst
}

// Run runs git in dir and returns its stdout; it fails the test on error.
func Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := Cmd(dir, nil, args...)
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// Cmd runs git in dir with a pinned identity and date (and env added)
// and returns its stdout.
func Cmd(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Test Author", "GIT_AUTHOR_EMAIL=author@example.org",
		"GIT_COMMITTER_NAME=Test Committer", "GIT_COMMITTER_EMAIL=committer@example.org",
		"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z")
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%v: %s", err, stderr.String())
	}
	return string(out), nil
}

// LsTree lists "mode hash path" of every blob, symlink and submodule in rev
// (git ls-tree -r), sorted.
func LsTree(t testing.TB, repo, rev string) []string {
	t.Helper()
	out := Run(t, "", "--git-dir="+repo, "ls-tree", "-r", "-z", rev)
	var lines []string
	for _, rec := range strings.Split(out, "\x00") {
		if rec == "" {
			continue
		}
		meta, path, _ := strings.Cut(rec, "\t")
		f := strings.Fields(meta) // mode type hash
		lines = append(lines, f[0]+" "+f[2]+" "+path)
	}
	sort.Strings(lines)
	return lines
}

// DirListing lists a checkout directory in LsTree's form by hashing every
// file as a git blob (the state file is left out).
func DirListing(t testing.TB, dir string) []string {
	t.Helper()
	var lines []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == gittree.StateFile || rel == gittree.LockName {
			return nil
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var mode string
			var data []byte
			fi, err := os.Lstat(p)
			if err != nil {
				t.Error(err)
				return
			}
			switch {
			case fi.Mode()&fs.ModeSymlink != 0:
				mode = "120000"
				target, err := os.Readlink(p)
				if err != nil {
					t.Error(err)
					return
				}
				data = []byte(target)
			default:
				mode = "100644"
				if fi.Mode()&0o100 != 0 {
					mode = "100755"
				}
				data, err = os.ReadFile(p)
				if err != nil {
					t.Error(err)
					return
				}
			}
			h := sha1.New()
			fmt.Fprintf(h, "blob %d\x00", len(data))
			h.Write(data)
			mu.Lock()
			lines = append(lines, fmt.Sprintf("%s %x %s", mode, h.Sum(nil), filepath.ToSlash(rel)))
			mu.Unlock()
		}()
		return nil
	})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return lines
}

// DiffLists reports the first differences of two sorted listings.
func DiffLists(want, got []string) string {
	w := map[string]bool{}
	for _, l := range want {
		w[l] = true
	}
	g := map[string]bool{}
	for _, l := range got {
		g[l] = true
	}
	var b strings.Builder
	n := 0
	for _, l := range want {
		if !g[l] && n < 10 {
			fmt.Fprintf(&b, "  missing: %s\n", l)
			n++
		}
	}
	for _, l := range got {
		if !w[l] && n < 20 {
			fmt.Fprintf(&b, "  extra:   %s\n", l)
			n++
		}
	}
	return b.String()
}

// NewRepo makes a non-bare repository in a temp dir with files (path ->
// content; a "120000:" prefix makes a symlink, "100755:" an executable)
// committed as "base", and returns its path.
func NewRepo(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	Run(t, "", "init", "-q", "-b", "master", dir)
	WriteFiles(t, dir, files)
	Run(t, dir, "add", "-A")
	Run(t, dir, "commit", "-q", "-m", "base")
	Run(t, dir, "tag", "base")
	return dir
}

// WriteFiles writes files (path -> content, prefixes as for NewRepo)
// into dir.
func WriteFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Remove(full)
		switch {
		case strings.HasPrefix(c, "120000:"):
			if err := os.Symlink(strings.TrimPrefix(c, "120000:"), full); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(c, "100755:"):
			if err := os.WriteFile(full, []byte(strings.TrimPrefix(c, "100755:")), 0o755); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
