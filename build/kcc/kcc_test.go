package kcc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// project is a small C tree compiled like kbuild compiles: from an object
// directory, absolute -I into the source tree, -Wp,-MMD dependency files.
type project struct {
	t               *testing.T
	src, out, store string
	log             string
	wrapper         string
	read_           []string // layers read besides store
}

func needGCC(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
}

func newProject(t *testing.T, files map[string]string) *project {
	t.Helper()
	needGCC(t)
	root := t.TempDir()
	p := &project{t: t, src: filepath.Join(root, "src"), out: filepath.Join(root, "out"),
		store: filepath.Join(root, "store"), log: filepath.Join(root, "kcc.log")}
	os.MkdirAll(p.out, 0o755)
	p.write(files)
	w, err := Install(filepath.Join(root, "kcc"))
	if err != nil {
		t.Fatal(err)
	}
	p.wrapper = w
	return p
}

func (p *project) write(files map[string]string) {
	for name, text := range files {
		f := filepath.Join(p.src, name)
		os.MkdirAll(filepath.Dir(f), 0o755)
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
}

// args is a kbuild-like compile of src/<file> into out/<obj>.
func (p *project) args(file, obj string, extra ...string) []string {
	a := []string{"-Wp,-MMD," + filepath.Join(p.out, obj+".d"), "-nostdinc", "-I" + filepath.Join(p.src, "include"),
		"-I./include", "-include", filepath.Join(p.src, "include/config.h"), "-D__KERNEL__", "-Os", "-Wall",
		"-fmacro-prefix-map=" + p.src + "/=",
		"-DKBUILD_MODNAME=\"m\""}
	a = append(a, extra...)
	return append(a, "-c", "-o", obj, filepath.Join(p.src, file))
}

// viaKCC compiles through the wrapper (the test binary, like the CLI);
// it returns the exit status and stderr.
func (p *project) viaKCC(args []string) (int, string) {
	p.t.Helper()
	cmd := exec.Command(p.wrapper, append([]string{"gcc"}, args...)...)
	cmd.Dir = p.out
	cmd.Env = append(os.Environ(), Env(p.store, p.read_, p.src, p.log)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stderr.String()
	} else if err != nil {
		p.t.Fatal(err)
	}
	return 0, stderr.String()
}

// direct compiles with gcc itself, into out/<obj> (suffix .ref).
func (p *project) direct(args []string) []byte {
	p.t.Helper()
	var a []string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-o":
			a = append(a, "-o", args[i+1]+".ref")
			i++
		case strings.HasPrefix(args[i], "-Wp,-MMD,"):
			a = append(a, args[i]+".ref")
		default:
			a = append(a, args[i])
		}
	}
	cmd := exec.Command("gcc", a...)
	cmd.Dir = p.out
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("gcc %v: %v\n%s", a, err, out)
	}
	return p.read(args[len(args)-2] + ".ref")
}

func (p *project) read(name string) []byte {
	p.t.Helper()
	b, err := os.ReadFile(filepath.Join(p.out, name))
	if err != nil {
		p.t.Fatal(err)
	}
	return b
}

func (p *project) stats() Stats { return ReadStats(p.log) }

var baseFiles = map[string]string{
	"include/config.h": "#define CONFIG_A 1\n",
	"include/lib.h":    "#ifndef LIB_H\n#define LIB_H\nstatic inline int twice(int x) { return 2 * x; }\n#endif\n",
	"a.c": `#include <lib.h>
int counter;
int f(int x) { counter += twice(x); return counter; }
const char *where(void) { return __FILE__; }
int line(void) { return __LINE__; }
`,
}

// compileCheck compiles obj through kcc and directly, and requires the
// same object and the same dependency file.
func (p *project) compileCheck(args []string) {
	p.t.Helper()
	if st, stderr := p.viaKCC(args); st != 0 {
		p.t.Fatalf("kcc exit %d: %s", st, stderr)
	}
	obj := args[len(args)-2]
	got := p.read(obj)
	want := p.direct(args)
	if !bytes.Equal(got, want) {
		p.t.Fatalf("%s through kcc differs from gcc's own (%d vs %d bytes)", obj, len(got), len(want))
	}
	dep, ref := p.read(obj+".d"), p.read(obj+".d.ref")
	if !bytes.Equal(dep, ref) {
		p.t.Fatalf("dependency file differs:\n%s\nvs\n%s", dep, ref)
	}
}

