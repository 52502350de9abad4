package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/gittree/gittest"
	"github.com/patcheval/patcheval/pipelines"
)

// --cover reads the patched tree's Makefiles through the git objects and
// adds the symbols that build the series' C files to every kernel.
func TestWithCoverReadsTheTree(t *testing.T) {
	repo := gittest.NewRepo(t, map[string]string{
		"drivers/Makefile":     "obj-$(CONFIG_FOO) += foo/\n",
		"drivers/foo/Makefile": "obj-$(CONFIG_FOO_BAR) += bar.o\n",
		"drivers/foo/bar.c":    "int bar;\n",
	})
	patched := strings.TrimSpace(gittest.Run(t, repo, "rev-parse", "HEAD"))
	p := &pipelines.Pipeline{Variants: []pipelines.Variant{{Name: "base", Symbols: map[string]string{"FOO": "m"}}}}
	dir := t.TempDir()
	cp, note, err := withCover(p, repo, patched, []string{"drivers/foo/bar.c", "README"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	frag, err := os.ReadFile(filepath.Join(dir, "cover.config"))
	if err != nil || !strings.Contains(string(frag), "FOO_BAR=y") {
		t.Fatalf("fragment %q, %v (note %q)", frag, err, note)
	}
	if got := cp.Variants[0].Symbols; got["FOO_BAR"] != "y" || got["FOO"] != "m" {
		t.Errorf("symbols %v: want FOO_BAR=y added and FOO=m kept", got)
	}
	if _, _, err := withCover(p, t.TempDir(), patched, nil, dir); err == nil {
		t.Error("--cover on a directory that is no repository succeeded")
	}
}
