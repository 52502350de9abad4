package service

import (
	"context"

	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/perpatch"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// The service is the queue driver of runner's stage graph: each step is a
// River job (apply, configure, build, more for StagePlan and StageMore, boot,
// report, per_patch, series_bisect); a job takes its step and, in the
// transaction that records it, asks runner.Next what follows and queues
// those steps as jobs (jobsFor). Only the steps' jobs and queues are
// written here, never their order.

// after is what a job knows about its evaluation when it asks what
// follows its step: its generation, its graph (runner.GraphOf with
// Config.SeriesBisect), the kernels by key (apply and configure: their
// queues) and the
// automatic bisection inside the series to start (autoPlan; StageReport
// and StagePerPatch).
type after struct {
	id, gen int64
	graph   runner.Graph
	specs   map[string]pipelines.BuildSpec
	bisect  *perpatch.Bisection
}

// graph is evaluation id's stage graph as this service drives it.
func (s *Service) graph(id int64) (runner.Graph, error) {
	g, err := runner.GraphOf(s.db.Store, id)
	g.SeriesBisect = s.cfg.SeriesBisect
	return g, err
}

// follow is the jobs of the steps that follow step done (runner.Next),
// inside tx.
func (s *Service) follow(ctx context.Context, tx *store.Tx, a after, done runner.Step, f runner.Found) ([]river.InsertManyParams, error) {
	if done.Stage == runner.StageReport || done.Stage == runner.StagePerPatch {
		f.Bisect = a.bisect != nil
	}
	return s.jobsFor(ctx, tx, a, runner.Next(a.graph, done, f))
}

// jobsFor is the jobs that take steps, inside tx.
func (s *Service) jobsFor(ctx context.Context, tx *store.Tx, a after, steps []runner.Step) ([]river.InsertManyParams, error) {
	var out []river.InsertManyParams
	for _, st := range steps {
		switch st.Stage {
		case runner.StageConfigure:
			out = append(out, configureJob(a.id, a.gen, a.specs[st.Key]))
		case runner.StageBuild:
			out = append(out, buildJob(a.id, a.gen, a.specs[st.Key]))
		case runner.StagePlan:
			out = append(out, moreJob(a.id, a.gen, 0, true))
		case runner.StageMore:
			out = append(out, moreJob(a.id, a.gen, st.Round, false))
		case runner.StageBoot:
			j, err := s.bootJob(ctx, a.id, a.gen, st)
			if err != nil {
				return nil, err
			}
			out = append(out, j)
		case runner.StageReport:
			out = append(out, reportJob(a.id, a.gen))
		case runner.StagePerPatch:
			// The evaluation stays running until the per-patch run ends.
			if err := s.setStatus(tx, a.id, "running"); err != nil {
				return nil, err
			}
			out = append(out, perPatchJob(a.id, a.gen))
		case runner.StageSeriesBisect:
			j, err := s.startAutoBisection(tx, a)
			if err != nil {
				return nil, err
			}
			if j == nil {
				// One was already made or is under way: the evaluation ends.
				return s.jobsFor(ctx, tx, a, []runner.Step{{Stage: runner.StageDone}})
			}
			out = append(out, *j)
		case runner.StageDone:
			if err := s.setStatus(tx, a.id, store.StatusDone); err != nil {
				return nil, err
			}
			out = append(out, s.notifyJobs(a.id, a.gen, EventDone)...)
			// The jobs waiting for it (waiters.go).
			w, err := s.endedTx(tx, a.id, EvalEnd{Status: store.StatusDone})
			if err != nil {
				return nil, err
			}
			out = append(out, w...)
		}
	}
	return out, nil
}

// bootJob is the job of boot step st, in its boot's queue (BootQueue: its
// arch's or its SSH target's).
func (s *Service) bootJob(ctx context.Context, id, gen int64, st runner.Step) (river.InsertManyParams, error) {
	env := s.env(id, "plan")
	env.Progress = progress.Discard()
	bp, err := runner.BootPlanOf(ctx, env, id, st.Boot)
	if err != nil {
		return river.InsertManyParams{}, err
	}
	return river.InsertManyParams{Args: BootArgs{id, gen, st.Round, st.Boot, st.Rest}, InsertOpts: jobOpts(BootQueue(bp), id, 5)}, nil
}

// startAutoBisection stores the automatic bisection a.bisect of the
// evaluation (Config.SeriesBisect) as queued, finishing generation a.gen
// when it ends (the evaluation stays running meanwhile, so that the
// report and the bots' replies name the patch), and is its first step's
// job; nil when one was already made or is under way.
func (s *Service) startAutoBisection(tx *store.Tx, a after) (*river.InsertManyParams, error) {
	st, err := s.autoBisection(tx, a.id, a.bisect)
	if err != nil || st == nil {
		return nil, err
	}
	st.DoneGen = a.gen
	if err := s.setStatus(tx, a.id, "running"); err != nil {
		return nil, err
	}
	if err := s.db.Store.SetSeriesBisectionTx(tx, a.id, st); err != nil {
		return nil, err
	}
	s.evalLog(a.id).printf("the series regresses %s %s %+.1f%%: bisecting it inside the series before the evaluation is done",
		a.bisect.Benchmark, a.bisect.Metric, a.bisect.Change)
	j := seriesBisectJob(a.id, st.Gen, 0)
	return &j, nil
}
