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
// of boots (A B A B ...), each with its guest.Plan.
//
// The pipelines shipped in this directory are embedded in the binary:
// Builtin(name), List(), and Find(nameOrPath) for the CLI. See the top of
// each .toml file for what it reproduces, and README.md for the format.
package pipelines

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
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
	"time"

	"github.com/BurntSushi/toml"

	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/internal/fail"
)

// DefaultBase is the base ref of Debian's 6.1 tree as imported by
// scripts/linux-tree.sh.
const DefaultBase = "v6.1-debian"

// Pipeline is a validated pipeline file.
type Pipeline struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// File is where the pipeline was read from (a path, or
	// "pipelines/<name>.toml" for a builtin); Dir resolves its relative
	// paths ("" for builtins).
	File string `json:"-"`
	Dir  string `json:"-"`

	Tree   Tree   `json:"tree"`
	Series Series `json:"series"`
	// Arches are normalised: ppc64le, arm64, x86_64.
	Arches []string `json:"arches"`
	// BaseConfig is a make target ("tinyconfig") or an absolute file path.
	BaseConfig string     `json:"base_config"`
	Fragments  []Fragment `json:"fragments"`
	// Symbols apply to every variant (the variant's own win).
	Symbols map[string]string `json:"symbols,omitempty"`

	Variants    []Variant    `json:"variants"`
	Benchmarks  []Benchmark  `json:"benchmarks"`
	Repeats     Repeats      `json:"repeats"`
	Target      Target       `json:"target"`
	Comparisons []Comparison `json:"comparisons"`
	Chains      []Chain      `json:"chains,omitempty"`
	// Deterministic runs QEMU with -icount shift=0,sleep=off: timings are
	// functions of executed instructions, and every result says so.
	Deterministic bool `json:"deterministic"`

	// Warnings are problems that do not stop the pipeline (file:line: ...).
	Warnings []string `json:"-"`
}

// Tree is the kernel tree and the base the series applies to.
type Tree struct {
	// Path of the git repository; "" means Debian's 6.1 tree as
	// scripts/linux-tree.sh provides it (or --tree on the command line).
	Path string `json:"path,omitempty"`
	Base string `json:"base"`
}

// Series says which thread the pipeline was written for; the command line
// names the series to evaluate and overrides MsgID.
type Series struct {
	MsgID string `json:"msgid,omitempty"`
	// Apply is the default of Variant.ApplySeries.
	Apply bool `json:"apply"`
}

// Fragment is a config fragment: a boot config shipped in build/configs
// (Name, e.g. "ppc64le-pseries", the file build/configs/<Name>.config) or
// a file (Path, absolute). In Pipeline.Fragments, Name may be BootFragment;
// BuildSpec.Fragments have it resolved for the spec's arch.
type Fragment struct {
	Name string `json:"name,omitempty"`
	Path string `json:"path,omitempty"`
}

func (f Fragment) String() string {
	if f.Name != "" {
		return f.Name
	}
	return f.Path
}

// Variant is one configuration under test.
type Variant struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Kernel is the variant whose kernel this one boots: its own name, or
	// the variant named by `kernel = ...` for a runtime-only variant.
	Kernel      string `json:"kernel"`
	ApplySeries bool   `json:"apply_series"`
	// Symbols are the effective Kconfig symbols (pipeline-wide ones merged
	// with the variant's own), without CONFIG_: SYM -> y, n, m or a value.
	Symbols map[string]string `json:"symbols,omitempty"`
	// Cmdline is added to the kernel command line.
	Cmdline string `json:"cmdline,omitempty"`
	// SchedPreempt is written to /sys/kernel/debug/sched/preempt
	// (none, voluntary, full, lazy): needs a PREEMPT_DYNAMIC kernel.
	SchedPreempt string            `json:"sched_preempt,omitempty"`
	Sysctls      map[string]string `json:"sysctls,omitempty"`
	// CPUs pins the benchmarks like taskset -c.
	CPUs string `json:"cpus,omitempty"`
	Line int    `json:"-"`
}

// Benchmark is one benchmark and its parameters.
type Benchmark struct {
	// Name is an agent benchmark (guest.Benchmarks): kill, kill-child,
	// getppid, getpgid, fork, execve, rcu, bridge.
	Name string `json:"name"`
	// Iterations is the loop count of one measurement (guest.Bench.Ops);
	// 0 means the agent's default.
	Iterations int `json:"iterations,omitempty"`
	// Calls and Runs shape rcu: Runs runs of Calls timed synchronize_rcu()
	// calls (membarrier(MEMBARRIER_CMD_GLOBAL)).
	Calls int `json:"calls,omitempty"`
	Runs  int `json:"runs,omitempty"`
}

// Guest is the agent's request for this benchmark.
func (b Benchmark) Guest() guest.Bench {
	return guest.Bench{Name: b.Name, Ops: b.Iterations, Calls: b.Calls, Runs: b.Runs}
}

