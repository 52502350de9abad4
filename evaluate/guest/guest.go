// Package guest is the benchmark agent that runs inside a booted kernel
// (as /init of an initramfs, or as a plain program on a hardware Target
// over SSH), and the host side's view of it: the Plan the agent follows,
// the records it prints on the console, and Build, which cross-compiles
// the agent for a guest architecture at run time.
//
// The agent prints one record per line, prefixed with Marker:
//
//	@@PATCHEVAL {"type":"info",...}      kernel release, cmdline, knobs
//	@@PATCHEVAL {"type":"result",...}    one benchmark iteration
//	@@PATCHEVAL {"type":"error",...}     a benchmark or knob failed
//	@@PATCHEVAL {"type":"done","ok":true}
//
// The package only uses the standard library, so the agent builds offline
// from the source embedded in the patcheval binary: running patcheval
// needs a Go toolchain at run time (go in $PATH, or $PATCHEVAL_GO); built
// agents are cached by content hash (see Build). As /init it uses raw
// system calls for file I/O, so kernels without CONFIG_EPOLL boot it.
package guest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Marker starts every agent record on the console.
const Marker = "@@PATCHEVAL "

// Version is the agent protocol version, recorded with every sample.
const Version = "patcheval-agent/1"

// Benchmark names the agent knows.
const (
	BenchKill      = "kill"       // kill(getpid(), 0) loop: a permission check, no signal sent (Describe)
	BenchKillChild = "kill-child" // kill(child, SIGUSR1) loop; the child ignores SIGUSR1, nothing is delivered (Describe)
	BenchGetppid   = "getppid"    // the syscall perf bench syscall basic times, in the agent's loop
	BenchGetpgid   = "getpgid"
	BenchFork      = "fork"   // fork + child exit + wait4
	BenchExecve    = "execve" // fork + execve(/init --patcheval-exit) + wait4
	BenchRCU       = "rcu"    // membarrier(MEMBARRIER_CMD_GLOBAL) = synchronize_rcu()
	// BenchBridge is seed 003's bridge.sh: RTM_NEWLINK kind bridge,
	// ifconfig ADDR up, down, RTM_DELLINK. (Named bridge-sh: the name
	// "bridge" measured add and delete only, and its samples must not be
	// compared with these.) Outside a QEMU guest (not PID 1) it runs in a
	// network namespace of its own, never in the host's.
	BenchBridge = "bridge-sh"

	// BenchStressNGKill runs `stress-ng --kill 1 -t N --metrics-brief`
	// (under perf stat when available) on SSH targets, not in the agent.
	BenchStressNGKill = "stress-ng-kill"
)

// Counters of a loop's Result: the system and user time (getrusage of
// the benchmark's thread) over the whole timed loop, in ns. The bridge
// loop sets them (its thread asked about time(1)'s sys); evaluate turns
// CounterSysNS into a "sys ns/op" sample.
const (
	CounterSysNS  = "sys_ns"
	CounterUserNS = "user_ns"
)

// descriptions say what each agent loop does, in the reports beside its
// name: where the name claims more (kill sends no signal; kill-child's
// signal is never delivered) and which tool's number it only
// approximates.
var descriptions = map[string]string{
	BenchKill: "the agent's loop of kill(getpid(), 0): signal 0 is the permission check only " +
		"(check_kill_permission and the LSM hook); no signal is sent or delivered. It times one of the kill() calls " +
		"stress-ng --kill makes per bogo-op, so it approximates stress-ng --kill and is not its number",
	BenchKillChild: "the agent's loop of kill(child, SIGUSR1) to a child that ignores SIGUSR1: the permission check " +
		"and the signal's generation, which the kernel drops because the child ignores it; no handler runs, " +
		"nothing is delivered. An approximation of stress-ng --kill, not its number",
	BenchGetppid: "the agent's loop of getppid(), the syscall perf bench syscall basic times: an approximation " +
		"of perf bench, not its number",
	BenchGetpgid: "the agent's loop of getpgid(0), the syscall perf bench syscall getpgid times (an approximation)",
	BenchFork:    "the agent's loop of fork(), the child's exit and wait4()",
	BenchExecve:  "the agent's loop of fork(), execve() of the agent in exit mode and wait4()",
	BenchRCU: "membarrier(MEMBARRIER_CMD_GLOBAL), which waits for synchronize_rcu(): its latency per call " +
		"(an approximation of a synchronize_rcu() latency measured inside the kernel)",
	BenchBridge: "seed 003's bridge.sh as syscalls: RTM_NEWLINK kind bridge, ifconfig ADDR up (ioctls), down, RTM_DELLINK",
}

