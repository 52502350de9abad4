package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/fail"
)

func TestMergeFragmentLikeMergeConfig(t *testing.T) {
	base := []byte("# header\nCONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=\"x\"\nCONFIG_D=y\n")
	frag := []byte("CONFIG_B=y\n# CONFIG_D is not set\nCONFIG_E=4\n# comment\n")
	got, notes := mergeFragment(base, "f.config", frag)
	want := "# header\nCONFIG_A=y\nCONFIG_C=\"x\"\nCONFIG_B=y\n# CONFIG_D is not set\nCONFIG_E=4\n"
	if string(got) != want {
		t.Fatalf("merged:\n%s\nwant:\n%s", got, want)
	}
	if len(notes) != 2 || !strings.Contains(notes[0], "CONFIG_B is redefined: n -> y") {
		t.Fatalf("notes %q", notes)
	}
}

func TestParseSymbols(t *testing.T) {
	m, err := ParseSymbols("CONFIG_PREEMPT_DYNAMIC=y, NR_CPUS=4,LOCALVERSION=-test,X=n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"PREEMPT_DYNAMIC": "y", "NR_CPUS": "4", "LOCALVERSION": `"-test"`, "X": "n"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
	if _, err := ParseSymbols("FOO"); fail.KindOf(err) != fail.KindInput {
		t.Errorf("FOO without a value: %v", err)
	}
	if _, err := ParseSymbols("BAD-NAME=y"); err == nil {
		t.Error("a bad symbol name was accepted")
	}
}

func TestCheckRequested(t *testing.T) {
	final := map[string]string{"A": "y", "B": "n", "C": "m", "S": `"x"`}
	probs := checkRequested(map[string]string{"A": "y", "B": "y", "C": "y", "D": "y", "E": "n", "S": `"x"`}, final)
	got := map[string]string{}
	for _, p := range probs {
		got[p.Symbol] = p.Kind
	}
	want := map[string]string{"B": "dropped", "C": "changed", "D": "dropped"}
	if len(got) != len(want) {
		t.Fatalf("problems %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	err := &ConfigError{Arch: "ppc64le", Variant: "v", Problems: probs}
	if fail.Code(err) != 2 {
		t.Errorf("ConfigError exit code %d, want 2", fail.Code(err))
	}
}

// A real gcc error log (a syntax error in an O= build whose sources are
// elsewhere) classifies as a kernel error at file:line.
func TestClassifyCompileError(t *testing.T) {
	src, out := "/c/builds/src/abc", "/c/builds/work/def/out"
	log := strings.Split(`  CC      kernel/sched/core.o
../../../src/abc/kernel/sched/core.c: In function 'patcheval_broken':
../../../src/abc/kernel/sched/core.c:11437:50: error: expected ';' before '}' token
11437 | static int patcheval_broken(void) { return 1 }
      |                                                  ^~
      |                                                  ;
make[3]: *** [/c/builds/src/abc/scripts/Makefile.build:250: kernel/sched/core.o] Error 1
make[2]: *** [/c/builds/src/abc/scripts/Makefile.build:500: kernel/sched] Error 2`, "\n")
	err := classifyFailure(log, src, out)
	var ke *KernelError
	if !errors.As(err, &ke) {
		t.Fatalf("got %T %v, want *KernelError", err, err)
	}
	if ke.File != "kernel/sched/core.c" || ke.Line != 11437 || ke.Stage != "compile" {
		t.Errorf("at %s:%d (%s)", ke.File, ke.Line, ke.Stage)
	}
	if len(ke.Excerpt) < 3 || !strings.HasPrefix(ke.Excerpt[1], "kernel/sched/core.c:11437:50: error") {
		t.Errorf("excerpt %q", ke.Excerpt)
	}
	if fail.Code(err) != 1 {
		t.Errorf("exit code %d, want 1", fail.Code(err))
	}
}

func TestClassifyLinkAndInfra(t *testing.T) {
	link := []string{"  LD      vmlinux.o", "powerpc64le-linux-gnu-ld: kernel/fork.o: in function `x':", "fork.c:(.text+0x10): undefined reference to `nope'", "make[1]: *** [Makefile:1164: vmlinux] Error 1"}
	var ke *KernelError
	if err := classifyFailure(link, "/s", "/o"); !errors.As(err, &ke) || ke.Stage != "link" {
		t.Errorf("link error: %v", err)
	}
	disk := []string{"  CC kernel/fork.o", "kernel/fork.c:1: fatal error: error writing to /tmp/x: No space left on device"}
	var ie *InfraError
	if err := classifyFailure(disk, "/s", "/o"); !errors.As(err, &ie) || ie.Reason != "disk full" {
		t.Errorf("disk full: %v", err)
	} else if fail.Code(err) != 3 {
		t.Errorf("exit code %d, want 3", fail.Code(err))
	}
	oom := []string{"powerpc64le-linux-gnu-gcc: fatal error: Killed signal terminated program cc1", "internal compiler error: Killed (program cc1)"}
	if err := classifyFailure(oom, "/s", "/o"); !errors.As(err, &ie) || ie.Reason != "out of memory" {
		t.Errorf("oom: %v", err)
	}
}

func TestToolchain(t *testing.T) {
	tc, err := FindToolchain(context.Background(), "powerpc", false)
	if err != nil {
		if _, lerr := exec.LookPath("powerpc64le-linux-gnu-gcc"); lerr == nil {
			t.Fatal(err)
		}
		var ie *InfraError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "gcc-powerpc64le-linux-gnu") {
			t.Fatalf("missing toolchain error does not name the package: %v", err)
		}
		return
	}
	if tc.CrossCompile != "powerpc64le-linux-gnu-" || !strings.HasPrefix(tc.Name, "gcc-") || tc.Binutils == "" {
		t.Errorf("toolchain %+v", tc)
	}
	// A missing compiler names the Debian package.
	t.Setenv("PATH", t.TempDir())
	toolchainCache.Delete("arm64false")
	_, err = findToolchain(context.Background(), tableArch(t, "arm64"), false)
	var ie *InfraError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "apt-get install gcc-aarch64-linux-gnu") || fail.Code(err) != 3 {
		t.Errorf("missing compiler: %v", err)
	}
}

func TestBootConfigs(t *testing.T) {
	for _, a := range arch.Names() {
		name, data := BootConfig(a)
		if name == "" || len(data) == 0 {
			t.Fatalf("no boot config for %s", a)
		}
		_, vals := symbolLines(data)
		for _, sym := range []string{"BLK_DEV_INITRD", "DEVTMPFS", "PROC_FS", "SYSFS", "BINFMT_ELF", "PRINTK", "TTY", "FUTEX", "PREEMPT_VOLUNTARY"} {
			if vals[sym] != "y" {
				t.Errorf("%s: CONFIG_%s=%q, want y", name, sym, vals[sym])
			}
		}
	}
	// perf_event_open(2) for perf stat and the guest's probe of the events
	// it counts; arch/x86/Kconfig selects PERF_EVENTS itself.
	for _, a := range []string{"ppc64le", "arm64", "riscv64"} {
		name, data := BootConfig(a)
		if _, vals := symbolLines(data); vals["PERF_EVENTS"] != "y" {
			t.Errorf("%s: CONFIG_PERF_EVENTS=%q, want y", name, vals["PERF_EVENTS"])
		}
	}
	_, x86 := BootConfig("amd64")
	if !strings.Contains(string(x86), "CONFIG_SERIAL_8250_CONSOLE=y") || !strings.Contains(string(x86), "CONFIG_64BIT=y") {
		t.Error("x86_64 boot config lacks the 8250 console or 64BIT")
	}
	_, arm := BootConfig("aarch64")
	if !strings.Contains(string(arm), "CONFIG_SERIAL_AMBA_PL011_CONSOLE=y") {
		t.Error("arm64 boot config lacks the PL011 console")
	}
	dir := t.TempDir()
	p, err := WriteBootConfig("ppc64le", dir)
	if err != nil || filepath.Base(p) != "ppc64le-pseries.config" {
		t.Fatal(p, err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
}

// TestBootConfigPathPerContent: two patcheval versions sharing a cache
// write different contents of one boot fragment; each keeps its own file
// (the cache once built a kernel from the other version's fragment, read
// while the test waited on the build lock).
func TestBootConfigPathPerContent(t *testing.T) {
	dir := t.TempDir()
	_, cur := BootConfig("ppc64le")
	old := bytes.Replace(cur, []byte("CONFIG_PERF_EVENTS=y\n"), nil, 1)
	if bytes.Equal(old, cur) {
		t.Fatal("the pseries boot config has no CONFIG_PERF_EVENTS=y line to drop")
	}
	pCur, err := WriteBootConfig("ppc64le", dir)
	if err != nil {
		t.Fatal(err)
	}
	pOld, err := writeFragment(dir, "ppc64le-pseries.config", old)
	if err != nil {
		t.Fatal(err)
	}
	if pOld == pCur || filepath.Base(pOld) != filepath.Base(pCur) {
		t.Fatalf("paths %s and %s: want two files of one name", pOld, pCur)
	}
	if again, err := WriteBootConfig("ppc64le", dir); err != nil || again != pCur {
		t.Fatalf("second write: %s, %v; want %s", again, err, pCur)
	}
	for p, want := range map[string][]byte{pCur: cur, pOld: old} {
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes (%v), want its own %d", p, len(got), err, len(want))
		}
	}
}

func TestRequestValidation(t *testing.T) {
	ctx := context.Background()
	cases := []Request{
		{Repo: ".", Commit: "HEAD", Arch: "sparc", BaseConfig: "tinyconfig"},
		{Repo: ".", Commit: "HEAD", Arch: "ppc64le"},
		{Repo: ".", Commit: "HEAD", Arch: "ppc64le", BaseConfig: "rm -rf"},
		{Repo: t.TempDir(), Commit: "HEAD", Arch: "ppc64le", BaseConfig: "tinyconfig"},
		{Repo: ".", Commit: "HEAD", Arch: "ppc64le", BaseConfig: "tinyconfig", Fragments: []string{"/nonexistent.config"}},
		{Repo: ".", Commit: "HEAD", Arch: "ppc64le", BaseConfig: "tinyconfig", Symbols: map[string]string{"a b": "y"}},
	}
	for i, r := range cases {
		_, err := Build(ctx, r, Options{CacheDir: t.TempDir()})
		if err == nil || fail.KindOf(err) != fail.KindInput {
			t.Errorf("case %d: got %v (kind %v), want bad input", i, err, fail.KindOf(err))
		}
	}
}

func TestLockFileSerialises(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	un, err := lockFile(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := lockFile(ctx, p, nil); err == nil {
		t.Fatal("second lock succeeded while the first is held")
	}
	un()
	un2, err := lockFile(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	un2()
}

// runMakes runs make -s in each of dirs at the same time, joined to js
// (each as a build of b when b is set).
func runMakes(t *testing.T, js *jobserver, b *Budget, dirs ...string) {
	t.Helper()
	errs := make(chan error, len(dirs))
	for _, dir := range dirs {
		go func() {
			if b != nil {
				finish, err := b.start(context.Background())
				if err != nil {
					errs <- err
					return
				}
				defer finish()
			}
			cmd := exec.Command("make", "-s", "-C", dir)
			cmd.Env = append(os.Environ(), "MAKEFLAGS=-j --jobserver-auth=3,4")
			cmd.ExtraFiles = []*os.File{js.mk, js.mk}
			out, err := cmd.CombinedOutput()
			if err != nil {
				err = fmt.Errorf("%v: %s", err, out)
			}
			errs <- err
		}()
	}
	for range dirs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// Two makes sharing one jobserver never run more jobs together than the
// budget: tokens + one implicit slot per make.
func TestJobserverSharesBudget(t *testing.T) {
	dir := t.TempDir()
	mk := "all: a b c d e f\na b c d e f:\n\t@echo + >> " + dir + "/log; sleep 0.3; echo - >> " + dir + "/log\n"
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte(mk), 0o644); err != nil {
		t.Fatal(err)
	}
	js, err := newJobserver(1) // budget 3 for two makes
	if err != nil {
		t.Fatal(err)
	}
	defer js.close()
	runMakes(t, js, nil, dir, dir)
	data, _ := os.ReadFile(filepath.Join(dir, "log"))
	cur, peak := 0, 0
	for _, l := range strings.Fields(string(data)) {
		if l == "+" {
			cur++
		} else {
			cur--
		}
		peak = max(peak, cur)
	}
	if peak > 3 || peak < 2 {
		t.Errorf("peak concurrency %d, want 2..3 (budget 3)", peak)
	}
}

func TestScrubbedEnvironment(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "secret")
	t.Setenv("SSH_AUTH_SOCK", "/tmp/agent")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "x")
	r := &runner{arch: tableArch(t, "ppc64le"), tc: &Toolchain{CC: "powerpc64le-linux-gnu-gcc", CrossCompile: "powerpc64le-linux-gnu-", CCache: "/usr/bin/ccache"},
		src: "/ws/src", out: "/ws/out", home: "/ws/home", cacheDir: "/c", ws: "/c/builds"}
	env := r.env()
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		switch k {
		case "PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "KBUILD_BUILD_USER", "KBUILD_BUILD_HOST", "KBUILD_BUILD_VERSION",
			"KBUILD_BUILD_TIMESTAMP", "CCACHE_DIR", "CCACHE_BASEDIR", "CCACHE_NOHASHDIR", "CCACHE_MAXSIZE", "CCACHE_STATSLOG":
		default:
			t.Errorf("unexpected variable in the build environment: %s", e)
		}
		if strings.Contains(e, "secret") || strings.Contains(e, "agent") {
			t.Errorf("credential leaked: %s", e)
		}
	}
	if !slices.Contains(env, "KBUILD_BUILD_VERSION=1") {
		t.Errorf("the kernel's build number is not pinned: %q", env)
	}
	if !strings.Contains(strings.Join(env, "\n"), "HOME=/ws/home") {
		t.Errorf("HOME is not the workspace: %q", env)
	}
	args := r.makeArgs("vmlinux")
	if strings.Join(args, " ") != "make -C /ws/src O=/ws/out ARCH=powerpc CROSS_COMPILE=powerpc64le-linux-gnu- CC=ccache powerpc64le-linux-gnu-gcc vmlinux" {
		t.Errorf("make args %q", args)
	}

	// With kcc: CC is the wrapper, and its variables are the only additions.
	r.kcc = "/c/kcc/bin/kcc-0123"
	for _, e := range r.env() {
		k, _, _ := strings.Cut(e, "=")
		if strings.HasPrefix(k, "CCACHE_") {
			t.Errorf("ccache variable with kcc: %s", e)
		}
		if strings.Contains(e, "secret") || strings.Contains(e, "agent") {
			t.Errorf("credential leaked: %s", e)
		}
	}
	if env := strings.Join(r.env(), "\n"); !strings.Contains(env, "PATCHEVAL_KCC=1") || !strings.Contains(env, "PATCHEVAL_KCC_BASEDIR=/ws/src") {
		t.Errorf("kcc environment: %q", env)
	}
	if got := strings.Join(r.makeArgs("vmlinux"), " "); got != "make -C /ws/src O=/ws/out ARCH=powerpc CROSS_COMPILE=powerpc64le-linux-gnu- CC=/c/kcc/bin/kcc-0123 powerpc64le-linux-gnu-gcc vmlinux" {
		t.Errorf("make args with kcc %q", got)
	}
	if got := strings.Join(r.plainMakeArgs("vmlinux"), " "); got != "make -C /ws/src O=/ws/out ARCH=powerpc CROSS_COMPILE=powerpc64le-linux-gnu- vmlinux" {
		t.Errorf("reproducer make args %q", got)
	}
}

// tableArch is the arch table's row for name.
func tableArch(t *testing.T, name string) arch.Arch {
	t.Helper()
	a, err := arch.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// pipeTokens is how many tokens b's pipe holds once the background takes
// settle at want (it fails the test after a few seconds).
func pipeTokens(t *testing.T, b *Budget, want int) {
	t.Helper()
	n, err := -1, error(nil)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n, err = b.js.queued(); err == nil && n == want {
			return
		}
	}
	t.Fatalf("%d tokens in the pipe (%v), want %d", n, err, want)
}

// A Budget's pipe holds what the running builds' implicit slots leave of
// it: none while Jobs or more run, the whole budget for the last; a build
// beyond Jobs+1 waits for a turn.
func TestBudgetTokens(t *testing.T) {
	b, err := NewBudget(2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	pipeTokens(t, b, 2)
	var fins []func()
	for i, want := range []int{1, 0, 0} { // tokens once 1, 2, 3 builds run
		f, err := b.start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fins = append(fins, f)
		pipeTokens(t, b, want)
		_ = i
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := b.start(short); err == nil {
		t.Fatal("a fourth build started beside three in a budget of 2")
	}
	for i, want := range []int{0, 1, 2} { // after 1, 2, 3 finished
		fins[i]()
		pipeTokens(t, b, want)
	}
	// A build starting while the tokens are out (with a make) takes one
	// back when it is returned.
	f1, _ := b.start(ctx)
	pipeTokens(t, b, 1)
	buf := make([]byte, 1)
	b.js.mk.Read(buf) // a make takes the last token
	f2, _ := b.start(ctx)
	pipeTokens(t, b, 0)
	b.js.add(1) // the make returns it: the second build's start takes it
	pipeTokens(t, b, 0)
	f2()
	pipeTokens(t, b, 1)
	f1()
	pipeTokens(t, b, 2)
}

// A build's start takes the tokens that are in the pipe before it
// returns: taken in the background, a make started right after could
// read them first and run over the budget (TestBudgetKeepsSlotsBusy saw
// 4 jobs under a budget of 2 on a loaded machine).
func TestBudgetStartTakesAtOnce(t *testing.T) {
	for round := 0; round < 50; round++ {
		b, err := NewBudget(2)
		if err != nil {
			t.Fatal(err)
		}
		f1, _ := b.start(context.Background())
		if n, err := b.js.queued(); err != nil || n != 1 {
			t.Fatalf("round %d: %d tokens (%v) right after the first start, want 1", round, n, err)
		}
		f2, _ := b.start(context.Background())
		if n, err := b.js.queued(); err != nil || n != 0 {
			t.Fatalf("round %d: %d tokens (%v) right after the second start, want 0", round, n, err)
		}
		f2()
		f1()
		pipeTokens(t, b, 2)
		b.Close()
	}
}

// A make killed while it holds a token (a cancelled build) never returns
// it, and the start that waits to take a token back would then take the
// next one returned. Once no build runs, the pipe holds the whole budget
// again, and the accounting goes on from there.
func TestBudgetSettlesAfterKilledMake(t *testing.T) {
	b, err := NewBudget(2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	fa, _ := b.start(ctx)
	pipeTokens(t, b, 1)
	buf := make([]byte, 1)
	b.js.mk.Read(buf) // A's make takes the last token and is killed with it
	fb, _ := b.start(ctx)
	pipeTokens(t, b, 0) // B's start waits to take one back
	fb()                // B's slot goes to B's own pending take
	pipeTokens(t, b, 0)
	fa()
	pipeTokens(t, b, 2) // drifted to 1 before
	for round := 0; round < 2; round++ {
		f1, _ := b.start(ctx)
		pipeTokens(t, b, 1)
		f2, _ := b.start(ctx)
		pipeTokens(t, b, 0)
		f2()
		pipeTokens(t, b, 1)
		f1()
		pipeTokens(t, b, 2)
	}
}

// Builds sharing a Budget keep every slot busy: with real makes under a
// budget of 2, a short and a long "build" never run more than 3 jobs
// (Jobs+1) together, and once the short one is done the long one runs 2
// at once (the whole budget), not 1.
func TestBudgetKeepsSlotsBusy(t *testing.T) {
	b, err := NewBudget(2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	dir := t.TempDir()
	logp := filepath.Join(dir, "log")
	for name, n := range map[string]int{"short": 2, "long": 12} {
		var targets []string
		for i := 0; i < n; i++ {
			targets = append(targets, fmt.Sprintf("%s%d", name, i))
		}
		mk := "all: " + strings.Join(targets, " ") + "\n" + strings.Join(targets, " ") +
			":\n\t@echo \"+ " + name + "\" >> " + logp + "; sleep 0.2; echo \"- " + name + "\" >> " + logp + "\n"
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "Makefile"), []byte(mk), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runMakes(t, b.js, b, filepath.Join(dir, "short"), filepath.Join(dir, "long"))
	data, _ := os.ReadFile(logp)
	cur, peak, shortLeft, alonePeak := 0, 0, 2, 0
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for _, l := range lines {
		sign, name, _ := strings.Cut(l, " ")
		if sign == "+" {
			cur++
		} else {
			cur--
			if name == "short" {
				shortLeft--
			}
		}
		peak = max(peak, cur)
		if shortLeft == 0 {
			alonePeak = max(alonePeak, cur)
		}
	}
	if peak > 3 {
		t.Errorf("peak concurrency %d, want at most 3 (Jobs+1)", peak)
	}
	if alonePeak != 2 {
		t.Errorf("the long build alone ran %d jobs at once, want 2 (the whole budget): %q", alonePeak, lines)
	}
}

// A missing cross toolchain is an infrastructure error (exit 3) that names
// the Debian package to install, found before anything is built.
func TestToolchainMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	// Forget what earlier tests found (TestToolchain caches ppc64le).
	toolchainCache.Range(func(k, _ any) bool { toolchainCache.Delete(k); return true })
	for _, arch := range []string{"powerpc", "arm64", "x86_64"} {
		_, err := FindToolchain(context.Background(), arch, false)
		var ie *InfraError
		if !errors.As(err, &ie) || ie.Reason != "toolchain" || fail.Code(err) != 3 || !strings.Contains(err.Error(), "apt-get install gcc") {
			t.Errorf("%s: %v", arch, err)
		}
	}
}

// TestJobserverTakeWaits: make sets O_NONBLOCK on the jobserver file it
// is handed; take must still wait for a token (not return on EAGAIN with
// the token never taken back), and close must end that wait.
func TestJobserverTakeWaits(t *testing.T) {
	js, err := newJobserver(0)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := js.mk.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) { syscall.SetNonblock(int(fd), true) }) // what make does
	done := make(chan struct{})
	go func() { js.take(1); done <- struct{}{} }()
	select {
	case <-done:
		t.Fatal("take returned with no token in the pipe")
	case <-time.After(300 * time.Millisecond):
	}
	js.add(1)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("take did not take the token added")
	}
	go func() { js.take(1); done <- struct{}{} }()
	time.Sleep(100 * time.Millisecond)
	js.close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not end a waiting take")
	}
}

// TestSweepJobservers: a jobserver directory left by a process that is
// gone (killed before its budget closed) is removed by the next budget;
// a live process's is kept.
func TestSweepJobservers(t *testing.T) {
	tmp := t.TempDir()
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(tmp, fmt.Sprintf("%s%d-123", jobserverPrefix, done.Process.Pid))
	live := filepath.Join(tmp, fmt.Sprintf("%s%d-456", jobserverPrefix, os.Getpid()))
	other := filepath.Join(tmp, "patcheval-something-else")
	for _, d := range []string{dead, live, other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sweepJobservers(tmp)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the gone process's jobserver directory is still there: %v", err)
	}
	for _, d := range []string{live, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", filepath.Base(d), err)
		}
	}
}