func TestMissThenHitAcrossLineShifts(t *testing.T) {
	p := newProject(t, baseFiles)
	args := p.args("a.c", "a.o")
	p.compileCheck(args)
	if s := p.stats(); s.Misses != 1 || s.Hits != 0 {
		t.Fatalf("first compile: %+v, want one miss", s)
	}
	p.compileCheck(args)
	if s := p.stats(); s.Hits != 1 {
		t.Fatalf("same input again: %+v, want a hit", s)
	}

	// What a header-adding patch does to most objects: new includes and
	// shifted lines whose tokens vanish (macros, inactive #if blocks).
	p.write(map[string]string{
		"include/preempt.h": "/* new */\n#ifndef PREEMPT_H\n#define PREEMPT_H\n#ifdef CONFIG_DYN\nint dyn;\n#endif\n#define need_irq() 0\n#endif\n",
		"include/lib.h":     "#ifndef LIB_H\n#define LIB_H\n#include <preempt.h>\n\n\n/* comment */\nstatic inline int twice(int x) { return 2 * x; }\n#endif\n",
	})
	p.compileCheck(args)
	if s := p.stats(); s.Hits != 2 || s.Misses != 1 {
		t.Fatalf("after a token-neutral header change: %+v, want a hit", s)
	}

	// A change in tokens is a miss.
	p.write(map[string]string{"include/config.h": "#define CONFIG_A 1\n#define CONFIG_DYN 1\n"})
	p.compileCheck(args)
	if s := p.stats(); s.Misses != 2 {
		t.Fatalf("after a token change: %+v, want a miss", s)
	}
}

// A wrapper that misses while another compiles the same key (builds
// running at the same time) waits for that object instead of compiling it
// again: here the test holds the key's lock, stores the object and lets
// go, and the waiting wrapper answers from the store.
func TestConcurrentMissWaitsForTheObject(t *testing.T) {
	p := newProject(t, baseFiles)
	args := p.args("a.c", "a.o")
	p.compileCheck(args)
	data, _ := os.ReadFile(p.log)
	f := strings.Fields(string(data))
	if len(f) != 3 || f[0] != "miss" {
		t.Fatalf("log %q, want one miss with its key", data)
	}
	key := f[2]
	stored := filepath.Join(p.store, key[:2], key+".o")
	obj, err := os.ReadFile(stored)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(stored) // as if never compiled; another build is at it
	unlock := lockKey(p.store, key)
	if unlock == nil {
		t.Fatal("no lock")
	}
	done := make(chan string)
	go func() {
		st, stderr := p.viaKCC(args)
		done <- fmt.Sprintf("%d %s", st, stderr)
	}()
	select {
	case r := <-done:
		t.Fatalf("the wrapper finished (%s) while the key was locked", r)
	case <-time.After(500 * time.Millisecond):
	}
	if err := storeObject(stored, filepath.Join(p.out, "a.o"), nil); err != nil {
		t.Fatal(err)
	}
	unlock()
	if r := <-done; r != "0 " {
		t.Fatalf("wrapper: %s", r)
	}
	if s := p.stats(); s.Misses != 1 || s.Hits != 1 {
		t.Fatalf("%+v, want the waiting wrapper's hit", s)
	}
	if got := p.read("a.o"); !bytes.Equal(got, obj) {
		t.Fatal("object differs from the stored one")
	}
}

// Shifted lines must miss where they reach the object: __LINE__ in the
// source (expanded into the text), and any line with -g (debug info).
func TestLineShiftsThatMatterMiss(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		extra      []string
	}{
		{"__LINE__ moves", "a.c", nil},
		{"-g", "include/lib.h", []string{"-g"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProject(t, baseFiles)
			args := p.args("a.c", "a.o", tc.extra...)
			p.compileCheck(args)
			p.write(map[string]string{tc.file: "\n\n" + baseFiles[tc.file]})
			p.compileCheck(args)
			if s := p.stats(); s.Misses != 2 || s.Hits != 0 {
				t.Fatalf("%+v, want two misses", s)
			}
		})
	}
}

