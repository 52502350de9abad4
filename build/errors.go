package build

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
)

// KernelError is a build failure caused by the kernel tree: a compile,
// assembler, link or modpost error. It exits with code 1 (the thing under
// evaluation failed).
type KernelError struct {
	Arch, Variant string
	// Stage is "compile", "link", "modpost" or "make".
	Stage string
	// File and Line locate the first error (File relative to the tree);
	// empty for link errors without a source location.
	File    string
	Line    int
	Message string
	// Excerpt holds the first error lines of the build log, compiler
	// context and caret lines included.
	Excerpt []string
	Log     string
}

func (e *KernelError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "build %s", e.Arch)
	if e.Variant != "" {
		fmt.Fprintf(&b, "/%s", e.Variant)
	}
	fmt.Fprintf(&b, ": kernel %s error", e.Stage)
	if e.File != "" {
		fmt.Fprintf(&b, " at %s:%d", e.File, e.Line)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if len(e.Excerpt) > 0 {
		b.WriteString("\n    " + strings.Join(e.Excerpt, "\n    "))
	}
	if e.Log != "" {
		fmt.Fprintf(&b, "\n(full log: %s)", e.Log)
	}
	return b.String()
}

// FailKind classifies the error as a failure of the tree under evaluation
// (exit 1).
func (e *KernelError) FailKind() fail.Kind { return fail.KindFailed }

var (
	diagRe     = lazyre.New(`^(\S[^:]*):(\d+):(?:(\d+):)? (?:fatal )?error: (.*)$`)
	asmErrRe   = lazyre.New(`^(\S[^:]*):(\d+): Error: (.*)$`)
	linkErrRe  = lazyre.New(`undefined reference to|multiple definition of|relocation truncated|ld: .*error|ld(\.lld|\.bfd)?: error|ld returned \d+ exit status`)
	modpostRe  = lazyre.New(`^ERROR: modpost: (.*)$`)
	makeErrRe  = lazyre.New(`^make(\[\d+\])?: \*\*\* (.*)$`)
	ctxLineRe  = lazyre.New(`^(\s|\d+ \||\s*\|)`)
	inFuncRe   = lazyre.New(`: In (function|member function) |: At top level:`)
	notFoundRe = lazyre.New(`(?:: not found|command not found|: No such file or directory)$`)
	warningRe  = lazyre.New(`: warning: `)
	errorRe    = lazyre.New(`: (fatal )?error: |: Error: |^ERROR: `)
)

// countDiagnostics counts compiler warnings and errors in a build log.
func countDiagnostics(log []string) (errors, warnings int) {
	for _, l := range log {
		if warningRe.MatchString(l) {
			warnings++
		} else if errorRe.MatchString(l) {
			errors++
		}
	}
	return
}

// classifyFailure turns a failed make's log into a *KernelError or an
// *InfraError. srcDir and outDir let it print paths relative to the tree.
func classifyFailure(log []string, srcDir, outDir string) error {
	for _, l := range log {
		switch {
		case strings.Contains(l, "No space left on device"):
			return &InfraError{Reason: "disk full", Msg: strings.TrimSpace(l)}
		case strings.Contains(l, "internal compiler error: Killed"),
			strings.Contains(l, "virtual memory exhausted"),
			strings.Contains(l, "out of memory allocating"),
			strings.Contains(l, "Cannot allocate memory"):
			return &InfraError{Reason: "out of memory", Msg: strings.TrimSpace(l)}
		}
	}
	for i, l := range log {
		if m := diagRe.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[2])
			return &KernelError{Stage: "compile", File: relSource(m[1], srcDir, outDir), Line: n,
				Message: m[4], Excerpt: excerpt(log, i, srcDir, outDir)}
		}
		if m := asmErrRe.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[2])
			return &KernelError{Stage: "compile", File: relSource(m[1], srcDir, outDir), Line: n,
				Message: m[3], Excerpt: excerpt(log, i, srcDir, outDir)}
		}
	}
	for i, l := range log {
		if linkErrRe.MatchString(l) {
			return &KernelError{Stage: "link", Message: strings.TrimSpace(trimPaths(l, srcDir, outDir)),
				Excerpt: excerpt(log, i, srcDir, outDir)}
		}
		if m := modpostRe.FindStringSubmatch(l); m != nil {
			return &KernelError{Stage: "modpost", Message: m[1], Excerpt: excerpt(log, i, srcDir, outDir)}
		}
	}
	// A tool the build needs is missing: the machine's fault.
	for _, l := range log {
		if notFoundRe.MatchString(l) && !strings.Contains(l, ".h:") && !strings.Contains(l, "#include") {
			if strings.Contains(l, "gcc") || strings.Contains(l, "ld") || strings.Contains(l, "flex") ||
				strings.Contains(l, "bison") || strings.Contains(l, "bc") || strings.Contains(l, "perl") ||
				strings.Contains(l, "openssl") || strings.Contains(l, "make") {
				return &InfraError{Reason: "toolchain", Msg: strings.TrimSpace(l) +
					" (install the missing tool: flex bison bc libssl-dev libelf-dev and the cross compiler)"}
			}
		}
	}
	for i, l := range log {
		if m := makeErrRe.FindStringSubmatch(l); m != nil {
			start := i - 6
			if start < 0 {
				start = 0
			}
			var ex []string
			for _, x := range log[start : i+1] {
				ex = append(ex, trimPaths(x, srcDir, outDir))
			}
			return &KernelError{Stage: "make", Message: m[2], Excerpt: ex}
		}
	}
	return nil
}

// excerpt returns the error line at i with the "In function" line before
// it and the compiler's context lines after it, plus the next two error
// lines; at most 16 lines.
func excerpt(log []string, i int, srcDir, outDir string) []string {
	var ex []string
	if i > 0 && inFuncRe.MatchString(log[i-1]) {
		ex = append(ex, trimPaths(log[i-1], srcDir, outDir))
	}
	ex = append(ex, trimPaths(log[i], srcDir, outDir))
	errs := 1
	for j := i + 1; j < len(log) && len(ex) < 16; j++ {
		l := log[j]
		switch {
		case ctxLineRe.MatchString(l) || inFuncRe.MatchString(l) || strings.Contains(l, ": note: "):
			ex = append(ex, trimPaths(l, srcDir, outDir))
		case diagRe.MatchString(l) || linkErrRe.MatchString(l):
			if errs >= 3 {
				return ex
			}
			errs++
			ex = append(ex, trimPaths(l, srcDir, outDir))
		default:
			if makeErrRe.MatchString(l) {
				return ex
			}
		}
	}
	return ex
}

// relSource turns a compiler's path into one relative to the tree.
func relSource(p, srcDir, outDir string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(outDir, p)
	}
	if r, err := filepath.Rel(srcDir, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	if r, err := filepath.Rel(outDir, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

// trimPaths removes the workspace's source and output prefixes from a
// log line so excerpts read like an in-tree build.
func trimPaths(l, srcDir, outDir string) string {
	l = strings.ReplaceAll(l, srcDir+"/", "")
	l = strings.ReplaceAll(l, outDir+"/", "")
	if rel, err := filepath.Rel(outDir, srcDir); err == nil && rel != "." {
		l = strings.ReplaceAll(l, rel+"/", "")
	}
	return l
}
