package build

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/patcheval/patcheval/build/kcc"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/sandbox"
)

// Isolation says how an untrusted tree's build was contained.
type Isolation struct {
	// ScrubbedEnv: the build saw only PATH, HOME (the workspace), LANG and
	// the kbuild/ccache variables patcheval sets; no tokens or credentials.
	ScrubbedEnv bool `json:"scrubbed_env"`
	// NoNetwork: make ran in its own network namespace (unshare -n).
	NoNetwork bool `json:"no_network"`
	// Note explains why network isolation did not apply, when it did not.
	Note string `json:"note,omitempty"`
	// Env lists the variable names the build saw.
	Env []string `json:"env"`
	// Sandbox says how the tree's code was contained: "bwrap as
	// patcheval-build" (internal/sandbox), or "off (...)" when the
	// operator ran it unsandboxed.
	Sandbox string `json:"sandbox,omitempty"`
	// Aggregate says how the sandboxed commands' process trees were
	// bounded together (a cgroup's memory and pids limits), or why
	// they were not (sandbox.Aggregate).
	Aggregate string `json:"aggregate,omitempty"`
}

var (
	unshareOnce sync.Once
	unshareOK   bool
	unshareNote string
)

// canUnshareNet checks once whether "unshare -n" works here (root or user
// namespaces).
func canUnshareNet() (bool, string) {
	unshareOnce.Do(func() {
		p, err := exec.LookPath("unshare")
		if err != nil {
			unshareNote = "unshare not installed (util-linux): build ran with the host network"
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, p, "-n", "--", "true").CombinedOutput()
		if err != nil {
			unshareNote = fmt.Sprintf("unshare -n failed (%s): build ran with the host network", strings.TrimSpace(string(out)))
			if unshareNote == "" {
				unshareNote = err.Error()
			}
			return
		}
		unshareOK = true
	})
	return unshareOK, unshareNote
}

var (
	pidnsOnce sync.Once
	pidnsOK   bool
)

// canUnsharePID checks once whether make can run as the first process of
// its own PID namespace, killed with its unshare ("unshare -p -f
// --kill-child": root or user namespaces).
func canUnsharePID() bool {
	pidnsOnce.Do(func() {
		p, err := exec.LookPath("unshare")
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pidnsOK = exec.CommandContext(ctx, p, "-p", "-f", "--kill-child", "--", "true").Run() == nil
	})
	return pidnsOK
}

// runner runs make for one workspace.
type runner struct {
	arch      arch.Arch
	tc        *Toolchain
	src, out  string
	home      string
	cacheDir  string
	ws        string // workspace root (ccache base dir)
	nice      int
	noNetwork bool // requested
	timestamp string
	label     string
	progress  *progress.Reporter
	jobserver *jobserver // shared -j budget, or nil
	jobs      int
	// kcc is the compiler-cache wrapper command (CC prefix) when the
	// build uses patcheval's compiler cache, "" otherwise.
	kcc string
	// kccLayer is the kcc store layer this build writes (its commit's);
	// kccRead are the layers it may read besides (its ancestors').
	kccLayer string
	kccRead  []string
	// unsandboxed: the operator accepted running the tree's code without
	// the sandbox (Options.Unsandboxed, PATCHEVAL_SANDBOX=off).
	unsandboxed bool
	limits      sandbox.Limits

	iso Isolation
}

// makeArgs is the make command line (without isolation prefixes).
func (r *runner) makeArgs(targets ...string) []string {
	args := []string{"make", "-C", r.src, "O=" + r.out, "ARCH=" + r.arch.KArch}
	if r.tc.LLVM {
		args = append(args, "LLVM=1")
	} else if r.tc.CrossCompile != "" {
		args = append(args, "CROSS_COMPILE="+r.tc.CrossCompile)
	}
	switch {
	case r.kcc != "":
		args = append(args, "CC="+r.kcc+" "+r.tc.CC)
	case r.tc.CCache != "":
		args = append(args, "CC=ccache "+r.tc.CC)
	}
	return append(args, targets...)
}

