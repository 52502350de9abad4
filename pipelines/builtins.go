package pipelines

import (
	"embed"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
)

//go:embed *.toml
var builtin embed.FS

// List names the builtin pipelines, sorted.
func List() []string {
	ents, _ := fs.ReadDir(builtin, ".")
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".toml"); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Builtin returns the shipped pipeline called name ("ppc-preempt-dynamic";
// a ".toml" suffix is accepted).
func Builtin(name string) (*Pipeline, error) {
	name = strings.TrimSuffix(filepath.Base(name), ".toml")
	data, err := builtin.ReadFile(name + ".toml")
	if err != nil {
		return nil, fail.Inputf("no builtin pipeline %q (have %s)", name, strings.Join(List(), ", "))
	}
	return parse(data, "pipelines/"+name+".toml", "")
}

// BuiltinSource returns the text of a shipped pipeline, e.g. to copy and
// edit it.
func BuiltinSource(name string) ([]byte, error) {
	data, err := builtin.ReadFile(strings.TrimSuffix(name, ".toml") + ".toml")
	if err != nil {
		return nil, fail.Inputf("no builtin pipeline %q (have %s)", name, strings.Join(List(), ", "))
	}
	return data, nil
}
