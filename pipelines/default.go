package pipelines

import (
	"fmt"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/series"
)

// DefaultName is the name --pipeline takes for the default evaluation.
const DefaultName = "default"

// DefaultBenchmarks are the default evaluation's syscall set: the
// agent's loops of the syscalls perf bench syscall times (getppid for
// basic, getpgid, fork, execve) and of kill(self, 0) (a permission check,
// no signal sent), which approximate the tools, plus Debian's own `perf
// bench syscall basic` in the guest, the tool itself.
var DefaultBenchmarks = []Benchmark{
	{Name: "kill", Iterations: 200000},
	{Name: "getppid", Iterations: 200000},
	{Name: "getpgid", Iterations: 200000},
	{Name: "fork", Iterations: 500},
	{Name: "execve", Iterations: 100},
	{Name: "perf-bench", Args: []string{"syscall", "basic", "-l", "200000"}},
}

// TouchedArches maps the paths a series changes to the architectures to
// measure it on: arch/powerpc -> ppc64le, arch/arm64 -> arm64, arch/riscv
// -> riscv64, arch/x86 -> x86_64; a series that touches no architecture of the table (or only
// others) is measured on x86_64.
func TouchedArches(files []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		rest, ok := strings.CutPrefix(f, "arch/")
		if !ok {
			continue
		}
		dir, _, _ := strings.Cut(rest, "/")
		for _, a := range arch.All() {
			if a.SrcArch == dir && !seen[a.Name] {
				seen[a.Name] = true
				out = append(out, a.Name)
			}
		}
	}
	if len(out) == 0 {
		out = []string{"x86_64"}
	}
	sort.Strings(out)
	return out
}

// SeriesFiles lists the paths the series' patches change (from their
// diff headers), sorted and unique.
func SeriesFiles(s *series.Series) []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if p != "" && p != "/dev/null" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, p := range s.Patches {
		for _, line := range strings.Split(p.Diff, "\n") {
			switch {
			case strings.HasPrefix(line, "diff --git "):
				f := strings.Fields(line)
				if len(f) == 4 {
					add(strings.TrimPrefix(f[2], "a/"))
					add(strings.TrimPrefix(f[3], "b/"))
				}
			case strings.HasPrefix(line, "+++ b/"):
				add(strings.TrimSpace(strings.TrimPrefix(line, "+++ b/")))
			}
		}
	}
	sort.Strings(out)
	return out
}

// Default is the evaluation for any series: base vs patched on the
// series' base, on the architectures it touches (or arches, when given),
// over tinyconfig with each architecture's shipped boot config, the
// syscall benchmark set (DefaultBenchmarks), 3 interleaved boots per
// variant in deterministic QEMU. The run checks that every boot finished
// and reports the build coverage of the series.
//
// It pins no base: the run takes it by the one rule of gittree.BaseChoice
// (--base, else the series' base-commit when the tree has it, else the
// tree's HEAD), and the report says which rule chose it.
func Default(s *series.Series, arches []string) (*Pipeline, error) {
	if s == nil || len(s.Patches) == 0 {
		return nil, fail.Inputf("the default pipeline evaluates a series: none given")
	}
	if len(arches) == 0 {
		arches = TouchedArches(SeriesFiles(s))
	}
	var norm []string
	for _, a := range arches {
		n, err := arch.Normalize(a)
		if err != nil {
			return nil, err
		}
		norm = append(norm, fmt.Sprintf("%q", n))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name = %q\n", DefaultName)
	fmt.Fprintf(&b, "description = %q\n", "base vs patched, syscall benchmarks, deterministic QEMU")
	b.WriteString("deterministic = true\n\n")
	b.WriteString("[series]\napply = true\n\n")
	fmt.Fprintf(&b, "[build]\narch = [%s]\nconfig = \"tinyconfig\"\nfragments = [%q]\n\n", strings.Join(norm, ", "), BootFragment)
	b.WriteString("[[variant]]\nname = \"base\"\ndescription = \"the series' base\"\napply_series = false\n\n")
	b.WriteString("[[variant]]\nname = \"patched\"\ndescription = \"the base with the series applied\"\napply_series = true\n\n")
	for _, bm := range DefaultBenchmarks {
		fmt.Fprintf(&b, "[[benchmark]]\nname = %q\n", bm.Name)
		if bm.Iterations > 0 {
			fmt.Fprintf(&b, "iterations = %d\n", bm.Iterations)
		}
		if len(bm.Args) > 0 {
			q := make([]string, len(bm.Args))
			for i, a := range bm.Args {
				q[i] = fmt.Sprintf("%q", a)
			}
			fmt.Fprintf(&b, "args = [%s]\n", strings.Join(q, ", "))
		}
		b.WriteString("\n")
	}
	b.WriteString("[repeats]\nboots = 3\niterations = 1\n\n")
	b.WriteString("[target]\nkind = \"qemu\"\nsmp = 1\nmemory = \"512M\"\ntimeout = \"10m\"\nkvm = \"off\"\n\n")
	b.WriteString("[[comparison]]\nbase = \"base\"\nother = \"patched\"\n\n")
	// Seed 002's perf bench syscall tables (Base, test, change %): perf's
	// own syscall basic, and the agent's loops for the syscalls bookworm's
	// perf 6.1 does not have (getpgid, fork, execve).
	b.WriteString("[[table]]\nname = \"perf bench syscall\"\ncolumns = [\"base\", \"patched\"]\n" +
		"benchmarks = [\"perf bench syscall\", \"getppid\", \"getpgid\", \"fork\", \"execve\"]\n" +
		"change = { name = \"change %\", base = \"base\", other = \"patched\" }\n")
	p, err := parse([]byte(b.String()), "pipelines/default (generated)", "")
	if err != nil {
		return nil, fmt.Errorf("default pipeline: %w\n%s", err, b.String())
	}
	return p, nil
}

// SeriesWarnings are the problems of measuring a series with p that can
// be seen before building: every code file the series changes lives
// under arch/ directories the pipeline does not build for. (Files the
// kernels leave out are reported after the build: build coverage.)
func (p *Pipeline) SeriesWarnings(files []string) []string {
	built := map[string]bool{}
	for _, a := range p.Arches {
		if x, ok := arch.Find(a); ok {
			built[x.SrcArch] = true
		}
	}
	var code, elsewhere []string
	for _, f := range files {
		if !isCode(f) {
			continue
		}
		code = append(code, f)
		if rest, ok := strings.CutPrefix(f, "arch/"); ok {
			dir, _, _ := strings.Cut(rest, "/")
			if !built[dir] {
				elsewhere = append(elsewhere, f)
			}
		}
	}
	if len(code) > 0 && len(elsewhere) == len(code) {
		return []string{fmt.Sprintf("pipeline %s measures nothing the series touches: its code (%s) is under arch/ directories of architectures the pipeline does not build (%s); use --pipeline default or --arch",
			p.Name, strings.Join(elsewhere, ", "), strings.Join(p.Arches, ", "))}
	}
	return nil
}

func isCode(f string) bool {
	switch {
	case strings.HasPrefix(f, "Documentation/"), strings.HasPrefix(f, "tools/"), strings.HasPrefix(f, "scripts/"):
		return false
	}
	return strings.HasSuffix(f, ".c") || strings.HasSuffix(f, ".h") || strings.HasSuffix(f, ".S")
}
