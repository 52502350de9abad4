//go:build linux

package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Agent argv flags. ExitFlag and SigChildFlag are checked before anything
// else so that the execve and kill-child benchmarks' children start fast.
const (
	ExitFlag     = "--patcheval-exit"     // exit 0 at once (execve benchmark)
	SigChildFlag = "--patcheval-sigchild" // ignore SIGUSR1, wait to be killed
	NoInitFlag   = "--no-init"            // run on a live system: no mounts, no poweroff
	PlanFlag     = "--plan"               // --plan FILE ("-" for stdin)
)

// PlanPath is where the initramfs carries the plan.
const PlanPath = "/patcheval/plan.json"

// Main is the agent: evaluate/guest/agent's main function only calls it.
// As PID 1 it mounts the pseudo file systems, runs the plan from PlanPath
// and powers off; with --no-init it runs the plan from --plan (default
// stdin) on the running system and exits 0 when every benchmark ran.
func Main() {
	args := os.Args[1:]
	for _, a := range args {
		switch a {
		case ExitFlag:
			os.Exit(0)
		case SigChildFlag:
			sigChild()
			return
		}
	}
	a := &agent{out: os.Stdout, noInit: os.Getpid() != 1}
	planFile := PlanPath
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == NoInitFlag:
			a.noInit = true
		case args[i] == PlanFlag && i+1 < len(args):
			planFile = args[i+1]
			i++
		case strings.HasPrefix(args[i], PlanFlag+"="):
			planFile = strings.TrimPrefix(args[i], PlanFlag+"=")
		}
	}
	if a.noInit && planFile == PlanPath {
		planFile = "-"
	}
	ok := a.run(planFile)
	if a.restart {
		syscall.Sync()
		syscall.Reboot(syscall.LINUX_REBOOT_CMD_RESTART)
	}
	if a.noInit {
		if !ok {
			os.Exit(1)
		}
		os.Exit(0)
	}
	powerOff()
}

type agent struct {
	mu      sync.Mutex
	out     io.Writer
	noInit  bool
	restart bool
}

func (a *agent) emit(r Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	io.WriteString(a.out, r.Line())
}

func (a *agent) fail(err error) {
	a.emit(Record{Type: "error", Error: err.Error()})
}

// run does the whole plan and reports whether everything ran.
func (a *agent) run(planFile string) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			buf := make([]byte, 8192)
			buf = buf[:runtime.Stack(buf, false)]
			a.fail(fmt.Errorf("agent panic: %v\n%s", p, buf))
			ok = false
		}
		a.emit(Record{Type: "done", OK: ok})
	}()
	if !a.noInit {
		if err := mountAll(); err != nil {
			a.fail(err)
			return false
		}
		// Keep notices ("random: crng init done") from splitting agent
		// records on the console; warnings, oopses and panics still show.
		writeFile("/proc/sys/kernel/printk", []byte("4"))
	}
	plan, err := readPlan(planFile)
	if err != nil {
		a.fail(err)
		return false
	}
	a.restart = plan.Restart && !a.noInit
	info, err := a.applyKnobs(plan)
	if info != nil {
		a.emit(Record{Type: "info", Info: info})
	}
	// No benchmark on a kernel other than the one asked for: the check
	// comes before the knobs' errors, which a wrong kernel may cause.
	if werr := plan.Expect.Check(info); werr != nil {
		a.fail(errors.New(WrongKernelPrefix + werr.Error()))
		return false
	}
	if err != nil {
		a.fail(err)
		return false
	}
	return a.runBenchmarks(plan)
}

func (a *agent) runBenchmarks(plan *Plan) bool {
	ok := true
	iters := plan.Iterations
	if iters <= 0 {
		iters = 1
	}
	for it := 0; it < iters; it++ {
		for _, b := range plan.Benchmarks {
			res, err := RunBench(b)
			if err != nil {
				a.fail(fmt.Errorf("benchmark %s iteration %d: %w", b.Name, it, err))
				ok = false
				continue
			}
			res.Iteration = it
			a.emit(Record{Type: "result", Result: res})
		}
	}
	return ok
}

func readPlan(file string) (*Plan, error) {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = readFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("reading plan: %w", err)
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("plan %s: %w", file, err)
	}
	for _, bn := range p.Benchmarks {
		if !knownBench(bn.Name) {
			return nil, fmt.Errorf("plan %s: unknown benchmark %q (known: %s)", file, bn.Name, strings.Join(append(Benchmarks, ToolBenchmarks...), ", "))
		}
	}
	return &p, nil
}

func knownBench(name string) bool {
	for _, b := range append(Benchmarks, ToolBenchmarks...) {
		if b == name {
			return true
		}
	}
	return false
}