func TestOtherSourceDirectoryHits(t *testing.T) {
	// Two workspaces (base and variant) with the same sources: the
	// workspace prefix is normalised out of the key.
	p := newProject(t, baseFiles)
	p.compileCheck(p.args("a.c", "a.o"))
	q := newProject(t, baseFiles)
	q.store = p.store
	q.compileCheck(q.args("a.c", "a.o"))
	if s := q.stats(); s.Hits != 1 {
		t.Fatalf("second workspace: %+v, want a hit", s)
	}
}

func TestAssembler(t *testing.T) {
	p := newProject(t, map[string]string{
		"include/config.h": "#define CONFIG_A 1\n",
		"s.S":              "#define VAL 42\n.globl sym\n.data\nsym: .long VAL\n",
	})
	args := p.args("s.S", "s.o", "-D__ASSEMBLY__")
	p.compileCheck(args)
	p.compileCheck(args)
	if s := p.stats(); s.Misses != 1 || s.Hits != 1 {
		t.Fatalf("%+v, want a miss then a hit", s)
	}
}

func TestIncbinIsNotCached(t *testing.T) {
	p := newProject(t, map[string]string{
		"include/config.h": "#define CONFIG_A 1\n",
		"data.bin":         "one",
		"c.c":              "asm(\".section .rodata\\n.incbin \\\"../src/data.bin\\\"\\n.previous\");\n",
	})
	args := p.args("c.c", "c.o")
	p.compileCheck(args)
	p.write(map[string]string{"data.bin": "two"})
	p.compileCheck(args)
	if s := p.stats(); s.Uncached != 2 || s.Hits+s.Misses != 0 {
		t.Fatalf("%+v, want two uncached compiles", s)
	}
}

func TestCompileErrorReportsTheSource(t *testing.T) {
	p := newProject(t, map[string]string{
		"include/config.h": "#define CONFIG_A 1\n",
		"bad.c":            "int ok;\nint broken(void) { return 1 }\n",
	})
	st, stderr := p.viaKCC(p.args("bad.c", "bad.o"))
	if st == 0 {
		t.Fatal("a compile error exited 0")
	}
	if !strings.Contains(stderr, "bad.c:2:") {
		t.Fatalf("diagnostic does not name the source line:\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(p.out, "bad.o")); err == nil {
		t.Fatal("an object was left behind")
	}
	if n, _ := Trim(p.store, 1<<40); n != 0 {
		t.Fatalf("a failed compile stored %d bytes", n)
	}
	// A missing header fails in the preprocessor, also with the usual words.
	p.write(map[string]string{"bad.c": "#include <nothere.h>\n"})
	st, stderr = p.viaKCC(p.args("bad.c", "bad.o"))
	if st == 0 || !strings.Contains(stderr, "nothere.h") {
		t.Fatalf("exit %d, stderr:\n%s", st, stderr)
	}
}

func TestWarningsReplayedOnHit(t *testing.T) {
	p := newProject(t, map[string]string{
		"include/config.h": "#define CONFIG_A 1\n",
		"w.c":              "int f(void) { int unused; return 0; }\n",
	})
	args := p.args("w.c", "w.o")
	_, first := p.viaKCC(args)
	_, second := p.viaKCC(args)
	if !strings.Contains(first, "unused") || first != second {
		t.Fatalf("warnings: miss %q, hit %q", first, second)
	}
}

func TestPassThrough(t *testing.T) {
	p := newProject(t, baseFiles)
	cmd := exec.Command(p.wrapper, "gcc", "--version")
	cmd.Env = append(os.Environ(), Env(p.store, nil, p.src, p.log)...)
	out, err := cmd.Output()
	if err != nil || !bytes.Contains(out, []byte("gcc")) {
		t.Fatalf("--version: %v %s", err, out)
	}
	// A kbuild cc-option probe: -x c from /dev/null.
	cmd = exec.Command(p.wrapper, "gcc", "-Werror", "-c", "-x", "c", "/dev/null", "-o", filepath.Join(p.out, "probe.o"))
	cmd.Env = append(os.Environ(), Env(p.store, nil, p.src, p.log)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("probe: %v %s", err, out)
	}
	if s := p.stats(); s != (Stats{}) {
		t.Fatalf("pass-through invocations were counted: %+v", s)
	}
}

func TestParse(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "x.c")
	os.WriteFile(src, []byte("int x;\n"), 0o644)
	for _, tc := range []struct {
		args   []string
		ok     bool
		reason string
	}{
		{[]string{"-c", "-o", "x.o", src}, true, ""},
		{[]string{"-c", src, "-ox.o"}, true, ""},
		{[]string{"-E", src}, false, ""},
		{[]string{"-c", "-o", "x.s", src}, false, "output .s"},
		{[]string{"-c", "-o", "x.o", src, src}, false, "several-inputs"},
		{[]string{"-c", "-o", "x.o", "-fprofile-arcs", src}, false, "flag -fprofile-arcs"},
		{[]string{"-c", "-o", "x.o", filepath.Join(dir, "missing.c")}, false, "input not a file"},
		{[]string{"-c", "-include", "x.h", "-o", "x.o", src}, true, ""},
		{[]string{"--version"}, false, ""},
	} {
		c, reason := parse(tc.args)
		if (c != nil) != tc.ok || reason != tc.reason {
			t.Errorf("parse(%q) = %v, %q; want ok=%v, %q", tc.args, c != nil, reason, tc.ok, tc.reason)
		}
	}
}

