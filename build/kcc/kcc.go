// Package kcc is the compiler cache patcheval puts in front of the kernel's
// compiler (CC="<patcheval> <real cc>"): a content-addressed object store
// keyed by the preprocessed source *without line markers*.
//
// Why not ccache alone: a kernel patch that adds a header or a Kconfig
// select (the seed series adds arch/powerpc/include/asm/preempt.h and
// selects HAVE_PREEMPT_DYNAMIC_KEY, which include/linux/kernel.h tests)
// makes kbuild rebuild every object, and ccache misses on all of them
// because the preprocessed text carries the new header's line markers. For
// a build without debug information the object code depends only on the
// preprocessed tokens and the flags (__FILE__ and __LINE__ are already
// expanded there), so kcc hashes the text with line markers and blank lines
// removed: of 960 ppc64le tinyconfig objects, 958 are answered from the
// store on the base -> patched rebuild.
//
// Per object kcc runs the preprocessor once (with the caller's -Wp,-MMD so
// kbuild's dependency file is written as usual), hashes, and on a hit
// copies the stored object; on a miss it compiles the preprocessed file it
// already has (a failure there is retried from the source, so the
// diagnostics are the compiler's usual ones) and stores the object. With
// -g the line markers are kept in the hash and a miss compiles the source. Anything that is not a plain
// "-c file.c|file.S -o file.o" compile, or whose text uses .incbin or
// __builtin_FILE/__builtin_LINE, runs the real compiler unchanged.
//
// The compiler runs with a small preloaded library (thpSource, built at
// Install with the host's C compiler) that asks for transparent huge pages
// on its large anonymous mappings: cc1's garbage-collected heap is ~100 MB
// of 4 KiB pages touched once each, and in a VM every first touch is a
// costly page fault (21,000 for kernel/fork.c, a fifth of its CPU time).
// The advice changes no byte of the output (memory addresses never reach
// the object; ASLR already varies them), and without the library, or
// where the kernel ignores the advice, compiles are as before.
//
// The store is layered by commit, because the wrapper runs inside the
// build it caches, and a build runs the tree's own code: a patched tree's
// Makefile can write anything into whatever store the wrapper may write.
// So a build writes only its own commit's layer (<cache>/kcc/layers/<commit>,
// bound read-write into its sandbox) and reads, besides, the layers of
// its commit's ancestors (bound read-only; package build finds them with a
// bounded walk of the history). An object can therefore only ever reach
// builds of the commit that wrote it and of its descendants -- builds
// that run that commit's code anyway -- never the base of another series
// or another evaluation's kernels. The base -> patched rebuild keeps its
// hits (the base is the patched commit's ancestor); two unrelated
// commits share nothing. Verifying each object instead (a trusted side
// recompiling what the build claims) would cost the compile the cache
// saves, and checking its key would mean preprocessing outside the
// sandbox; keying by lineage costs neither.
//
// The process becomes the wrapper in init when PATCHEVAL_KCC=1 is set, so
// any binary that links package build (the CLI, test binaries) can serve
// as CC: see Env and Command.
package kcc

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Environment variables the wrapper reads.
const (
	envMode    = "PATCHEVAL_KCC"         // "1": this process is the wrapper
	envDir     = "PATCHEVAL_KCC_DIR"     // the store layer this build writes
	envRead    = "PATCHEVAL_KCC_READ"    // layers it only reads, ':'-separated
	envBaseDir = "PATCHEVAL_KCC_BASEDIR" // prefix replaced in arguments (the workspace)
	envLog     = "PATCHEVAL_KCC_LOG"     // per-build statistics log, one word per compile
	envTmp     = "TMPDIR"
)

// version changes every key when the hashing scheme changes.
const version = "kcc 1"

func init() {
	if os.Getenv(envMode) == "1" && len(os.Args) >= 2 {
		os.Exit(Main(os.Args[1:]))
	}
}

//go:embed kcc.go
var source []byte

