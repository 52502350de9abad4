package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestDefaultEverywhere: watch add and bisect take the default pipeline
// (with --arch) as lore does; a watch's pipeline file is stored by its
// absolute path; --arch with another pipeline is refused.
func TestDefaultEverywhere(t *testing.T) {
	t.Setenv("PATCHEVAL_STATE_DIR", t.TempDir())
	t.Setenv("PATCHEVAL_CONFIG_DIR", t.TempDir())
	t.Setenv("PATCHEVAL_CACHE_DIR", t.TempDir())
	tree := t.TempDir()
	add := []string{"watch", "add", "--remote", "https://git.example/linux.git", "--tags", "v6.*", "--tree", tree}
	if _, errOut, code := runsCLI(t, append(add, "--pipeline", "default")...); code != 2 || !strings.Contains(errOut, "--series") {
		t.Errorf("watch add --pipeline default without a series: %d %q, want 2 asking for --series", code, errOut)
	}
	if _, errOut, code := runsCLI(t, append(add, "--pipeline", "selinux-tax", "--arch", "arm64")...); code != 2 || !strings.Contains(errOut, "--arch goes with --pipeline default") {
		t.Errorf("watch add --arch with a shipped pipeline: %d %q", code, errOut)
	}
	if out, errOut, code := runsCLI(t, append(add, "--name", "d", "--pipeline", "default", "--arch", "arm64", "--series", "a@example.org")...); code != 0 {
		t.Fatalf("watch add --pipeline default --arch arm64 --series: %d %q %q", code, out, errOut)
	}
	src, _ := pipelines.BuiltinSource("selinux-tax")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mine.toml"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if out, errOut, code := runsCLI(t, append(add, "--name", "f", "--pipeline", "mine.toml")...); code != 0 {
		t.Fatalf("watch add --pipeline mine.toml: %d %q %q", code, out, errOut)
	}
	out, _, _ := runsCLI(t, "watch", "list", "--json")
	var ws []store.Watch
	if err := json.Unmarshal([]byte(out), &ws); err != nil {
		t.Fatalf("watch list --json: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, w := range ws {
		got[w.Name] = w.Pipeline
	}
	if got["d"] != "default:arm64" || got["f"] != filepath.Join(dir, "mine.toml") {
		t.Errorf("stored pipelines %v: want d default:arm64, f %s", got, filepath.Join(dir, "mine.toml"))
	}

	repo := testgit.InitBare(t, filepath.Join(t.TempDir(), "r.git"))
	c0 := testgit.Commit(t, repo, "", "base", "2026-11-02T09:00:00Z", map[string]string{"README": "x\n"})
	c1 := testgit.Commit(t, repo, c0, "change", "2026-11-02T10:00:00Z", map[string]string{"README": "y\n"})
	if _, errOut, code := runsCLI(t, "bisect", "--tree", repo, "--good", c0, "--bad", c1, "--pipeline", "default", "--arch", "arm64", "--benchmark", "nope"); code != 2 || !strings.Contains(errOut, `no benchmark "nope"`) {
		t.Errorf("bisect --pipeline default: %d %q, want the pipeline found and the benchmark refused", code, errOut)
	}
}
