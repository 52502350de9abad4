package testenv

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSkipSlowReadHereOnly: PATCHEVAL_SKIP_SLOW is read by SkipSlow and
// nowhere else, so that what "slow" means is decided in one place (it was
// read directly again twice after testenv existed).
func TestSkipSlowReadHereOnly(t *testing.T) {
	root := ModuleRoot()
	self := filepath.Join(root, "internal", "testenv", "testenv.go")
	const name = "PATCHEVAL_" + "SKIP_SLOW" // not spelled whole here
	reads := []string{`Getenv("` + name + `")`, `LookupEnv("` + name + `")`}
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(line, reads[0]) && !strings.Contains(line, reads[1]) {
				continue
			}
			found++
			if path != self {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d reads %s; use testenv.SkipSlow or SkipIfSlow", rel, i+1, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatalf("no file reads %s, not even testenv.go: the search is broken", name)
	}
}
