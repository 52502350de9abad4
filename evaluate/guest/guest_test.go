package guest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestParseLine(t *testing.T) {
	rec := Record{Type: "result", Result: &Result{Benchmark: "kill", Iterations: 10, NsPerOp: 955}}
	line := "[    7.1] random: crng init done" + rec.Line()
	got, ok, err := ParseLine(line)
	if !ok || err != nil || got.Result.NsPerOp != 955 || got.Result.Benchmark != "kill" {
		t.Fatalf("ParseLine(%q) = %+v %v %v", line, got, ok, err)
	}
	if _, ok, _ := ParseLine("Kernel panic - not syncing"); ok {
		t.Fatal("plain kernel line parsed as a record")
	}
	if _, ok, err := ParseLine(Marker + "{broken"); !ok || err == nil {
		t.Fatal("broken record not reported")
	}
	out, err := ParseBytes([]byte("boot\n" + Record{Type: "info", Info: &Info{Release: "6.1.0"}}.Line() + rec.Line() + Record{Type: "done", OK: true}.Line()))
	if err != nil || out.Info.Release != "6.1.0" || len(out.Results) != 1 || !out.Done || !out.OK {
		t.Fatalf("Parse: %+v %v", out, err)
	}
}

func TestParseCPUs(t *testing.T) {
	got, err := ParseCPUs("0-2,5")
	if err != nil || len(got) != 4 || got[3] != 5 {
		t.Fatalf("ParseCPUs = %v %v", got, err)
	}
	for _, bad := range []string{"", "a", "3-1", "-1"} {
		if _, err := ParseCPUs(bad); err == nil {
			t.Errorf("ParseCPUs(%q) accepted", bad)
		}
	}
}

// TestBenchmarksInProcess runs every benchmark loop in the test process
// (fork, execve and kill-child need the agent binary: see TestAgentNoInit)
// and fails when one of them was skipped.
func TestBenchmarksInProcess(t *testing.T) {
	for _, b := range []Bench{{Name: BenchKill, Ops: 20000}, {Name: BenchGetppid, Ops: 20000}, {Name: BenchGetpgid, Ops: 20000}, {Name: BenchFork, Ops: 20}, {Name: BenchRCU, Runs: 2, Calls: 3}} {
		r, err := RunBench(b)
		if err != nil {
			t.Fatalf("%s: %v", b.Name, err)
		}
		if r.Skipped != "" {
			// A benchmark this test names that did not run is a failure,
			// not a pass: rcu needs membarrier(MEMBARRIER_CMD_GLOBAL)
			// on the host (CONFIG_MEMBARRIER, no nohz_full CPUs).
			t.Errorf("%s was not measured: %s", b.Name, r.Skipped)
			continue
		}
		want := int64(b.Ops)
		if b.Name == BenchRCU {
			want = 6
			if len(r.Runs) != 2 || r.Runs[0].Calls != 3 || r.Runs[0].MinNS > r.Runs[0].MeanNS || r.Runs[0].MeanNS > r.Runs[0].MaxNS {
				t.Errorf("rcu runs: %+v", r.Runs)
			}
		}
		if r.Benchmark != b.Name || r.Iterations != want || r.NsPerOp <= 0 || r.OpsPerSec <= 0 || r.DurationNS <= 0 {
			t.Errorf("%s: %+v", b.Name, r)
		}
		t.Logf("%s: %.0f ns/op", b.Name, r.NsPerOp)
	}
}

