package build

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/fail"
)

func lookupArch(a string) (arch.Arch, error) { return arch.Lookup(a) }

// Toolchain is the compiler a kernel is built with.
type Toolchain struct {
	// Name is tuxmake's toolchain name: "gcc-12", "clang-14".
	Name string `json:"name"`
	// CrossCompile is the CROSS_COMPILE prefix ("" for native or LLVM).
	CrossCompile string `json:"cross_compile,omitempty"`
	LLVM         bool   `json:"llvm,omitempty"`
	// CC is the compiler command (without ccache).
	CC string `json:"cc"`
	// CCVersion is the first line of "$CC --version".
	CCVersion string `json:"cc_version"`
	// CCMajor is the compiler's major version ("12").
	CCMajor string `json:"cc_major"`
	// Binutils is the first line of "${CROSS_COMPILE}ld --version" (or
	// ld.lld's with LLVM).
	Binutils string `json:"binutils"`
	// CCache is the ccache binary when installed, "" otherwise.
	CCache        string `json:"ccache,omitempty"`
	CCacheVersion string `json:"ccache_version,omitempty"`
}

// ID identifies the toolchain for cache keys: everything that changes the
// generated code (ccache does not).
func (t *Toolchain) ID() string {
	return strings.Join([]string{t.Name, t.CrossCompile, fmt.Sprint(t.LLVM), t.CCVersion, t.Binutils}, "\x00")
}

// InfraError is a build failure that is not the kernel tree's fault: a
// missing toolchain, a full disk, a killed or timed-out build. It exits
// with code 3.
type InfraError struct {
	Arch, Variant string
	// Reason is a short class: "toolchain", "disk full", "killed",
	// "out of memory", "timeout", "interrupted", "make", "io".
	Reason string
	Msg    string
	Log    string // build log path, when there is one
	Err    error
}

func (e *InfraError) Error() string {
	s := "build"
	if e.Arch != "" {
		s += " " + e.Arch
		if e.Variant != "" {
			s += "/" + e.Variant
		}
	}
	s += ": infrastructure (" + e.Reason + "): " + e.Msg
	if e.Log != "" {
		s += " (log: " + e.Log + ")"
	}
	return s
}

func (e *InfraError) Unwrap() error { return e.Err }

// FailKind classifies the error as infrastructure (exit 3).
func (e *InfraError) FailKind() fail.Kind { return fail.KindInfra }

var toolchainCache sync.Map // key -> *Toolchain or error

// FindToolchain locates the compiler for arch (LLVM=1 when llvm) and records
// its versions. A missing compiler is an *InfraError naming the Debian
// package to install.
func FindToolchain(ctx context.Context, arch string, llvm bool) (*Toolchain, error) {
	ai, err := lookupArch(arch)
	if err != nil {
		return nil, err
	}
	key := ai.Name + fmt.Sprint(llvm)
	if v, ok := toolchainCache.Load(key); ok {
		t := *v.(*Toolchain)
		return &t, nil
	}
	t, err := findToolchain(ctx, ai, llvm)
	if err != nil {
		return nil, err
	}
	toolchainCache.Store(key, t)
	c := *t
	return &c, nil
}

func findToolchain(ctx context.Context, ai arch.Arch, llvm bool) (*Toolchain, error) {
	t := &Toolchain{LLVM: llvm}
	missing := func(bin, pkg string) error {
		return &InfraError{Arch: ai.Name, Reason: "toolchain",
			Msg: fmt.Sprintf("%s not found in PATH: install the Debian package %s (apt-get install %s)", bin, pkg, pkg)}
	}
	if llvm {
		for _, p := range []struct{ bin, pkg string }{{"clang", "clang"}, {"ld.lld", "lld"}, {"llvm-ar", "llvm"}, {"llvm-objcopy", "llvm"}} {
			if _, err := exec.LookPath(p.bin); err != nil {
				return nil, missing(p.bin, p.pkg)
			}
		}
		t.CC = "clang"
		t.CCVersion = firstLine(ctx, "clang", "--version")
		t.CCMajor = versionMajor(t.CCVersion, "version ")
		t.Name = "clang-" + t.CCMajor
		t.Binutils = firstLine(ctx, "ld.lld", "--version")
	} else {
		cross := ai.Cross
		if ai.HostGoArch == runtime.GOARCH {
			if _, err := exec.LookPath(cross + "gcc"); err != nil {
				cross = "" // the native compiler builds the host's arch
			}
		}
		pkg := ai.CrossPkg
		if cross == "" {
			pkg = "gcc"
		}
		if _, err := exec.LookPath(cross + "gcc"); err != nil {
			return nil, missing(cross+"gcc", pkg)
		}
		binPkg := strings.Replace(pkg, "gcc", "binutils", 1)
		if _, err := exec.LookPath(cross + "ld"); err != nil {
			return nil, missing(cross+"ld", binPkg)
		}
		t.CrossCompile = cross
		t.CC = cross + "gcc"
		t.CCVersion = firstLine(ctx, t.CC, "--version")
		t.CCMajor = versionMajor(t.CCVersion, ") ")
		t.Name = "gcc-" + t.CCMajor
		t.Binutils = firstLine(ctx, cross+"ld", "--version")
	}
	if t.CCVersion == "" {
		return nil, &InfraError{Arch: ai.Name, Reason: "toolchain", Msg: t.CC + " --version failed"}
	}
	if p := LookCCache(); p != "" {
		t.CCache = p
		t.CCacheVersion = firstLine(ctx, p, "--version")
	}
	return t, nil
}

// LookCCache is the ccache the builds would use (Toolchain.CCache, which
// Options.CompilerCache "ccache" requires): its path in PATH, or "" when
// it is not installed.
func LookCCache() string {
	p, err := exec.LookPath("ccache")
	if err != nil {
		return ""
	}
	return p
}

func firstLine(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil && len(out) == 0 {
		return ""
	}
	s, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(s)
}

// versionMajor finds the major version in a --version line: the number
// after marker ("gcc (Debian 12.2.0-14) 12.2.0" with ") " -> 12).
func versionMajor(line, marker string) string {
	s := line
	if i := strings.LastIndex(line, marker); i >= 0 {
		s = line[i+len(marker):]
	}
	for _, f := range strings.Fields(s) {
		if f != "" && f[0] >= '0' && f[0] <= '9' {
			maj, _, _ := strings.Cut(f, ".")
			return maj
		}
	}
	return "unknown"
}