// Describe says what the agent benchmark name does ("" for a tool or an
// unknown name).
func Describe(name string) string { return descriptions[name] }

// Benchmarks lists every benchmark name in a stable order.
var Benchmarks = []string{BenchKill, BenchKillChild, BenchGetppid, BenchGetpgid, BenchFork, BenchExecve, BenchRCU, BenchBridge}

// Bench is one benchmark request.
type Bench struct {
	Name string `json:"name"`
	// Ops is the loop count per iteration (0: the benchmark's default).
	Ops int `json:"ops,omitempty"`
	// Runs and Calls shape the rcu benchmark: Runs runs of Calls timed
	// calls each (default 10 x 100, as in the RCU thread).
	Runs  int `json:"runs,omitempty"`
	Calls int `json:"calls,omitempty"`
	// Seconds is the duration of stress-ng benchmarks (-t, default 10).
	Seconds int `json:"seconds,omitempty"`
	// Args are the arguments of a tool benchmark (stress-ng, perf-bench):
	// ["--kill", "1", "-t", "23"], ["syscall", "basic", "-l", "200000"].
	Args []string `json:"args,omitempty"`
}

// Plan is what the agent does in one boot.
type Plan struct {
	Benchmarks []Bench `json:"benchmarks"`
	// Iterations repeats the whole benchmark list (default 1).
	Iterations int `json:"iterations,omitempty"`
	// Preempt is written to /sys/kernel/debug/sched/preempt when set
	// (full, lazy, voluntary, none); a kernel without the file fails the
	// boot with an error record.
	Preempt string `json:"preempt,omitempty"`
	// Sysctls are written to /proc/sys before the benchmarks
	// ("kernel.printk" -> /proc/sys/kernel/printk).
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// Restart makes the agent (as /init) end with a reboot instead of a
	// power-off: QEMU runs with -no-reboot, so both end the boot, and
	// x86_64 kernels without ACPI cannot power off.
	Restart bool `json:"restart,omitempty"`
	// CPUs pins the agent and its children like taskset -c ("0-7,9").
	CPUs string `json:"cpus,omitempty"`
	// LibPath is LD_LIBRARY_PATH for the tools of the userland archive.
	LibPath string `json:"lib_path,omitempty"`
	// SELinux sets SELinux's mode before the benchmarks: loads Policy
	// through selinuxfs and sets enforcing or permissive, or checks that
	// SELinux is disabled (selinux=0). Only as /init (QEMU).
	SELinux *SELinux `json:"selinux,omitempty"`
	// Expect is the kernel this boot must run. The agent checks it
	// against /sys/kernel/notes and /proc/cmdline before the first
	// benchmark; on another kernel it runs none and reports one error
	// record starting with WrongKernelPrefix.
	Expect *Expect `json:"expect,omitempty"`
}

// WrongKernelPrefix starts the agent's error record when the running
// kernel is not Plan.Expect's.
const WrongKernelPrefix = "wrong kernel: "

// Expect names a kernel: the GNU build-id of its vmlinux (hex; "" to
// check the command line only) and words its /proc/cmdline must hold.
type Expect struct {
	BuildID string   `json:"build_id,omitempty"`
	Cmdline []string `json:"cmdline,omitempty"`
	// Image names the kernel in messages (its image path or variant).
	Image string `json:"image,omitempty"`
}

