// Package ssh is the hardware Target: a machine reached with OpenSSH's
// ssh client (ssh://user@host[:port]). Each Boot first puts the kernel
// under test on the machine with the configured boot method (see Boot:
// none, a user's boot hook, or kexec), then proves that the machine runs
// it -- the GNU build-id in /sys/kernel/notes against the built vmlinux's,
// and the booted command line in /proc/cmdline -- before any benchmark
// runs; then it copies the guest agent for the machine's architecture
// and runs it in --no-init mode on that kernel. The stress-ng-kill
// benchmark runs `stress-ng --kill 1 -t N --metrics-brief` there instead,
// under `perf stat` when perf works.
//
// The ssh client is used as is, so ~/.ssh/config, agents and keys apply;
// BatchMode is always on (no password prompts). A wrong host key, a
// refused login, a machine without kexec, a machine that is lost (does
// not come back, or stops answering during the benchmarks, with no crash
// on its console) and a machine that comes back in another kernel are
// each an infrastructure error (exit 3) with one line saying which, and
// no sample: the boot is retried (BootRetries), and redone when the run
// is resumed. A kernel under test that crashes on the way up or during
// the benchmarks -- a panic or an oops on the console log
// (Config.ConsoleLog) or in the boot hook's output, then silence -- is
// that kernel's failure: exit 1, a failed boot of the variant with the
// crash report as its console tail, not retried.
package ssh

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/internal/xdg"
)

// Config shapes the SSH target.
type Config struct {
	// URL is ssh://user@host[:port].
	URL string
	// IdentityFile and Options (ssh -o) are passed to ssh.
	IdentityFile string
	Options      []string
	// Boot is the boot method: BootNone (measure the running kernel,
	// verified against the one asked for), BootHook (run BootHook, which
	// boots the kernel) or BootKexec (copy the image and initrd, kexec -l,
	// kexec -e, wait; BootHook, when set, is then the fallback that brings
	// a lost machine back, e.g. an IPMI power cycle). "" is BootHook when
	// BootHook is set, else BootNone.
	Boot string
	// BootHook is a shell command run on this host with a scrubbed
	// environment (HookEnv: only what it needs, never patcheval's
	// secrets); its output is kept as the boot's console. Boot then waits
	// up to BootWait for ssh to answer again.
	BootHook string
	BootWait time.Duration // default 10 min
	// BootRetries is how many more times a kexec boot is tried after the
	// machine was lost or came back in another kernel (default 1).
	BootRetries int
	// Initrd is a local initramfs that kexec boots with; Cmdline is added
	// to every kexec'd kernel's command line (after the machine's own).
	Initrd  string
	Cmdline string
	// ConsoleLog is a file on this host that the machine's console is
	// appended to (a console server's log, ipmitool sol's output, the
	// emulated lab's serial log). When the machine stops answering, what
	// it printed since the boot began tells a kernel that crashed (a
	// panic, an oops: the variant's failed boot, exit 1) from a machine
	// that was lost (the network, the power: infra, exit 3, retried).
	// Without it only the boot hook's output is read for a crash.
	ConsoleLog string
	// Kexec is the kexec program on the machine (default "kexec").
	Kexec string
	// Timeout bounds one boot's benchmarks (default 30 min).
	Timeout time.Duration
	// CacheDir holds built agents (default $PATCHEVAL_CACHE_DIR/agents).
	CacheDir string
	// Agent is a prebuilt agent for the remote arch; empty: build it.
	Agent string
}

// Target runs benchmarks on a machine over SSH.
type Target struct {
	cfg              Config
	user, host, port string
}

