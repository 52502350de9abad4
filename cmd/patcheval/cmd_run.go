package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/target"
	"github.com/patcheval/patcheval/evaluate/target/qemu"
	"github.com/patcheval/patcheval/internal/buildid"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/store"
)

type sshOptFlags []string

func (l *sshOptFlags) String() string     { return strings.Join(*l, ",") }
func (l *sshOptFlags) Set(s string) error { *l = append(*l, s); return nil }

type kernelFlags []evaluate.RunVariant

func (k *kernelFlags) String() string { return "" }

// Set parses VARIANT=PATH[,arch=A][,cmdline=C][,preempt=P][,build-id=HEX].
func (k *kernelFlags) Set(s string) error {
	v, err := parseKernelFlag(s)
	if err != nil {
		return err
	}
	*k = append(*k, v)
	return nil
}

func parseKernelFlag(s string) (evaluate.RunVariant, error) {
	var rv evaluate.RunVariant
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" || rest == "" {
		return rv, fmt.Errorf("--kernel %q: want VARIANT=PATH[,arch=ppc64le][,cmdline=...][,preempt=full][,build-id=HEX]", s)
	}
	parts := strings.Split(rest, ",")
	rv.Kernel = evaluate.Kernel{Variant: name, Image: parts[0], Arch: "ppc64le"}
	for _, p := range parts[1:] {
		key, val, _ := strings.Cut(p, "=")
		switch key {
		case "arch":
			rv.Kernel.Arch = val
		case "cmdline":
			rv.Kernel.Cmdline = val
		case "preempt":
			rv.Preempt = val
		case "build-id":
			rv.Kernel.BuildID = strings.ToLower(val)
		default:
			return rv, fmt.Errorf("--kernel %q: unknown option %q (want arch, cmdline, preempt or build-id)", s, key)
		}
	}
	if rv.Kernel.BuildID == "" {
		rv.Kernel.BuildID = imageBuildID(rv.Kernel.Image)
	}
	if _, err := qemu.MachineFor(rv.Kernel.Arch); err != nil {
		return rv, err
	}
	return rv, nil
}

// parseBenches parses "kill,getppid:100000,rcu".
func parseBenches(s string) ([]guest.Bench, error) {
	var out []guest.Bench
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, n, hasN := strings.Cut(f, ":")
		b := guest.Bench{Name: name}
		known := name == guest.BenchStressNGKill
		for _, k := range guest.Benchmarks {
			known = known || k == name
		}
		if !known {
			return nil, fmt.Errorf("--bench: unknown benchmark %q (known: %s, %s)", name, strings.Join(guest.Benchmarks, ", "), guest.BenchStressNGKill)
		}
		if hasN {
			v, err := strconv.Atoi(n)
			if err != nil || v <= 0 {
				return nil, fmt.Errorf("--bench %s: %q is not a positive count", name, n)
			}
			switch name {
			case guest.BenchRCU:
				b.Calls = v
			case guest.BenchStressNGKill:
				b.Seconds = v
			default:
				b.Ops = v
			}
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--bench: no benchmarks given")
	}
	return out, nil
}

