//go:build linux

package guest

import (
	"fmt"
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

// probePerfEvents opens task-clock and cpu-cycles for the agent itself,
// does some work and reads both.
func probePerfEvents() *PerfEvents {
	pe := &PerfEvents{}
	var notes []string
	try := func(typ uint32, config uint64, name string) bool {
		attr := perfEventAttr{Type: typ, Size: uint32(unsafe.Sizeof(perfEventAttr{})), Config: config}
		attr.Flags = 1 << 6 // exclude_hv: the hypervisor is not ours to count
		fd, _, e := syscall.Syscall6(syscall.SYS_PERF_EVENT_OPEN, uintptr(unsafe.Pointer(&attr)), 0, ^uintptr(0), ^uintptr(0), 8 /* PERF_FLAG_FD_CLOEXEC */, 0)
		if e != 0 {
			notes = append(notes, fmt.Sprintf("%s: %v", name, e))
			return false
		}
		defer syscall.Close(int(fd))
		x := 0
		for i := 0; i < 2000000; i++ {
			x += i ^ (x >> 3)
		}
		sink = x
		var buf [8]byte
		if n, err := syscall.Read(int(fd), buf[:]); n != 8 || err != nil {
			notes = append(notes, fmt.Sprintf("%s: read: %v", name, err))
			return false
		}
		if *(*uint64)(unsafe.Pointer(&buf[0])) == 0 {
			notes = append(notes, name+" opens but counts nothing")
			return false
		}
		return true
	}
	pe.Software = try(1 /* PERF_TYPE_SOFTWARE */, 1 /* PERF_COUNT_SW_TASK_CLOCK */, "task-clock")
	pe.Hardware = try(0 /* PERF_TYPE_HARDWARE */, 0 /* PERF_COUNT_HW_CPU_CYCLES */, "cpu-cycles")
	pe.Note = strings.Join(notes, "; ")
	return pe
}

var sink int
