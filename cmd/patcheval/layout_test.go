package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
)

// TestImportsRunOneWay holds the layout rule of the developers' guide:
// imports run one way, cmd -> pipelines -> evaluate, build, series ->
// mbox -> internal. No package (tests aside) imports one of a higher layer.
func TestImportsRunOneWay(t *testing.T) {
	const module = "github.com/patcheval/patcheval/"
	layer := map[string]int{"internal": 0, "mbox": 1, "series": 2, "build": 2, "evaluate": 2, "pipelines": 3, "cmd": 4, "scripts": 4, "bench": 4}
	root := testenv.ModuleRoot()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		top := strings.Split(filepath.ToSlash(rel), "/")[0]
		from, ok := layer[top]
		if !ok {
			t.Errorf("%s: top-level directory %q is not in the layout (cmd, pipelines, evaluate, build, series, mbox, internal, bench, scripts)", rel, top)
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module) {
				continue
			}
			to := strings.Split(strings.TrimPrefix(p, module), "/")[0]
			if layer[to] > from {
				t.Errorf("%s imports %s: %s may not import %s (cmd -> pipelines -> evaluate, build, series -> mbox -> internal)", rel, p, top, to)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d files: the walk is broken", checked)
	}
}