func init() {
	register(&command{
		name:    "run",
		summary: "boot kernels (QEMU or a machine over SSH), run benchmarks, print every sample",
		usage:   "patcheval run --kernel VARIANT=PATH[,arch=ppc64le][,cmdline=...][,preempt=...]... [--bench kill,getppid] [--boots N] [--iterations M] [--deterministic] [--target qemu|ssh://user@host[:port]] [--json]",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			var kernels kernelFlags
			fs.Var(&kernels, "kernel", "a variant to boot: `VARIANT=PATH[,arch=ppc64le|arm64|x86_64][,cmdline=...][,preempt=full]` (repeat; booted interleaved)")
			bench := fs.String("bench", "kill", "comma-separated `benchmarks`, each optionally NAME:COUNT (ops; rcu: calls per run; stress-ng-kill: seconds): "+strings.Join(guest.Benchmarks, ", ")+", "+guest.BenchStressNGKill)
			boots := fs.Int("boots", 1, "boots per variant (N)")
			iters := fs.Int("iterations", 1, "iterations of the benchmark list per boot (M)")
			det := fs.Bool("deterministic", false, "QEMU -icount shift=0,sleep=off: timings count instructions, not wall time")
			where := fs.String("target", target.QEMU, "where to run: qemu, or ssh://user@host[:port] (the machine's running kernel)")
			asJSON := fs.Bool("json", false, "print one JSON object per boot")
			smp := fs.Int("smp", 1, "QEMU CPUs")
			mem := fs.Int("memory", 512, "QEMU memory in MiB")
			timeout := fs.Duration("timeout", 10*time.Minute, "per-boot timeout (a hang is killed and reported)")
			kvm := fs.String("kvm", "off", "QEMU KVM: off (TCG), auto (when /dev/kvm opens and the guest arch is the host's) or on")
			cmdline := fs.String("cmdline", "", "kernel command line appended for every variant")
			preempt := fs.String("preempt", "", "write this model to /sys/kernel/debug/sched/preempt in every boot")
			cpus := fs.String("cpus", "", "pin the benchmarks like taskset -c (`LIST`, e.g. 0-7)")
			keepGoing := fs.Bool("keep-going", false, "continue with the other boots after a failed boot")
			console := fs.Bool("console", false, "copy the QEMU console to stderr as it arrives")
			hook := fs.String("boot-hook", "", "ssh target: shell `command` that boots the kernel (--boot hook) or brings a lost machine back (--boot kexec); it gets a scrubbed environment")
			bootMethod := fs.String("boot", "", "ssh target: how each kernel is booted: none (measure the running kernel, verified to be --kernel's), hook or kexec (default: hook with --boot-hook, else none)")
			initrd := fs.String("initrd", "", "ssh target, --boot kexec: the initramfs `file` the kexec'd kernels boot with")
			running := fs.Bool("running", false, "ssh target without --kernel: measure whatever kernel the machine runs (not verified; its build-id is recorded)")
			identity := fs.String("identity", "", "ssh target: identity `file`")
			consoleLog := fs.String("console-log", "", "ssh target: the `file` this host logs the machine's console to (a console server's log): a panic there after the machine stops answering is the kernel's failed boot (exit 1), silence a lost machine (exit 3)")
			var sshOpts sshOptFlags
			fs.Var(&sshOpts, "ssh-option", "ssh target: an ssh -o `option` (repeat), e.g. StrictHostKeyChecking=accept-new")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return fail.Inputf("run: unexpected arguments %q", args)
				}
				if err := sshKernels(env, *where, &kernels, *running, *bootMethod, *hook); err != nil {
					return err
				}
				bs, err := parseBenches(*bench)
				if err != nil {
					return fail.Input(err)
				}
				plan := guest.Plan{Benchmarks: bs, Iterations: *iters, Preempt: *preempt, CPUs: *cpus}
				planned, err := evaluate.Interleave(kernels, plan, *boots)
				if err != nil {
					return err
				}
				if *consoleLog != "" {
					if abs, err := filepath.Abs(*consoleLog); err == nil {
						*consoleLog = abs
					}
				}
				tc := target.Config{Where: *where, Deterministic: *det, Timeout: *timeout,
					SMP: *smp, MemoryMiB: *mem, KVM: *kvm, Cmdline: *cmdline,
					Boot: *bootMethod, BootHook: *hook, Initrd: *initrd, IdentityFile: *identity, SSHOptions: sshOpts, ConsoleLog: *consoleLog}
				if *console {
					tc.Console = env.Stderr
				}
				t, err := target.New(tc)
				if err != nil {
					return err
				}
				st, rec, err := runEvaluation(kernels, plan, *boots)
				if err != nil {
					return err
				}
				defer st.Close()
				if done, err := rec.Done(ctx); err != nil {
					return err
				} else if len(done) > 0 {
					fmt.Fprintf(env.Stderr, "resuming evaluation: %d boot(s) already finished (patcheval runs)\n", len(done))
				}
				var printed []error
				err = evaluate.Run(ctx, t, planned, evaluate.RunOptions{Recorder: rec, KeepGoing: *keepGoing, Each: func(rec evaluate.BootRecord) {
					printBoot(env.Stdout, env.Stderr, rec, *asJSON)
					if rec.Err != nil {
						printed = append(printed, rec.Err)
					}
				}})
				// The stored evaluation says how it ended (it stayed
				// "running" for ever); an interrupted one stays running
				// and resumes with the same command.
				if ctx.Err() == nil {
					status := store.StatusDone
					if err != nil {
						status = store.StatusFailed
					}
					if serr := st.SetEvaluationStatus(rec.EvalID, status); serr != nil && err == nil {
						err = serr
					}
				}
				return bootsFailed(err, printed)
			}
		},
	})
}