// New parses cfg.URL.
func New(cfg Config) (*Target, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme != "ssh" || u.Hostname() == "" {
		return nil, fail.Inputf("ssh target %q: want ssh://user@host[:port]", cfg.URL)
	}
	t := &Target{cfg: cfg, host: u.Hostname(), port: u.Port()}
	if u.User != nil {
		t.user = u.User.Username()
	}
	if t.cfg.BootWait <= 0 {
		t.cfg.BootWait = 10 * time.Minute
	}
	if t.cfg.Timeout <= 0 {
		t.cfg.Timeout = 30 * time.Minute
	}
	if t.cfg.CacheDir == "" {
		t.cfg.CacheDir = filepath.Join(xdg.CacheDir(), "agents")
	}
	if t.cfg.Kexec == "" {
		t.cfg.Kexec = "kexec"
	}
	if t.cfg.BootRetries <= 0 {
		t.cfg.BootRetries = 1
	}
	if c := t.cfg.ConsoleLog; c != "" {
		// The log need not exist before the first boot (a console server
		// may create it), but a misspelt path would silently give no
		// evidence.
		if st, err := os.Stat(filepath.Dir(c)); err != nil || !st.IsDir() {
			return nil, fail.Inputf("ssh target %s: console log %s: no directory %s to hold the machine's console log", cfg.URL, c, filepath.Dir(c))
		}
	}
	switch t.cfg.Boot {
	case "":
		t.cfg.Boot = BootNone
		if t.cfg.BootHook != "" {
			t.cfg.Boot = BootHook
		}
	case BootNone, BootKexec:
	case BootHook:
		if t.cfg.BootHook == "" {
			return nil, fail.Inputf("ssh target %s: boot = %q needs a boot hook command", cfg.URL, BootHook)
		}
	default:
		return nil, fail.Inputf("ssh target %s: boot method %q: want %q, %q or %q", cfg.URL, t.cfg.Boot, BootNone, BootHook, BootKexec)
	}
	return t, nil
}

// Name is the URL.
func (t *Target) Name() string { return t.cfg.URL }

func (t *Target) sshArgs(remote ...string) []string {
	a := []string{"-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=15"}
	if t.port != "" {
		a = append(a, "-p", t.port)
	}
	if t.cfg.IdentityFile != "" {
		a = append(a, "-i", t.cfg.IdentityFile)
	}
	for _, o := range t.cfg.Options {
		a = append(a, "-o", o)
	}
	dest := t.host
	if t.user != "" {
		dest = t.user + "@" + t.host
	}
	a = append(a, dest, "--")
	return append(a, remote...)
}

