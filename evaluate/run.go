package evaluate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/internal/fail"
)

// Target boots a Kernel (or uses a machine's running kernel), runs the
// agent with a Plan and returns what it reported. One Boot is one boot:
// the agent runs every benchmark of the plan, then the machine powers off.
type Target interface {
	Name() string
	Boot(ctx context.Context, k Kernel, p guest.Plan) (*BootResult, error)
}

// BootResult is what one boot produced.
type BootResult struct {
	Output  *guest.Output
	Console []byte // the full console log (or agent output over SSH)
	Env     Environment
	Started time.Time
	// Duration is the whole boot, start of QEMU to its exit.
	Duration time.Duration
	// FirstResult is the time from start to the first result record.
	FirstResult time.Duration
}

// Boot failure phases.
const (
	PhaseKernelPanic  = "kernel-panic"  // the kernel panicked before or without the agent
	PhaseKernelHang   = "kernel-hang"   // timeout; the kernel printed but the agent never finished
	PhaseAgentFailure = "agent-failure" // the agent reported errors or died
	PhaseNoBoot       = "no-boot"       // nothing on the console: firmware/QEMU
	PhaseInfra        = "infra"         // QEMU/ssh could not run
)

// BootError is a classified boot failure with the console tail.
type BootError struct {
	Variant string
	Phase   string
	Kind    fail.Kind
	Msg     string
	Tail    string // last lines of the console
	Console []byte // the whole console log
}

func (e *BootError) Error() string {
	s := fmt.Sprintf("booting %s: %s: %s", e.Variant, e.Phase, e.Msg)
	if e.Tail != "" {
		s += "\n--- console tail ---\n" + e.Tail
	}
	return s
}

// FailKind classifies the error for exit codes.
func (e *BootError) FailKind() fail.Kind { return e.Kind }

// Tail returns the last n lines of a console log.
func Tail(console []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(console), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Classify turns a finished boot into an error when it failed. exitErr is
// the error of the machine (QEMU's exit, ssh's), timedOut says the
// watchdog killed it. It returns nil for a boot whose agent finished OK.
func Classify(variant string, console []byte, out *guest.Output, exitErr error, timedOut bool) error {
	be := &BootError{Variant: variant, Console: console, Tail: Tail(console, 40)}
	panicked := bytes.Contains(console, []byte("Kernel panic"))
	kernelSpoke := bytes.Contains(console, []byte("Linux version")) || out.Info != nil || panicked
	switch {
	case out.Done && out.OK && len(out.Errors) == 0:
		return nil
	case out.Done:
		be.Phase, be.Kind = PhaseAgentFailure, fail.KindInfra
		be.Msg = "agent reported: " + strings.Join(out.Errors, "; ")
	case panicked && out.Info != nil && bytes.Contains(console, []byte("Attempted to kill init")):
		be.Phase, be.Kind = PhaseAgentFailure, fail.KindInfra
		be.Msg = "the agent (/init) died; the kernel panicked"
	case panicked:
		be.Phase, be.Kind = PhaseKernelPanic, fail.KindFailed
		be.Msg = "kernel panic"
		if i := bytes.Index(console, []byte("Kernel panic")); i >= 0 {
			line := console[i:]
			if j := bytes.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
			}
			be.Msg = strings.TrimSpace(string(line))
		}
	case timedOut && kernelSpoke:
		be.Phase, be.Kind = PhaseKernelHang, fail.KindFailed
		be.Msg = "timed out: the kernel started but the agent did not finish (hang); machine killed"
		if out.Info != nil {
			be.Msg = fmt.Sprintf("timed out after %d results: the agent started but did not finish (hang); machine killed", len(out.Results))
		}
	case timedOut:
		be.Phase, be.Kind = PhaseNoBoot, fail.KindInfra
		be.Msg = "timed out with no kernel output (firmware or QEMU problem); machine killed"
	case exitErr != nil && !kernelSpoke:
		be.Phase, be.Kind = PhaseInfra, fail.KindInfra
		be.Msg = exitErr.Error()
	case len(out.Errors) > 0:
		be.Phase, be.Kind = PhaseAgentFailure, fail.KindInfra
		be.Msg = "agent reported: " + strings.Join(out.Errors, "; ")
	case kernelSpoke:
		be.Phase, be.Kind = PhaseKernelHang, fail.KindFailed
		be.Msg = "the machine stopped before the agent finished"
		if exitErr != nil {
			be.Msg += " (" + exitErr.Error() + ")"
		}
	default:
		be.Phase, be.Kind = PhaseNoBoot, fail.KindInfra
		be.Msg = "no console output"
	}
	return be
}

// RunVariant is one variant of a run: a kernel and its run-time knobs.
type RunVariant struct {
	Kernel Kernel // Kernel.Variant names it; Kernel.Cmdline is its extra command line
	// Preempt is written to /sys/kernel/debug/sched/preempt in the guest.
	Preempt string
}

// BootKey names one boot of a run: the resume unit (store.RunKey is the
// same type).
type BootKey struct {
	Variant string `json:"variant"`
	Boot    int    `json:"boot"`
}

func (k BootKey) String() string { return fmt.Sprintf("%s#%d", k.Variant, k.Boot) }