// TestAgentNoInit builds the agent from the embedded source for the host
// and runs a whole plan in no-init mode.
func TestAgentNoInit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("agent is Linux only")
	}
	cache := t.TempDir()
	bin, err := Build(context.Background(), runtime.GOARCH, cache)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Build(context.Background(), runtime.GOARCH, cache)
	if err != nil || again != bin {
		t.Fatalf("second Build = %q, %v; want cached %q", again, err, bin)
	}
	plan := Plan{Iterations: 2, CPUs: "0", Benchmarks: []Bench{
		{Name: BenchKill, Ops: 10000}, {Name: BenchKillChild, Ops: 10000}, {Name: BenchExecve, Ops: 5},
		{Name: BenchFork, Ops: 10}, {Name: BenchRCU, Runs: 1, Calls: 2}, {Name: BenchBridge, Ops: 3},
	}}
	pj, _ := json.Marshal(plan)
	pf := filepath.Join(t.TempDir(), "plan.json")
	os.WriteFile(pf, pj, 0o644)
	cmd := exec.Command(bin, NoInitFlag, PlanFlag, pf)
	if os.Geteuid() == 0 {
		// The bridge loop gives its bridge an address: not on the host.
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	}
	o, err := cmd.Output()
	if err != nil {
		t.Fatalf("agent: %v\n%s", err, o)
	}
	out, err := ParseBytes(o)
	if err != nil {
		t.Fatal(err)
	}
	if out.Info == nil || !out.Info.NoInit || out.Info.Release == "" || out.Info.AgentVersion != Version || out.Info.CPUs != "0" {
		t.Errorf("info: %+v", out.Info)
	}
	if !out.Done || !out.OK || len(out.Errors) > 0 {
		t.Errorf("done=%v ok=%v errors=%v", out.Done, out.OK, out.Errors)
	}
	if len(out.Results) != 12 {
		t.Fatalf("got %d results, want 12:\n%s", len(out.Results), o)
	}
	for _, r := range out.Results {
		if r.Skipped == "" && r.NsPerOp <= 0 {
			t.Errorf("result %+v", r)
		}
		t.Logf("%s #%d: %.0f ns/op %s", r.Benchmark, r.Iteration, r.NsPerOp, r.Skipped)
	}
	// On a running system the agent never loads an SELinux policy; it
	// only checks that SELinux is disabled when asked to.
	for mode, want := range map[string]string{SELinuxEnforcing: "only as /init", SELinuxPermissive: "only as /init", "strict": `selinux mode "strict"`} {
		cmd = exec.Command(bin, NoInitFlag)
		pj, _ := json.Marshal(Plan{Benchmarks: []Bench{{Name: BenchKill, Ops: 10}}, SELinux: &SELinux{Mode: mode, Policy: []byte("x")}})
		cmd.Stdin = strings.NewReader(string(pj))
		o, err = cmd.Output()
		out, _ = ParseBytes(o)
		if err == nil || len(out.Errors) != 1 || !strings.Contains(out.Errors[0], want) || out.Info == nil || out.Info.SELinux == "" {
			t.Errorf("selinux %s on a running system: err %v, %+v, want an error saying %q", mode, err, out, want)
		}
	}
	if _, err := os.Stat("/sys/fs/selinux"); err != nil {
		cmd = exec.Command(bin, NoInitFlag)
		cmd.Stdin = strings.NewReader(`{"benchmarks":[{"name":"kill","ops":10}],"selinux":{"mode":"disabled"}}`)
		o, err = cmd.Output()
		out, _ = ParseBytes(o)
		if err != nil || !out.OK || out.Info == nil || out.Info.SELinux != SELinuxDisabled {
			t.Errorf("selinux disabled on a host without selinuxfs: %v %+v", err, out.Info)
		}
	}
	// An unknown benchmark fails the agent with an error record.
	cmd = exec.Command(bin, NoInitFlag)
	cmd.Stdin = strings.NewReader(`{"benchmarks":[{"name":"nope"}]}`)
	o, err = cmd.Output()
	if err == nil {
		t.Fatal("agent accepted an unknown benchmark")
	}
	out, _ = ParseBytes(o)
	if len(out.Errors) != 1 || !strings.Contains(out.Errors[0], `"nope"`) || out.OK {
		t.Errorf("unknown benchmark: %+v", out)
	}
}

