package build

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

// archInfo describes how to build one target architecture.
type archInfo struct {
	Name    string // ppc64le, arm64, x86_64
	KArch   string // ARCH= for make
	SrcArch string // arch/<SrcArch>/ in the tree
	// Cross is the CROSS_COMPILE prefix; empty means the host compiler.
	Cross string
	// DebPkg is the Debian package providing Cross+"gcc".
	DebPkg string
	// Targets are the default make targets; Image is the boot image path
	// inside the O= directory.
	Targets []string
	Image   string
}

var arches = map[string]archInfo{
	"ppc64le": {Name: "ppc64le", KArch: "powerpc", SrcArch: "powerpc", Cross: "powerpc64le-linux-gnu-",
		DebPkg: "gcc-powerpc64le-linux-gnu", Targets: []string{"vmlinux"}, Image: "vmlinux"},
	"arm64": {Name: "arm64", KArch: "arm64", SrcArch: "arm64", Cross: "aarch64-linux-gnu-",
		DebPkg: "gcc-aarch64-linux-gnu", Targets: []string{"Image"}, Image: "arch/arm64/boot/Image"},
	"x86_64": {Name: "x86_64", KArch: "x86_64", SrcArch: "x86", Cross: "x86_64-linux-gnu-",
		DebPkg: "gcc-x86-64-linux-gnu", Targets: []string{"bzImage"}, Image: "arch/x86/boot/bzImage"},
}

var archAliases = map[string]string{
	"ppc64le": "ppc64le", "powerpc": "ppc64le", "powerpc64le": "ppc64le", "ppc64el": "ppc64le",
	"arm64": "arm64", "aarch64": "arm64",
	"x86_64": "x86_64", "x86": "x86_64", "amd64": "x86_64", "x86-64": "x86_64",
}

// Arches lists the supported architectures.
func Arches() []string { return []string{"ppc64le", "arm64", "x86_64"} }

// NormalizeArch maps an architecture name or alias (powerpc, aarch64, amd64)
// to ppc64le, arm64 or x86_64.
func NormalizeArch(a string) (string, error) {
	if n, ok := archAliases[strings.ToLower(strings.TrimSpace(a))]; ok {
		return n, nil
	}
	return "", fail.Inputf("unknown architecture %q (want one of %s)", a, strings.Join(Arches(), ", "))
}

func lookupArch(a string) (archInfo, error) {
	n, err := NormalizeArch(a)
	if err != nil {
		return archInfo{}, err
	}
	return arches[n], nil
}

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

func findToolchain(ctx context.Context, ai archInfo, llvm bool) (*Toolchain, error) {
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
		if ai.Name == "x86_64" && runtime.GOARCH == "amd64" {
			if _, err := exec.LookPath(cross + "gcc"); err != nil {
				cross = "" // the native compiler builds x86_64
			}
		}
		if ai.Name == "arm64" && runtime.GOARCH == "arm64" {
			if _, err := exec.LookPath(cross + "gcc"); err != nil {
				cross = ""
			}
		}
		pkg := ai.DebPkg
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
	if p, err := exec.LookPath("ccache"); err == nil {
		t.CCache = p
		t.CCacheVersion = firstLine(ctx, p, "--version")
	}
	return t, nil
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