func TestStrip(t *testing.T) {
	in := "# 1 \"a.c\"\n# 1 \"<built-in>\" 1\nint a;\n\n   \n#line 7 \"b.h\"\n#pragma GCC diagnostic push\nint b;\n#define X"
	var b bytes.Buffer
	writeStripped(&b, []byte(in))
	if want := "int a;\n#pragma GCC diagnostic push\nint b;\n#define X"; b.String() != want {
		t.Fatalf("got %q want %q", b.String(), want)
	}
}

func TestTrim(t *testing.T) {
	store := t.TempDir()
	for i, name := range []string{"aa/old.o", "bb/mid.o", "cc/new.o"} {
		p := filepath.Join(store, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, make([]byte, 100), 0o644)
		ts := int64(1_700_000_000 + i*100)
		os.Chtimes(p, timeUnix(ts), timeUnix(ts))
	}
	left, err := Trim(store, 250)
	if err != nil || left != 200 {
		t.Fatalf("Trim: %d %v", left, err)
	}
	if _, err := os.Stat(filepath.Join(store, "aa/old.o")); err == nil {
		t.Fatal("the least recently used object stayed")
	}
}

func TestInstallIsStable(t *testing.T) {
	dir := t.TempDir()
	a, err := Install(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Install(dir)
	if err != nil || a != b {
		t.Fatalf("second install: %q %v (first %q)", b, err, a)
	}
	// A huge-page library that could not be built (no C compiler then) is
	// tried again by the next install, without the wrapper being rebuilt.
	if _, err := exec.LookPath("cc"); err == nil {
		shim := filepath.Join(filepath.Dir(a), shimName)
		before, _ := os.Stat(a)
		os.Remove(shim)
		if _, err := Install(dir); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(shim); err != nil {
			t.Errorf("the missing %s was not built again: %v", shimName, err)
		}
		if after, _ := os.Stat(a); !after.ModTime().Equal(before.ModTime()) {
			t.Error("the wrapper was rebuilt to restore the library")
		}
	}
	if st, err := os.Stat(a); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("wrapper not executable: %v", err)
	}
	// With a Go toolchain the wrapper is this package alone, not a copy of
	// the (test) binary with all its package initialisers.
	if _, err := exec.LookPath("go"); err == nil {
		self, _ := os.Executable()
		st, _ := os.Stat(a)
		me, _ := os.Stat(self)
		if st.Size() >= me.Size() {
			t.Errorf("wrapper is %d bytes, the test binary %d: not the slim build", st.Size(), me.Size())
		}
	}
	// Another kcc version installed it: replaced in place, same path.
	os.WriteFile(a+".version", []byte("0000\n"), 0o644)
	os.WriteFile(a, []byte("old"), 0o755)
	c, err := Install(dir)
	if err != nil || c != a {
		t.Fatalf("reinstall: %q %v", c, err)
	}
	if err := Check(c); err != nil {
		t.Fatalf("the replaced wrapper does not run: %v", err)
	}
	if _, err := Install(filepath.Join(dir, "with space")); err == nil {
		t.Fatal("a store path with a blank was accepted")
	}
}

