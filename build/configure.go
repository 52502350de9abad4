package build

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
)

func numCPU() int { return runtime.NumCPU() }

// ConfigError says that the final .config does not hold what the Variant
// asked for. It is bad input (exit 2): the request cannot be built as
// asked on this tree.
type ConfigError struct {
	Arch, Variant string
	Problems      []ConfigProblem
}

// ConfigProblem is one requested symbol that did not hold.
type ConfigProblem struct {
	Symbol    string `json:"symbol"`
	Requested string `json:"requested"`
	// Final is the value in the final .config ("" when the symbol is not
	// in it at all).
	Final string `json:"final"`
	// Kind: "missing" (no such symbol in this tree), "dropped" or "changed".
	Kind string `json:"kind"`
	// Why explains it from the tree's Kconfig files (unmet depends on, a
	// choice, ...), when known.
	Why string `json:"why,omitempty"`
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "build %s", e.Arch)
	if e.Variant != "" {
		fmt.Fprintf(&b, "/%s", e.Variant)
	}
	fmt.Fprintf(&b, ": %d requested Kconfig symbol(s) do not hold after make olddefconfig (nothing was compiled):", len(e.Problems))
	for _, p := range e.Problems {
		fin := p.Final
		if fin == "" {
			fin = "absent"
		}
		fmt.Fprintf(&b, "\n  CONFIG_%s=%s: %s (final: %s)", p.Symbol, p.Requested, p.Kind, fin)
		if p.Why != "" {
			fmt.Fprintf(&b, "\n      %s", strings.ReplaceAll(p.Why, "\n", "\n      "))
		}
	}
	return b.String()
}

// FailKind classifies the error as bad input (exit 2).
func (e *ConfigError) FailKind() fail.Kind { return fail.KindInput }

// configure writes the base config, merges the fragments and the Variant's
// symbols, runs olddefconfig and verifies the requested symbols. It returns
// the final .config and warnings for fragment symbols that did not hold.
func (j *job) configure(ctx context.Context, r *runner, logw io.Writer, logPath string) ([]byte, []string, error) {
	cfgPath := filepath.Join(r.out, ".config")
	runMake := func(targets ...string) error {
		lines, err := r.run(ctx, logw, false, targets...)
		if err != nil {
			ferr := r.makeFailure(ctx, err, lines, logPath)
			if ke, ok := ferr.(*KernelError); ok {
				// The tree's Kconfig or a config target is broken.
				ke.Stage = "config"
				ke.Variant = j.req.Variant
				return ke
			}
			setVariant(ferr, j.req.Variant)
			return ferr
		}
		return nil
	}
	if j.baseFile != nil {
		if err := writeBelow(filepath.Dir(cfgPath), ".config", j.baseFile); err != nil {
			return nil, nil, classifyIO(j, err)
		}
	} else if err := j.baseConfig(r, logw, cfgPath, runMake); err != nil {
		return nil, nil, err
	}
	cfg, err := readBelow(filepath.Dir(cfgPath), ".config")
	if err != nil {
		return nil, nil, &InfraError{Arch: j.arch.Name, Variant: j.req.Variant, Reason: "make",
			Msg: "make " + j.req.BaseConfig + " wrote no .config (a regular file in its O= directory): " + err.Error(), Err: err}
	}
	fragVals := map[string]string{}
	var fragOrigin = map[string]string{}
	for i, f := range j.frags {
		var notes []string
		cfg, notes = mergeFragment(cfg, j.req.Fragments[i], f)
		for _, n := range notes {
			fmt.Fprintln(logw, "# merge: "+n)
		}
		_, v := symbolLines(f)
		for k, val := range v {
			fragVals[k] = val
			fragOrigin[k] = j.req.Fragments[i]
		}
	}
	if len(j.syms) > 0 {
		var notes []string
		cfg, notes = mergeFragment(cfg, "variant "+j.req.Variant, symbolsFragment(j.syms))
		for _, n := range notes {
			fmt.Fprintln(logw, "# merge: "+n)
		}
	}
	if err := writeBelow(filepath.Dir(cfgPath), ".config", cfg); err != nil {
		return nil, nil, classifyIO(j, err)
	}
	if err := runMake("olddefconfig"); err != nil {
		return nil, nil, err
	}
	final, err := readBelow(filepath.Dir(cfgPath), ".config")
	if err != nil {
		return nil, nil, classifyIO(j, err)
	}
	_, finalVals := symbolLines(final)

	// The Variant's symbols must hold; fragment symbols only warn (like
	// merge_config.sh), unless the Variant also asked for them.
	if probs := checkRequested(j.syms, finalVals); len(probs) > 0 {
		explainProblems(r.src, j.arch.SrcArch, final, j.syms, probs)
		return final, nil, &ConfigError{Arch: j.arch.Name, Variant: j.req.Variant, Problems: probs}
	}
	var warnings []string
	for _, p := range checkRequested(fragVals, finalVals) {
		if _, inVariant := j.syms[p.Symbol]; inVariant {
			continue
		}
		fin := p.Final
		if fin == "" {
			fin = "absent"
		}
		warnings = append(warnings, fmt.Sprintf("%s: CONFIG_%s=%s did not make it into the final config (%s, final: %s)",
			filepath.Base(fragOrigin[p.Symbol]), p.Symbol, p.Requested, p.Kind, fin))
	}
	sort.Strings(warnings)
	for _, w := range warnings {
		fmt.Fprintln(logw, "# warning: "+w)
	}
	return final, warnings, nil
}

