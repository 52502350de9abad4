package runner

import (
	"fmt"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/pipelines/store"
)

// The stage graph: what follows each step of an evaluation. It is written
// once, here; the steps themselves (Apply, Build, Boot, ...) do not know
// what comes next, and the two drivers ask Next after every step: the
// local loop (Run, RunWith: `patcheval lore --pipeline`, `run`, the
// experiments' measurements) and the service's River jobs
// (pipelines/service), which turn each step into a job.
//
//	apply ─► configure (one per kernel) ─► build (one per kernel) ─► plan ─► boot ─► … ─► boot ─► more ─┐
//	                                                                   │                          ▲      │
//	                                                                   │                          └──────┘ (an adaptive round)
//	                                                                   └────────────────────────────────► report ─► per_patch ─► series_bisect ─► done
//
// Every kernel is configured and verified before any compiles: the
// builds follow only the last configure to finish, so a variant the tree
// cannot give stops the evaluation before minutes of compiling.

// Stage names a step of the stage graph.
type Stage string

// The stages, in the graph's order.
const (
	// StageApply applies the series onto the base (Apply).
	StageApply Stage = "apply"
	// StageConfigure configures and verifies one kernel without
	// compiling it (ConfigureKernel, Step.Key).
	StageConfigure Stage = "configure"
	// StageBuild builds one kernel (Build, Step.Key).
	StageBuild Stage = "build"
	// StagePlan plans the first round of boots (Boots).
	StagePlan Stage = "plan"
	// StageBoot boots one planned boot (Boot, Step.Boot); Step.Rest are
	// the round's boots after it, booted one at a time in their order.
	StageBoot Stage = "boot"
	// StageMore plans adaptive round Step.Round (More).
	StageMore Stage = "more"
	// StageReport compares and writes the reports (Report).
	StageReport Stage = "report"
	// StagePerPatch measures the series patch by patch
	// (pipelines/experiments/perpatch), when the evaluation asks for it.
	StagePerPatch Stage = "per_patch"
	// StageSeriesBisect bisects a whole-series regression inside the
	// series, when the driver's policy asks for it and there is one.
	StageSeriesBisect Stage = "series_bisect"
	// StageDone ends the evaluation (a queue tells who waits for it).
	StageDone Stage = "done"
)

// Step is one step of an evaluation's graph.
type Step struct {
	Stage Stage
	// Key is StageConfigure's and StageBuild's kernel
	// (pipelines.BuildSpec.Key).
	Key string
	// Round is StageBoot's and StageMore's round of boots (0: the
	// planned ones).
	Round int
	// Boot is StageBoot's boot; Rest the round's boots after it.
	Boot evaluate.BootKey
	Rest []evaluate.BootKey
}

func (s Step) String() string {
	switch s.Stage {
	case StageConfigure:
		return fmt.Sprintf("configure %s", s.Key)
	case StageBuild:
		return fmt.Sprintf("build %s", s.Key)
	case StageBoot:
		return fmt.Sprintf("boot %s#%d (round %d)", s.Boot.Variant, s.Boot.Boot, s.Round)
	case StageMore:
		return fmt.Sprintf("more (round %d)", s.Round)
	}
	return string(s.Stage)
}

// Graph is what an evaluation's graph depends on besides its steps'
// results: its bounds and which follow-ups after the report it has.
type Graph struct {
	// MaxRound is the last round of boots (MaxRound): a round whose
	// boots all failed for infrastructure reasons is offered again by
	// More, and the rounds are bounded.
	MaxRound int
	// PerPatch: a per-patch run follows the report.
	PerPatch bool
	// SeriesBisect: a whole-series regression is bisected inside the
	// series (Found.Bisect says whether there is one).
	SeriesBisect bool
}

// MaxRound is the last round of boots of a pipeline that may boot up to
// maxBoots per variant: the planned round and one adaptive round per
// boot at most.
func MaxRound(maxBoots int) int { return max(maxBoots, 1) }