// Check compares the kernel info describes with e. The error names both
// sides; nil when info runs e's kernel with every word of e's command line.
func (e *Expect) Check(info *Info) error {
	if e == nil {
		return nil
	}
	if info == nil {
		return fmt.Errorf("the machine did not say which kernel it runs (no info record)")
	}
	if e.BuildID != "" {
		switch {
		case info.BuildID == "":
			return fmt.Errorf("cannot verify the kernel: the running kernel (%s) shows no build-id in %s; want %s (%s)",
				info.Release, NotesPath, e.BuildID, e.Image)
		case !strings.EqualFold(info.BuildID, e.BuildID):
			return fmt.Errorf("the running kernel is not the one asked for: build-id %s (release %s) is running, want %s (%s)",
				info.BuildID, info.Release, e.BuildID, e.Image)
		}
	}
	have := map[string]bool{}
	for _, f := range strings.Fields(info.Cmdline) {
		have[f] = true
	}
	var missing []string
	for _, f := range e.Cmdline {
		if f != "" && !have[f] {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the running kernel was booted with another command line: %q lacks %s", info.Cmdline, strings.Join(missing, " "))
	}
	return nil
}

// SELinux modes of Plan.SELinux and Info.SELinux.
const (
	SELinuxEnforcing  = "enforcing"
	SELinuxPermissive = "permissive"
	SELinuxDisabled   = "disabled"
	// SELinuxNoPolicy is Info.SELinux of a kernel with SELinux enabled
	// but no policy loaded: every AVC check allows early.
	SELinuxNoPolicy = "enabled, no policy loaded"
)

// SELinux is the SELinux state a boot asks for.
type SELinux struct {
	// Mode is SELinuxEnforcing, SELinuxPermissive or SELinuxDisabled.
	Mode string `json:"mode"`
	// Policy is a binary policy (checkpolicy's output, see
	// evaluate/guest/selinux), written to /sys/fs/selinux/load before the mode
	// is set; required for enforcing and permissive.
	Policy []byte `json:"policy,omitempty"`
	// PolicyName names it in reports ("minimal").
	PolicyName string `json:"policy_name,omitempty"`
}

// Info is the agent's first record: what it runs on.
type Info struct {
	Release string `json:"release"`
	Machine string `json:"machine"`
	Cmdline string `json:"cmdline"`
	// BuildID is the GNU build-id of the running kernel, from the notes
	// it exposes in /sys/kernel/notes (hex; "" when unreadable).
	BuildID        string `json:"build_id,omitempty"`
	NumCPU         int    `json:"num_cpu"`
	PreemptPresent bool   `json:"preempt_present"`
	// Preempt is the current model as the kernel shows it, "(full)"
	// marking in /sys/kernel/debug/sched/preempt stripped to "full".
	Preempt      string `json:"preempt,omitempty"`
	PreemptRaw   string `json:"preempt_raw,omitempty"`
	AgentVersion string `json:"agent_version"`
	NoInit       bool   `json:"no_init,omitempty"`
	CPUs         string `json:"cpus,omitempty"`
	// Tools are the userland tools present ("stress-ng", "perf").
	Tools []string `json:"tools,omitempty"`
	// PerfEvents says which perf events the kernel on this machine counts.
	PerfEvents *PerfEvents `json:"perf_events,omitempty"`
	// SELinux is SELinux's state after the plan's knobs, as selinuxfs
	// shows it: enforcing, permissive, SELinuxNoPolicy or disabled
	// (no /sys/fs/selinux); "" when the agent did not look (--no-init).
	SELinux string `json:"selinux,omitempty"`
}

// PerfEvents is what perf_event_open(2) gives the agent for itself:
// software events (task-clock, cpu-clock, page-faults) and hardware ones
// (cycles, instructions, branches), each opened, then read after some
// work (a loop and fresh pages touched); an event counts when it opens
// and reads more than zero. Under QEMU's TCG the hardware events usually
// do not exist or count nothing (what a CPU model emulates decides it);
// without CONFIG_PERF_EVENTS nothing opens. PMUs are the event sources
// the kernel registered (/sys/bus/event_source/devices).
type PerfEvents struct {
	Software bool `json:"software"`
	Hardware bool `json:"hardware"`
	// Counted names the events that counted, in probe order.
	Counted []string `json:"counted,omitempty"`
	PMUs    []string `json:"pmus,omitempty"`
	Note    string   `json:"note,omitempty"` // why the others did not
}

// String is "software only: task-clock, cpu-clock, page-faults; PMUs:
// software (cycles, instructions, branches: no such file or directory)".
func (p *PerfEvents) String() string {
	if p == nil {
		return "unknown"
	}
	var s string
	switch {
	case p.Software && p.Hardware:
		s = "software and hardware"
	case p.Software:
		s = "software only"
	case p.Hardware:
		s = "hardware only"
	default:
		s = "none"
	}
	if len(p.Counted) > 0 {
		s += ": " + strings.Join(p.Counted, ", ")
	}
	if len(p.PMUs) > 0 {
		s += "; PMUs: " + strings.Join(p.PMUs, ", ")
	}
	if p.Note != "" {
		s += " (" + p.Note + ")"
	}
	return s
}

// RunStat is one rcu run: Calls timed calls.
type RunStat struct {
	Calls  int     `json:"calls"`
	MeanNS float64 `json:"mean_ns"`
	MinNS  float64 `json:"min_ns"`
	MaxNS  float64 `json:"max_ns"`
}

// Result is one benchmark iteration.
type Result struct {
	Benchmark  string  `json:"benchmark"`
	Iteration  int     `json:"iteration"`
	Iterations int64   `json:"iterations"` // operations timed
	DurationNS int64   `json:"duration_ns"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	NsPerOp    float64 `json:"ns_per_op"`
	// Runs holds per-run statistics of the rcu benchmark.
	Runs []RunStat `json:"runs,omitempty"`
	// Counters holds external counters (perf stat on SSH targets,
	// stress-ng's miscellaneous metrics, CounterSysNS).
	Counters map[string]float64 `json:"counters,omitempty"`
	// Skipped says why the benchmark did not run ("no bridge support").
	Skipped string `json:"skipped,omitempty"`
	// Metrics are a tool benchmark's values, parsed from its own output
	// in its units (NsPerOp and OpsPerSec are then 0).
	Metrics []Metric `json:"metrics,omitempty"`
	// Tool is the tool's version ("stress-ng 0.15.06").
	Tool string `json:"tool,omitempty"`
}

// Record is one console line of the agent.
type Record struct {
	Type   string  `json:"type"` // info, result, error, done
	Info   *Info   `json:"info,omitempty"`
	Result *Result `json:"result,omitempty"`
	Error  string  `json:"error,omitempty"`
	OK     bool    `json:"ok,omitempty"`
}

// Line renders r as a console line (with Marker and newline).
func (r Record) Line() string {
	b, _ := json.Marshal(r)
	return Marker + string(b) + "\n"
}

// ParseLine finds an agent record in one console line. Kernel messages may
// precede the marker on the same line. ok is false when the line holds no
// record; err is set when it holds a broken one.
func ParseLine(line string) (rec Record, ok bool, err error) {
	i := strings.Index(line, Marker)
	if i < 0 {
		return Record{}, false, nil
	}
	s := strings.TrimSpace(line[i+len(Marker):])
	if err := json.Unmarshal([]byte(s), &rec); err != nil {
		return Record{}, true, fmt.Errorf("agent record %q: %w", s, err)
	}
	return rec, true, nil
}

// Output is everything the agent reported in one boot.
type Output struct {
	Info    *Info
	Results []Result
	Errors  []string
	Done    bool // the agent printed its done record
	OK      bool // ... with ok=true
}

// Parse reads a whole console log.
func Parse(r io.Reader) (*Output, error) {
	out := &Output{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		if err := out.Add(sc.Text()); err != nil {
			return out, err
		}
	}
	return out, sc.Err()
}

// ParseBytes is Parse on a byte slice.
func ParseBytes(b []byte) (*Output, error) { return Parse(bytes.NewReader(b)) }

// Add feeds one console line.
func (o *Output) Add(line string) error {
	rec, ok, err := ParseLine(line)
	if !ok || err != nil {
		return err
	}
	switch rec.Type {
	case "info":
		o.Info = rec.Info
	case "result":
		if rec.Result != nil {
			o.Results = append(o.Results, *rec.Result)
		}
	case "error":
		o.Errors = append(o.Errors, rec.Error)
	case "done":
		o.Done, o.OK = true, rec.OK
	}
	return nil
}