// Repeats is the design: Boots boots per variant (interleaved), each
// running every benchmark Iterations times. With MaxBoots > Boots sampling
// is adaptive: after Boots, the variants of every comparison whose verdict
// is not clear yet get one more boot each, round after round, until every
// verdict is clear or MaxBoots is reached (stats.NeedMore; the report says
// why sampling stopped).
type Repeats struct {
	Boots      int `json:"boots"`
	Iterations int `json:"iterations"`
	MaxBoots   int `json:"max_boots,omitempty"`
}

// Target is where kernels run.
type Target struct {
	Kind string `json:"kind"` // "qemu" or "ssh"
	// Host is the ssh URL (ssh://user@host[:port]) for Kind "ssh".
	Host string `json:"host,omitempty"`
	// BootHook runs on the host before a run (e.g. kexec into the kernel).
	BootHook  string        `json:"boot_hook,omitempty"`
	SMP       int           `json:"smp"`
	MemoryMiB int           `json:"memory_mib"`
	Timeout   time.Duration `json:"timeout"`
	// KVM is "auto" (when /dev/kvm works), "on" or "off". Deterministic
	// pipelines always run under TCG.
	KVM string `json:"kvm"`
	// Cmdline is added to every variant's kernel command line.
	Cmdline string `json:"cmdline,omitempty"`
}

// Comparison is one pair the report compares: Other against Base.
type Comparison struct {
	Base  string `json:"base"`
	Other string `json:"other"`
}

// Chain is an ordered isolation chain (A -> B -> C) whose total change the
// report decomposes into steps.
type Chain struct {
	Name     string   `json:"name,omitempty"`
	Variants []string `json:"variants"`
}

// Variant returns the variant called name, or nil.
func (p *Pipeline) Variant(name string) *Variant {
	for i := range p.Variants {
		if p.Variants[i].Name == name {
			return &p.Variants[i]
		}
	}
	return nil
}

// NeedsSeries reports whether any variant applies the series.
func (p *Pipeline) NeedsSeries() bool {
	for _, v := range p.Variants {
		if v.ApplySeries {
			return true
		}
	}
	return false
}

// Error is one problem in a pipeline file, at File:Line (Line 0: the file
// as a whole).
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// FailKind: a bad pipeline file is bad input.
func (e *Error) FailKind() fail.Kind { return fail.KindInput }

// Errors is every problem found in one file, in line order.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// FailKind: a bad pipeline file is bad input.
func (es Errors) FailKind() fail.Kind { return fail.KindInput }

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

// raw* mirror the file format; see README.md.
type rawPipeline struct {
	Name          string          `toml:"name"`
	Description   string          `toml:"description"`
	Deterministic bool            `toml:"deterministic"`
	Tree          rawTree         `toml:"tree"`
	Series        rawSeries       `toml:"series"`
	Build         rawBuild        `toml:"build"`
	Variant       []rawVariant    `toml:"variant"`
	Benchmark     []rawBenchmark  `toml:"benchmark"`
	Repeats       rawRepeats      `toml:"repeats"`
	Target        rawTarget       `toml:"target"`
	Comparison    []rawComparison `toml:"comparison"`
	Chain         []rawChain      `toml:"chain"`
}

type rawTree struct {
	Path string `toml:"path"`
	Base string `toml:"base"`
}

type rawSeries struct {
	MsgID string `toml:"msgid"`
	Apply *bool  `toml:"apply"`
}

type rawBuild struct {
	Arch      any            `toml:"arch"` // "ppc64le" or ["ppc64le", ...]
	Config    string         `toml:"config"`
	Fragments []string       `toml:"fragments"`
	Symbols   map[string]any `toml:"symbols"`
}

type rawVariant struct {
	Name         string         `toml:"name"`
	Description  string         `toml:"description"`
	Kernel       string         `toml:"kernel"`
	ApplySeries  *bool          `toml:"apply_series"`
	Symbols      map[string]any `toml:"symbols"`
	Cmdline      string         `toml:"cmdline"`
	SchedPreempt string         `toml:"sched_preempt"`
	Sysctls      map[string]any `toml:"sysctls"`
	CPUs         string         `toml:"cpus"`
}

type rawBenchmark struct {
	Name       string `toml:"name"`
	Iterations *int   `toml:"iterations"`
	Calls      *int   `toml:"calls"`
	Runs       *int   `toml:"runs"`
}

type rawRepeats struct {
	Boots      *int `toml:"boots"`
	Iterations *int `toml:"iterations"`
	MaxBoots   *int `toml:"max_boots"`
}

type rawTarget struct {
	Kind     string `toml:"kind"`
	Host     string `toml:"host"`
	BootHook string `toml:"boot_hook"`
	SMP      *int   `toml:"smp"`
	Memory   any    `toml:"memory"` // "512M", "1G" or MiB as an integer
	Timeout  string `toml:"timeout"`
	KVM      string `toml:"kvm"`
	Cmdline  string `toml:"cmdline"`
}

type rawComparison struct {
	Base  string `toml:"base"`
	Other string `toml:"other"`
}

type rawChain struct {
	Name     string   `toml:"name"`
	Variants []string `toml:"variants"`
}