// checkRequested compares requested values with the final .config's.
func checkRequested(req, final map[string]string) []ConfigProblem {
	var probs []ConfigProblem
	keys := make([]string, 0, len(req))
	for k := range req {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, sym := range keys {
		want := req[sym]
		got, present := final[sym]
		if present && got == want {
			continue
		}
		if !present && want == "n" {
			continue // an invisible symbol that is off is "not set"
		}
		p := ConfigProblem{Symbol: sym, Requested: want, Final: got}
		switch {
		case !present:
			p.Kind = "dropped"
		case got == "n":
			p.Kind = "dropped"
		default:
			p.Kind = "changed"
		}
		probs = append(probs, p)
	}
	return probs
}

// baseConfig writes the base config target's .config (make tinyconfig,
// defconfig, ...) to cfgPath, from the cache when the same target was made
// before from the same Kconfig inputs, arch, toolchain and make variables.
//
// A base config target is the costly part of configuring: 6.1's
// tinyconfig alone runs the Kconfig front end three times (allnoconfig,
// then merge_config.sh's tiny.config pass), each evaluating the
// toolchain probes, about 30 s of CPU per build on a 2-core machine. What
// it writes is a function of the files kconfigInputs names (the Kconfig
// files, the configs directories, the kconfig front end and the probes
// it runs), ARCH and the toolchain (cc-option and friends; its ID carries
// the compiler and binutils versions). Keyed by those rather than by the
// whole tree, the steps of a bisection share one run. Probe-derived
// symbols without a prompt (CC_VERSION_TEXT, PAHOLE_VERSION, ...) are
// computed again by the olddefconfig that always follows, so a host tool
// installed since does not survive in the result.
func (j *job) baseConfig(r *runner, logw io.Writer, cfgPath string, runMake func(...string) error) error {
	var vars []string
	for _, a := range r.makeArgs(j.req.BaseConfig) {
		if a == "-C" || strings.HasPrefix(a, "O=") || a == r.src {
			continue // where the sources and outputs are does not matter
		}
		vars = append(vars, a)
	}
	inputs := j.kconfigInputs()
	if inputs == "" {
		// Unreadable tree objects: fall back to the whole tree (what
		// make reads is then certainly the same).
		inputs = "tree " + j.tree
	}
	key := sha256hex([]byte("baseconfig/v2"), []byte(inputs), []byte(j.tc.ID()), []byte(j.arch.Name),
		[]byte(strings.Join(vars, "\x00")))
	// Entries are per commit, and a build takes only its own commit's or
	// an ancestor's: what the make wrote is the tree's code's output (a
	// hostile Makefile may write any .config), so it may only reach the
	// commit's descendants, like its compiler-cache layer.
	lineage := j.ancestry
	if len(lineage) == 0 {
		lineage = []string{j.commit}
	}
	for _, c := range lineage {
		cached := filepath.Join(j.cache, "baseconfigs", key[:32]+"-"+c)
		if b, err := os.ReadFile(cached); err == nil && len(b) > 0 {
			fmt.Fprintf(logw, "# make %s: the .config made before from the same Kconfig inputs as tree %s (%s)\n", j.req.BaseConfig, j.tree, cached)
			if err := writeBelow(filepath.Dir(cfgPath), ".config", b); err != nil {
				return classifyIO(j, err)
			}
			return nil
		}
	}
	if err := runMake(j.req.BaseConfig); err != nil {
		return err
	}
	// Kept for the next build of this commit or its descendants; a
	// failure to keep it costs only time.
	cached := filepath.Join(j.cache, "baseconfigs", key[:32]+"-"+j.commit)
	if b, err := readBelow(filepath.Dir(cfgPath), ".config"); err == nil && len(b) > 0 && os.MkdirAll(filepath.Dir(cached), 0o755) == nil {
		writeAtomic(cached, b)
	}
	return nil
}

// kconfigInputs returns kconfigInputs of the job's tree, remembered in the
// cache per (tree, source arch): the walk reads every tree object and the
// Kconfig files, about a second on a 6.1 tree. "" when it cannot be read.
func (j *job) kconfigInputs() string {
	memo := filepath.Join(j.cache, "baseconfigs", "inputs", "v1-"+j.tree+"-"+j.arch.SrcArch) // v1: kconfigInputs as it is now
	if b, err := os.ReadFile(memo); err == nil && len(b) == 64 {
		return string(b)
	}
	h, err := kconfigInputs(j.req.Repo, j.tree, j.arch.SrcArch)
	if err != nil {
		return ""
	}
	if os.MkdirAll(filepath.Dir(memo), 0o755) == nil {
		writeAtomic(memo, []byte(h))
	}
	return h
}
