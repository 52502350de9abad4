package build

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/patcheval/patcheval/build/coverage"
)

// CoverageFile is the artifact file recording what the build compiled
// (build/coverage's text format).
const CoverageFile = "coverage.txt"

// Coverage returns what the artifact's build compiled. Artifacts built
// before the record existed get it from their workspace's O= directory
// when that still holds this build (same System.map); the record is then
// stored with the artifact.
func (a *Artifact) Coverage() (*coverage.Record, error) {
	p := filepath.Join(a.Dir, CoverageFile)
	if b, err := os.ReadFile(p); err == nil {
		return coverage.Decode(b)
	}
	var src, out string
	args := a.Meta.Build.MakeCommand
	for i, arg := range args {
		switch {
		case arg == "-C" && i+1 < len(args):
			src = args[i+1]
		case strings.HasPrefix(arg, "O="):
			out = strings.TrimPrefix(arg, "O=")
		}
	}
	if src == "" || out == "" {
		return nil, fmt.Errorf("build %s: no coverage record and no O= directory in its make command", a.Dir)
	}
	mine, err1 := os.ReadFile(a.SystemMap)
	theirs, err2 := readBelow(out, "System.map")
	if err1 != nil || err2 != nil || !bytes.Equal(mine, theirs) {
		return nil, fmt.Errorf("build %s: no coverage record, and its O= directory %s now holds another build", a.Dir, out)
	}
	rec, err := coverage.FromObjDir(src, out)
	if err != nil {
		return nil, err
	}
	writeAtomic(p, rec.Encode())
	return rec, nil
}

func writeAtomic(p string, data []byte) error {
	tmp := fmt.Sprintf("%s.tmp%d", p, os.Getpid())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