// Run runs a shell command on the machine with stdin and returns stdout
// and stderr.
func (t *Target) Run(ctx context.Context, stdin []byte, command string) (stdout, stderr []byte, err error) {
	cmd := exec.CommandContext(ctx, "ssh", t.sshArgs(command)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err = cmd.Run()
	if err != nil {
		if why := sshProblem(e.Bytes()); why != "" && cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 255 {
			err = &AccessError{URL: t.cfg.URL, Why: why, Err: err}
		} else {
			err = fmt.Errorf("ssh %s %q: %w: %s", t.cfg.URL, firstLine(command), err, strings.TrimSpace(e.String()))
		}
	}
	return o.Bytes(), e.Bytes(), err
}

// AccessError is a machine that ssh reaches but cannot use as configured:
// its host key is not the known one, or it refuses the login. Waiting
// does not help; the boot is an infrastructure error.
type AccessError struct {
	URL, Why string
	Err      error
}

func (e *AccessError) Error() string { return "ssh target " + e.URL + ": " + e.Why }
func (e *AccessError) Unwrap() error { return e.Err }

// FailKind: the target, not the kernel or the input.
func (e *AccessError) FailKind() fail.Kind { return fail.KindInfra }

// sshProblem names what ssh's stderr says is wrong with the access itself.
func sshProblem(stderr []byte) string {
	s := string(stderr)
	switch {
	case strings.Contains(s, "REMOTE HOST IDENTIFICATION HAS CHANGED") || strings.Contains(s, "Host key verification failed"):
		return "host key verification failed: the machine's host key is not the one known_hosts holds for it (a reinstalled machine, or another machine at that address)"
	case strings.Contains(s, "Permission denied"):
		return "login refused (" + lastLine(s) + "): check the user, the identity file and the machine's authorized_keys"
	}
	return ""
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(l[len(l)-1])
}

// WaitUp polls the machine until ssh answers or the wait ends.
func (t *Target) WaitUp(ctx context.Context, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	var last error
	for {
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, _, err := t.Run(c, nil, "true")
		cancel()
		if err == nil {
			return nil
		}
		last = err
		var ae *AccessError
		if errors.As(err, &ae) {
			return err
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fail.Infraf("ssh target %s did not answer within %v: %w", t.cfg.URL, wait, last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// Boot puts kernel k on the machine with the boot method, verifies that
// the machine runs it (build-id, command line), then runs the plan. A
// machine lost during the benchmarks with nothing on its console that
// says the kernel crashed (the network, the power) is booted and measured
// again, up to BootRetries more times; a kernel that crashed is this
// variant's failed boot (exit 1), never retried.
func (t *Target) Boot(ctx context.Context, k evaluate.Kernel, p guest.Plan) (*evaluate.BootResult, error) {
	var console bytes.Buffer
	for attempt := 0; ; attempt++ {
		res, lost, err := t.bootOnce(ctx, k, p, &console)
		if !lost || attempt >= t.cfg.BootRetries || t.cfg.Boot == BootNone || ctx.Err() != nil {
			return res, err
		}
		fmt.Fprintf(&console, "--- boot attempt %d of %d (after: %s) ---\n", attempt+2, t.cfg.BootRetries+1, firstLine(lostMsg(err)))
	}
}

func lostMsg(err error) string {
	var be *evaluate.BootError
	if errors.As(err, &be) {
		return be.Msg
	}
	return err.Error()
}

// bootOnce is one boot and its benchmarks; lost says the machine stopped
// answering during the benchmarks and showed no crash (what Boot retries).
func (t *Target) bootOnce(ctx context.Context, k evaluate.Kernel, p guest.Plan, console *bytes.Buffer) (_ *evaluate.BootResult, lost bool, _ error) {
	res := &evaluate.BootResult{Output: &guest.Output{}, Started: time.Now(),
		Env: evaluate.Environment{Target: t.cfg.URL, Host: t.host, AgentVersion: guest.Version, ConfigHash: k.ConfigHash}}
	finish := func() {
		res.Duration = time.Since(res.Started)
		res.Console = slices.Clone(console.Bytes())
	}
	probe, err := t.bootKernel(ctx, k, console)
	if err != nil {
		finish()
		var be *evaluate.BootError
		if !errors.As(err, &be) {
			be = &evaluate.BootError{Variant: k.Variant, Phase: evaluate.PhaseInfra, Kind: fail.KindInfra, Msg: err.Error()}
		}
		be.Console = res.Console
		if be.Tail == "" {
			be.Tail = evaluate.Tail(res.Console, 40)
		}
		return res, false, be
	}
	res.Env.BuildID, res.Env.Verified = probe.BuildID, k.BuildID != ""
	fmt.Fprintf(console, "--- verified: %s ---\n", probe.evidence(k))
	benchMark := t.markConsole()
	timedOut, runErr := t.benchmarks(ctx, k, p, res, console)
	finish()
	if res.Output.Info != nil {
		res.Env.KernelRelease = res.Output.Info.Release
		res.Env.Cmdline = res.Output.Info.Cmdline
	}
	if ctx.Err() != nil {
		return res, false, fail.Infraf("ssh %s: interrupted: %w", t.cfg.URL, ctx.Err())
	}
	if runErr != nil && !res.Output.Done {
		if c := t.awaitCrash(benchMark, "", nil, 5*time.Second); c != nil {
			be := t.crashError(k, "during the benchmarks", c, console)
			t.bringBack(ctx, k, console)
			finish()
			be.Console = res.Console
			return res, false, be
		}
		if connectionLost(runErr) {
			be := &evaluate.BootError{Variant: k.Variant, Phase: evaluate.PhaseMachineLost, Kind: fail.KindInfra,
				Msg: fmt.Sprintf("the machine stopped answering during the benchmarks of %s, %s: %s", imageName(k), t.noCrashSeen(), firstLine(runErr.Error()))}
			fmt.Fprintf(console, "--- lost: %s ---\n", be.Msg)
			finish()
			be.Console, be.Tail = res.Console, evaluate.Tail(res.Console, 40)
			return res, true, be
		}
	}
	if err := evaluate.Classify(k.Variant, res.Console, res.Output, runErr, timedOut); err != nil {
		if be, ok := err.(*evaluate.BootError); ok && be.Kind == fail.KindFailed && t.cfg.Boot == BootNone {
			// Without a boot hook nothing was booted: a stopped agent is
			// this tool's (or the connection's) problem, not a kernel's.
			be.Kind = fail.KindInfra
		}
		return res, false, err
	}
	return res, false, nil
}

// benchmarks runs the plan on the verified kernel: the agent's benchmarks,
// then stress-ng's over the shell.
func (t *Target) benchmarks(ctx context.Context, k evaluate.Kernel, p guest.Plan, res *evaluate.BootResult, console *bytes.Buffer) (timedOut bool, _ error) {
	bctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	defer func() { timedOut = bctx.Err() != nil && ctx.Err() == nil }()
	var agentPlan guest.Plan = p
	agentPlan.Benchmarks = nil
	// The agent checks again before its first benchmark (a machine that
	// rebooted between the probe and the agent runs nothing).
	agentPlan.Expect = evaluate.ExpectFor(k)
	var stress []guest.Bench
	for _, b := range p.Benchmarks {
		if b.Name == guest.BenchStressNGKill {
			stress = append(stress, b)
		} else {
			agentPlan.Benchmarks = append(agentPlan.Benchmarks, b)
		}
	}
	var runErr error
	if len(agentPlan.Benchmarks) > 0 || len(stress) == 0 {
		runErr = t.runAgent(bctx, agentPlan, res, console)
	} else {
		runErr = t.info(bctx, res, console)
	}
	if runErr != nil {
		return false, runErr
	}
	iters := max(p.Iterations, 1)
	for it := 0; it < iters; it++ {
		for _, b := range stress {
			r, err := t.stressNGKill(bctx, b, console)
			if err != nil {
				return false, err
			}
			r.Iteration = it
			console.WriteString(guest.Record{Type: "result", Result: r}.Line())
			res.Output.Results = append(res.Output.Results, *r)
		}
	}
	res.Output.Done, res.Output.OK = true, len(res.Output.Errors) == 0
	return false, nil
}

// connectionLost says err is ssh's own failure (exit 255: the connection
// dropped or could not be made), not the remote command's.
func connectionLost(err error) bool {
	var ae *AccessError
	if errors.As(err, &ae) {
		return false
	}
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == 255
}

// noCrashSeen says what was looked at before calling a machine lost.
func (t *Target) noCrashSeen() string {
	if t.cfg.ConsoleLog == "" {
		return "and no console log is configured to tell a crash from a lost machine (console_log)"
	}
	return "with no crash on its console log " + t.cfg.ConsoleLog
}

func (t *Target) remoteArch(ctx context.Context) (string, error) {
	o, _, err := t.Run(ctx, nil, "uname -m")
	if err != nil {
		return "", fail.Infra(err)
	}
	name := strings.TrimSpace(string(o))
	g, err := arch.GoArch(name)
	if err != nil {
		return "", fail.Infraf("ssh %s: %w", t.cfg.URL, err)
	}
	return g, nil
}

// runAgent copies the agent (once per content) and runs the plan.
func (t *Target) runAgent(ctx context.Context, p guest.Plan, res *evaluate.BootResult, console *bytes.Buffer) error {
	goarch, err := t.remoteArch(ctx)
	if err != nil {
		return err
	}
	local := t.cfg.Agent
	if local == "" {
		if local, err = guest.Build(ctx, goarch, t.cfg.CacheDir); err != nil {
			return fail.Infra(err)
		}
	}
	bin, err := os.ReadFile(local)
	if err != nil {
		return fail.Infra(err)
	}
	remote := "/tmp/patcheval-" + filepath.Base(local)
	install := fmt.Sprintf("test -x %[1]s || { cat > %[1]s.$$ && chmod 755 %[1]s.$$ && mv %[1]s.$$ %[1]s; }", remote)
	if _, _, err := t.Run(ctx, bin, install); err != nil {
		return fail.Infraf("copying the agent: %w", err)
	}
	pj, _ := json.Marshal(p)
	o, e, err := t.Run(ctx, pj, remote+" "+guest.NoInitFlag)
	console.Write(o)
	if len(e) > 0 {
		console.WriteString("--- agent stderr ---\n")
		console.Write(e)
	}
	out, perr := guest.ParseBytes(o)
	*res.Output = *out
	if perr != nil {
		return fail.Infra(perr)
	}
	if err != nil && !out.Done {
		return err
	}
	return nil
}

// info fills Output.Info from the shell when the agent is not run.
func (t *Target) info(ctx context.Context, res *evaluate.BootResult, console *bytes.Buffer) error {
	o, _, err := t.Run(ctx, nil, "uname -r; uname -m; cat /proc/cmdline; nproc; cat /sys/kernel/debug/sched/preempt 2>/dev/null; true")
	if err != nil {
		return err
	}
	l := strings.Split(strings.TrimRight(string(o), "\n"), "\n")
	for len(l) < 5 {
		l = append(l, "")
	}
	n, _ := strconv.Atoi(l[3])
	info := &guest.Info{Release: l[0], Machine: l[1], Cmdline: l[2], NumCPU: n, NoInit: true, AgentVersion: "shell", BuildID: res.Env.BuildID}
	if l[4] != "" {
		info.PreemptPresent, info.PreemptRaw = true, l[4]
		if m := regexp.MustCompile(`\((\w+)\)`).FindStringSubmatch(l[4]); m != nil {
			info.Preempt = m[1]
		}
	}
	res.Output.Info = info
	console.WriteString(guest.Record{Type: "info", Info: info}.Line())
	return nil
}

var (
	stressLine = lazyre.New(`(?m)\]\s+kill\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$`)
	stressMisc = lazyre.New(`(?m)\]\s+kill\s+([\d.]+) kill calls per sec`)
)

// ParseStressNG reads stress-ng --metrics-brief output of the kill
// stressor.
func ParseStressNG(out []byte) (*guest.Result, error) {
	m := stressLine.FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("no kill metrics line in stress-ng output:\n%s", out)
	}
	f := func(i int) float64 { v, _ := strconv.ParseFloat(string(m[i]), 64); return v }
	r := &guest.Result{Benchmark: guest.BenchStressNGKill, Iterations: int64(f(1)), DurationNS: int64(f(2) * 1e9),
		OpsPerSec: f(5), Counters: map[string]float64{"usr_s": f(3), "sys_s": f(4), "bogo_ops_per_cpu_s": f(6)}}
	if r.OpsPerSec > 0 {
		r.NsPerOp = 1e9 / r.OpsPerSec
	}
	if mm := stressMisc.FindSubmatch(out); mm != nil {
		v, _ := strconv.ParseFloat(string(mm[1]), 64)
		r.Counters["kill_calls_per_s"] = v
	}
	return r, nil
}

// ParsePerfStat reads `perf stat -x,` output into counters
// ("perf:task-clock"); unsupported events are left out.
func ParsePerfStat(out []byte) map[string]float64 {
	c := map[string]float64{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Split(l, ",")
		if len(f) < 3 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil || f[2] == "" {
			continue
		}
		c["perf:"+f[2]] = v
	}
	return c
}

func (t *Target) stressNGKill(ctx context.Context, b guest.Bench, console *bytes.Buffer) (*guest.Result, error) {
	secs := b.Seconds
	if secs <= 0 {
		secs = 10
	}
	sng := fmt.Sprintf("stress-ng --kill 1 -t %d --metrics-brief", secs)
	cmd := fmt.Sprintf(`command -v stress-ng >/dev/null || { echo "stress-ng not installed" >&2; exit 127; }
if perf stat -x, -e task-clock true >/dev/null 2>&1; then
  perf stat -x, -o /tmp/patcheval-perf.$$ -e task-clock,context-switches,cycles,instructions -- %[1]s 2>&1; rc=$?
  echo @@PERF; cat /tmp/patcheval-perf.$$; rm -f /tmp/patcheval-perf.$$; exit $rc
fi
%[1]s 2>&1`, sng)
	o, _, err := t.Run(ctx, nil, cmd)
	console.Write(o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sng, err)
	}
	main, perf, _ := bytes.Cut(o, []byte("@@PERF\n"))
	r, err := ParseStressNG(main)
	if err != nil {
		return nil, err
	}
	for k, v := range ParsePerfStat(perf) {
		r.Counters[k] = v
	}
	return r, nil
}
