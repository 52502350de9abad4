package service

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/perpatch"
	"github.com/patcheval/patcheval/pipelines/runner"
)

// Taking a whole-series evaluation apart (issue 21, pipelines/perpatch)
// as queue work, in the "series" queue (one worker: its jobs build and
// boot inside the job, within the service's -j budget and its build and
// boot slots, like the watches' re-tests):
//
//   - per_patch follows the report of an evaluation submitted with
//     PerPatch (runner.Options.PerPatch: `submit --per-patch`, the API's
//     per_patch, a list's per_patch): it measures the series after each
//     patch (perpatch.Run; every prefix is a stored evaluation, so a
//     retried job resumes it), writes the reports again with the
//     per-patch table, and only then tells Notify the evaluation is done,
//     so that the bots' reports carry the table. The evaluation stays
//     "running" until then.

// QueueSeries runs per-patch runs and bisections inside a series.
const QueueSeries = "series"

// PerPatchArgs measures evaluation EvaluationID patch by patch.
type PerPatchArgs struct {
	EvaluationID int64 `json:"evaluation_id"`
	Gen          int64 `json:"gen"`
}

func (PerPatchArgs) Kind() string { return "per_patch" }

func perPatchJob(id, gen int64) river.InsertManyParams {
	return river.InsertManyParams{Args: PerPatchArgs{id, gen}, InsertOpts: jobOpts(QueueSeries, id, 3)}
}

// SeriesMeasurers make the series jobs' measurements (tests give fakes).
// A nil field: the runner, in the service's store and cache.
type SeriesMeasurers struct {
	// PerPatch measures the at-commit pipeline at a commit of s, its
	// reports under outDir.
	PerPatch func(s *perpatch.Series, at *pipelines.Pipeline, outDir string) perpatch.Measurer
}

// runEnv is the runner.Env of an evaluation run inside a series job: the
// service's store, cache and -j budget, and its build and boot slots.
func (s *Service) runEnv(id int64) runner.Env {
	jobs := s.cfg.Jobs
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	return runner.Env{Store: s.db.Store, CacheDir: s.cfg.CacheDir, Jobs: jobs, Budget: s.budget, Slot: s.engine.slot,
		Artifacts: s.artifacts, Progress: progress.New(s.evalLog(id))}
}

// afterReport is what follows evaluation id's report: the per-patch run
// when it was asked for (the evaluation stays running until it ends),
// else the done notification.
func (s *Service) afterReport(ctx context.Context, tx *store.Tx, id, gen int64) ([]river.InsertManyParams, error) {
	in, err := runner.Load(s.db.Store, id)
	if err != nil {
		return nil, err
	}
	if in.Options.PerPatch && in.Series != nil && len(in.Series.Patches) > 1 {
		if err := s.setStatus(tx, id, "running"); err != nil {
			return nil, err
		}
		return []river.InsertManyParams{perPatchJob(id, gen)}, nil
	}
	return s.notifyJobs(id, gen, EventDone), nil
}

type perPatchWorker struct {
	river.WorkerDefaults[PerPatchArgs]
	s *Service
}

func (w *perPatchWorker) Work(ctx context.Context, job *river.Job[PerPatchArgs]) error {
	s, a := w.s, job.Args
	e, err := s.db.Store.Evaluation(a.EvaluationID)
	if err != nil {
		if fail.KindOf(err) == fail.KindInput {
			return river.JobCancel(err)
		}
		return err
	}
	if e.Status == StatusCancelled {
		return river.JobCancel(fmt.Errorf("evaluation %d was cancelled", a.EvaluationID))
	}
	s.beat.begin(job.ID, fmt.Sprintf("per-patch run of evaluation %d (attempt %d)", a.EvaluationID, job.Attempt))
	defer s.beat.end(job.ID)
	log := s.evalLog(a.EvaluationID)
	dir := s.OutDir(a.EvaluationID)
	pp, err := s.perPatch(ctx, a.EvaluationID, dir)
	if err != nil {
		if ctx.Err() != nil {
			return err // shutdown: retried on the next start, the prefixes' evaluations resume
		}
		if fail.KindOf(err) == fail.KindInfra && job.Attempt < job.MaxAttempts {
			log.printf("per-patch: attempt %d of %d failed, will retry: %v", job.Attempt, job.MaxAttempts, err)
			return err
		}
		// The whole-series report stands; it says why it has no table.
		log.printf("per-patch run not done: %v", err)
		if pp == nil {
			pp = &report.PerPatch{}
		}
		pp.Notes = append(pp.Notes, "per-patch run not done: "+err.Error())
	}
	if err := s.amendReport(a.EvaluationID, dir, pp); err != nil {
		if ctx.Err() != nil || job.Attempt < job.MaxAttempts {
			return err
		}
		// Give up on the table, not on the evaluation: its report stands.
		log.printf("per-patch: the reports could not be written again: %v", err)
	} else {
		log.printf("per-patch: done; reports in %s", dir)
	}
	return completeWith(ctx, s, job, s.notifyJobs(a.EvaluationID, a.Gen, EventDone), func(tx *store.Tx) error {
		return s.setStatus(tx, a.EvaluationID, store.StatusDone)
	})
}

// amendReport writes evaluation id's reports in dir again (report.json
// as the report stage wrote it, the text, Markdown, KCIDB and the reply
// draft) with pp as their per-patch section.
func (s *Service) amendReport(id int64, dir string, pp *report.PerPatch) error {
	f, err := os.Open(filepath.Join(dir, "report.json"))
	if err != nil {
		return fail.Infraf("evaluation %d: the report to add the per-patch results to: %v", id, err)
	}
	r, err := report.ReadJSON(f)
	f.Close()
	if err != nil {
		return fail.Infraf("evaluation %d: %v", id, err)
	}
	r.PerPatch = pp
	return runner.Rewrite(runner.Env{Store: s.db.Store}, id, r, dir, &runner.Outcome{EvaluationID: id})
}

// perPatch measures evaluation id after each patch of its series.
func (s *Service) perPatch(ctx context.Context, id int64, dir string) (*report.PerPatch, error) {
	ser, err := perpatch.Load(s.db.Store, id)
	if err != nil {
		return nil, err
	}
	at, err := perpatch.AtCommit(ser.Pipeline, perpatch.SeriesPairs(ser.Pipeline))
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "per-patch")
	var m perpatch.Measurer
	if f := s.cfg.Series.PerPatch; f != nil {
		m = f(ser, at, out)
	} else {
		env := s.runEnv(id)
		defer env.Progress.Done()
		m = &perpatch.RunnerMeasurer{Env: env, Pipeline: at, Repo: ser.Repo, Boots: ser.Boots, OutDir: out}
	}
	log := s.evalLog(id)
	return perpatch.Run(ctx, ser, perpatch.Options{PerPatch: true, Measurer: m,
		Logf: func(format string, a ...any) { log.printf(format, a...) }})
}
