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
	// PhaseMachineLost: a machine over ssh stopped answering and nothing
	// it printed (console log, boot hook) shows that its kernel crashed:
	// the network or the power, an infrastructure error that is retried.
	// A crash it printed is PhaseKernelPanic, the kernel's failure.
	PhaseMachineLost = "machine-lost"
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

// BootKey names one boot of a run: the variant and the boot's index. It is
// the resume unit, one type for Run, the pipeline runner, the service's
// jobs and the store.
type BootKey struct {
	Variant string `json:"variant"`
	Boot    int    `json:"boot"`
}

func (k BootKey) String() string { return fmt.Sprintf("%s#%d", k.Variant, k.Boot) }

// PlannedBoot is one boot to do: which kernel, and the plan its agent runs.
// `patcheval run` plans them with Interleave, the pipeline runner from
// the stored pipeline and its built kernels.
type PlannedBoot struct {
	Key    BootKey
	Kernel Kernel // Kernel.Cmdline is the boot's extra command line
	Plan   guest.Plan
}

// RunVariant is one variant of a run: a kernel and its run-time knobs.
type RunVariant struct {
	Kernel Kernel // Kernel.Variant names it; Kernel.Cmdline is its extra command line
	// Preempt is written to /sys/kernel/debug/sched/preempt in the guest.
	Preempt string
}

// Interleave plans boots boots (N, at least 1) of every variant, each
// running plan (M iterations of its benchmarks; a variant's Preempt
// replaces plan's), interleaved A B A B ... so that drift of the host
// spreads evenly over the variants.
func Interleave(variants []RunVariant, plan guest.Plan, boots int) ([]PlannedBoot, error) {
	if len(variants) == 0 {
		return nil, fail.Inputf("run: no kernel variants")
	}
	seen := map[string]bool{}
	for _, v := range variants {
		if v.Kernel.Variant == "" {
			return nil, fail.Inputf("run: kernel %s has no variant name", v.Kernel.Image)
		}
		if seen[v.Kernel.Variant] {
			return nil, fail.Inputf("run: variant %q given twice", v.Kernel.Variant)
		}
		seen[v.Kernel.Variant] = true
	}
	var out []PlannedBoot
	for b := 0; b < max(boots, 1); b++ {
		for _, v := range variants {
			p := plan
			if v.Preempt != "" {
				p.Preempt = v.Preempt
			}
			out = append(out, PlannedBoot{Key: BootKey{Variant: v.Kernel.Variant, Boot: b}, Kernel: v.Kernel, Plan: p})
		}
	}
	return out, nil
}

// Recorder keeps the boots of one run: pipelines/store's BootRecorder, used
// by `patcheval run` and the pipeline runner alike.
type Recorder interface {
	// Done is the boots already finished: Run skips them.
	Done(ctx context.Context) (map[BootKey]bool, error)
	// Begin notes that boot key starts and returns the run's id.
	Begin(ctx context.Context, key BootKey) (int64, error)
	// Finish records how run id ended, with its samples.
	Finish(ctx context.Context, id int64, rec BootRecord) error
}

// RunOptions are how Run goes.
type RunOptions struct {
	// Recorder, when set, keeps every boot before the next starts; the
	// boots it has finished are skipped (a resume).
	Recorder Recorder
	// Each is called after every boot (once it is recorded).
	Each func(BootRecord)
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

// Run boots the planned boots on t in their order, recording each (o.Recorder)
// before the next starts, so that an interrupted run loses nothing and
// resumes where it stopped. A failed boot stops the run unless
// o.KeepGoing; then the errors of every failed boot are joined. An error of
// the recorder always stops it.
func Run(ctx context.Context, t Target, boots []PlannedBoot, o RunOptions) error {
	var done map[BootKey]bool
	if o.Recorder != nil {
		var err error
		if done, err = o.Recorder.Done(ctx); err != nil {
			return err
		}
	}
	var errs []error
	for _, pb := range boots {
		if done[pb.Key] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return fail.Infra(err)
		}
		var id int64
		if o.Recorder != nil {
			var err error
			if id, err = o.Recorder.Begin(ctx, pb.Key); err != nil {
				return err
			}
		}
		rec := Boot(ctx, t, pb)
		if o.Recorder != nil {
			if err := o.Recorder.Finish(ctx, id, rec); err != nil {
				return err
			}
		}
		if o.Each != nil {
			o.Each(rec)
		}
		if rec.Err != nil {
			if ctx.Err() != nil || !o.KeepGoing {
				return rec.Err
			}
			errs = append(errs, rec.Err)
		}
	}
	return errors.Join(errs...)
}

// Boot boots planned boot pb on t: the one way patcheval boots, for Run
// and for the pipeline runner's Boot stage. The record's Err is the boot's
// failure; its samples are the agent's results.
func Boot(ctx context.Context, t Target, pb PlannedBoot) BootRecord {
	res, err := t.Boot(ctx, pb.Kernel, pb.Plan)
	// No sample of a kernel other than the one asked for; a wrong kernel
	// is the boot's failure even when the agent refused it (its refusal
	// fails the boot as an agent error).
	if verr := verifyBoot(pb.Kernel, res); verr != nil && ctx.Err() == nil {
		err = verr
	}
	rec := BootRecord{Key: pb.Key, Kernel: pb.Kernel, Target: t.Name(), Result: res, Err: err}
	var be *BootError
	if errors.As(err, &be) && be.Phase == PhaseWrongKernel {
		return rec
	}
	if res != nil && res.Output != nil {
		rec.Samples, rec.Skipped = Samples(pb.Kernel.Variant, pb.Key.Boot, res)
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
		base := Sample{Variant: variant, Benchmark: r.Benchmark, Boot: boot, Iteration: r.Iteration, Time: when, Deterministic: det, BuildID: res.Env.BuildID}
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
		if sys, ok := r.Counters[guest.CounterSysNS]; ok && r.Iterations > 0 {
			// time(1)'s sys per loop (tick-sampled by the kernel).
			s = base
			s.Metric, s.Unit, s.Value, s.Extra = "sys ns/op", "ns", sys/float64(r.Iterations), extra
			samples = append(samples, s)
		}
		for i, run := range r.Runs {
			s = base
			s.Metric, s.Unit, s.Value = "mean_ns", "ns", run.MeanNS
			s.Extra = map[string]float64{"run": float64(i), "calls": float64(run.Calls), "min_ns": run.MinNS, "max_ns": run.MaxNS}
			samples = append(samples, s)
		}
	}
	return samples, skipped
}