// qemuArches are the architectures the QEMU target has defaults for
// (machine, CPU, console).
var qemuArches = map[string]string{
	"ppc64le": "-M pseries -cpu POWER9, console hvc0",
	"arm64":   "-M virt -cpu max, console ttyAMA0",
	"x86_64":  "-M q35, console ttyS0",
}

var archAliases = map[string]string{
	"ppc64le": "ppc64le", "powerpc": "ppc64le", "powerpc64le": "ppc64le", "ppc64el": "ppc64le",
	"arm64": "arm64", "aarch64": "arm64",
	"x86_64": "x86_64", "x86": "x86_64", "amd64": "x86_64", "x86-64": "x86_64",
}

// BootConfigs are the boot config fragments shipped in build/configs
// (<name>.config) that a pipeline can name as a fragment.
var BootConfigs = []string{"ppc64le-pseries", "arm64-virt", "x86_64-q35"}

// BootFragment, as a fragment, means each arch's own boot config: what a
// pipeline building several architectures names.
const BootFragment = "qemu-boot"

var bootConfigFor = map[string]string{"ppc64le": "ppc64le-pseries", "arm64": "arm64-virt", "x86_64": "x86_64-q35"}

var (
	reName    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+@=-]*$`)
	reSymbol  = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	reCPUs    = regexp.MustCompile(`^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$`)
	reSysctl  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.*/-]*$`)
	reMakeTgt = regexp.MustCompile(`^[A-Za-z0-9_.-]+config$`)
)

var schedPreemptModes = []string{"none", "voluntary", "full", "lazy"}

type parser struct {
	file string
	dir  string
	ix   *lineIndex
	md   toml.MetaData
	errs Errors
	warn []string
}

func (ps *parser) errorf(path string, format string, a ...any) {
	ps.errs = append(ps.errs, &Error{File: ps.file, Line: ps.ix.line(path), Msg: fmt.Sprintf(format, a...)})
}

func (ps *parser) warnf(path string, format string, a ...any) {
	ps.warn = append(ps.warn, (&Error{File: ps.file, Line: ps.ix.line(path), Msg: fmt.Sprintf(format, a...)}).Error())
}

func (ps *parser) defined(key ...string) bool { return ps.md.IsDefined(key...) }

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
	p.Warnings = ps.warn
	return p, nil
}

// knownKeysHint lists the keys allowed where an unknown key was found.
func knownKeysHint(k toml.Key) string {
	t := reflect.TypeOf(rawPipeline{})
	for _, part := range k[:len(k)-1] {
		f, ok := fieldByTag(t, part)
		if !ok {
			return ""
		}
		t = f.Type
		for t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return ""
		}
	}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		names = append(names, t.Field(i).Tag.Get("toml"))
	}
	return " (allowed here: " + strings.Join(names, ", ") + ")"
}

func fieldByTag(t reflect.Type, tag string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Tag.Get("toml") == tag {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// mismatch walks the raw structure and the generic decoding together and
// returns the path and message of the first value of the wrong type.
func mismatch(t reflect.Type, v any, path string) (string, string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tomlType := func(v any) string {
		switch v.(type) {
		case string:
			return "a string"
		case int64:
			return "an integer"
		case float64:
			return "a float"
		case bool:
			return "a boolean"
		case []map[string]any:
			return "an array of tables"
		case []any:
			return "an array"
		case map[string]any:
			return "a table"
		}
		return fmt.Sprintf("%T", v)
	}
	want := func(s string) (string, string) {
		return path, fmt.Sprintf("%s: want %s, found %s", path, s, tomlType(v))
	}
	switch t.Kind() {
	case reflect.Interface:
		return "", ""
	case reflect.String:
		if _, ok := v.(string); !ok {
			return want("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return want("a boolean (true or false)")
		}
	case reflect.Int:
		if _, ok := v.(int64); !ok {
			return want("an integer")
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return want("a table")
		}
		for k, e := range m {
			if p, msg := mismatch(t.Elem(), e, join(path, k)); p != "" {
				return p, msg
			}
		}
	case reflect.Slice:
		var elems []any
		switch s := v.(type) {
		case []any:
			elems = s
		case []map[string]any:
			for _, e := range s {
				elems = append(elems, e)
			}
		default:
			if t.Elem().Kind() == reflect.Struct {
				return want("an array of tables ([[" + path + "]])")
			}
			return want("an array")
		}
		for i, e := range elems {
			if p, msg := mismatch(t.Elem(), e, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p, msg
			}
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return want("a table")
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("toml")
			if e, ok := m[tag]; ok {
				if p, msg := mismatch(f.Type, e, join(path, tag)); p != "" {
					return p, msg
				}
			}
		}
	}
	return "", ""
}

// kconfigValue turns a TOML value into a Kconfig value.
func kconfigValue(v any) (string, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return "y", true
		}
		return "n", true
	case int64:
		return strconv.FormatInt(x, 10), true
	case string:
		return x, x != ""
	}
	return "", false
}

func (ps *parser) symbols(path string, m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		sym := strings.TrimPrefix(k, "CONFIG_")
		if !reSymbol.MatchString(sym) {
			ps.errorf(join(path, k), "%q is not a Kconfig symbol name (letters, digits, _)", k)
			continue
		}
		val, ok := kconfigValue(v)
		if !ok {
			ps.errorf(join(path, k), "symbol %s: value must be y, n, m, a number or a non-empty string; got %v", sym, v)
			continue
		}
		out[sym] = val
	}
	return out
}