func timeUnix(s int64) time.Time { return time.Unix(s, 0) }

func TestCheck(t *testing.T) {
	w, err := Install(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(w); err != nil {
		t.Fatal(err)
	}
	// A file that is not an executable fails the check, with its name.
	bad := filepath.Join(t.TempDir(), "kcc-bad")
	os.WriteFile(bad, []byte("not a program"), 0o644)
	if err := Check(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("Check of a non-executable: %v", err)
	}
}

// hugeProbe is a stand-in compiler: it maps 4 MiB of anonymous memory the
// way GCC's heap does and writes that mapping's VmFlags (from
// /proc/self/smaps) to its -o file, or to stdout.
const hugeProbe = `#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
int main(int argc, char **argv)
{
	char *p = mmap(NULL, 4 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char line[1024], flags[1024] = "VmFlags: none\n";
	unsigned long lo, hi;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "r"), *o = stdout;
	if (p == MAP_FAILED || !f)
		return 3;
	p[0] = 1;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
			in = (unsigned long)p >= lo && (unsigned long)p < hi;
		else if (in && strncmp(line, "VmFlags:", 8) == 0)
			strcpy(flags, line);
	}
	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], "-o") == 0 && !(o = fopen(argv[i + 1], "w")))
			return 4;
	fputs(flags, o);
	return fclose(o) != 0;
}
`

// The compiler runs with the huge-page library preloaded, on both paths
// (a cacheable compile's preprocess and compile, and a pass-through): a
// large anonymous mapping of its carries the advice (VmFlags "hg"), which
// the same program run directly does not. That the advice changes no
// object is what every compileCheck above shows: those compiles run gcc
// with the library too.
func TestCompilerGetsHugePageAdvice(t *testing.T) {
	needGCC(t)
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skip("kernel without transparent huge pages")
	}
	p := newProject(t, baseFiles)
	if _, err := os.Stat(filepath.Join(filepath.Dir(p.wrapper), shimName)); err != nil {
		t.Fatalf("Install left no %s beside the wrapper: %v", shimName, err)
	}
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe")
	os.WriteFile(probe+".c", []byte(hugeProbe), 0o644)
	if out, err := exec.Command("gcc", "-O2", "-o", probe, probe+".c").CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, out)
	}
	direct, err := exec.Command(probe).Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(direct), " hg") {
		t.Fatalf("the probe run directly already has the advice: %s", direct)
	}

	// A cacheable compile: the probe writes its flags as the object.
	cmd := exec.Command(p.wrapper, append([]string{probe}, p.args("a.c", "a.o")...)...)
	cmd.Dir = p.out
	cmd.Env = append(os.Environ(), Env(p.store, nil, p.src, p.log)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compile through kcc: %v\n%s", err, out)
	}
	if s := p.stats(); s.Misses != 1 {
		t.Fatalf("the probe's compile was not a kcc miss: %+v", s)
	}
	if obj := p.read("a.o"); !strings.Contains(string(obj), " hg") {
		t.Errorf("the compiler kcc ran had no huge-page advice: %s", obj)
	}
	// A pass-through (not a compile): exec'd with the same environment.
	cmd = exec.Command(p.wrapper, probe, "--version")
	cmd.Env = append(os.Environ(), Env(p.store, nil, p.src, p.log)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), " hg") {
		t.Errorf("the compiler kcc passed through had no huge-page advice: %s", out)
	}
}

