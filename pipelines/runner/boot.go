package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/guest/selinux"
	"github.com/patcheval/patcheval/evaluate/guest/userland"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/evaluate/target"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Boots returns evaluation id's planned boots in interleaving order (A B C
// A B C ...): repeats.boots, or the boots the evaluation was submitted
// with. Each names the variant (its name, or "name/arch" with several
// arches) and the boot's index; everything else (kernel, plan, target)
// comes from the stored pipeline. Boot skips the finished ones.
func Boots(ctx context.Context, env Env, id int64) ([]evaluate.BootKey, error) {
	ev, err := loadInputs(env.Store, id)
	if err != nil {
		return nil, err
	}
	return keys(ev.p.RunsBetween(0, plannedBoots(ev))), nil
}

func keys(runs []pipelines.BootPlan) []evaluate.BootKey {
	out := make([]evaluate.BootKey, len(runs))
	for i, bp := range runs {
		out[i] = bp.BootKey
	}
	return out
}

// plannedBoots is the boots per variant: Options.Boots when set, else
// repeats.boots.
func plannedBoots(ev *evaluation) int {
	if ev.in.Boots > 0 {
		return ev.in.Boots
	}
	return ev.p.Repeats.Boots
}

// Boot boots planned boot b of evaluation id and records it with its
// samples (evaluate.Run with the store's BootRecorder, like `patcheval
// run`). A finished boot is never redone. A boot that failed for
// infrastructure reasons is recorded (a resume tries it again) and is no
// error; a kernel that panics or whose agent fails is the thing under test
// failing: the error stops the evaluation.
func Boot(ctx context.Context, env Env, id int64, b evaluate.BootKey) (err error) {
	defer failed(ctx, env, id, &err)
	if err := ctx.Err(); err != nil {
		return fail.Infra(err)
	}
	rec := &store.BootRecorder{Store: env.Store, EvalID: id}
	done, err := rec.Done(ctx)
	if err != nil || done[b] {
		return err
	}
	ev, err := loadInputs(env.Store, id)
	if err != nil {
		return err
	}
	bp, pb, err := plannedKernel(ctx, env, ev, b)
	if err != nil {
		return err
	}
	land, landTime, err := userlandFor(ctx, env, ev.p, bp.Arch)
	if err != nil {
		return err
	}
	tgt, err := target.New(targetConfig(bp, env.CacheDir, land))
	if err != nil {
		return err
	}
	pr := env.progress()
	pr.Status("boot %s #%d on %s", bp.Variant, bp.Boot+1, tgt.Name())
	landNote := strings.Join(ev.p.Tools(), ", ")
	if land != nil && len(land.Versions) > 0 {
		landNote = userlandVersions(land) // the reproducer names them
	}
	rec.Also = func(ctx context.Context, tx *store.Tx, r evaluate.BootRecord) error {
		return recordBoot(ctx, env, ev, tx, r, landTime, landNote)
	}
	var booted *evaluate.BootRecord
	err = evaluate.Run(ctx, tgt, []evaluate.PlannedBoot{pb}, evaluate.RunOptions{Recorder: rec,
		Each: func(r evaluate.BootRecord) { booted = &r }})
	if booted == nil {
		return err // not booted, or not recorded
	}
	if booted.Err == nil {
		pr.Printf("boot %s #%d: %s", bp.Variant, bp.Boot+1, sampleLine(booted.Samples))
		return nil
	}
	if ctx.Err() != nil {
		return fail.Infra(ctx.Err())
	}
	pr.Printf("boot %s #%d failed: %v", bp.Variant, bp.Boot+1, firstLine(booted.Err.Error()))
	if store.StatusOf(booted.Err) == store.RunFailed {
		return booted.Err
	}
	return lostBudget(env.Store, id, tgt.Name(), ev.p.Target.LostBoots())
}

// ErrLostBoots is in the error of an evaluation stopped because its
// boots failed for infrastructure reasons more times in a row than its
// target allows (pipelines.Target.MaxLostBoots). A queue must not retry
// the boot: the budget is the evaluation's, not the job's (a retry would
// spend it again on every attempt of every boot).
var ErrLostBoots = errors.New("lost-boot budget spent")

