// Package ssh is the hardware Target: a machine reached with OpenSSH's
// ssh client (ssh://user@host[:port]). Each Boot optionally runs a
// configured boot hook first (e.g. a kexec into the built kernel) and
// waits for the machine to answer again, then copies the guest agent for
// the machine's architecture and runs it in --no-init mode on the running
// kernel; the stress-ng-kill benchmark runs `stress-ng --kill 1 -t N
// --metrics-brief` there instead, under `perf stat` when perf works.
//
// The ssh client is used as is, so ~/.ssh/config, agents and keys apply;
// BatchMode is always on (no password prompts).
package ssh

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/xdg"
)

// Config shapes the SSH target.
type Config struct {
	// URL is ssh://user@host[:port].
	URL string
	// IdentityFile and Options (ssh -o) are passed to ssh.
	IdentityFile string
	Options      []string
	// BootHook is a shell command run on this host before every boot, with
	// PATCHEVAL_HOST, PATCHEVAL_PORT, PATCHEVAL_USER, PATCHEVAL_VARIANT,
	// PATCHEVAL_KERNEL_IMAGE and PATCHEVAL_CMDLINE in its environment
	// (e.g. copy the image and kexec into it). Run then waits up to
	// BootWait for ssh to answer again.
	BootHook string
	BootWait time.Duration // default 10 min
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
		err = fmt.Errorf("ssh %s %q: %w: %s", t.cfg.URL, command, err, strings.TrimSpace(e.String()))
	}
	return o.Bytes(), e.Bytes(), err
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
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fail.Infraf("ssh target %s did not answer within %v: %w", t.cfg.URL, wait, last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// Boot runs the boot hook (if any), then the plan on the running kernel.
func (t *Target) Boot(ctx context.Context, k evaluate.Kernel, p guest.Plan) (*evaluate.BootResult, error) {
	res := &evaluate.BootResult{Output: &guest.Output{}, Started: time.Now(),
		Env: evaluate.Environment{Target: t.cfg.URL, Host: t.host, AgentVersion: guest.Version, ConfigHash: k.ConfigHash}}
	var console bytes.Buffer
	finish := func() {
		res.Duration = time.Since(res.Started)
		res.Console = console.Bytes()
	}
	if t.cfg.BootHook != "" {
		hook := exec.CommandContext(ctx, "sh", "-c", t.cfg.BootHook)
		hook.Env = append(os.Environ(), "PATCHEVAL_HOST="+t.host, "PATCHEVAL_PORT="+t.port, "PATCHEVAL_USER="+t.user,
			"PATCHEVAL_VARIANT="+k.Variant, "PATCHEVAL_KERNEL_IMAGE="+k.Image, "PATCHEVAL_CMDLINE="+k.Cmdline)
		out, err := hook.CombinedOutput()
		fmt.Fprintf(&console, "--- boot hook: %s ---\n%s", t.cfg.BootHook, out)
		if err != nil {
			finish()
			return res, &evaluate.BootError{Variant: k.Variant, Phase: evaluate.PhaseInfra, Kind: fail.KindInfra,
				Msg: fmt.Sprintf("boot hook %q: %v", t.cfg.BootHook, err), Tail: evaluate.Tail(res.Console, 40), Console: res.Console}
		}
	}
	if err := t.WaitUp(ctx, t.cfg.BootWait); err != nil {
		finish()
		phase, kind := evaluate.PhaseInfra, fail.KindInfra
		if t.cfg.BootHook != "" {
			phase, kind = evaluate.PhaseKernelHang, fail.KindFailed // booted into the new kernel and never came back
		}
		return res, &evaluate.BootError{Variant: k.Variant, Phase: phase, Kind: kind, Msg: err.Error(), Tail: evaluate.Tail(res.Console, 40), Console: res.Console}
	}
	bctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	var agentPlan guest.Plan = p
	agentPlan.Benchmarks = nil
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
		runErr = t.runAgent(bctx, agentPlan, res, &console)
	} else {
		runErr = t.info(bctx, res, &console)
	}
	if runErr == nil {
		iters := p.Iterations
		if iters <= 0 {
			iters = 1
		}
		for it := 0; it < iters && runErr == nil; it++ {
			for _, b := range stress {
				r, err := t.stressNGKill(bctx, b, &console)
				if err != nil {
					runErr = err
					break
				}
				r.Iteration = it
				console.WriteString(guest.Record{Type: "result", Result: r}.Line())
				res.Output.Results = append(res.Output.Results, *r)
			}
		}
		if runErr == nil {
			res.Output.Done, res.Output.OK = true, len(res.Output.Errors) == 0
		}
	}
	finish()
	if res.Output.Info != nil {
		res.Env.KernelRelease = res.Output.Info.Release
		res.Env.Cmdline = res.Output.Info.Cmdline
	}
	if ctx.Err() != nil {
		return res, fail.Infraf("ssh %s: interrupted: %w", t.cfg.URL, ctx.Err())
	}
	if err := evaluate.Classify(k.Variant, res.Console, res.Output, runErr, bctx.Err() != nil); err != nil {
		if be, ok := err.(*evaluate.BootError); ok && be.Kind == fail.KindFailed && t.cfg.BootHook == "" {
			// Without a boot hook nothing was booted: a stopped agent is
			// this tool's (or the connection's) problem, not a kernel's.
			be.Kind = fail.KindInfra
		}
		return res, err
	}
	return res, nil
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
	info := &guest.Info{Release: l[0], Machine: l[1], Cmdline: l[2], NumCPU: n, NoInit: true, AgentVersion: "shell"}
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
	stressLine = regexp.MustCompile(`(?m)\]\s+kill\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$`)
	stressMisc = regexp.MustCompile(`(?m)\]\s+kill\s+([\d.]+) kill calls per sec`)
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