func (ps *parser) build(r *rawPipeline) *Pipeline {
	p := &Pipeline{
		Name: r.Name, Description: strings.TrimSpace(r.Description), File: ps.file, Dir: ps.dir,
		Deterministic: r.Deterministic,
	}
	if p.Name == "" {
		ps.errorf("", "the pipeline needs a name (name = \"...\")")
	} else if !reName.MatchString(p.Name) {
		ps.errorf("name", "pipeline name %q: use letters, digits and _.+-@=", p.Name)
	}

	p.Tree = Tree{Path: r.Tree.Path, Base: r.Tree.Base}
	if p.Tree.Path != "" && !filepath.IsAbs(p.Tree.Path) && ps.dir != "" {
		p.Tree.Path = filepath.Join(ps.dir, p.Tree.Path)
	}
	if p.Tree.Base == "" {
		p.Tree.Base = DefaultBase
	}
	p.Series = Series{MsgID: strings.Trim(strings.TrimSpace(r.Series.MsgID), "<>"), Apply: true}
	if r.Series.Apply != nil {
		p.Series.Apply = *r.Series.Apply
	}

	// Target first: arch validation depends on its kind.
	ps.target(p, &r.Target)

	// Arches.
	var arches []string
	switch a := r.Build.Arch.(type) {
	case nil:
		ps.errorf("build", "build.arch is missing (ppc64le, arm64 or x86_64)")
	case string:
		arches = []string{a}
	case []any:
		for _, e := range a {
			s, ok := e.(string)
			if !ok {
				ps.errorf("build.arch", "build.arch: want strings, found %v", e)
				continue
			}
			arches = append(arches, s)
		}
		if len(a) == 0 {
			ps.errorf("build.arch", "build.arch is empty")
		}
	default:
		ps.errorf("build.arch", "build.arch: want a string or an array of strings, found %v", a)
	}
	seenArch := map[string]bool{}
	for _, a := range arches {
		n, ok := archAliases[strings.ToLower(strings.TrimSpace(a))]
		if !ok {
			if p.Target.Kind == "qemu" {
				ps.errorf("build.arch", "architecture %q has no QEMU default (machine, CPU, console); QEMU targets: ppc64le, arm64, x86_64", a)
			} else {
				ps.errorf("build.arch", "unknown architecture %q (want ppc64le, arm64 or x86_64)", a)
			}
			continue
		}
		if seenArch[n] {
			ps.errorf("build.arch", "architecture %s is listed twice", n)
			continue
		}
		seenArch[n] = true
		p.Arches = append(p.Arches, n)
	}

	// Base config and fragments.
	p.BaseConfig = r.Build.Config
	switch {
	case p.BaseConfig == "":
		p.BaseConfig = "tinyconfig"
	case reMakeTgt.MatchString(p.BaseConfig) && !strings.Contains(p.BaseConfig, "/") && !strings.HasSuffix(p.BaseConfig, ".config"):
		// a make target
	default:
		if path, ok := ps.file_(p.BaseConfig, "build.config", "base config"); ok {
			p.BaseConfig = path
		}
	}
	for i, f := range r.Build.Fragments {
		path := fmt.Sprintf("build.fragments[%d]", i)
		name := strings.TrimSuffix(f, ".config")
		if name == BootFragment {
			p.Fragments = append(p.Fragments, Fragment{Name: name})
			continue
		}
		if !strings.Contains(f, "/") && contains(BootConfigs, name) {
			for _, a := range p.Arches {
				if want := bootConfigFor[a]; want != name {
					ps.errorf(path, "fragment %q is the boot config of another architecture; for %s use %q (or %q: each arch's own)", f, a, want, BootFragment)
				}
			}
			p.Fragments = append(p.Fragments, Fragment{Name: name})
			continue
		}
		if abs, ok := ps.file_(f, path, "fragment"); ok {
			p.Fragments = append(p.Fragments, Fragment{Path: abs})
		}
	}
	p.Symbols = ps.symbols("build.symbols", r.Build.Symbols)

	ps.variants(p, r)
	ps.benchmarks(p, r)

	// Repeats.
	p.Repeats = Repeats{Boots: 3, Iterations: 1}
	if r.Repeats.Boots != nil {
		p.Repeats.Boots = *r.Repeats.Boots
		if p.Repeats.Boots < 1 {
			ps.errorf("repeats.boots", "repeats.boots = %d: want at least 1 boot per variant", p.Repeats.Boots)
		}
	}
	if r.Repeats.Iterations != nil {
		p.Repeats.Iterations = *r.Repeats.Iterations
		if p.Repeats.Iterations < 1 {
			ps.errorf("repeats.iterations", "repeats.iterations = %d: want at least 1 iteration per boot", p.Repeats.Iterations)
		}
	}
	if r.Repeats.MaxBoots != nil {
		p.Repeats.MaxBoots = *r.Repeats.MaxBoots
		if p.Repeats.MaxBoots < p.Repeats.Boots {
			ps.errorf("repeats.max_boots", "repeats.max_boots = %d is less than repeats.boots = %d: max_boots is the adaptive budget, at least boots", p.Repeats.MaxBoots, p.Repeats.Boots)
		}
		if p.Repeats.MaxBoots > 1000 {
			ps.errorf("repeats.max_boots", "repeats.max_boots = %d: at most 1000", p.Repeats.MaxBoots)
		}
	}

	if p.Deterministic {
		switch {
		case p.Target.Kind == "ssh":
			ps.errorf("deterministic", "deterministic mode needs QEMU (-icount); target.kind is ssh")
		case p.Target.KVM == "on":
			ps.errorf("target.kvm", "deterministic mode runs under TCG with -icount; it cannot use KVM (kvm = \"on\"): set kvm = \"off\" or deterministic = false")
		default:
			p.Target.KVM = "off"
		}
	}

	ps.comparisons(p, r)
	return p
}

