package runner

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/qemu"
	"github.com/patcheval/patcheval/evaluate/ssh"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/evaluate/userland"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines"
)

// PlannedBoot names one boot of an evaluation: the variant (its name, or
// "name/arch" with several arches) and the boot's index. Everything else
// (kernel, plan, target) comes from the stored pipeline.
type PlannedBoot = evaluate.BootKey

// Boots returns evaluation id's planned boots in interleaving order (A B C
// A B C ...): repeats.boots, or the boots the evaluation was submitted
// with. Boot skips the finished ones.
func Boots(ctx context.Context, env Env, id int64) ([]PlannedBoot, error) {
	ev, err := load(env, id)
	if err != nil {
		return nil, err
	}
	return keys(ev.p.RunsBetween(0, plannedBoots(ev))), nil
}

func keys(runs []pipelines.RunPlan) []PlannedBoot {
	out := make([]PlannedBoot, len(runs))
	for i, rp := range runs {
		out[i] = PlannedBoot{Variant: rp.Variant, Boot: rp.Boot}
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
// samples. A finished boot is never redone. A boot that failed for
// infrastructure reasons is recorded (a resume tries it again) and is no
// error; a kernel that panics or whose agent fails is the thing under test
// failing: the error stops the evaluation.
func Boot(ctx context.Context, env Env, id int64, b PlannedBoot) (err error) {
	defer failed(ctx, env, id, &err)
	if err := ctx.Err(); err != nil {
		return fail.Infra(err)
	}
	done, err := env.Store.FinishedRuns(id)
	if err != nil || done[store.RunKey{Variant: b.Variant, Boot: b.Boot}] {
		return err
	}
	ev, err := load(env, id)
	if err != nil {
		return err
	}
	rp, v, err := plannedKernel(env, ev, b)
	if err != nil {
		return err
	}
	land, landTime, err := userlandFor(ctx, env, ev.p, rp.Arch)
	if err != nil {
		return err
	}
	tgt, err := newTarget(rp, env.CacheDir, land)
	if err != nil {
		return err
	}
	pr := env.progress()
	pr.Status("boot %s #%d on %s", rp.Variant, rp.Boot+1, tgt.Name())
	runID, err := env.Store.BeginRun(id, rp.Variant, rp.Boot)
	if err != nil {
		return err
	}
	rec := evaluate.Boot(ctx, tgt, b, v, rp.Plan)
	if err := recordBoot(ctx, env, ev, runID, rec, landTime); err != nil {
		return err
	}
	if rec.Err == nil {
		pr.Printf("boot %s #%d: %s", rp.Variant, rp.Boot+1, sampleLine(rec.Samples))
		return nil
	}
	if ctx.Err() != nil {
		return fail.Infra(ctx.Err())
	}
	pr.Printf("boot %s #%d failed: %v", rp.Variant, rp.Boot+1, firstLine(rec.Err.Error()))
	if store.StatusOf(rec.Err) == store.RunFailed {
		return rec.Err
	}
	return nil
}

// plannedKernel is planned boot b of ev: its plan and its built kernel.
func plannedKernel(env Env, ev *evaluation, b PlannedBoot) (pipelines.RunPlan, evaluate.RunVariant, error) {
	rp, ok := planOf(ev.p, b)
	if !ok {
		return rp, evaluate.RunVariant{}, fail.Inputf("evaluation %d: pipeline %s plans no boot %d of %q", ev.id, ev.p.Name, b.Boot, b.Variant)
	}
	spec, _ := specByKey(ev.p, rp.BuildKey)
	art, err := builtArtifact(env, ev.id, spec)
	if err == nil && art == nil {
		err = fail.Inputf("evaluation %d: boot %s #%d: kernel %s is not built (run the build stage first)", ev.id, rp.Variant, rp.Boot+1, rp.BuildKey)
	}
	if err != nil {
		return rp, evaluate.RunVariant{}, err
	}
	k := evaluate.Kernel{Variant: rp.Variant, Arch: rp.Arch, Image: art.Image, SystemMap: art.SystemMap,
		Config: art.Config, ConfigHash: art.ConfigHash(), Commit: art.Meta.Git.Commit, Cmdline: rp.Cmdline}
	return rp, evaluate.RunVariant{Kernel: k}, nil
}

// recordBoot records run runID's end and the time it took, and (unless the
// kernel under test failed, which stops the evaluation) env.Record, in one
// transaction.
func recordBoot(ctx context.Context, env Env, ev *evaluation, runID int64, rec evaluate.BootRecord, landTime time.Duration) error {
	rctx := ctx
	if rec.Err == nil {
		rctx = keep(ctx)
	}
	return env.Store.Tx(rctx, func(tx *sql.Tx) error {
		if err := env.Store.FinishBootTx(tx, runID, rec); err != nil {
			return err
		}
		if landTime > 0 {
			if err := env.Store.AddTimingTx(tx, ev.id, "userland", landTime, strings.Join(ev.p.Tools(), ", ")); err != nil {
				return err
			}
		}
		if res := rec.Result; res != nil {
			if err := env.Store.AddTimingTx(tx, ev.id, "boot", res.FirstResult, ""); err != nil {
				return err
			}
			if err := env.Store.AddTimingTx(tx, ev.id, "benchmark", res.Duration-res.FirstResult, ""); err != nil {
				return err
			}
		}
		if store.StatusOf(rec.Err) == store.RunFailed {
			return nil // the evaluation stops: no next stage
		}
		return record(ctx, env, tx)
	})
}

// planOf finds planned boot b in p (also an adaptive boot beyond
// repeats.boots).
func planOf(p *pipelines.Pipeline, b PlannedBoot) (pipelines.RunPlan, bool) {
	if b.Boot < 0 || b.Boot >= max(p.Repeats.MaxBoots, p.Repeats.Boots, b.Boot+1) {
		return pipelines.RunPlan{}, false
	}
	for _, rp := range p.RunsBetween(b.Boot, b.Boot+1) {
		if rp.Variant == b.Variant {
			return rp, true
		}
	}
	return pipelines.RunPlan{}, false
}

// More is adaptive sampling (repeats.max_boots above the planned boots):
// it looks at the samples so far and returns the next round's boots, of
// the variants whose comparisons are not clear yet, or nothing when every
// comparison is clear or the budget is spent.
func More(ctx context.Context, env Env, id int64) ([]PlannedBoot, error) {
	ev, err := load(env, id)
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
	var out []PlannedBoot
	for _, rp := range ev.p.RunsBetween(round, round+1) {
		if need[rp.Variant] {
			out = append(out, PlannedBoot{Variant: rp.Variant, Boot: rp.Boot})
		}
	}
	if env.Record != nil {
		err = env.Store.Tx(ctx, func(tx *sql.Tx) error { return record(ctx, env, tx) })
	}
	return out, err
}

// userlandFor is the users' tools (stress-ng, perf) for the guest arch:
// Debian's packages, unpacked once and cached by content
// (evaluate/userland); nil when the pipeline runs none or boots over ssh.
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

func newTarget(rp pipelines.RunPlan, cacheDir string, u *userland.Userland) (evaluate.Target, error) {
	agents := ""
	if cacheDir != "" {
		agents = filepath.Join(cacheDir, "agents")
	}
	switch rp.Target.Kind {
	case "ssh":
		return ssh.New(ssh.Config{URL: rp.Target.Host, BootHook: rp.Target.BootHook, Timeout: rp.Target.Timeout, CacheDir: agents})
	default:
		cfg := qemu.Config{SMP: rp.Target.SMP, MemoryMB: rp.Target.MemoryMiB, Deterministic: rp.Deterministic,
			KVM: rp.Target.KVM, Timeout: rp.Target.Timeout, CacheDir: agents}
		if u != nil {
			cfg.Userland, cfg.UserlandLibPath = u.Archive, u.LibPath()
		}
		return qemu.New(cfg), nil
	}
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