// lostBudget is nil, or ErrLostBoots (an infrastructure error naming the
// target and the last failure) when the last budget boots recorded for
// evaluation id all failed for infrastructure reasons. A boot a dead
// worker left unfinished (store.InterruptRuns) counts neither way: the
// machine was not the cause.
func lostBudget(st *store.Store, id int64, target string, budget int) error {
	runs, err := st.RunsOf(id)
	if err != nil {
		return err
	}
	n, last := lostStreak(runs)
	if n < budget {
		return nil
	}
	return fail.Infraf("%s: %d boots in a row failed for infrastructure reasons, the last %s #%d: %s: %w: the evaluation stops here instead of trying every boot left (target.max_lost_boots = %d); resume it when the machine is back",
		target, n, last.Variant, last.Boot+1, firstLine(last.ErrorText), ErrLostBoots, budget)
}

// lostStreak is how many of runs (in the order they began) at the end
// failed for infrastructure reasons, and the last of them: a measured or
// failed boot ends the streak; interrupted ones are passed over.
func lostStreak(runs []store.Run) (n int, last store.Run) {
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		if r.Status == store.RunInfra && strings.HasPrefix(r.ErrorText, store.Interrupted) {
			continue
		}
		if r.Status != store.RunInfra {
			break
		}
		if n == 0 {
			last = r
		}
		n++
	}
	return n, last
}

// BootPlanOf is evaluation id's plan of boot b (its arch and target): a
// queue routes the boot by it.
func BootPlanOf(ctx context.Context, env Env, id int64, b evaluate.BootKey) (pipelines.BootPlan, error) {
	ev, err := loadInputs(env.Store, id)
	if err != nil {
		return pipelines.BootPlan{}, err
	}
	bp, ok := planOf(ev.p, b)
	if !ok {
		return bp, fail.Inputf("evaluation %d: pipeline %s plans no boot %d of %q", id, ev.p.Name, b.Boot, b.Variant)
	}
	return bp, nil
}

// plannedKernel is planned boot b of ev: the pipeline's plan of it, and
// the boot of its built kernel.
func plannedKernel(ctx context.Context, env Env, ev *evaluation, b evaluate.BootKey) (pipelines.BootPlan, evaluate.PlannedBoot, error) {
	bp, ok := planOf(ev.p, b)
	if !ok {
		return bp, evaluate.PlannedBoot{}, fail.Inputf("evaluation %d: pipeline %s plans no boot %d of %q", ev.id, ev.p.Name, b.Boot, b.Variant)
	}
	spec, _ := specByKey(ev.p, bp.BuildKey)
	art, err := builtArtifact(env, ev.id, spec)
	if err == nil && art == nil {
		err = fail.Inputf("evaluation %d: boot %s #%d: kernel %s is not built (run the build stage first)", ev.id, bp.Variant, bp.Boot+1, bp.BuildKey)
	}
	if err != nil {
		return bp, evaluate.PlannedBoot{}, err
	}
	k := evaluate.Kernel{Variant: bp.Variant, Arch: bp.Arch, Image: art.Image, SystemMap: art.SystemMap,
		Config: art.Config, ConfigHash: art.ConfigHash(), Commit: art.Meta.Git.Commit, Cmdline: bp.Cmdline, BuildID: art.BuildID()}
	plan := bp.Plan
	if s := plan.SELinux; s != nil && s.Mode != guest.SELinuxDisabled && ev.p.SELinuxPolicy != nil {
		// The policy is compiled here, on the host, for the boot that
		// loads it (cached by content): the plan stored with the
		// pipeline names it only.
		pol := ev.p.SELinuxPolicy
		bin, err := selinux.Compile(ctx, pol.Label(), pol.Source, env.CacheDir)
		if err != nil {
			return bp, evaluate.PlannedBoot{}, err
		}
		c := *s
		c.Policy = bin
		plan.SELinux = &c
	}
	return bp, evaluate.PlannedBoot{Key: bp.BootKey, Kernel: k, Plan: plan}, nil
}

// recordBoot records, in the transaction that finishes a boot, the time it
// took (and building the userland) and, unless the kernel under test
// failed, which stops the evaluation, env.Record.
func recordBoot(ctx context.Context, env Env, ev *evaluation, tx *store.Tx, rec evaluate.BootRecord, landTime time.Duration, landNote string) error {
	if landTime > 0 {
		if err := env.Store.AddTimingTx(tx, ev.id, "userland", landTime, landNote); err != nil {
			return err
		}
	}
	if res := rec.Result; res != nil {
		if err := env.Store.AddSpanTx(tx, ev.id, "boot", res.Started, res.FirstResult, ""); err != nil {
			return err
		}
		if err := env.Store.AddSpanTx(tx, ev.id, "benchmark", res.Started.Add(res.FirstResult), res.Duration-res.FirstResult, ""); err != nil {
			return err
		}
	}
	if store.StatusOf(rec.Err) == store.RunFailed {
		return nil // the evaluation stops: no next stage
	}
	return record(ctx, env, tx)
}

