package service

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/pipelines/store"

	"github.com/patcheval/patcheval/internal/fail"
)

// Queue names. apply, more and report (with notify) are the
// coordinator's; builds and boots go to a queue per arch or SSH target,
// build-<arch>, boot-<arch> and boot-ssh-<host> (Capabilities.Queues),
// so that a worker takes only the jobs it can run.
const (
	QueueApply  = "apply"
	QueueBuild  = "build"
	QueueBoot   = "boot"
	QueueMore   = "more"
	QueueReport = "report"
)

// Engine runs the stage jobs on River, on either database: River's client
// is generic over its driver's transaction type (*sql.Tx on SQLite, pgx.Tx
// on Postgres), so the engine holds the one that fits and reaches it
// through client for what does not involve a transaction, and through
// the store's Tx (store.Tx.SQLite or .Postgres) for what does.
type Engine struct {
	db     *DB
	client riverClient
	sqlite *river.Client[*sql.Tx]
	pg     *river.Client[pgx.Tx]
	log    *slog.Logger
	cfg    EngineConfig

	// builds and boots bound this process's builds and boots across the
	// per-arch queues (River's MaxWorkers is per queue).
	builds, boots chan struct{}

	mu     sync.Mutex
	queues map[string]bool // the queues this process works
}

// riverClient is what River's clients share whatever their driver.
type riverClient interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	JobList(ctx context.Context, params *river.JobListParams) (*river.JobListResult, error)
	JobCancel(ctx context.Context, jobID int64) (*rivertype.JobRow, error)
}

// EngineConfig sizes the queues.
type EngineConfig struct {
	// ID names the River client (River's default when empty).
	ID string
	// BootWorkers boot at once (default 1: boots that share the machine
	// disturb each other's timings; an evaluation's own boots always run
	// one after another, in their interleaving order).
	BootWorkers int
	// BuildWorkers build at once (default DefaultBuildWorkers). They
	// share one make -j budget (build.Budget): a build running alone
	// gets all of it, and builds beside it keep the cores busy through
	// each other's serial steps (checkout, configuration, the link), as
	// `patcheval lore --pipeline` builds an evaluation's kernels.
	BuildWorkers int
	// Grace is how long Stop lets running jobs finish before it cancels
	// them (they are then retried on the next start).
	Grace time.Duration
	// Logger gets River's own warnings (default: discard below warn).
	Logger *slog.Logger
	// Capabilities choose the queues this process works (Queues). With
	// AnySSH it also works every boot-ssh-<host> queue a job of its own
	// is inserted into (the embedded default owns every target).
	Capabilities Capabilities
	AnySSH       bool
	// Queues, when set, are the queues worked instead of the
	// capabilities' (`watch run-now` and `watch daemon` work only the
	// watch queue). InsertOnly works none: the client inserts and lists
	// jobs for the serve that works them.
	Queues     []string
	InsertOnly bool
}

// DefaultBuildWorkers is how many kernels a process builds at once by
// default: the kernels of a pipeline (up to four), like runner.Run. More
// do not use more cores (the -j budget bounds them), only more disk for
// their work trees.
const DefaultBuildWorkers = 4

// FetchPoll is how often each queue looks for jobs besides River's
// insert notifications (a fallback: see newEngine).
const FetchPoll = 5 * time.Second

// FetchCooldown is the least time between two fetches of a queue
// (River's default is 100 ms): the next stage of an evaluation is
// inserted when the last one ends, and its fetch should not wait for the
// cooldown of the fetch that found the last one. Jobs are few and long,
// so more frequent fetches cost nothing measurable.
const FetchCooldown = 10 * time.Millisecond

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
		cfg.BuildWorkers = DefaultBuildWorkers
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{db: db, log: log, cfg: cfg, queues: map[string]bool{},
		builds: make(chan struct{}, cfg.BuildWorkers), boots: make(chan struct{}, cfg.BootWorkers)}
	queues := map[string]river.QueueConfig{}
	names := cfg.Capabilities.Queues()
	if len(cfg.Queues) > 0 {
		names = cfg.Queues
	}
	for _, q := range names {
		queues[q] = e.queueConfig(q)
		e.queues[q] = true
	}
	if cfg.InsertOnly {
		queues, workers, e.queues = nil, nil, map[string]bool{}
	} else if len(queues) == 0 {
		return nil, fail.Inputf("this process can run no stage: no toolchain, QEMU or SSH target found, and not the coordinator")
	}
	rc := &river.Config{
		ID:      cfg.ID,
		Queues:  queues,
		Workers: workers,
		// Stages take minutes (a cold kernel build, tens of boots): no
		// per-job timeout; cancellation and shutdown cancel through ctx.
		JobTimeout: -1,
		// A job still "running" this long after it started belongs to a
		// worker that died. The service finds those sooner (orphans.go:
		// at start on SQLite, by presence locks on Postgres); this is
		// the last resort.
		RescueStuckJobsAfter: 6 * time.Hour,
		// Finished jobs stay a week for the queue page.
		CompletedJobRetentionPeriod: 7 * 24 * time.Hour,
		CancelledJobRetentionPeriod: 7 * 24 * time.Hour,
		DiscardedJobRetentionPeriod: 30 * 24 * time.Hour,
		// A job inserted by any process wakes the producers of its
		// queue at once: River's insert notifications (LISTEN/NOTIFY on
		// Postgres, the river_notification outbox its listener polls
		// every 50 ms on SQLite) and its scheduler's for retried jobs.
		// The fetch poll is only the fallback, and each poll costs a
		// query per queue (ten queues by default, and on SQLite a
		// statement parse each): at 500 ms it alone used ~3% of a core
		// while idle, CPU that the boots' QEMU (deterministic, so its
		// wall time is its CPU time) lost on a busy machine.
		FetchPollInterval: FetchPoll,
		FetchCooldown:     FetchCooldown,
		SoftStopTimeout:   cfg.Grace,
		MaxAttempts:       5,
		Logger:            log,
	}
	var err error
	if db.pgDriver != nil {
		e.pg, err = river.NewClient(db.pgDriver, rc)
		e.client = e.pg
	} else {
		e.sqlite, err = river.NewClient(db.sqliteDriver, rc)
		e.client = e.sqlite
	}
	if err != nil {
		return nil, fail.Infraf("river: %w", err)
	}
	return e, nil
}