// Install puts the wrapper at <store>/bin/kcc and returns its path: the CC
// prefix for make. The wrapper is this package alone built as a command
// (see buildSlim) or, without a Go toolchain, a copy of this executable. The path never changes, so kbuild's
// recorded command lines (and with them incremental builds) stay valid
// whether the CLI or a test binary drives the build, and across patcheval
// upgrades; a test binary removed after its run does not pull the wrapper
// from under a build still running in another process. The copy is
// replaced (atomically) when this file's source differs from the one that
// installed it (<store>/bin/kcc.version); kcc's answers do not depend on
// its version beyond the key, which carries it.
func Install(store string) (string, error) {
	sum := sha256.Sum256(source)
	version := hex.EncodeToString(sum[:8])
	dst := filepath.Join(store, "bin", "kcc")
	stamp := dst + ".version"
	if strings.ContainsAny(dst, " \t\n'\"\\$;&|<>()*?[]#~=%") {
		return "", fmt.Errorf("kcc: store path %q has characters make would split or expand", dst)
	}
	replace := func(name string, fill func(tmp string) error, mode os.FileMode) error {
		f, err := os.CreateTemp(filepath.Dir(dst), ".kcc-install-*")
		if err != nil {
			return err
		}
		tmp := f.Name()
		f.Close()
		if err = fill(tmp); err == nil {
			if err = os.Chmod(tmp, mode); err == nil {
				if err = os.Rename(tmp, name); err == nil {
					return nil
				}
			}
		}
		os.Remove(tmp)
		return err
	}
	// The huge-page library beside it, when there is a C compiler (a
	// kernel build has one: HOSTCC); without it compiles run as before.
	// Tried again while it is missing (no compiler when kcc was
	// installed, one now).
	shim := filepath.Join(filepath.Dir(dst), shimName)
	installShim := func() {
		if err := replace(shim, buildShim, 0o644); err != nil {
			os.Remove(shim)
		}
	}
	if st, err := os.Stat(dst); err == nil && st.Mode()&0o111 != 0 {
		if v, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(v)) == version {
			if _, err := os.Stat(shim); err != nil {
				installShim()
			}
			return dst, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("kcc: %w", err)
	}
	// The wrapper runs once per compile, so its start-up is paid ~1,000
	// times per kernel: a binary of this package alone starts with about
	// half the CPU time of the whole patcheval binary (whose package
	// initialisers all run first). It is built from the embedded source
	// with the Go toolchain when there is one; otherwise this executable
	// serves.
	fill := func(tmp string) error {
		if buildSlim(tmp) == nil {
			return nil
		}
		self, err := os.Executable()
		if err != nil {
			return err
		}
		return copyFile(self, tmp)
	}
	if err := replace(dst, fill, 0o755); err != nil {
		return "", fmt.Errorf("kcc: installing the wrapper: %w", err)
	}
	installShim()
	if err := replace(stamp, func(tmp string) error { return os.WriteFile(tmp, []byte(version+"\n"), 0o644) }, 0o644); err != nil {
		return "", fmt.Errorf("kcc: installing the wrapper: %w", err)
	}
	return dst, nil
}

// buildSlim builds this package alone as a command into out, from the
// embedded source, with the Go toolchain on PATH or in /usr/local/go.
func buildSlim(out string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = "/usr/local/go/bin/go"
		if _, err := os.Stat(gobin); err != nil {
			return fmt.Errorf("no Go toolchain")
		}
	}
	dir, err := os.MkdirTemp(filepath.Dir(out), ".kcc-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	files := map[string]string{
		"go.mod":     "module patcheval.invalid/kccwrapper\n\ngo 1.21\n",
		"kcc/kcc.go": string(source),
		"main.go": "// Command kcc is patcheval's compiler-cache wrapper alone (see package kcc).\n" +
			"package main\n\nimport (\n\t\"os\"\n\n\t\"patcheval.invalid/kccwrapper/kcc\"\n)\n\n" +
			"func main() {\n\tif len(os.Args) < 2 {\n\t\tos.Exit(2)\n\t}\n\tos.Exit(kcc.Main(os.Args[1:]))\n}\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return err
		}
	}
	cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local", "GO111MODULE=on")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the wrapper: %v: %s", err, strings.TrimSpace(string(msg)))
	}
	return nil
}

