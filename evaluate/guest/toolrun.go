//go:build linux

package guest

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// toolLibPath is the plan's LD_LIBRARY_PATH for tools.
var toolLibPath string

// runTool runs a tool benchmark once and parses the tool's output.
func runTool(b Bench) (*Result, error) {
	const outFile = "/tmp/patcheval-tool.out"
	const yamlFile = "/tmp/patcheval-stress-ng.yaml"
	var exe string
	var argv []string
	switch b.Name {
	case BenchStressNG:
		exe = StressNGPath
		argv = append([]string{exe}, b.Args...)
		argv = append(argv, "--metrics-brief", "--yaml", yamlFile)
		syscall.Unlink(yamlFile)
	case BenchPerfBench:
		exe = PerfPath
		argv = append([]string{exe, "bench"}, b.Args...)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(exe, &st); err != nil {
		return nil, fmt.Errorf("%s is not in the guest (%v): the pipeline's userland archive must hold %s", exe, err, ToolOf(b.Name))
	}
	syscall.Mkdir("/tmp", 0o1777)
	fd, err := syscall.Open(outFile, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", outFile, err)
	}
	null, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("opening /dev/null: %w", err)
	}
	env := []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/root", "TMPDIR=/tmp", "TERM=dumb", "LC_ALL=C"}
	if toolLibPath != "" {
		env = append(env, "LD_LIBRARY_PATH="+toolLibPath)
	}
	start := time.Now()
	pid, err := syscall.ForkExec(exe, argv, &syscall.ProcAttr{Dir: "/tmp", Env: env, Files: []uintptr{uintptr(null), uintptr(fd), uintptr(fd)}})
	syscall.Close(fd)
	syscall.Close(null)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", strings.Join(argv, " "), err)
	}
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	d := time.Since(start)
	out, _ := readFile(outFile)
	if err != nil {
		return nil, fmt.Errorf("waiting for %s: %w", strings.Join(argv, " "), err)
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		return nil, fmt.Errorf("%s: %v; its output:\n%s", strings.Join(argv, " "), ws, tail(string(out), 30))
	}
	res := &Result{Iterations: 1, DurationNS: d.Nanoseconds()}
	switch b.Name {
	case BenchStressNG:
		y, err := readFile(yamlFile)
		if err != nil {
			return nil, fmt.Errorf("stress-ng wrote no --yaml file (%v); its output:\n%s", err, tail(string(out), 30))
		}
		var ver string
		res.Metrics, res.Counters, ver, err = ParseStressNGYAML(y)
		if err != nil {
			return nil, fmt.Errorf("%w; stress-ng's output:\n%s", err, tail(string(out), 30))
		}
		res.Tool = "stress-ng " + ver
		if v, ok := res.Counters["bogo-ops"]; ok {
			res.Iterations = int64(v)
		}
	case BenchPerfBench:
		res.Metrics, res.Counters, err = ParsePerfBench(out)
		if err != nil {
			return nil, err
		}
		res.Tool = "perf " + perfVersion(env)
		if v, ok := res.Counters["executed"]; ok {
			res.Iterations = int64(v)
		}
	}
	return res, nil
}

// perfVersion runs `perf version` ("perf version 6.1.192" -> "6.1.192").
func perfVersion(env []string) string {
	const f = "/tmp/patcheval-perf-version"
	fd, err := syscall.Open(f, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return ""
	}
	pid, err := syscall.ForkExec(PerfPath, []string{PerfPath, "version"}, &syscall.ProcAttr{Env: env, Files: []uintptr{uintptr(fd), uintptr(fd), uintptr(fd)}})
	syscall.Close(fd)
	if err != nil {
		return ""
	}
	var ws syscall.WaitStatus
	syscall.Wait4(pid, &ws, 0, nil)
	b, _ := readFile(f)
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(b)), "perf version"))
}

// perf_event_attr, the first (VER0) 64 bytes.
type perfEventAttr struct {
	Type         uint32
	Size         uint32
	Config       uint64
	SamplePeriod uint64
	SampleType   uint64
	ReadFormat   uint64
	Flags        uint64
	WakeupEvents uint32
	BPType       uint32
	BPAddr       uint64
}

// perfProbes are the events probePerfEvents tries, by perf's names:
// PERF_TYPE_SOFTWARE (1) and PERF_TYPE_HARDWARE (0) with their configs.
var perfProbes = []struct {
	typ    uint32
	config uint64
	name   string
}{
	{1, 1, "task-clock"}, {1, 0, "cpu-clock"}, {1, 2, "page-faults"},
	{0, 0, "cycles"}, {0, 1, "instructions"}, {0, 4, "branches"},
}

// probePerfEvents opens each of perfProbes for the calling thread, does
// some work (a loop, fresh pages touched) and reads them: what the kernel
// counts, found by asking it, not by what the target is supposed to be.
func probePerfEvents() *PerfEvents {
	runtime.LockOSThread() // the events count this thread only
	defer runtime.UnlockOSThread()
	pe := &PerfEvents{PMUs: perfPMUs("/sys/bus/event_source/devices")}
	var reasons []string
	failed := map[string][]string{}
	note := func(name, why string) {
		if _, ok := failed[why]; !ok {
			reasons = append(reasons, why)
		}
		failed[why] = append(failed[why], name)
	}
	fds := make([]int, len(perfProbes))
	for i, e := range perfProbes {
		fds[i] = -1
		attr := perfEventAttr{Type: e.typ, Size: uint32(unsafe.Sizeof(perfEventAttr{})), Config: e.config}
		attr.Flags = 1 << 6 // exclude_hv: the hypervisor is not ours to count
		fd, _, errno := syscall.Syscall6(syscall.SYS_PERF_EVENT_OPEN, uintptr(unsafe.Pointer(&attr)), 0, ^uintptr(0), ^uintptr(0), 8 /* PERF_FLAG_FD_CLOEXEC */, 0)
		if errno != 0 {
			note(e.name, errno.Error())
			continue
		}
		fds[i] = int(fd)
	}
	x := 0
	for i := 0; i < 2000000; i++ {
		x += i ^ (x >> 3)
	}
	sink = x
	if m, err := syscall.Mmap(-1, 0, 16<<12, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON); err == nil {
		for i := 0; i < len(m); i += 4096 {
			m[i] = 1
		}
		syscall.Munmap(m)
	}
	for i, e := range perfProbes {
		if fds[i] < 0 {
			continue
		}
		var buf [8]byte
		n, err := syscall.Read(fds[i], buf[:])
		syscall.Close(fds[i])
		switch {
		case n != 8 || err != nil:
			note(e.name, fmt.Sprintf("read: %v", err))
		case *(*uint64)(unsafe.Pointer(&buf[0])) == 0:
			note(e.name, "opens but counts nothing")
		default:
			pe.Counted = append(pe.Counted, e.name)
			if e.typ == 1 {
				pe.Software = true
			} else {
				pe.Hardware = true
			}
		}
	}
	var notes []string
	for _, r := range reasons {
		notes = append(notes, strings.Join(failed[r], ", ")+": "+r)
	}
	pe.Note = strings.Join(notes, "; ")
	return pe
}

// perfPMUs lists the event sources in dir, sorted ("" entries and
// errors give none: no sysfs, or a kernel without PERF_EVENTS).
func perfPMUs(dir string) []string {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err != nil || n <= 0 {
			break
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
	sort.Strings(names)
	return names
}

var sink int