// RunPlan is N boots x M iterations per variant.
type RunPlan struct {
	Variants []RunVariant
	// Plan is the agent plan of every boot: benchmarks and iterations
	// (M). Its Preempt is overridden by the variant's.
	Plan  guest.Plan
	Boots int // N, default 1
	// Done holds boots already finished (from the store): Run skips them.
	Done map[BootKey]bool
	// KeepGoing continues with the other boots after a failed boot.
	KeepGoing bool
}

// BootRecord is one finished (or failed) boot, handed to the callback.
type BootRecord struct {
	Key     BootKey
	Kernel  Kernel
	Target  string
	Result  *BootResult // nil when the target could not start
	Samples []Sample
	Skipped []string // "bridge: no bridge support: ..."
	Err     error
}

// Run boots every variant Boots times, interleaved (A B A B ...) so that
// drift of the host spreads evenly, and calls each after every boot, so
// that the caller can commit the boot's samples before the next starts.
// An error from each stops the run. Boots in rp.Done are skipped.
func Run(ctx context.Context, t Target, rp RunPlan, each func(BootRecord) error) error {
	if len(rp.Variants) == 0 {
		return fail.Inputf("run: no kernel variants")
	}
	seen := map[string]bool{}
	for _, v := range rp.Variants {
		if v.Kernel.Variant == "" {
			return fail.Inputf("run: kernel %s has no variant name", v.Kernel.Image)
		}
		if seen[v.Kernel.Variant] {
			return fail.Inputf("run: variant %q given twice", v.Kernel.Variant)
		}
		seen[v.Kernel.Variant] = true
	}
	boots := rp.Boots
	if boots <= 0 {
		boots = 1
	}
	var errs []error
	for b := 0; b < boots; b++ {
		for _, v := range rp.Variants {
			key := BootKey{Variant: v.Kernel.Variant, Boot: b}
			if rp.Done[key] {
				continue
			}
			if err := ctx.Err(); err != nil {
				return fail.Infra(err)
			}
			rec := Boot(ctx, t, key, v, rp.Plan)
			err := rec.Err
			if each != nil {
				if cerr := each(rec); cerr != nil {
					return cerr
				}
			}
			if err != nil {
				if ctx.Err() != nil || !rp.KeepGoing {
					return err
				}
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Boot runs one planned boot (boot key.Boot of variant v, the agent
// running plan with v's Preempt) on t: the one way patcheval boots, for
// Run and for the pipeline runner's Boot stage. The record's Err is the
// boot's failure; its samples are the agent's results.
func Boot(ctx context.Context, t Target, key BootKey, v RunVariant, plan guest.Plan) BootRecord {
	if v.Preempt != "" {
		plan.Preempt = v.Preempt
	}
	res, err := t.Boot(ctx, v.Kernel, plan)
	rec := BootRecord{Key: key, Kernel: v.Kernel, Target: t.Name(), Result: res, Err: err}
	if res != nil && res.Output != nil {
		rec.Samples, rec.Skipped = Samples(v.Kernel.Variant, key.Boot, res)
	}
	return rec
}

// Samples turns a boot's agent results into Samples: ns/op and ops/s per
// benchmark iteration of the agent's loops, and for rcu one mean_ns
// sample per run with its min and max; a tool benchmark (stress-ng, perf
// bench) gives its own metrics in its own units (bogo-ops/s, usec/op).
func Samples(variant string, boot int, res *BootResult) (samples []Sample, skipped []string) {
	when := res.Started.Add(res.Duration)
	det := res.Env.Deterministic
	for _, r := range res.Output.Results {
		if r.Skipped != "" {
			skipped = append(skipped, r.Benchmark+": "+r.Skipped)
			continue
		}
		extra := map[string]float64{"iterations": float64(r.Iterations), "duration_ns": float64(r.DurationNS)}
		for k, v := range r.Counters {
			extra[k] = v
		}
		base := Sample{Variant: variant, Benchmark: r.Benchmark, Boot: boot, Iteration: r.Iteration, Time: when, Deterministic: det}
		if len(r.Metrics) > 0 {
			// A tool's own values in its own units; never converted to ns/op.
			for _, m := range r.Metrics {
				s := base
				s.Metric, s.Unit, s.Value, s.HigherIsBetter, s.Extra = m.Name, m.Unit, m.Value, m.HigherIsBetter, extra
				samples = append(samples, s)
			}
			continue
		}
		s := base
		s.Metric, s.Unit, s.Value, s.Extra = "ns/op", "ns", r.NsPerOp, extra
		samples = append(samples, s)
		s = base
		s.Metric, s.Unit, s.Value, s.HigherIsBetter, s.Extra = "ops/s", "ops/s", r.OpsPerSec, true, extra
		samples = append(samples, s)
		for i, run := range r.Runs {
			s = base
			s.Metric, s.Unit, s.Value = "mean_ns", "ns", run.MeanNS
			s.Extra = map[string]float64{"run": float64(i), "calls": float64(run.Calls), "min_ns": run.MinNS, "max_ns": run.MaxNS}
			samples = append(samples, s)
		}
	}
	return samples, skipped
}