// TestSigChildIgnores checks that the kill-child benchmark's child really
// ignores SIGUSR1 (SigIgn in /proc/PID/status), as stress-ng's does.
func TestSigChildIgnores(t *testing.T) {
	bin, err := Build(context.Background(), runtime.GOARCH, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, w, _ := os.Pipe()
	cmd := exec.Command(bin, SigChildFlag)
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	w.Close()
	b := make([]byte, 1)
	if _, err := r.Read(b); err != nil {
		t.Fatal(err)
	}
	st, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "status"))
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "SigIgn:") {
			var mask uint64
			for _, c := range strings.TrimSpace(strings.TrimPrefix(l, "SigIgn:")) {
				mask = mask<<4 | uint64(strings.IndexRune("0123456789abcdef", c))
			}
			if mask&(1<<(10-1)) == 0 { // SIGUSR1 = 10
				t.Fatalf("child does not ignore SIGUSR1: %s", l)
			}
			return
		}
	}
	t.Fatal("no SigIgn line")
}

// hostTool is where the host's tools are (Debian's packages stress-ng
// and linux-perf put them where the guest's userland does).
var hostTool = map[string]string{BenchStressNG: StressNGPath, BenchPerfBench: PerfPath}

// TestToolsOnHost runs the host's own stress-ng and perf through the
// agent's tool runner (the same code that runs them in the guest) and
// checks the parsed metrics and units. Both must be installed.
func TestToolsOnHost(t *testing.T) {
	for _, tc := range []struct {
		b     Bench
		units []string
	}{
		{Bench{Name: BenchStressNG, Args: []string{"--kill", "1", "-t", "2"}}, []string{"bogo-ops/s", "bogo-ops/s"}},
		{Bench{Name: BenchPerfBench, Args: []string{"syscall", "basic", "-l", "100000"}}, []string{"usec/op", "ops/sec"}},
	} {
		if _, err := os.Stat(hostTool[tc.b.Name]); err != nil {
			// .ci/install-deps installs both (stress-ng, linux-perf): a
			// host without them has not run it, and the test that names
			// them must not pass without running them.
			t.Errorf("%s: not installed on the host (.ci/install-deps installs it): %v", tc.b.Name, err)
			continue
		}
		r, err := RunBench(tc.b)
		if err != nil {
			t.Fatalf("%s: %v", tc.b.Label(), err)
		}
		if r.Benchmark != tc.b.Label() || Source(r.Benchmark) == "agent loop" || Source(r.Benchmark) == "" {
			t.Errorf("benchmark %q, source %q", r.Benchmark, Source(r.Benchmark))
		}
		if len(r.Metrics) != len(tc.units) {
			t.Fatalf("%s: metrics %+v", tc.b.Label(), r.Metrics)
		}
		for i, m := range r.Metrics {
			if m.Unit != tc.units[i] || !(m.Value > 0) {
				t.Errorf("%s: metric %+v, want unit %s and a positive value", tc.b.Label(), m, tc.units[i])
			}
		}
		if r.Tool == "" || r.Tool == "perf " {
			t.Errorf("%s: no tool version: %q", tc.b.Label(), r.Tool)
		}
		t.Logf("%s: %s %+v counters %v", r.Benchmark, r.Tool, r.Metrics, r.Counters)
	}
	if Source("kill") != "agent loop" {
		t.Errorf("Source(kill) = %q", Source("kill"))
	}
	pe := probePerfEvents()
	t.Logf("host perf events: %s", pe)
	if len(pe.Counted) == 0 && pe.Note == "" {
		t.Errorf("probe counted nothing and says nothing about why: %+v", pe)
	}
}