// file_ resolves a path relative to the pipeline's directory and checks
// that it exists.
func (ps *parser) file_(f, path, what string) (string, bool) {
	abs := f
	if !filepath.IsAbs(f) {
		if ps.dir == "" {
			ps.errorf(path, "%s %q: a builtin pipeline can only name shipped boot configs (%s); copy the pipeline to use files", what, f, strings.Join(BootConfigs, ", "))
			return "", false
		}
		abs = filepath.Join(ps.dir, f)
	}
	st, err := os.Stat(abs)
	if err != nil || st.IsDir() {
		ps.errorf(path, "%s %q: no such file (looked at %s); shipped boot configs: %s", what, f, abs, strings.Join(BootConfigs, ", "))
		return "", false
	}
	return abs, true
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func (ps *parser) target(p *Pipeline, r *rawTarget) {
	t := Target{Kind: r.Kind, Host: r.Host, BootHook: r.BootHook, SMP: 1, MemoryMiB: 512, Timeout: 10 * time.Minute, KVM: r.KVM, Cmdline: strings.Join(strings.Fields(r.Cmdline), " ")}
	if t.Kind == "" {
		t.Kind = "qemu"
		if strings.HasPrefix(t.Host, "ssh://") {
			t.Kind = "ssh"
		}
	}
	switch t.Kind {
	case "qemu":
		if t.Host != "" {
			ps.errorf("target.host", "target.host is for kind = \"ssh\"; this target is qemu")
		}
		if t.BootHook != "" {
			ps.errorf("target.boot_hook", "target.boot_hook is for kind = \"ssh\"")
		}
	case "ssh":
		if !strings.HasPrefix(t.Host, "ssh://") || len(t.Host) <= len("ssh://") {
			ps.errorf("target.host", "an ssh target needs host = \"ssh://user@host[:port]\", got %q", t.Host)
		}
	default:
		ps.errorf("target.kind", "target.kind %q: want \"qemu\" or \"ssh\"", t.Kind)
	}
	if r.SMP != nil {
		t.SMP = *r.SMP
		if t.SMP < 1 || t.SMP > 1024 {
			ps.errorf("target.smp", "target.smp = %d: want 1..1024 CPUs", t.SMP)
		}
	}
	switch m := r.Memory.(type) {
	case nil:
	case int64:
		t.MemoryMiB = int(m)
	case string:
		n, err := parseMemory(m)
		if err != nil {
			ps.errorf("target.memory", "target.memory %q: %v", m, err)
		}
		t.MemoryMiB = n
	default:
		ps.errorf("target.memory", "target.memory: want \"512M\", \"2G\" or a number of MiB, found %v", m)
	}
	if r.Memory != nil && t.MemoryMiB < 64 {
		ps.errorf("target.memory", "target.memory = %d MiB: a kernel and the agent need at least 64 MiB", t.MemoryMiB)
	}
	if r.Timeout != "" {
		d, err := time.ParseDuration(r.Timeout)
		if err != nil || d <= 0 {
			ps.errorf("target.timeout", "target.timeout %q: want a positive duration like \"5m\" or \"90s\"", r.Timeout)
		} else {
			t.Timeout = d
		}
	}
	switch t.KVM {
	case "":
		t.KVM = "auto"
	case "auto", "on", "off":
	default:
		ps.errorf("target.kvm", "target.kvm %q: want \"auto\", \"on\" or \"off\"", t.KVM)
	}
	if t.Kind == "ssh" && (r.SMP != nil || r.Memory != nil || r.KVM != "") {
		ps.warnf("target", "smp, memory and kvm are QEMU settings; an ssh target ignores them")
	}
	p.Target = t
}

func parseMemory(s string) (int, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	mult := 1
	switch {
	case strings.HasSuffix(s, "G"):
		mult, s = 1024, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		s = s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 1<<20 {
		return 0, errors.New("want a size like \"512M\" or \"2G\"")
	}
	return n * mult, nil
}

func (ps *parser) variants(p *Pipeline, r *rawPipeline) {
	if len(r.Variant) == 0 {
		ps.errorf("", "no variants: add at least one [[variant]] with a name")
		return
	}
	first := map[string]int{} // name -> index
	for i, rv := range r.Variant {
		path := fmt.Sprintf("variant[%d]", i)
		v := Variant{Name: rv.Name, Description: strings.TrimSpace(rv.Description), Kernel: rv.Name,
			Cmdline: strings.Join(strings.Fields(rv.Cmdline), " "), SchedPreempt: rv.SchedPreempt, CPUs: rv.CPUs,
			ApplySeries: p.Series.Apply, Line: ps.ix.line(path)}
		switch {
		case v.Name == "":
			ps.errorf(path, "variant without a name")
		case !reName.MatchString(v.Name):
			ps.errorf(path+".name", "variant name %q: use letters, digits and _.+-@= (no spaces or /)", v.Name)
		}
		if j, dup := first[v.Name]; dup && v.Name != "" {
			ps.errorf(path+".name", "duplicate variant name %q (first at line %d)", v.Name, ps.ix.line(fmt.Sprintf("variant[%d]", j)))
		} else {
			first[v.Name] = i
		}
		if rv.ApplySeries != nil {
			v.ApplySeries = *rv.ApplySeries
		}
		own := ps.symbols(path+".symbols", rv.Symbols)
		v.Symbols = map[string]string{}
		for k, s := range p.Symbols {
			v.Symbols[k] = s
		}
		for k, s := range own {
			v.Symbols[k] = s
		}
		if len(rv.Sysctls) > 0 {
			v.Sysctls = map[string]string{}
			for k, val := range rv.Sysctls {
				s, ok := kconfigValue(val)
				if b, isBool := val.(bool); isBool {
					s = map[bool]string{true: "1", false: "0"}[b]
				}
				if !reSysctl.MatchString(k) || strings.Contains(k, "..") || !ok {
					ps.errorf(join(path+".sysctls", k), "sysctl %q = %v: want a name like kernel.printk and a string or number", k, val)
					continue
				}
				v.Sysctls[k] = s
			}
		}
		if v.CPUs != "" && !reCPUs.MatchString(v.CPUs) {
			ps.errorf(path+".cpus", "cpus %q: want a CPU list like taskset -c takes (\"0\", \"0-7\", \"0,2\")", v.CPUs)
		}
		if v.SchedPreempt != "" && !contains(schedPreemptModes, v.SchedPreempt) {
			ps.errorf(path+".sched_preempt", "sched_preempt %q: want one of %s", v.SchedPreempt, strings.Join(schedPreemptModes, ", "))
		}
		p.Variants = append(p.Variants, v)
	}
	// Runtime-only variants share another variant's kernel.
	for i, rv := range r.Variant {
		if rv.Kernel == "" {
			continue
		}
		path := fmt.Sprintf("variant[%d]", i)
		v := &p.Variants[i]
		j, ok := first[rv.Kernel]
		switch {
		case !ok:
			ps.errorf(path+".kernel", "kernel = %q: no such variant (have %s)", rv.Kernel, variantNames(p))
			continue
		case j == i:
			ps.errorf(path+".kernel", "variant %q names itself as its kernel", v.Name)
			continue
		case r.Variant[j].Kernel != "":
			ps.errorf(path+".kernel", "kernel = %q: that variant boots %q's kernel itself; name %q", rv.Kernel, r.Variant[j].Kernel, r.Variant[j].Kernel)
			continue
		}
		if len(rv.Symbols) > 0 {
			ps.errorf(path+".symbols", "variant %q boots %q's kernel (kernel = ...) and cannot set Kconfig symbols; only command line and runtime knobs", v.Name, rv.Kernel)
		}
		if rv.ApplySeries != nil && *rv.ApplySeries != p.Variants[j].ApplySeries {
			ps.errorf(path+".apply_series", "variant %q boots %q's kernel, whose apply_series is %v", v.Name, rv.Kernel, p.Variants[j].ApplySeries)
		}
		v.Kernel = rv.Kernel
		v.ApplySeries = p.Variants[j].ApplySeries
		v.Symbols = p.Variants[j].Symbols
	}
	// The runtime preemption switch exists only in dynamic-preempt kernels.
	for i, v := range p.Variants {
		if v.SchedPreempt == "" {
			continue
		}
		if v.Symbols["PREEMPT_DYNAMIC"] != "y" {
			ps.errorf(fmt.Sprintf("variant[%d].sched_preempt", i),
				"variant %q: sched_preempt = %q needs a kernel with PREEMPT_DYNAMIC=y (/sys/kernel/debug/sched/preempt exists only there); its kernel %q does not request it",
				v.Name, v.SchedPreempt, v.Kernel)
		}
		if v.SchedPreempt == "lazy" && (p.Tree.Base == DefaultBase || p.Tree.Path == "") {
			ps.warnf(fmt.Sprintf("variant[%d].sched_preempt", i), "variant %q: lazy preemption does not exist in 6.1; the boot will report an error", v.Name)
		}
		if v.Symbols["DEBUG_FS"] == "n" {
			ps.errorf(fmt.Sprintf("variant[%d].sched_preempt", i), "variant %q: sched_preempt is written through debugfs, but DEBUG_FS=n", v.Name)
		}
	}
}

func variantNames(p *Pipeline) string {
	n := make([]string, len(p.Variants))
	for i, v := range p.Variants {
		n[i] = v.Name
	}
	return strings.Join(n, ", ")
}

// benchAliases maps accepted spellings to agent benchmark names.
var benchAliases = map[string]string{"rcu_sync": guest.BenchRCU, "synchronize_rcu": guest.BenchRCU, "kill_child": guest.BenchKillChild}

func (ps *parser) benchmarks(p *Pipeline, r *rawPipeline) {
	if len(r.Benchmark) == 0 {
		ps.errorf("", "no benchmarks: add at least one [[benchmark]] (%s)", strings.Join(guest.Benchmarks, ", "))
		return
	}
	seen := map[string]bool{}
	for i, rb := range r.Benchmark {
		path := fmt.Sprintf("benchmark[%d]", i)
		b := Benchmark{Name: rb.Name}
		if a, ok := benchAliases[b.Name]; ok {
			b.Name = a
		}
		if !contains(guest.Benchmarks, b.Name) {
			ps.errorf(path+".name", "unknown benchmark %q (the agent has %s)", rb.Name, strings.Join(guest.Benchmarks, ", "))
			continue
		}
		if seen[b.Name] {
			ps.errorf(path+".name", "benchmark %q is listed twice", b.Name)
		}
		seen[b.Name] = true
		positive := func(v *int, key string) int {
			if v == nil {
				return 0
			}
			if *v < 1 {
				ps.errorf(path+"."+key, "benchmark %s: %s = %d: want at least 1", b.Name, key, *v)
			}
			return *v
		}
		if b.Name == guest.BenchRCU {
			if rb.Iterations != nil {
				ps.errorf(path+".iterations", "benchmark rcu is shaped by calls and runs (e.g. calls = 100, runs = 10), not iterations")
			}
			b.Calls, b.Runs = positive(rb.Calls, "calls"), positive(rb.Runs, "runs")
		} else {
			if rb.Calls != nil {
				ps.errorf(path+".calls", "benchmark %s has no calls parameter (only rcu does); use iterations", b.Name)
			}
			if rb.Runs != nil {
				ps.errorf(path+".runs", "benchmark %s has no runs parameter (only rcu does); use iterations, or repeats for more measurements", b.Name)
			}
			b.Iterations = positive(rb.Iterations, "iterations")
		}
		p.Benchmarks = append(p.Benchmarks, b)
	}
}

func (ps *parser) comparisons(p *Pipeline, r *rawPipeline) {
	known := func(name, path string) bool {
		if p.Variant(name) != nil {
			return true
		}
		if name == "" {
			ps.errorf(path, "missing variant name")
		} else {
			ps.errorf(path, "unknown variant %q (have %s)", name, variantNames(p))
		}
		return false
	}
	seen := map[Comparison]bool{}
	for i, rc := range r.Comparison {
		path := fmt.Sprintf("comparison[%d]", i)
		okB, okO := known(rc.Base, path+".base"), known(rc.Other, path+".other")
		if !okB || !okO {
			continue
		}
		c := Comparison{Base: rc.Base, Other: rc.Other}
		if c.Base == c.Other {
			ps.errorf(path, "comparison of %q with itself", c.Base)
			continue
		}
		if seen[c] {
			ps.errorf(path, "comparison %s -> %s is listed twice", c.Base, c.Other)
			continue
		}
		seen[c] = true
		p.Comparisons = append(p.Comparisons, c)
	}
	if len(r.Comparison) == 0 && len(p.Variants) > 1 {
		// Default: every variant against the first.
		for _, v := range p.Variants[1:] {
			p.Comparisons = append(p.Comparisons, Comparison{Base: p.Variants[0].Name, Other: v.Name})
		}
	}
	for i, rc := range r.Chain {
		path := fmt.Sprintf("chain[%d]", i)
		if len(rc.Variants) < 2 {
			ps.errorf(path+".variants", "a chain needs at least two variants (A -> B), got %d", len(rc.Variants))
			continue
		}
		ok := true
		dup := map[string]bool{}
		for _, n := range rc.Variants {
			if !known(n, path+".variants") {
				ok = false
			} else if dup[n] {
				ps.errorf(path+".variants", "chain names %q twice", n)
				ok = false
			}
			dup[n] = true
		}
		if ok {
			p.Chains = append(p.Chains, Chain{Name: rc.Name, Variants: append([]string(nil), rc.Variants...)})
		}
	}
}

// BuildSpec is one kernel to build: the variants listed share it (the
// first is the one that declared it). It maps onto build.Request: Tree.Path
// and the commit (base, or base + series when ApplySeries), Arch,
// BaseConfig, Fragments (a Name is build/configs/<Name>.config), Symbols.
type BuildSpec struct {
	// Key identifies the spec within the pipeline (stable across runs).
	Key         string            `json:"key"`
	Variant     string            `json:"variant"`
	Variants    []string          `json:"variants"`
	Arch        string            `json:"arch"`
	ApplySeries bool              `json:"apply_series"`
	BaseConfig  string            `json:"base_config"`
	Fragments   []Fragment        `json:"fragments"`
	Symbols     map[string]string `json:"symbols"`
}

// Builds returns the distinct kernels: for each arch, one per variant that
// owns a kernel, with the runtime-only variants that boot it. Variants
// with identical build inputs also share one build.
func (p *Pipeline) Builds() []BuildSpec {
	var out []BuildSpec
	for _, arch := range p.Arches {
		byKey := map[string]int{}
		for _, v := range p.Variants {
			owner := p.Variant(v.Kernel)
			key := p.buildKey(arch, owner)
			if i, ok := byKey[key]; ok {
				out[i].Variants = append(out[i].Variants, v.Name)
				continue
			}
			byKey[key] = len(out)
			var frags []Fragment
			for _, f := range p.Fragments {
				if f.Name == BootFragment {
					f.Name = bootConfigFor[arch]
				}
				frags = append(frags, f)
			}
			out = append(out, BuildSpec{
				Key: key, Variant: owner.Name, Variants: []string{v.Name}, Arch: arch, ApplySeries: owner.ApplySeries,
				BaseConfig: p.BaseConfig, Fragments: frags, Symbols: owner.Symbols,
			})
		}
	}
	return out
}

func (p *Pipeline) buildKey(arch string, v *Variant) string {
	b, _ := json.Marshal(struct {
		Arch        string
		ApplySeries bool
		Symbols     map[string]string
	}{arch, v.ApplySeries, v.Symbols})
	h := sha256.Sum256(b)
	return arch + "-" + hex.EncodeToString(h[:6])
}

// RunPlan is one boot: variant Variant's kernel (build BuildKey) booted for
// the Boot-th time, running Plan.
type RunPlan struct {
	// Variant is the name samples and the store use: the variant's name,
	// or "name/arch" when the pipeline has more than one arch.
	Variant string `json:"variant"`
	// Name is the variant's name in the pipeline.
	Name     string `json:"name"`
	Arch     string `json:"arch"`
	Boot     int    `json:"boot"`
	BuildKey string `json:"build_key"`
	// Cmdline is the target's and the variant's command line additions.
	Cmdline       string     `json:"cmdline,omitempty"`
	Plan          guest.Plan `json:"plan"`
	Deterministic bool       `json:"deterministic"`
	Target        Target     `json:"target"`
}

// Runs returns every boot in execution order: boots interleaved across
// variants (A B C A B C ...) so that drift spreads evenly, arch by arch.
// A resuming runner skips the (Variant, Boot) pairs already finished.
func (p *Pipeline) Runs() []RunPlan { return p.runs(0, p.Repeats.Boots) }

// runs plans boots [from, to) of every variant, interleaved.
func (p *Pipeline) runs(from, to int) []RunPlan {
	builds := map[string]string{} // arch/variant -> build key
	for _, b := range p.Builds() {
		for _, v := range b.Variants {
			builds[b.Arch+"/"+v] = b.Key
		}
	}
	var benches []guest.Bench
	for _, b := range p.Benchmarks {
		benches = append(benches, b.Guest())
	}
	var out []RunPlan
	for _, arch := range p.Arches {
		for boot := from; boot < to; boot++ {
			for _, v := range p.Variants {
				label := v.Name
				if len(p.Arches) > 1 {
					label += "/" + arch
				}
				cmd := strings.TrimSpace(p.Target.Cmdline + " " + v.Cmdline)
				plan := guest.Plan{
					Benchmarks: append([]guest.Bench(nil), benches...),
					Iterations: p.Repeats.Iterations,
					Preempt:    v.SchedPreempt,
					Sysctls:    v.Sysctls,
					CPUs:       v.CPUs,
				}
				out = append(out, RunPlan{Variant: label, Name: v.Name, Arch: arch, Boot: boot, BuildKey: builds[arch+"/"+v.Name],
					Cmdline: cmd, Plan: plan, Deterministic: p.Deterministic, Target: p.Target})
			}
		}
	}
	return out
}

// Hash is a content hash of everything that decides what the pipeline
// builds and runs (not its comments, description or file name; fragment
// files by content): part of an evaluation's key.
func (p *Pipeline) Hash() string {
	c := *p
	c.Description, c.Warnings = "", nil
	c.Fragments = nil
	for _, f := range p.Fragments {
		if f.Path != "" {
			data, _ := os.ReadFile(f.Path)
			sum := sha256.Sum256(data)
			c.Fragments = append(c.Fragments, Fragment{Path: "sha256:" + hex.EncodeToString(sum[:])})
		} else {
			c.Fragments = append(c.Fragments, f)
		}
	}
	if c.BaseConfig != "" && filepath.IsAbs(c.BaseConfig) {
		data, _ := os.ReadFile(c.BaseConfig)
		sum := sha256.Sum256(data)
		c.BaseConfig = "sha256:" + hex.EncodeToString(sum[:])
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.Encode(c) // maps marshal with sorted keys
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}
