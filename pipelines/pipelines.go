// Package pipelines reads pipeline files: TOML documents that say what an
// evaluation builds and runs — the tree and base, the architectures, the
// base config and fragments, the Variants (Kconfig symbols, kernel command
// line, runtime knobs, whether the Series is applied), the benchmarks and
// their parameters, the repeats, the Target, deterministic mode, and the
// comparisons and isolation chains the report shows.
//
// Load and Parse validate everything they can without a kernel tree and
// name file:line for every problem: unknown keys, wrong types, unknown
// variants in comparisons and chains, impossible combinations. A Pipeline
// maps 1:1 onto work: Builds() is the distinct kernels to build (variants
// that differ only at run time share one), Runs() is the interleaved list
// of boots (A B A B ...), each a BootPlan: its evaluate.BootKey, its
// guest.Plan, target and build. pipelines/runner evaluates a series with a
// Pipeline; the files here are the spec, one concept each (model, schema,
// validate, mismatch, errors, builtins, plan).
//
// The pipelines shipped in this directory are embedded in the binary:
// Builtin(name), List(), and Find(nameOrPath) for the CLI. See the top of
// each .toml file for what it reproduces, and README.md for the format.
package pipelines

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/patcheval/patcheval/internal/fail"
)

// Load reads and validates the pipeline file at path.
func Load(path string) (*Pipeline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fail.Inputf("pipeline %s: no such file (builtin pipelines: %s)", path, strings.Join(List(), ", "))
		}
		return nil, fail.Infraf("pipeline %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return parse(data, path, filepath.Dir(abs))
}

// Parse validates a pipeline held in memory; name is used in messages and
// relative fragment paths resolve against its directory.
func Parse(data []byte, name string) (*Pipeline, error) {
	dir := ""
	if name != "" {
		if abs, err := filepath.Abs(name); err == nil {
			dir = filepath.Dir(abs)
		}
	}
	return parse(data, name, dir)
}

// Find loads nameOrPath as a file when it exists, else as a builtin
// pipeline name: what --pipeline takes.
func Find(nameOrPath string) (*Pipeline, error) {
	if _, err := os.Stat(nameOrPath); err == nil {
		return Load(nameOrPath)
	}
	if !strings.ContainsRune(nameOrPath, os.PathSeparator) || strings.HasPrefix(nameOrPath, "pipelines/") {
		if p, err := Builtin(nameOrPath); err == nil {
			return p, nil
		}
	}
	return Load(nameOrPath)
}

func parse(data []byte, file, dir string) (*Pipeline, error) {
	if file == "" {
		file = "<pipeline>"
	}
	var raw rawPipeline
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, Errors{{File: file, Line: pe.Position.Line, Msg: pe.Message}}
		}
		// A type mismatch: BurntSushi names the key but, inside an array
		// of tables, the line of its last occurrence. Find the exact one.
		ix := indexLines(string(data))
		var generic map[string]any
		if _, gerr := toml.Decode(string(data), &generic); gerr == nil {
			if path, msg := mismatch(reflect.TypeOf(raw), generic, ""); path != "" {
				return nil, Errors{{File: file, Line: ix.line(path), Msg: msg}}
			}
		}
		msg := strings.TrimPrefix(err.Error(), "toml: ")
		line := 0
		if m := regexp.MustCompile(`^line (\d+) (.*)$`).FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		return nil, Errors{{File: file, Line: line, Msg: msg}}
	}
	ps := &parser{file: file, dir: dir, ix: indexLines(string(data)), md: md}
	for _, k := range md.Undecoded() {
		lines := ps.ix.matching(k.String())
		if len(lines) == 0 {
			lines = []int{0}
		}
		for _, l := range lines {
			ps.errs = append(ps.errs, &Error{File: file, Line: l, Msg: fmt.Sprintf("unknown key %q%s", k.String(), knownKeysHint(k))})
		}
	}
	p := ps.build(&raw)
	if len(ps.errs) > 0 {
		sort.SliceStable(ps.errs, func(i, j int) bool { return ps.errs[i].Line < ps.errs[j].Line })
		return nil, ps.errs
	}
	p.Warnings, p.Source = ps.warn, data
	return p, nil
}