// queueConfig sizes queue q: builds and boots by the configuration (and
// the process-wide slots, see slot), the coordinator's stages two at once.
func (e *Engine) queueConfig(q string) river.QueueConfig {
	switch {
	case strings.HasPrefix(q, QueueBuild+"-"):
		return river.QueueConfig{MaxWorkers: e.cfg.BuildWorkers}
	case strings.HasPrefix(q, QueueBoot+"-"):
		return river.QueueConfig{MaxWorkers: e.cfg.BootWorkers}
	case q == QueueWatch, q == QueueSeries:
		// Re-tests, per-patch runs and bisection steps build and boot
		// inside the job: one at a time per queue.
		return river.QueueConfig{MaxWorkers: 1}
	}
	return river.QueueConfig{MaxWorkers: 2}
}

// slot takes one of this process's build or boot slots (kind "build" or
// "boot"; other kinds need none) until release is called: builds share
// one -j budget and boots must not disturb each other, whichever arch's
// queue they came from.
func (e *Engine) slot(ctx context.Context, kind string) (release func(), err error) {
	var c chan struct{}
	switch kind {
	case BuildArgs{}.Kind():
		c = e.builds
	case BootArgs{}.Kind():
		c = e.boots
	default:
		return func() {}, nil
	}
	select {
	case c <- struct{}{}:
		return func() { <-c }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Works reports whether this process works queue q.
func (e *Engine) Works(q string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.queues[q]
}

// WorkedQueues are the queues this process works, sorted.
func (e *Engine) WorkedQueues() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for q := range e.queues {
		out = append(out, q)
	}
	slices.Sort(out)
	return out
}

// adopt starts working the boot-ssh-<host> queues of params that this
// process does not work yet, when it owns every SSH target (AnySSH).
func (e *Engine) adopt(params []river.InsertManyParams) error {
	if !e.cfg.AnySSH {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range params {
		q := p.InsertOpts.Queue
		if e.queues[q] || !strings.HasPrefix(q, QueueBoot+"-ssh-") {
			continue
		}
		if err := e.queueBundle().Add(q, e.queueConfig(q)); err != nil {
			return fail.Infraf("river: working queue %s: %w", q, err)
		}
		e.queues[q] = true
	}
	return nil
}

func (e *Engine) queueBundle() *river.QueueBundle {
	if e.pg != nil {
		return e.pg.Queues()
	}
	return e.sqlite.Queues()
}

// insertManyTx inserts jobs in tx.
func (e *Engine) insertManyTx(ctx context.Context, tx *store.Tx, params []river.InsertManyParams) error {
	if err := e.adopt(params); err != nil {
		return err
	}
	var err error
	if e.pg != nil {
		_, err = e.pg.InsertManyTx(ctx, tx.Postgres(), params)
	} else {
		_, err = e.sqlite.InsertManyTx(ctx, tx.SQLite(), params)
	}
	return err
}

// insertTx inserts one job in tx and returns its id (that of the
// existing job when it is a duplicate by its unique options).
func (e *Engine) insertTx(ctx context.Context, tx *store.Tx, p river.InsertManyParams) (int64, error) {
	var res *rivertype.JobInsertResult
	var err error
	if e.pg != nil {
		res, err = e.pg.InsertTx(ctx, tx.Postgres(), p.Args, p.InsertOpts)
	} else {
		res, err = e.sqlite.InsertTx(ctx, tx.SQLite(), p.Args, p.InsertOpts)
	}
	if err != nil {
		return 0, err
	}
	return res.Job.ID, nil
}

// jobListTx lists jobs in tx.
func (e *Engine) jobListTx(ctx context.Context, tx *store.Tx, params *river.JobListParams) (*river.JobListResult, error) {
	if e.pg != nil {
		return e.pg.JobListTx(ctx, tx.Postgres(), params)
	}
	return e.sqlite.JobListTx(ctx, tx.SQLite(), params)
}

// completeTx marks job completed in tx.
func completeTx[T river.JobArgs](ctx context.Context, tx *store.Tx, job *river.Job[T]) error {
	var err error
	if ptx := tx.Postgres(); ptx != nil {
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, ptx, job)
	} else {
		_, err = river.JobCompleteTx[*riversqlite.Driver](ctx, tx.SQLite(), job)
	}
	return err
}

// Jobs lists River jobs, newest first, in the given states (all when
// none) and, when evalID > 0, of that evaluation only.
func (e *Engine) Jobs(ctx context.Context, evalID int64, limit int, states ...rivertype.JobState) ([]*rivertype.JobRow, error) {
	res, err := e.client.JobList(ctx, e.jobsParams(evalID, limit, states))
	if err != nil {
		return nil, fail.Infraf("river: listing jobs: %w", err)
	}
	return res.Jobs, nil
}

// jobsTx is Jobs in tx.
func (e *Engine) jobsTx(ctx context.Context, tx *store.Tx, evalID int64, limit int, states ...rivertype.JobState) ([]*rivertype.JobRow, error) {
	res, err := e.jobListTx(ctx, tx, e.jobsParams(evalID, limit, states))
	if err != nil {
		return nil, fail.Infraf("river: listing jobs: %w", err)
	}
	return res.Jobs, nil
}

// jobsParams are Jobs' list parameters.
func (e *Engine) jobsParams(evalID int64, limit int, states []rivertype.JobState) *river.JobListParams {
	p := river.NewJobListParams().OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(max(1, limit))
	if len(states) > 0 {
		p = p.States(states...)
		if finalized(states) && evalID == 0 {
			// Newest by when they ended, which River's index on
			// (state, finalized_at) gives in order: by id, every
			// completed job kept would be read and sorted.
			p = p.OrderBy(river.JobListOrderByFinalizedAt, river.SortOrderDesc)
		}
	}
	if evalID > 0 {
		p = e.evalJobs(p, evalID)
	}
	return p
}

// JobCounts counts River's jobs by queue and state (an index-only scan
// of River's fetch index, not the jobs themselves).
func (e *Engine) JobCounts(ctx context.Context) (map[string]map[rivertype.JobState]int, error) {
	q := `SELECT queue, state, COUNT(*) FROM river_job GROUP BY queue, state`
	if e.pg != nil {
		q = `SELECT queue, state::text, COUNT(*) FROM river_job GROUP BY queue, state`
	}
	rows, err := e.db.Store.Query(ctx, q)
	if err != nil {
		return nil, fail.Infraf("river: counting jobs: %w", err)
	}
	defer rows.Close()
	out := map[string]map[rivertype.JobState]int{}
	for rows.Next() {
		var queue, state string
		var n int
		if err := rows.Scan(&queue, &state, &n); err != nil {
			return nil, fail.Infraf("river: counting jobs: %w", err)
		}
		if out[queue] == nil {
			out[queue] = map[rivertype.JobState]int{}
		}
		out[queue][rivertype.JobState(state)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fail.Infraf("river: counting jobs: %w", err)
	}
	return out, nil
}

// finalized reports whether every state of states is final.
func finalized(states []rivertype.JobState) bool {
	for _, s := range states {
		switch s {
		case rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded:
		default:
			return false
		}
	}
	return true
}

// RetriedJobs lists completed jobs that needed more than one attempt,
// newest first (found through riverJobIndexes: they are few among
// many).
func (e *Engine) RetriedJobs(ctx context.Context, limit int) ([]*rivertype.JobRow, error) {
	p := river.NewJobListParams().States(rivertype.JobStateCompleted).Where("attempt > 1").
		OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(max(1, limit))
	res, err := e.client.JobList(ctx, p)
	if err != nil {
		return nil, fail.Infraf("river: listing retried jobs: %w", err)
	}
	return res.Jobs, nil
}

// evalJobs narrows p to evaluation evalID's jobs: those carrying its tag
// (a notify job names the evaluation but has no tag, so cancelling the
// evaluation leaves it alone), found through the index on the
// evaluation_id of their arguments (riverJobIndexes).
func (e *Engine) evalJobs(p *river.JobListParams, evalID int64) *river.JobListParams {
	var id any = evalID
	if e.pg != nil {
		id = strconv.FormatInt(evalID, 10) // ->> gives text on Postgres
	}
	return p.TagsAll(evalTag(evalID)).Where("args ->> 'evaluation_id' = @evaluation_id", river.NamedArgs{"evaluation_id": id})
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
//
// On Postgres a server that cannot be reached at that moment (restarting)
// is waited for, backing off, for up to store.ReconnectFor.
func (e *Engine) Start(ctx context.Context) error {
	deadline := time.Now().Add(store.ReconnectFor)
	wait := 100 * time.Millisecond
	for {
		err := e.client.Start(ctx)
		if err == nil {
			return nil
		}
		if e.pg == nil || !store.Unreachable(err) || time.Now().After(deadline) {
			return fail.Infraf("river: starting: %w", err)
		}
		e.log.Warn("river: starting: the database cannot be reached; trying again", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return fail.Infraf("river: starting: %w", err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
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
