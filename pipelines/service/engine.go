package service

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/internal/fail"
)

// Queue names: one per job kind, each with its own concurrency.
const (
	QueueApply  = "apply"
	QueueBuild  = "build"
	QueueBoot   = "boot"
	QueueMore   = "more"
	QueueReport = "report"
)

// Queues lists the queues in stage order (the queue page's order).
var Queues = []string{QueueApply, QueueBuild, QueueBoot, QueueMore, QueueReport}

// Engine runs the stage jobs on River.
type Engine struct {
	db     *DB
	client *river.Client[*sql.Tx]
	log    *slog.Logger
}

// EngineConfig sizes the queues.
type EngineConfig struct {
	// BootWorkers boot at once (default 1: boots that share the machine
	// disturb each other's timings; an evaluation's own boots always run
	// one after another, in their interleaving order).
	BootWorkers int
	// BuildWorkers build at once (default 1). The make -j budget is split
	// between them, so that all builds share one budget.
	BuildWorkers int
	// Grace is how long Stop lets running jobs finish before it cancels
	// them (they are then retried on the next start).
	Grace time.Duration
	// Logger gets River's own warnings (default: discard below warn).
	Logger *slog.Logger
}

// evalTag is the River tag naming an evaluation's jobs (cancel lists them
// by it). River tags allow [\w-] only.
func evalTag(id int64) string { return "eval-" + strconv.FormatInt(id, 10) }

// evalOfTags is the evaluation an evalTag names (0 if none).
func evalOfTags(tags []string) int64 {
	for _, t := range tags {
		if len(t) > 5 && t[:5] == "eval-" {
			id, _ := strconv.ParseInt(t[5:], 10, 64)
			return id
		}
	}
	return 0
}

func newEngine(db *DB, cfg EngineConfig, workers *river.Workers) (*Engine, error) {
	if cfg.BootWorkers <= 0 {
		cfg.BootWorkers = 1
	}
	if cfg.BuildWorkers <= 0 {
		cfg.BuildWorkers = 1
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client, err := river.NewClient(db.Driver, &river.Config{
		Queues: map[string]river.QueueConfig{
			QueueApply:  {MaxWorkers: 2},
			QueueBuild:  {MaxWorkers: cfg.BuildWorkers},
			QueueBoot:   {MaxWorkers: cfg.BootWorkers},
			QueueMore:   {MaxWorkers: 2},
			QueueReport: {MaxWorkers: 2},
		},
		Workers: workers,
		// Stages take minutes (a cold kernel build, tens of boots): no
		// per-job timeout; cancellation and shutdown cancel through ctx.
		JobTimeout: -1,
		// A job still "running" this long after it started belongs to a
		// worker that died. In embedded mode OpenDB's lock makes this
		// moot (RescueOrphans at start); it matters on a farm (issue 14).
		RescueStuckJobsAfter: 6 * time.Hour,
		// Finished jobs stay a week for the queue page.
		CompletedJobRetentionPeriod: 7 * 24 * time.Hour,
		CancelledJobRetentionPeriod: 7 * 24 * time.Hour,
		DiscardedJobRetentionPeriod: 30 * 24 * time.Hour,
		FetchPollInterval:           500 * time.Millisecond,
		SoftStopTimeout:             cfg.Grace,
		MaxAttempts:                 5,
		Logger:                      log,
	})
	if err != nil {
		return nil, fail.Infraf("river: %w", err)
	}
	return &Engine{db: db, client: client, log: log}, nil
}

// Client is the River client (for tests and the queue page).
func (e *Engine) Client() *river.Client[*sql.Tx] { return e.client }

// Jobs lists River jobs, newest first, in the given states (all when
// none) and, when evalID > 0, of that evaluation only.
func (e *Engine) Jobs(ctx context.Context, evalID int64, limit int, states ...rivertype.JobState) ([]*rivertype.JobRow, error) {
	p := river.NewJobListParams().OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(max(1, limit))
	if len(states) > 0 {
		p = p.States(states...)
	}
	if evalID > 0 {
		p = p.TagsAll(evalTag(evalID))
	}
	res, err := e.client.JobList(ctx, p)
	if err != nil {
		return nil, fail.Infraf("river: listing jobs: %w", err)
	}
	return res.Jobs, nil
}

// unfinished are the job states that may still run.
var unfinished = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}

// CancelEvaluation cancels every unfinished job of evaluation id: queued
// ones never run; running ones get their context cancelled (QEMU is
// killed, the partial boot is recorded as an infrastructure failure, which
// never counts as finished). It returns how many jobs it cancelled.
func (e *Engine) CancelEvaluation(ctx context.Context, id int64) (int, error) {
	jobs, err := e.Jobs(ctx, id, 1000, unfinished...)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, j := range jobs {
		if _, err := e.client.JobCancel(ctx, j.ID); err != nil {
			if errors.Is(err, river.ErrNotFound) {
				continue
			}
			return n, fail.Infraf("river: cancelling job %d of evaluation %d: %w", j.ID, id, err)
		}
		n++
	}
	return n, nil
}

// Start starts working jobs. ctx bounds the client's life; Stop ends it
// gracefully.
func (e *Engine) Start(ctx context.Context) error {
	if err := e.client.Start(ctx); err != nil {
		return fail.Infraf("river: starting: %w", err)
	}
	return nil
}

// Stop stops fetching jobs, waits up to the grace period for running
// ones, then cancels them: they end as errors, which River retries on the
// next start (their stages are idempotent). ctx bounds the whole stop.
func (e *Engine) Stop(ctx context.Context) error {
	err := e.client.Stop(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("river: stopping: %w", err)
	}
	return nil
}
