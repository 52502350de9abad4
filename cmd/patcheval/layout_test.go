package main

import (
	"go/ast"
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
	err := walkSources(root, func(path, rel string) error {
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

// walkSources calls fn with the path and the module-relative name of
// every Go source file under root (tests, testdata and .git aside).
func walkSources(root string, fn func(path, rel string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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
		return fn(path, rel)
	})
}

// maxFuncLines is the developers' guide's limit on a function's length.
const maxFuncLines = 120

// TestNoLongFunctions holds the limit on a function's length (the
// developers' guide: no function over 120 lines) in the whole module
// (tests and testdata aside). A function that grows past it becomes
// named steps.
func TestNoLongFunctions(t *testing.T) {
	root := testenv.ModuleRoot()
	fset := token.NewFileSet()
	funcs := 0
	err := walkSources(root, func(path, rel string) error {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, long := range longFunctions(fset, f, maxFuncLines) {
			t.Errorf("%s: %s: over %d lines: make it named steps", rel, long, maxFuncLines)
		}
		for _, decl := range f.Decls {
			if _, ok := decl.(*ast.FuncDecl); ok {
				funcs++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if funcs < 2000 {
		t.Fatalf("only %d functions found in the module: the walk missed the tree", funcs)
	}
}

// longFunctions names f's functions (and methods) of more than limit
// lines, with their length.
func longFunctions(fset *token.FileSet, f *ast.File, limit int) []string {
	var out []string
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
		if n <= limit {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			name = recvName(fd.Recv.List[0].Type) + "." + name
		}
		out = append(out, strconv.Itoa(n)+" lines: "+name)
	}
	return out
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "(*" + strings.Trim(recvName(t.X), "()") + ")"
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

// The check finds a long function (it would pass on nothing otherwise).
func TestLongFunctionsFound(t *testing.T) {
	src := "package x\n\nfunc (s *S) long() {\n" + strings.Repeat("\t_ = 1\n", maxFuncLines) + "}\n\nfunc short() {}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := longFunctions(fset, f, maxFuncLines)
	if len(got) != 1 || got[0] != strconv.Itoa(maxFuncLines+2)+" lines: (*S).long" {
		t.Errorf("long functions %q, want the 122-line (*S).long alone", got)
	}
}
