package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=A U Thor", "GIT_AUTHOR_EMAIL=author@example.org",
		"GIT_COMMITTER_NAME=C O Mitter", "GIT_COMMITTER_EMAIL=committer@example.org",
		"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestApplyCommand runs `patcheval apply` and `patcheval checkout` on a
// small repository with a format-patch series (base-commit given).
func TestApplyCommand(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "repo")
	git(t, "", "init", "-q", "-b", "master", repo)
	os.WriteFile(filepath.Join(repo, "a.c"), []byte("one\ntwo\nthree\n"), 0o644)
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-q", "-m", "base")
	os.WriteFile(filepath.Join(repo, "a.c"), []byte("one\n2\nthree\n"), 0o644)
	git(t, repo, "commit", "-q", "-am", "a: two is 2", "-m", "Signed-off-by: A U Thor <author@example.org>")
	os.WriteFile(filepath.Join(repo, "b.c"), []byte("b\n"), 0o644)
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-q", "-m", "b: new file")
	mb := filepath.Join(t.TempDir(), "series.mbox")
	os.WriteFile(mb, []byte(git(t, repo, "format-patch", "-q", "--stdout", "--thread", "--cover-letter", "--base=HEAD~2", "HEAD~2")), 0o644)
	base := strings.TrimSpace(git(t, repo, "rev-parse", "HEAD~2"))

	var out, errb bytes.Buffer
	code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"apply", "--tree", repo, "-m", mb, "--branch", "test/series"})
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	o := out.String()
	for _, want := range []string{"base: " + base + " (base-commit " + base[:12] + " given in the series)", "1/2 a: two is 2", "2/2 b: new file", "branch: test/series -> ", "(created)"} {
		if !strings.Contains(o, want) {
			t.Errorf("apply output lacks %q:\n%s", want, o)
		}
	}
	if got, want := git(t, repo, "rev-parse", "test/series^{tree}"), git(t, repo, "rev-parse", "master^{tree}"); got != want {
		t.Errorf("applied tree %s, want %s", got, want)
	}
	out.Reset()
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"apply", "--tree", repo, "-m", mb, "--branch", "test/series"}); code != 0 || !strings.Contains(out.String(), "(unchanged)") {
		t.Errorf("re-run: exit %d\n%s", code, out.String())
	}
	// --base that the tree lacks: bad input.
	errb.Reset()
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"apply", "--tree", repo, "-m", mb, "--base", "v0.0"}); code != 2 || !strings.Contains(errb.String(), `--base "v0.0": not found`) {
		t.Errorf("--base v0.0: exit %d, %s", code, errb.String())
	}
	// master already has both patches: not a failure to apply but bad
	// input (exit 2) that says so per patch; nothing written.
	errb.Reset()
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"apply", "--tree", repo, "-m", mb, "--base", "master", "--branch", "test/fail"}); code != 2 ||
		!strings.Contains(errb.String(), "1/2 is already in master: the reverse applies cleanly (a: two is 2); 2/2 is already in master: the reverse applies cleanly (b: new file); nothing to apply") {
		t.Errorf("already applied: exit %d, %s", code, errb.String())
	}
	if err := exec.Command("git", "-C", repo, "rev-parse", "--verify", "-q", "refs/heads/test/fail").Run(); err == nil {
		t.Errorf("branch test/fail written")
	}
	// On a base where the first patch's context changed: exit 1.
	git(t, repo, "checkout", "-q", "-b", "moved", base)
	os.WriteFile(filepath.Join(repo, "a.c"), []byte("something else\n"), 0o644)
	git(t, repo, "commit", "-q", "-am", "a: moved on")
	errb.Reset()
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"apply", "--tree", repo, "-m", mb, "--base", "moved", "--branch", "test/fail"}); code != 1 || !strings.Contains(errb.String(), "patch 1/2 a: two is 2: a.c: hunk #1") {
		t.Errorf("non-applying: exit %d, %s", code, errb.String())
	}
	git(t, repo, "checkout", "-q", "master")

	// checkout, then incremental.
	dir := filepath.Join(t.TempDir(), "co")
	out.Reset()
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"checkout", "--tree", repo, base, dir}); code != 0 || !strings.Contains(out.String(), "1 files written") {
		t.Errorf("checkout: exit %d, %s %s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"checkout", "--verbose", "--tree", repo, "test/series", dir}); code != 0 || !strings.Contains(out.String(), "2 files written, 0 removed") || !strings.Contains(out.String(), "  b.c") {
		t.Errorf("incremental checkout: exit %d, %s %s", code, out.String(), errb.String())
	}
}