// plainMakeArgs is makeArgs without a compiler cache: what a person redoes
// by hand.
func (r *runner) plainMakeArgs(targets ...string) []string {
	c := *r
	c.kcc = ""
	tc := *r.tc
	tc.CCache = ""
	c.tc = &tc
	return c.makeArgs(targets...)
}

// env is the scrubbed environment.
func (r *runner) env() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{
		"PATH=" + path,
		"HOME=" + r.home,
		"LANG=C",
		"LC_ALL=C",
		"TMPDIR=" + filepath.Join(r.home, "tmp"),
		"KBUILD_BUILD_USER=patcheval",
		"KBUILD_BUILD_HOST=patcheval",
		// The "#N" of the version string: kbuild otherwise counts the
		// links in this O= directory (.version), so the same kernel
		// rebuilt in another cache, or after another build in this one,
		// differed by that number.
		"KBUILD_BUILD_VERSION=1",
	}
	if r.timestamp != "" {
		env = append(env, "KBUILD_BUILD_TIMESTAMP="+r.timestamp)
	}
	if r.kcc != "" {
		env = append(env, kcc.Env(r.kccLayer, r.kccRead, r.src, r.statsLog())...)
	} else if r.tc.CCache != "" {
		env = append(env,
			"CCACHE_DIR="+r.ccacheDir(),
			"CCACHE_BASEDIR="+r.ws,
			"CCACHE_NOHASHDIR=1",
			"CCACHE_STATSLOG="+r.statsLog(),
			"CCACHE_MAXSIZE=5G")
	}
	return env
}

// statsLog is the compiler cache's per-build statistics log.
func (r *runner) statsLog() string {
	if r.kcc != "" {
		return filepath.Join(r.home, "kcc-stats.log")
	}
	return filepath.Join(r.home, "ccache-stats.log")
}

// ccacheStats counts compiler-cache hits and misses in the statistics log.
func (r *runner) ccacheStats() (hits, misses int) {
	if r.kcc != "" {
		s := kcc.ReadStats(r.statsLog())
		return s.Hits, s.Misses
	}
	data, err := readBelow(r.home, filepath.Base(r.statsLog()))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		switch strings.TrimSpace(l) {
		case "direct_cache_hit", "preprocessed_cache_hit":
			hits++
		case "cache_miss":
			misses++
		}
	}
	return hits, misses
}

// run runs make with targets, appending its output to logw and feeding
// progress; parallel says whether to use the job budget.
func (r *runner) run(ctx context.Context, logw io.Writer, parallel bool, targets ...string) (lines []string, err error) {
	args := r.makeArgs(targets...)
	env := r.env()
	var extra []*os.File
	if parallel {
		if r.jobserver != nil {
			env = append(env, fmt.Sprintf("MAKEFLAGS=-j --jobserver-auth=3,4"))
			extra = []*os.File{r.jobserver.mk, r.jobserver.mk}
		} else {
			args = append(args[:1], append([]string{fmt.Sprintf("-j%d", max(1, r.jobs))}, args[1:]...)...)
		}
	}
	if err := os.MkdirAll(filepath.Join(r.home, "tmp"), 0o755); err != nil {
		return nil, err
	}
	cmdline := args
	if r.nice > 0 {
		cmdline = append([]string{"nice", "-n", fmt.Sprint(r.nice)}, cmdline...)
	}
	cmd, err := r.command(ctx, cmdline, env)
	if err != nil {
		return nil, err
	}
	cmd.ExtraFiles = extra
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	fmt.Fprintf(logw, "$ %s\n", strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, err
	}
	pw.Close()
	stopWatch := r.watchDisk(ctx, cmd)
	defer func() {
		if derr := stopWatch(); derr != nil {
			// The watch checks every interval: a fast writer is over the
			// limit by what it wrote in one. What it left is the tree's
			// and goes (its processes are gone: Release ran), so a stopped
			// build does not keep the disk it was stopped for; the next
			// build here starts afresh.
			msg := derr.Error()
			if rerr := r.emptyWritable(); rerr != nil {
				msg += "; emptying its directories: " + rerr.Error()
			} else {
				msg += "; what it wrote was removed"
			}
			err = &KernelError{Stage: "sandbox", Message: msg}
		}
	}()
	objects := 0
	lastPrint := time.Time{}
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		fmt.Fprintln(logw, l)
		lines = append(lines, l)
		f := strings.Fields(l)
		if len(f) >= 2 && (f[0] == "CC" || f[0] == "AS") && strings.HasPrefix(l, "  ") {
			objects++
			obj := f[len(f)-1]
			if r.progress.Live() || time.Since(lastPrint) > 20*time.Second {
				r.progress.Status("%s: %s %s (%d objects)", r.label, f[0], obj, objects)
				lastPrint = time.Now()
			}
		} else if len(f) >= 2 && (f[0] == "LD" || f[0] == "KSYMS" || f[0] == "SORTTAB" || f[0] == "SYSMAP") && strings.HasPrefix(l, "  ") {
			r.progress.Status("%s: %s %s (%d objects)", r.label, f[0], f[len(f)-1], objects)
		}
	}
	pr.Close()
	err = cmd.Wait()
	if merr := sandbox.Release(cmd); merr != nil {
		// The tree's processes together passed the memory bound.
		err = &KernelError{Stage: "sandbox", Message: merr.Error()}
	}
	return lines, err
}