// GraphOf is stored evaluation id's Graph: its rounds, and whether a
// per-patch run follows its report (submitted with Options.PerPatch, on a
// series of more than one patch). SeriesBisect is the driver's policy,
// left false.
func GraphOf(st *store.Store, id int64) (Graph, error) {
	ev, err := loadInputs(st, id)
	if err != nil {
		return Graph{}, err
	}
	g := Graph{MaxRound: MaxRound(ev.p.Repeats.MaxBoots)}
	if ev.in.PerPatch && len(ev.in.Mbox) > 0 {
		if err := ev.loadSeries(st); err != nil && ev.p.NeedsSeries() {
			return g, fmt.Errorf("evaluation %d: stored series: %w", id, err)
		}
		g.PerPatch = ev.series != nil && len(ev.series.Patches) > 1
	}
	return g, nil
}

// Found is what a finished step found that decides what follows it.
type Found struct {
	// Kernels are StageApply's kernels to configure and, after the last
	// StageConfigure, the kernels to build (their keys: all of them, or
	// those left when a local run with Options.KeepGoing dropped the
	// variants that cannot be configured).
	Kernels []string
	// Configuring is how many other kernels of the evaluation are still
	// being configured after a StageConfigure (the last one to finish
	// starts the builds).
	Configuring int
	// Building is how many other kernels of the evaluation are still
	// being built after a StageBuild (the last one to finish plans the
	// boots).
	Building int
	// Boots are StagePlan's and StageMore's round of boots (none: the
	// sampling is over).
	Boots []evaluate.BootKey
	// Bisect: after StageReport or StagePerPatch, there is a whole-series
	// regression to bisect (or the bisection step decides it itself).
	Bisect bool
}

// Next is the steps that follow step done of an evaluation, given what
// it found: none while other steps still have to finish first (a
// configure or a build that is not the last), one StageDone at the end.
func Next(g Graph, done Step, f Found) []Step {
	switch done.Stage {
	case StageApply:
		return perKernel(StageConfigure, f.Kernels)
	case StageConfigure:
		if f.Configuring > 0 {
			return nil
		}
		return perKernel(StageBuild, f.Kernels)
	case StageBuild:
		if f.Building > 0 {
			return nil
		}
		return []Step{{Stage: StagePlan}}
	case StagePlan, StageMore:
		if len(f.Boots) == 0 {
			return []Step{{Stage: StageReport}}
		}
		return []Step{{Stage: StageBoot, Round: done.Round, Boot: f.Boots[0], Rest: f.Boots[1:]}}
	case StageBoot:
		if len(done.Rest) > 0 {
			return []Step{{Stage: StageBoot, Round: done.Round, Boot: done.Rest[0], Rest: done.Rest[1:]}}
		}
		if done.Round+1 > g.MaxRound {
			return []Step{{Stage: StageReport}}
		}
		return []Step{{Stage: StageMore, Round: done.Round + 1}}
	case StageReport:
		if g.PerPatch {
			return []Step{{Stage: StagePerPatch}}
		}
		return afterPerPatch(g, f)
	case StagePerPatch:
		return afterPerPatch(g, f)
	case StageSeriesBisect:
		return []Step{{Stage: StageDone}}
	}
	return nil
}

// perKernel is one step of stage per kernel of keys; with none, the
// boots' planning.
func perKernel(stage Stage, keys []string) []Step {
	if len(keys) == 0 {
		return []Step{{Stage: StagePlan}}
	}
	out := make([]Step, len(keys))
	for i, k := range keys {
		out[i] = Step{Stage: stage, Key: k}
	}
	return out
}

func afterPerPatch(g Graph, f Found) []Step {
	if g.SeriesBisect && f.Bisect {
		return []Step{{Stage: StageSeriesBisect}}
	}
	return []Step{{Stage: StageDone}}
}
