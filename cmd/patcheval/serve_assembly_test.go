package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
)

// TestServeFeaturesAssembledInOnePlace: what serve runs beside its core
// is listed in one place, serve_assembly.go's serveFeatures, not
// registered by init functions spread over the package: every init in
// cmd/patcheval only registers commands.
func TestServeFeaturesAssembledInOnePlace(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testenv.ModuleRoot(), "cmd", "patcheval", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	inits := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Name.Name != "init" {
				continue
			}
			inits++
			for _, st := range fn.Body.List {
				if call, ok := st.(*ast.ExprStmt); ok {
					if c, ok := call.X.(*ast.CallExpr); ok {
						if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "register" {
							continue
						}
					}
				}
				t.Errorf("%s: an init does more than register a command: a feature of serve goes in serve_assembly.go's serveFeatures",
					fset.Position(st.Pos()))
			}
		}
	}
	if inits < 10 {
		t.Fatalf("found only %d init functions: the walk is broken", inits)
	}
}