// emptyWritable empties the build's own writable directories (O= and its
// home; not the compiler cache's layer, which builds of other variants of
// the commit share).
func (r *runner) emptyWritable() error {
	for _, d := range []string{r.out, r.home} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// objectCount counts compiled objects in make output.
func objectCount(lines []string) int {
	n := 0
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) >= 2 && (f[0] == "CC" || f[0] == "AS") && strings.HasPrefix(l, "  ") {
			n++
		}
	}
	return n
}

// makeFailure classifies a make error: context (timeout, interrupt), a
// signal, then the log.
func (r *runner) makeFailure(ctx context.Context, err error, lines []string, logPath string) error {
	var ie *InfraError
	if errors.As(err, &ie) {
		// The sandbox could not be set up.
		ie.Arch, ie.Log = r.arch.Name, logPath
		return ie
	}
	var ke *KernelError
	if errors.As(err, &ke) {
		// The sandbox stopped the tree's build (disk limit).
		ke.Arch, ke.Log = r.arch.Name, logPath
		return ke
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		ie = &InfraError{Reason: "timeout", Msg: "build exceeded its time limit", Err: ctx.Err()}
	case ctx.Err() != nil:
		ie = &InfraError{Reason: "interrupted", Msg: "build interrupted", Err: ctx.Err()}
	default:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				ie = &InfraError{Reason: "killed", Msg: "make killed by signal " + ws.Signal().String(), Err: err}
			}
		} else {
			ie = &InfraError{Reason: "make", Msg: "could not run make: " + err.Error(), Err: err}
		}
	}
	if ie == nil {
		switch c := classifyFailure(lines, r.src, r.out).(type) {
		case *KernelError:
			c.Arch, c.Log = r.arch.Name, logPath
			return c
		case *InfraError:
			ie = c
		default:
			ie = &InfraError{Reason: "make", Msg: "make failed without a recognised error: " + err.Error(), Err: err}
		}
	}
	ie.Arch, ie.Log = r.arch.Name, logPath
	return ie
}

// jobserver is a GNU make jobserver pipe shared by concurrent builds so
// that together they stay within one -j budget. It is a named pipe (in a
// private temporary directory), so that this process can open its own end
// of it (own, below).
type jobserver struct {
	mk *os.File // make's end, handed as both fds of --jobserver-auth=3,4
	// own is this process's end for add and take: an open of its own,
	// because make sets O_NONBLOCK on the file it is handed (shared with
	// mk), and a blocking read there would then return EAGAIN at once
	// instead of waiting; own is polled by the runtime, so take waits
	// and close ends the wait.
	own    *os.File
	path   string
	taking sync.WaitGroup // takes under way
}