// sshKernels checks run's kernels against an ssh target: without
// --kernel only --running measures the machine's kernel as it is (named
// "running", said on stderr); several kernels or command lines need a
// boot method, else one running kernel would be measured under every
// name.
func sshKernels(env *Env, where string, kernels *kernelFlags, running bool, boot, hook string) error {
	ssh := strings.HasPrefix(where, "ssh://")
	switch {
	case running && (!ssh || len(*kernels) > 0):
		return fail.Inputf("run: --running is for an ssh target without --kernel")
	case running:
		fmt.Fprintf(env.Stderr, "run: measuring the kernel %s runs now, as variant \"running\": not verified against a build (its build-id is recorded)\n", where)
		*kernels = kernelFlags{{Kernel: evaluate.Kernel{Variant: "running"}}}
		return nil
	case len(*kernels) == 0 && ssh:
		return fail.Inputf("run: --target %s: name the kernel to measure (--kernel VARIANT=PATH, verified against the running one, or booted with --boot kexec|--boot-hook), or --running for whatever the machine runs", where)
	case len(*kernels) == 0:
		return fail.Inputf("run: no --kernel VARIANT=PATH given")
	}
	if !ssh || boot == "kexec" || boot == "hook" || (boot == "" && hook != "") {
		return nil
	}
	seen := map[string]bool{}
	for _, k := range *kernels {
		seen[k.Kernel.Image+"\x00"+k.Kernel.BuildID+"\x00"+k.Kernel.Cmdline] = true
	}
	if len(seen) > 1 {
		return fail.Inputf("run: --target %s: %d different kernels or command lines, but without --boot kexec or --boot-hook the machine only runs one", where, len(seen))
	}
	return nil
}

// imageBuildID is the build-id of a kernel given by path: its own when it
// is the ELF vmlinux, else the one in the metadata.json of the build
// artifact directory it is in; "" when neither says.
func imageBuildID(image string) string {
	if id, err := buildid.FromELF(image); err == nil {
		return id
	}
	if a, err := build.LoadArtifact(filepath.Dir(image)); err == nil && a.Image == image {
		return a.BuildID()
	}
	return ""
}

// bootsFailed is run's error once the failed boots' errors were printed
// as they happened: a count with their kind (exit code), not the same
// text again. Any other error is returned as it is.
func bootsFailed(err error, printed []error) error {
	if err == nil || len(printed) == 0 {
		return err
	}
	members := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		members = j.Unwrap()
	}
	for _, m := range members {
		if !slices.Contains(printed, m) {
			return err
		}
	}
	return &fail.Error{Kind: fail.KindOf(err), Err: fmt.Errorf("%d boot(s) failed (errors above)", len(members))}
}

// bootJSON is the --json form of one boot.
type bootJSON struct {
	Variant  string                `json:"variant"`
	Boot     int                   `json:"boot"`
	Target   string                `json:"target"`
	Kernel   evaluate.Kernel       `json:"kernel"`
	Env      *evaluate.Environment `json:"environment,omitempty"`
	Info     *guest.Info           `json:"info,omitempty"`
	Duration float64               `json:"duration_s,omitempty"`
	// FirstResult is the time from QEMU's start to the first result.
	FirstResult float64           `json:"first_result_s,omitempty"`
	Samples     []evaluate.Sample `json:"samples"`
	Skipped     []string          `json:"skipped,omitempty"`
	Error       string            `json:"error,omitempty"`
	Phase       string            `json:"phase,omitempty"`
}

func printBoot(w, ew io.Writer, rec evaluate.BootRecord, asJSON bool) {
	if asJSON {
		j := bootJSON{Variant: rec.Key.Variant, Boot: rec.Key.Boot, Target: rec.Target, Kernel: rec.Kernel, Samples: rec.Samples, Skipped: rec.Skipped}
		if j.Samples == nil {
			j.Samples = []evaluate.Sample{}
		}
		if rec.Result != nil {
			j.Env, j.Duration, j.FirstResult = &rec.Result.Env, rec.Result.Duration.Seconds(), rec.Result.FirstResult.Seconds()
			if rec.Result.Output != nil {
				j.Info = rec.Result.Output.Info
			}
		}
		if rec.Err != nil {
			j.Error = rec.Err.Error()
			if be, ok := rec.Err.(*evaluate.BootError); ok {
				j.Phase = be.Phase
			}
		}
		b, _ := json.Marshal(j)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	det := ""
	if rec.Result != nil && rec.Result.Env.Deterministic {
		det = " (deterministic: -icount, instruction-counted time)"
	}
	rel := ""
	if rec.Result != nil && rec.Result.Output != nil && rec.Result.Output.Info != nil {
		i := rec.Result.Output.Info
		rel = " " + i.Release
		if i.PreemptPresent {
			rel += " preempt=" + i.Preempt
		}
	}
	fmt.Fprintf(w, "# %s boot %d on %s%s%s\n", rec.Key.Variant, rec.Key.Boot, rec.Target, rel, det)
	for _, s := range rec.Samples {
		if s.Metric == "ops/s" {
			continue
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%.1f %s\n", s.Variant, s.Boot, s.Iteration, s.Benchmark, s.Value, s.Metric)
	}
	for _, s := range rec.Skipped {
		fmt.Fprintf(w, "%s\t%d\tskipped %s\n", rec.Key.Variant, rec.Key.Boot, s)
	}
	if rec.Err != nil {
		fmt.Fprintf(ew, "patcheval run: %v\n", rec.Err)
	}
}