// shimName is the huge-page library's file name, beside the wrapper.
const shimName = "kcc-thp.so"

// thpSource is the library preloaded into the compiler: its anonymous
// private mappings of 1 MiB or more (GCC's garbage-collected heap grows in
// 2 MiB chunks) get madvise(MADV_HUGEPAGE). It changes nothing else, and
// keeps errno as mmap left it.
const thpSource = `/* patcheval kcc: transparent huge pages for the compiler's heap. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static void *advise(void *p, size_t len, int flags)
{
#ifdef MADV_HUGEPAGE
	if (p != MAP_FAILED && (flags & MAP_ANONYMOUS) && (flags & MAP_PRIVATE) && len >= (1u << 20)) {
		int e = errno;
		madvise(p, len, MADV_HUGEPAGE);
		errno = e;
	}
#endif
	return p;
}

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);

static void *real(mmap_fn *fn, const char *name, void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (!*fn)
		*fn = (mmap_fn)dlsym(RTLD_NEXT, name);
	if (!*fn)
		return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	return (*fn)(addr, len, prot, flags, fd, off);
}

static mmap_fn real_mmap, real_mmap64;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return advise(real(&real_mmap, "mmap", addr, len, prot, flags, fd, off), len, flags);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return advise(real(&real_mmap64, "mmap64", addr, len, prot, flags, fd, off), len, flags);
}
`

// buildShim compiles thpSource into out with the host C compiler and
// checks that a program starts with it preloaded and says nothing.
func buildShim(out string) error {
	var cc string
	for _, name := range []string{"cc", "gcc"} {
		if p, err := exec.LookPath(name); err == nil {
			cc = p
			break
		}
	}
	if cc == "" {
		return fmt.Errorf("no C compiler")
	}
	if strings.ContainsAny(out, ": ") {
		return fmt.Errorf("path %q cannot be preloaded", out)
	}
	dir, err := os.MkdirTemp(filepath.Dir(out), ".kcc-shim-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "thp.c")
	if err := os.WriteFile(src, []byte(thpSource), 0o644); err != nil {
		return err
	}
	if msg, err := exec.Command(cc, "-O2", "-shared", "-fPIC", "-o", out, src, "-ldl").CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %v: %s", shimName, err, strings.TrimSpace(string(msg)))
	}
	cmd := exec.Command("true")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+out)
	if msg, err := cmd.CombinedOutput(); err != nil || len(msg) > 0 {
		return fmt.Errorf("%s does not preload: %v %s", shimName, err, strings.TrimSpace(string(msg)))
	}
	return nil
}

// ccEnv is the compiler's environment: ours, with the huge-page library
// beside the wrapper preloaded when it is there.
var ccEnv = sync.OnceValue(func() []string {
	env := os.Environ()
	exe, err := os.Executable()
	if err != nil {
		return env
	}
	shim := filepath.Join(filepath.Dir(exe), shimName)
	if strings.ContainsAny(shim, ": ") {
		return env
	}
	if _, err := os.Stat(shim); err != nil {
		return env
	}
	pre := shim
	if old := os.Getenv("LD_PRELOAD"); old != "" {
		pre = old + ":" + shim
	}
	r := make([]string, 0, len(env)+1)
	for _, e := range env {
		if !strings.HasPrefix(e, "LD_PRELOAD=") {
			r = append(r, e)
		}
	}
	return append(r, "LD_PRELOAD="+pre)
})