// TestPerfEventsString: the report's line names the events that counted,
// the PMUs, and why the others did not.
func TestPerfEventsString(t *testing.T) {
	for _, tc := range []struct {
		pe   *PerfEvents
		want string
	}{
		{nil, "unknown"},
		{&PerfEvents{Note: "task-clock, cycles: function not implemented"}, "none (task-clock, cycles: function not implemented)"},
		{&PerfEvents{Software: true, Counted: []string{"task-clock", "page-faults"}, PMUs: []string{"software", "tracepoint"}, Note: "cycles: no such file or directory"},
			"software only: task-clock, page-faults; PMUs: software, tracepoint (cycles: no such file or directory)"},
		{&PerfEvents{Software: true, Hardware: true, Counted: []string{"task-clock", "cycles"}, PMUs: []string{"cpu"}},
			"software and hardware: task-clock, cycles; PMUs: cpu"},
	} {
		if got := tc.pe.String(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
	dir := t.TempDir()
	for _, n := range []string{"software", "cpu", "tracepoint"} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(perfPMUs(dir), ","); got != "cpu,software,tracepoint" {
		t.Errorf("perfPMUs = %q", got)
	}
	if got := perfPMUs(filepath.Join(dir, "missing")); got != nil {
		t.Errorf("perfPMUs(missing) = %q", got)
	}
}

func TestParseToolOutputErrors(t *testing.T) {
	if _, _, err := ParsePerfBench([]byte("Unknown benchmark: 'getpgid' for collection 'syscall'\n")); err == nil || !strings.Contains(err.Error(), "Unknown benchmark") {
		t.Errorf("perf's complaint not carried: %v", err)
	}
	if _, _, _, err := ParseStressNGYAML([]byte("---\nsystem-info:\n      stress-ng-version: 0.15.06\n")); err == nil {
		t.Error("yaml without metrics accepted")
	}
	two := "metrics:\n    - stressor: kill\n      bogo-ops: 10\n      bogo-ops-per-second-usr-sys-time: 2.5\n      bogo-ops-per-second-real-time: 1.5\n" +
		"    - stressor: getpid\n      bogo-ops: 20\n      bogo-ops-per-second-usr-sys-time: 4\n      bogo-ops-per-second-real-time: 3\n"
	m, c, _, err := ParseStressNGYAML([]byte(two))
	if err != nil || len(m) != 4 || m[2].Name != "getpid bogo-ops/s (real time)" || m[2].Value != 3 || c["kill bogo-ops"] != 10 {
		t.Errorf("two stressors: %+v %v %v", m, c, err)
	}
}

// TestAgentRefusesWrongKernel runs the agent on this host with a plan
// that expects another kernel: it says so before its first benchmark and
// runs none. The host's own build-id and command line pass.
func TestAgentRefusesWrongKernel(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("agent is Linux only")
	}
	notes, err := os.ReadFile(NotesPath)
	if err != nil {
		t.Fatalf("reading %s: %v", NotesPath, err)
	}
	own := ParseBuildID(notes)
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil || own == "" {
		t.Fatalf("this host shows no build-id (%v) or command line (%v)", own, err)
	}
	words := strings.Fields(string(cmdline))
	bin, err := Build(context.Background(), runtime.GOARCH, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other := strings.Repeat("0", len(own)-1) + "1"
	run := func(e *Expect) (*Output, error) {
		pj, _ := json.Marshal(Plan{Iterations: 2, Benchmarks: []Bench{{Name: BenchKill, Ops: 100}}, Expect: e})
		cmd := exec.Command(bin, NoInitFlag)
		cmd.Stdin = strings.NewReader(string(pj))
		o, err := cmd.Output()
		out, perr := ParseBytes(o)
		if perr != nil {
			t.Fatal(perr)
		}
		return out, err
	}
	for _, c := range []struct {
		name string
		e    *Expect
		want string
	}{
		{"other build-id", &Expect{BuildID: other, Image: "/x/vmlinux"}, "build-id " + own},
		{"missing word", &Expect{BuildID: own, Cmdline: append(words, "patcheval.boot=nonce")}, "lacks patcheval.boot=nonce"},
	} {
		out, err := run(c.e)
		if err == nil || out.OK || len(out.Results) != 0 || len(out.Errors) != 1 ||
			!strings.HasPrefix(out.Errors[0], WrongKernelPrefix) || !strings.Contains(out.Errors[0], c.want) || out.Info == nil {
			t.Errorf("%s: exit %v, %d results, errors %q; want no result and one %q error naming %q",
				c.name, err, len(out.Results), out.Errors, WrongKernelPrefix, c.want)
		}
	}
	out, err := run(&Expect{BuildID: strings.ToUpper(own), Cmdline: words})
	if err != nil || !out.OK || len(out.Results) != 2 {
		t.Errorf("this host's own kernel: exit %v, %d results, errors %q", err, len(out.Results), out.Errors)
	}
}