// jobserverPrefix names the jobserver's temporary directory, with the
// owning process's PID: a process killed before its budget closed
// leaves it behind, and the next one removes it (sweepJobservers).
const jobserverPrefix = "patcheval-jobserver-"

func newJobserver(tokens int) (js *jobserver, err error) {
	sweepJobservers(os.TempDir())
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", jobserverPrefix, os.Getpid()))
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "fifo")
	js = &jobserver{path: path}
	defer func() {
		if err != nil {
			js.close()
			js = nil
		}
	}()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return nil, err
	}
	// make's end: read-write (a named pipe opened so never waits for its
	// other end) and blocking, as make expects.
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	js.mk = os.NewFile(uintptr(fd), path)
	if js.own, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
		return nil, err
	}
	js.add(tokens)
	return js, nil
}

func (j *jobserver) add(n int) {
	if n > 0 {
		j.own.Write([]byte(strings.Repeat("+", n)))
	}
}

// takeBack takes n tokens back: those in the pipe now at once, before
// it returns, and the rest in the background (see take; settle ends the
// wait). Taking them all in the background let a make started right
// after take them first: the builds then ran one job over the budget
// until the background take got a token back.
func (j *jobserver) takeBack(n int) {
	n -= j.takeNow(n)
	if n <= 0 {
		return
	}
	j.taking.Add(1)
	go func() {
		defer j.taking.Done()
		j.take(n)
	}()
}

// takeNow reads up to n tokens that are in the pipe now, without
// waiting (own is non-blocking: the runtime polls it), and says how many.
func (j *jobserver) takeNow(n int) int {
	if n <= 0 {
		return 0
	}
	rc, err := j.own.SyscallConn()
	if err != nil {
		return 0
	}
	buf := make([]byte, n)
	got := 0
	rc.Read(func(fd uintptr) bool {
		for got < n {
			m, err := syscall.Read(int(fd), buf[got:])
			if err == syscall.EINTR {
				continue
			}
			if m <= 0 || err != nil {
				break
			}
			got += m
		}
		return true // never wait for the poller
	})
	return got
}

// take reads n tokens back out of the pipe, waiting for running makes to
// return them (or for settle or close, which end the wait).
func (j *jobserver) take(n int) {
	buf := make([]byte, 1)
	for ; n > 0; n-- {
		if _, err := j.own.Read(buf); err != nil {
			return
		}
	}
}

// settle makes the pipe hold exactly tokens, when no make holds any (no
// build runs): the takes still waiting end, and the tokens the pipe has
// are counted and topped up or read out. A make that was killed with
// tokens out (a cancelled build) never returns them, and a take waiting
// for them would steal the next ones returned: without this, a
// long-lived budget (the service's) would shrink with every cancelled
// build.
//
// It reports false when it cannot end the waiting takes (the pipe end
// not pollable: it would wait for them forever) or count the pipe; the
// budget then goes on with its own count.
func (j *jobserver) settle(tokens int) bool {
	if err := j.own.SetReadDeadline(time.Now()); err != nil {
		return false
	}
	j.taking.Wait()
	j.own.SetReadDeadline(time.Time{})
	n, err := j.queued()
	if err != nil {
		return false
	}
	j.add(tokens - n)
	j.take(n - tokens)
	return true
}

// queued is how many tokens are in the pipe (FIONREAD).
func (j *jobserver) queued() (int, error) {
	rc, err := j.own.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// sweepJobservers removes the jobserver directories in tmp whose
// process is gone.
func sweepJobservers(tmp string) {
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), jobserverPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
}

// close closes both ends and removes the pipe's directory; it is also
// newJobserver's clean-up of a half-made jobserver.
func (j *jobserver) close() {
	for _, f := range []*os.File{j.own, j.mk} {
		if f != nil {
			f.Close()
		}
	}
	os.RemoveAll(filepath.Dir(j.path))
}