// Check runs the installed wrapper once (it execs "true"): a store on a
// noexec mount, or a binary that does not link this package, fails here
// rather than as a compile error in the kernel build.
func Check(wrapper string) error {
	cmd := exec.Command(wrapper, "true")
	cmd.Env = append(os.Environ(), envMode+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kcc: the wrapper %s does not run: %v %s", wrapper, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Env is the environment the wrapper needs: the store layer it writes,
// the layers it only reads (searched after its own, in order), the
// workspace prefix normalised out of arguments, and the statistics log.
func Env(storeDir string, read []string, baseDir, logPath string) []string {
	return []string{envMode + "=1", envDir + "=" + storeDir, envRead + "=" + strings.Join(read, ":"),
		envBaseDir + "=" + baseDir, envLog + "=" + logPath}
}

// Lookup is the stored object for key: in the layer store, else in the
// first of read that has it; "" when none has.
func Lookup(store string, read []string, key string) string {
	if !ValidKey(key) {
		return ""
	}
	for _, l := range append([]string{store}, read...) {
		p := filepath.Join(l, key[:2], key+".o")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// ValidKey says whether key is a key (64 lower-case hex digits): what a
// statistics log written inside a build says is checked before it names
// a file.
func ValidKey(key string) bool {
	if len(key) != 64 {
		return false
	}
	for _, c := range key {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Stats counts a build's compiles by outcome.
type Stats struct {
	Hits, Misses, Uncached int
}

// ReadStats reads the statistics log Env named.
func ReadStats(logPath string) Stats {
	var s Stats
	// Written inside the build: not followed if a link, not waited on if
	// a pipe, read up to 64 MiB.
	f, err := os.OpenFile(logPath, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return s
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return s
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return s
	}
	for _, l := range strings.Split(string(data), "\n") {
		switch w, _, _ := strings.Cut(l, " "); w {
		case "hit":
			s.Hits++
		case "miss":
			s.Misses++
		case "uncached":
			s.Uncached++
		}
	}
	return s
}

// Main runs the wrapper: args are the real compiler and its arguments. It
// returns the exit status.
func Main(args []string) int {
	cc, ccArgs := args[0], args[1:]
	c, reason := parse(ccArgs)
	store := os.Getenv(envDir)
	if c == nil || store == "" {
		if store == "" {
			reason = ""
		}
		if reason != "" {
			logf("uncached %s", reason)
		}
		return execReal(cc, ccArgs)
	}
	st, err := c.run(cc, ccArgs, store)
	if err != nil {
		// The store failed (disk, permissions): build without it.
		fmt.Fprintf(os.Stderr, "patcheval kcc: %v; compiling without the cache\n", err)
		logf("uncached store-error")
		return execReal(cc, ccArgs)
	}
	return st
}

// logf appends one line to the statistics log (O_APPEND: concurrent
// wrappers do not interleave short lines).
func logf(format string, a ...any) {
	p := os.Getenv(envLog)
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, format+"\n", a...)
	f.Close()
}

// execReal replaces this process with the real compiler.
func execReal(cc string, args []string) int {
	p, err := exec.LookPath(cc)
	if err != nil {
		fmt.Fprintf(os.Stderr, "patcheval kcc: %v\n", err)
		return 127
	}
	err = syscall.Exec(p, append([]string{cc}, args...), ccEnv())
	fmt.Fprintf(os.Stderr, "patcheval kcc: exec %s: %v\n", p, err)
	return 127
}

// compile is one cacheable compile: "-c input -o output".
type compile struct {
	input   string // the source file argument
	inIdx   int    // its index in the arguments
	output  string
	outIdx  int // index of "-o" (output at outIdx+1, or joined "-oFILE": -1)
	lang    string
	debug   bool  // -g*: line markers stay in the hash
	depArgs []int // indexes of dependency-file arguments (-Wp,-MD,..., -MD, -MF x...)
}

// parse decides whether args are a cacheable compile; reason says why not
// (empty for invocations that are not compiles at all: --version, -E ...).
func parse(args []string) (*compile, string) {
	c := &compile{inIdx: -1, outIdx: -2}
	hasC := false
	for _, a := range args {
		if a == "-x" || a == "/dev/null" {
			return nil, "" // compiler probes (cc-option) and generated input
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-c":
			hasC = true
		case a == "-E", a == "-S", a == "-M", a == "-MM", a == "-":
			return nil, ""
		case a == "-o":
			if i+1 >= len(args) {
				return nil, ""
			}
			c.outIdx, c.output = i, args[i+1]
			i++
		case strings.HasPrefix(a, "-o"):
			c.outIdx, c.output = -1, a[2:]
		case strings.HasPrefix(a, "-Wp,-MD,"), strings.HasPrefix(a, "-Wp,-MMD,"):
			c.depArgs = append(c.depArgs, i)
		case a == "-MD", a == "-MMD":
			c.depArgs = append(c.depArgs, i)
		case a == "-MF", a == "-MT", a == "-MQ":
			if i+1 >= len(args) {
				return nil, ""
			}
			c.depArgs = append(c.depArgs, i, i+1)
			i++
		case strings.HasPrefix(a, "-save-temps"), strings.HasPrefix(a, "-fprofile"), strings.HasPrefix(a, "-ftest-coverage"),
			strings.HasPrefix(a, "-fcoverage"), strings.HasPrefix(a, "-flto"), strings.HasPrefix(a, "-fplugin"),
			strings.HasPrefix(a, "-specs"), strings.HasPrefix(a, "-fdump-"), strings.HasPrefix(a, "-gsplit-dwarf"),
			strings.HasPrefix(a, "-fstack-usage"), strings.HasPrefix(a, "-fcallgraph-info"), a == "-aux-info",
			a == "-MJ", strings.HasPrefix(a, "-ftime-trace"):
			// Side outputs (or inputs) beside the object that a hit would
			// not produce.
			return nil, "flag " + a
		case a == "-g0":
			c.debug = false
		case strings.HasPrefix(a, "-g"):
			c.debug = true
		case a == "-I", a == "-include", a == "-isystem", a == "-iquote", a == "-idirafter", a == "-imacros",
			a == "-D", a == "-U", a == "-Xassembler", a == "-Xpreprocessor", a == "-Xlinker", a == "-L", a == "-l",
			a == "-imultilib", a == "-iprefix", a == "-isysroot", a == "--param", a == "-target", a == "--target":
			i++ // takes a separate value
		case !strings.HasPrefix(a, "-"):
			if c.inIdx >= 0 {
				return nil, "several-inputs"
			}
			c.inIdx, c.input = i, a
		}
	}
	if !hasC || c.inIdx < 0 || c.outIdx == -2 {
		return nil, ""
	}
	switch {
	case strings.HasSuffix(c.input, ".c"):
		c.lang = "c"
	case strings.HasSuffix(c.input, ".S"):
		c.lang = "S"
	default:
		return nil, "input " + filepath.Ext(c.input)
	}
	if !strings.HasSuffix(c.output, ".o") {
		return nil, "output " + filepath.Ext(c.output)
	}
	if st, err := os.Stat(c.input); err != nil || !st.Mode().IsRegular() {
		return nil, "input not a file"
	}
	return c, ""
}

// argsWithout returns args without the indexes in drop, with the output
// and input replaced by out and in ("" drops them).
func (c *compile) rewrite(args []string, dropDeps bool, out, in string) []string {
	drop := map[int]bool{}
	if dropDeps {
		for _, i := range c.depArgs {
			drop[i] = true
		}
	}
	var r []string
	for i := 0; i < len(args); i++ {
		switch {
		case drop[i]:
		case i == c.outIdx:
			if out != "" {
				r = append(r, "-o", out)
			}
			i++
		case c.outIdx == -1 && strings.HasPrefix(args[i], "-o") && args[i][2:] == c.output:
			if out != "" {
				r = append(r, "-o", out)
			}
		case i == c.inIdx:
			if in != "" {
				r = append(r, in)
			}
		default:
			r = append(r, args[i])
		}
	}
	return r
}

// run compiles through the store; the error is for store failures only (the
// compiler's own failure is its exit status).
func (c *compile) run(cc string, args []string, store string) (int, error) {
	tmpDir := os.Getenv(envTmp)
	if tmpDir == "" {
		tmpDir = os.TempDir()
	}
	ext := ".i"
	if c.lang == "S" {
		ext = ".s"
	}
	tmp, err := os.CreateTemp(tmpDir, "kcc-*"+ext)
	if err != nil {
		return 0, err
	}
	tmpName := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpName)

	// Preprocess: the caller's arguments without -c and -o, with -E: the
	// dependency file comes out of this step exactly as from the compile.
	pre := c.rewrite(args, false, tmpName, c.input)
	pre = removeArg(pre, "-c")
	pre = append(pre, "-E")
	if st := runCC(cc, pre, nil); st != 0 {
		// The preprocessor failed (missing header, #error): that is the
		// compile's result; rerun it so its diagnostics are the usual ones.
		logf("uncached preprocess-failed %s", c.output)
		return runCC(cc, args, nil), nil
	}
	text, unmap, err := mapFile(tmpName)
	if err != nil {
		return 0, err
	}
	key, cacheable := c.key(cc, args, text)
	unmap()
	if !cacheable {
		logf("uncached text %s", c.output)
		return runCC(cc, c.rewrite(args, true, c.output, c.input), nil), nil
	}
	obj := filepath.Join(store, key[:2], key+".o")
	if hit, err := c.fetch(obj, key); hit || err != nil {
		return 0, err
	}
	for _, l := range filepath.SplitList(os.Getenv(envRead)) {
		if hit, err := c.fetch(filepath.Join(l, key[:2], key+".o"), key); hit || err != nil {
			return 0, err
		}
	}
	// Builds that run at the same time (BuildAll, an evaluation's
	// kernels) miss on the same objects at about the same time: one
	// compiles while the others wait for its object instead of compiling
	// it again.
	if unlock := lockKey(store, key); unlock != nil {
		defer unlock()
		if hit, err := c.fetch(obj, key); hit || err != nil {
			return 0, err
		}
	}

	// Miss: compile what was preprocessed (saves running cpp twice). With
	// -g the source is compiled again instead (the debug information names
	// the preprocessed file otherwise), and so is assembler (cheap, and it
	// keeps the assembler's file names).
	var stderr bytes.Buffer
	var st int
	if c.lang == "c" && !c.debug {
		st = runCC(cc, c.rewrite(args, true, c.output, tmpName), &stderr)
		if st != 0 {
			// Compiling preprocessed text can differ in diagnostics
			// (macro-expansion context is gone); the source decides.
			stderr.Reset()
			st = runCC(cc, c.rewrite(args, true, c.output, c.input), &stderr)
		}
	} else {
		st = runCC(cc, c.rewrite(args, true, c.output, c.input), &stderr)
	}
	os.Stderr.Write(stderr.Bytes())
	if st != 0 {
		logf("uncached failed %s", c.output)
		return st, nil
	}
	if err := storeObject(obj, c.output, stderr.Bytes()); err != nil {
		fmt.Fprintf(os.Stderr, "patcheval kcc: storing %s: %v\n", c.output, err)
	}
	logf("miss %s %s", c.output, key)
	return 0, nil
}

// fetch copies the stored object (and replays its diagnostics) when there
// is one.
func (c *compile) fetch(obj, key string) (bool, error) {
	err := copyFile(obj, c.output)
	if err != nil {
		if os.IsNotExist(err) {
			return false, nil
		}
		return false, err
	}
	now := time.Now()
	os.Chtimes(obj, now, now) // LRU for Trim (fails quietly on a read-only layer)
	if msg, err := os.ReadFile(obj + ".stderr"); err == nil {
		os.Stderr.Write(msg)
	}
	logf("hit %s %s", c.output, key)
	return true, nil
}

// lockKey takes the store's lock for key: one of 4,096 lock files
// (<store>/locks/<first three hex digits>), so their number stays bounded;
// two keys that share one wait for each other's compile, rarely. It
// returns nil when there is no lock to take (the compile then goes ahead
// unlocked); the kernel drops the lock if the wrapper dies.
//
// Waiting keeps this compile's job slot of make's budget: the wait lasts
// one compile of the same object, and the object is then a hit. (An
// earlier version lent the slot to make's jobserver while it waited and
// took a token back afterwards; with several makes reading the same pipe
// the token almost never came back to it, and two compiles of the main
// job waited 26 minutes for one.)
func lockKey(store, key string) (unlock func()) {
	dir := filepath.Join(store, "locks")
	p := filepath.Join(dir, key[:3])
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if os.IsNotExist(err) {
		if os.MkdirAll(dir, 0o755) != nil {
			return nil
		}
		f, err = os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	}
	if err != nil {
		return nil
	}
	if err := flock(f, syscall.LOCK_EX); err != nil {
		f.Close()
		return nil
	}
	return func() { f.Close() }
}

func flock(f *os.File, how int) error {
	for {
		if err := syscall.Flock(int(f.Fd()), how); err != syscall.EINTR {
			return err
		}
	}
}

// key hashes what decides the object: the compiler, the arguments (minus
// dependency-file and output names, the workspace prefix normalised) and
// the preprocessed text (line markers and blank lines removed unless -g).
func (c *compile) key(cc string, args []string, text []byte) (string, bool) {
	if containsAt(text, "inc", "bin") || bytes.Contains(text, []byte(".include")) {
		return "", false // the object embeds a file the text does not show
	}
	keepMarkers := c.debug || containsAt(text, "__builtin_", "FILE") || containsAt(text, "__builtin_", "LINE")
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", version, c.lang)
	if p, err := exec.LookPath(cc); err == nil {
		if st, err := os.Stat(p); err == nil {
			fmt.Fprintf(h, "%s\x00%d\x00%d\x00", p, st.Size(), st.ModTime().UnixNano())
		}
	} else {
		return "", false
	}
	base := os.Getenv(envBaseDir)
	norm := func(s string) string {
		if base != "" && !keepMarkers {
			return strings.ReplaceAll(s, base, "\x01BASE")
		}
		return s
	}
	for _, a := range c.rewrite(args, true, "", "") {
		fmt.Fprintf(h, "%s\x00", norm(a))
	}
	fmt.Fprintf(h, "input=%s\x00", norm(c.input))
	if keepMarkers {
		h.Write(text)
	} else {
		writeStripped(h, text)
	}
	return hex.EncodeToString(h.Sum(nil)), true
}

// containsAt is bytes.Contains(text, pre+anchor), searching for anchor:
// bytes.Index hops from one occurrence of its pattern's first byte to the
// next, and "_", "i" are among the commonest bytes of preprocessed C while
// "F", "L", "b" are rare (a whole-text search for "__builtin_FILE" took
// longer than hashing the text).
func containsAt(text []byte, pre, anchor string) bool {
	for off := len(pre); off <= len(text); {
		i := bytes.Index(text[off:], []byte(anchor))
		if i < 0 {
			return false
		}
		i += off
		if string(text[i-len(pre):i]) == pre {
			return true
		}
		off = i + 1
	}
	return false
}

// writeStripped writes text without line markers (# 12 "file" flags) and
// without blank lines. Runs of kept lines go to w in one write.
func writeStripped(w io.Writer, text []byte) {
	kept := 0 // start of the run of kept lines not yet written
	for i := 0; i < len(text); {
		end := len(text)
		if j := bytes.IndexByte(text[i:], '\n'); j >= 0 {
			end = i + j + 1
		}
		// Most lines start with a byte that is neither '#' nor (ASCII or
		// Unicode) space: kept without a closer look.
		if b := text[i]; b == '#' || b <= ' ' || b >= 0x80 {
			if line := text[i:end]; isMarker(line) || len(bytes.TrimSpace(line)) == 0 {
				if kept < i {
					w.Write(text[kept:i])
				}
				kept = end
			}
		}
		i = end
	}
	if kept < len(text) {
		w.Write(text[kept:])
	}
}

// isMarker reports a preprocessor line marker: `# 123 "file"` (or #line).
func isMarker(l []byte) bool {
	if len(l) < 3 || l[0] != '#' {
		return false
	}
	r := l[1:]
	if bytes.HasPrefix(r, []byte("line")) {
		r = r[4:]
	}
	r = bytes.TrimLeft(r, " \t")
	return len(r) > 0 && r[0] >= '0' && r[0] <= '9'
}

// mapFile maps the preprocessed file read-only: reading several megabytes
// into a fresh heap would cost a page fault per 4 KiB (the kernel maps a
// file's cached pages 64 KiB at a time) and a copy. unmap releases it; the
// file is the wrapper's own and nothing truncates it meanwhile.
func mapFile(path string) (text []byte, unmap func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Size() > 0 && st.Size() == int64(int(st.Size())) {
		if b, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED); err == nil {
			return b, func() { syscall.Munmap(b) }, nil
		}
	}
	b, err := io.ReadAll(f)
	return b, func() {}, err
}

func removeArg(args []string, a string) []string {
	var r []string
	for _, x := range args {
		if x != a {
			r = append(r, x)
		}
	}
	return r
}

// runCC runs the real compiler; its stderr goes to errw (or ours).
func runCC(cc string, args []string, errw io.Writer) int {
	cmd := exec.Command(cc, args...)
	cmd.Env = ccEnv()
	cmd.Stdin, cmd.Stdout = os.Stdin, os.Stdout
	cmd.Stderr = os.Stderr
	if errw != nil {
		cmd.Stderr = errw
	}
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ee.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "patcheval kcc: %v\n", err)
		return 127
	}
	return 0
}

// copyFile copies src to dst through a temporary file and a rename (the
// object is never half-written; kbuild post-processes objects in place, so
// the store's copy is never linked).
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".kcc-tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}

// storeObject puts a compiled object (and its diagnostics) in the store.
func storeObject(obj, built string, stderr []byte) error {
	if err := os.MkdirAll(filepath.Dir(obj), 0o755); err != nil {
		return err
	}
	if len(stderr) > 0 {
		f, err := os.CreateTemp(filepath.Dir(obj), ".stderr-*")
		if err != nil {
			return err
		}
		_, werr := f.Write(stderr)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Rename(f.Name(), obj+".stderr")
		}
		if werr != nil {
			os.Remove(f.Name())
			return werr
		}
	}
	f, err := os.CreateTemp(filepath.Dir(obj), ".store-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	if err := copyFile(built, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, obj)
}

// Trim removes the least recently used objects until the store holds at
// most maxBytes; it returns the bytes left.
func Trim(store string, maxBytes int64) (int64, error) {
	type entry struct {
		path string
		size int64
		t    time.Time
	}
	var es []entry
	var total int64
	err := filepath.WalkDir(store, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".o") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		es = append(es, entry{p, info.Size(), info.ModTime()})
		total += info.Size()
		return nil
	})
	if err != nil || total <= maxBytes {
		return total, err
	}
	sort.Slice(es, func(i, j int) bool { return es[i].t.Before(es[j].t) })
	for _, e := range es {
		if total <= maxBytes {
			break
		}
		if os.Remove(e.path) == nil {
			os.Remove(e.path + ".stderr")
			total -= e.size
		}
	}
	return total, nil
}