// writeStripped writes runs of lines at once and looks closely only at
// lines that start with '#' or a space: the same bytes as dropping marker
// and blank lines one line at a time (the hash, and so every stored key,
// depends on it).
func TestStripRunsMatchLineByLine(t *testing.T) {
	lines := []string{"# 1 \"a.c\"\n", "#line 3 \"b.h\" 2\n", "int a;\n", "\n", "   \n", "\t\n", "\v\f\r\n",
		"\u00a0\n", "\u00a0x\n", "  int b;\n", "#pragma once\n", "#define X 1\n", "# define Y\n", "#\n", "x", "#", " ", "\x01\n"}
	byLine := func(text []byte) []byte {
		var out []byte
		for len(text) > 0 {
			line := text
			if i := bytes.IndexByte(text, '\n'); i >= 0 {
				line = text[:i+1]
			}
			text = text[len(line):]
			if !isMarker(line) && len(bytes.TrimSpace(line)) > 0 {
				out = append(out, line...)
			}
		}
		return out
	}
	// Every sequence of three lines, and each line last without its newline.
	for _, a := range lines {
		for _, b := range lines {
			for _, c := range lines {
				text := []byte(a + b + c)
				var got bytes.Buffer
				writeStripped(&got, text)
				if want := byLine(text); !bytes.Equal(got.Bytes(), want) {
					t.Fatalf("%q: got %q want %q", text, got.Bytes(), want)
				}
			}
		}
	}
}

func TestContainsAt(t *testing.T) {
	text := []byte("x = __builtin_expect(a, 0); asm(\".incbi\" \"n\"); FILE *f; __builtin_LINE();")
	for _, p := range [][2]string{{"__builtin_", "FILE"}, {"__builtin_", "LINE"}, {"__builtin_", "expect"}, {"inc", "bin"},
		{"x = ", "__"}, {"", "x"}, {"LINE();", ""}, {"__builtin_LINE();", "z"}} {
		if got, want := containsAt(text, p[0], p[1]), bytes.Contains(text, []byte(p[0]+p[1])); got != want {
			t.Errorf("containsAt(%q, %q) = %v, bytes.Contains says %v", p[0], p[1], got, want)
		}
	}
}

// A build reads its ancestors' layers and writes only its own: the
// object the base's layer holds is a hit for the descendant, an object
// it compiles goes to its own layer, and the base's layer is unchanged.
func TestLayers(t *testing.T) {
	p := newProject(t, map[string]string{"include/config.h": "", "a.c": "int a(void) { return 1; }\n",
		"b.c": "int b(void) { return 2; }\n"})
	base := p.store
	if st, msg := p.viaKCC(p.args("a.c", "a.o")); st != 0 {
		t.Fatalf("base compile: %d %s", st, msg)
	}
	before := storeFiles(t, base)
	p.store = filepath.Join(filepath.Dir(base), "layer-child")
	p.read_ = []string{base}
	os.Remove(p.log)
	for _, f := range []string{"a", "b"} {
		if st, msg := p.viaKCC(p.args(f+".c", f+".o")); st != 0 {
			t.Fatalf("child compile of %s: %d %s", f, st, msg)
		}
	}
	s := ReadStats(p.log)
	if s.Hits != 1 || s.Misses != 1 {
		t.Errorf("child: %d hits %d misses, want a.o from the base's layer and b.o compiled", s.Hits, s.Misses)
	}
	if after := storeFiles(t, base); after != before {
		t.Errorf("the base's layer changed:\n%s\nnow\n%s", before, after)
	}
	if n := strings.Count(storeFiles(t, p.store), "\n"); n != 1 {
		t.Errorf("the child's layer holds %d objects, want 1 (b.o)", n)
	}
}

func storeFiles(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".o") {
			fi, _ := d.Info()
			fmt.Fprintf(&b, "%s %d\n", p, fi.Size())
		}
		return nil
	})
	return b.String()
}