func mountAll() error {
	for _, m := range []struct{ src, dir, fs string }{
		{"proc", "/proc", "proc"},
		{"sysfs", "/sys", "sysfs"},
		{"devtmpfs", "/dev", "devtmpfs"},
		{"debugfs", "/sys/kernel/debug", "debugfs"},
		{"tmpfs", "/dev/shm", "tmpfs"}, // shm_open (stress-ng); kernels without SHMEM give ramfs
	} {
		os.MkdirAll(m.dir, 0o755)
		err := syscall.Mount(m.src, m.dir, m.fs, 0, "")
		if err != nil && err != syscall.EBUSY {
			if (m.fs == "debugfs" || m.fs == "tmpfs") && (err == syscall.ENODEV || err == syscall.ENOENT) {
				continue // kernel without DEBUG_FS: no sched/preempt knob; without TMPFS: /dev/shm on the rootfs
			}
			return fmt.Errorf("mount %s on %s: %w", m.fs, m.dir, err)
		}
	}
	return nil
}

const preemptFile = "/sys/kernel/debug/sched/preempt"

// readPreempt parses "none voluntary (full) lazy".
func readPreempt() (cur, raw string, present bool) {
	b, err := readFile(preemptFile)
	if err != nil {
		return "", "", false
	}
	raw = strings.TrimSpace(string(b))
	for _, f := range strings.Fields(raw) {
		if strings.HasPrefix(f, "(") && strings.HasSuffix(f, ")") {
			cur = strings.Trim(f, "()")
		}
	}
	return cur, raw, true
}

func (a *agent) applyKnobs(p *Plan) (*Info, error) {
	var errs []error
	if p.CPUs != "" {
		if err := pinAll(p.CPUs); err != nil {
			errs = append(errs, err)
		}
	}
	for k, v := range p.Sysctls {
		path := filepath.Join("/proc/sys", strings.ReplaceAll(k, ".", "/"))
		if err := writeFile(path, []byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("sysctl %s=%s: %w", k, v, err))
		}
	}
	if p.Preempt != "" {
		if _, _, present := readPreempt(); !present {
			errs = append(errs, fmt.Errorf("preempt=%s requested but %s does not exist (kernel without PREEMPT_DYNAMIC or DEBUG_FS)", p.Preempt, preemptFile))
		} else if err := writeFile(preemptFile, []byte(p.Preempt)); err != nil {
			errs = append(errs, fmt.Errorf("writing %q to %s: %w", p.Preempt, preemptFile, err))
		}
	}
	if p.SELinux != nil {
		if err := applySELinux(p.SELinux, a.noInit); err != nil {
			errs = append(errs, err)
		}
	}
	info := &Info{AgentVersion: Version, NoInit: a.noInit, NumCPU: runtime.NumCPU(), CPUs: p.CPUs}
	if !a.noInit || p.SELinux != nil {
		if !a.noInit {
			mountSELinuxFS()
		}
		info.SELinux = selinuxState()
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		info.Release = utsString(u.Release[:])
		info.Machine = utsString(u.Machine[:])
	}
	if b, err := readFile("/proc/cmdline"); err == nil {
		info.Cmdline = strings.TrimSpace(string(b))
	}
	if b, err := readFile(NotesPath); err == nil {
		info.BuildID = ParseBuildID(b)
	}
	info.Preempt, info.PreemptRaw, info.PreemptPresent = readPreempt()
	toolLibPath = p.LibPath
	for _, t := range []struct{ name, path string }{{"stress-ng", StressNGPath}, {"perf", PerfPath}} {
		var st syscall.Stat_t
		if syscall.Stat(t.path, &st) == nil {
			info.Tools = append(info.Tools, t.name)
		}
	}
	info.PerfEvents = probePerfEvents()
	if p.Preempt != "" && info.PreemptPresent && info.Preempt != p.Preempt {
		errs = append(errs, fmt.Errorf("preempt=%s requested but the kernel shows %q", p.Preempt, info.PreemptRaw))
	}
	return info, errors.Join(errs...)
}

func utsString[T int8 | uint8](b []T) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// sigChild is the kill-child benchmark's child: it ignores SIGUSR1, says
// so on fd 3 and waits to be killed.
func sigChild() {
	ignoreSIGUSR1()
	if f := os.NewFile(3, "ready"); f != nil {
		f.Write([]byte{'r'})
		f.Close()
	}
	for {
		time.Sleep(time.Hour)
	}
}

func powerOff() {
	syscall.Sync()
	syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
	for {
		time.Sleep(time.Hour)
	}
}

// readFile and writeFile use plain system calls: package os registers
// opened files with the Go netpoller, and the runtime dies ("netpollinit
// failed") on kernels without CONFIG_EPOLL, which tinyconfig leaves out.
func readFile(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n <= 0 {
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
}

func writeFile(path string, data []byte) error {
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CLOEXEC|syscall.O_TRUNC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	for len(data) > 0 {
		n, err := syscall.Write(fd, data)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "write", Path: path, Err: err}
		}
		data = data[n:]
	}
	return nil
}

// listDir returns the names in a directory.
func listDir(path string) ([]string, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var names []string
	buf := make([]byte, 16<<10)
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err != nil {
			return nil, &os.PathError{Op: "readdirent", Path: path, Err: err}
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
}