// planOf finds planned boot b in p (also an adaptive boot beyond
// repeats.boots).
func planOf(p *pipelines.Pipeline, b evaluate.BootKey) (pipelines.BootPlan, bool) {
	if b.Boot < 0 || b.Boot >= max(p.Repeats.MaxBoots, p.Repeats.Boots, b.Boot+1) {
		return pipelines.BootPlan{}, false
	}
	for _, bp := range p.RunsBetween(b.Boot, b.Boot+1) {
		if bp.BootKey == b {
			return bp, true
		}
	}
	return pipelines.BootPlan{}, false
}

// More is adaptive sampling (repeats.max_boots above the planned boots):
// it looks at the samples so far and returns the next round's boots, of
// the variants whose comparisons are not clear yet, or nothing when every
// comparison is clear or the budget is spent.
func More(ctx context.Context, env Env, id int64) ([]evaluate.BootKey, error) {
	ev, err := loadInputs(env.Store, id)
	if err != nil {
		return nil, err
	}
	planned := plannedBoots(ev)
	if ev.p.Repeats.MaxBoots <= planned {
		return nil, nil
	}
	a := &adaptiveState{min: planned, max: ev.p.Repeats.MaxBoots}
	samples, err := env.Store.Samples(id)
	if err != nil {
		return nil, err
	}
	round, need := a.next(ev.p, stats.Primary(samples))
	if len(need) == 0 {
		return nil, nil
	}
	env.progress().Printf("adaptive sampling: boot %d of at most %d for %s", round+1, a.max, strings.Join(trueKeys(need), ", "))
	var out []evaluate.BootKey
	for _, bp := range ev.p.RunsBetween(round, round+1) {
		if need[bp.Variant] {
			out = append(out, bp.BootKey)
		}
	}
	if env.Record != nil {
		err = env.Store.Tx(ctx, func(tx *store.Tx) error { return record(ctx, env, tx) })
	}
	return out, err
}

// userlandFor is the users' tools (stress-ng, perf) for the guest arch:
// Debian's packages, unpacked once and cached by content
// (evaluate/guest/userland); nil when the pipeline runs none or boots over ssh.
// took is the time spent building it (0 when it came from the cache).
func userlandFor(ctx context.Context, env Env, p *pipelines.Pipeline, arch string) (u *userland.Userland, took time.Duration, err error) {
	tools := p.Tools()
	if len(tools) == 0 || p.Target.Kind == "ssh" {
		return nil, 0, nil
	}
	start := time.Now()
	pr := env.progress()
	pr.Status("guest userland for %s: %s", arch, strings.Join(tools, ", "))
	if u, err = userland.Build(ctx, arch, tools, env.CacheDir, nil); err != nil {
		return nil, 0, err
	}
	if u.Cached {
		return u, 0, nil
	}
	pr.Printf("guest userland %s: %s (%d files, %d KiB)", arch, userlandVersions(u), len(u.Files), u.Bytes>>10)
	return u, time.Since(start), nil
}

func userlandVersions(u *userland.Userland) string {
	var parts []string
	for _, t := range sortedKeys(u.Versions) {
		parts = append(parts, t+" "+u.Versions[t])
	}
	return strings.Join(parts, ", ")
}

// targetConfig is where the pipeline boots bp (target.New).
func targetConfig(bp pipelines.BootPlan, cacheDir string, u *userland.Userland) target.Config {
	where := target.QEMU
	if bp.Target.Kind == "ssh" {
		where = bp.Target.Host
	}
	return target.Config{Where: where, Deterministic: bp.Deterministic, Timeout: bp.Target.Timeout, CacheDir: cacheDir,
		SMP: bp.Target.SMP, MemoryMiB: bp.Target.MemoryMiB, KVM: bp.Target.KVM, Userland: u,
		Boot: bp.Target.Boot, BootHook: bp.Target.BootHook, Initrd: bp.Target.Initrd,
		IdentityFile: bp.Target.Identity, SSHOptions: bp.Target.SSHOptions, ConsoleLog: bp.Target.ConsoleLog}
}

func sampleLine(samples []evaluate.Sample) string {
	var parts []string
	for _, s := range samples {
		if s.Metric == "ns/op" || s.Metric == "mean_ns" {
			parts = append(parts, fmt.Sprintf("%s %.0f %s", s.Benchmark, s.Value, s.Metric))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%d sample(s)", len(samples))
	}
	return strings.Join(parts, ", ")
}
