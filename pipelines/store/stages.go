package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/fail"
)

// migrationStages holds what an evaluation's stages need to run from its
// id alone (the inputs, the applied series) and the stage timings, so that
// each stage can run later, in another process (pipelines/runner); and
// the perf events a run's guest counts (Environment.PerfEvents).
const migrationStages = `
CREATE TABLE evaluation_inputs (
	evaluation_id INTEGER PRIMARY KEY REFERENCES evaluations(id) ON DELETE CASCADE,
	inputs        TEXT NOT NULL,
	series_mbox   BLOB
);
CREATE TABLE applied (
	evaluation_id INTEGER PRIMARY KEY REFERENCES evaluations(id) ON DELETE CASCADE,
	head          TEXT NOT NULL DEFAULT '',
	tree          TEXT NOT NULL DEFAULT '',
	branch        TEXT NOT NULL DEFAULT '',
	created       TEXT NOT NULL
);
CREATE TABLE applied_commits (
	evaluation_id INTEGER NOT NULL REFERENCES evaluations(id) ON DELETE CASCADE,
	seq           INTEGER NOT NULL,
	hash          TEXT NOT NULL,
	tree          TEXT NOT NULL DEFAULT '',
	subject       TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (evaluation_id, seq)
);
CREATE TABLE stage_timings (
	evaluation_id INTEGER NOT NULL REFERENCES evaluations(id) ON DELETE CASCADE,
	stage         TEXT NOT NULL,
	duration_ns   INTEGER NOT NULL DEFAULT 0,
	note          TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (evaluation_id, stage)
);
ALTER TABLE runs ADD COLUMN perf_events TEXT NOT NULL DEFAULT '';
`

// Tx runs fn in one database transaction: everything fn writes (with the
// *Tx methods, or a queue's own InsertTx on the same database through
// tx.SQLite or tx.Postgres) commits together or not at all.
//
// On Postgres, a transaction that fails because the server went away
// (restart, failover) before its commit was rolled back by the server:
// Tx runs fn again on a new connection, backing off, for up to
// ReconnectFor. fn must therefore do nothing outside tx that it cannot
// do twice. A commit that fails for the same reason is not repeated (it
// may have committed): its error is returned.
func (s *Store) Tx(ctx context.Context, fn func(tx *Tx) error) error {
	deadline := time.Now().Add(s.reconnectFor)
	wait := 50 * time.Millisecond
	for {
		retry, err := s.tx(ctx, fn)
		if err == nil || !retry || s.pool == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// tx runs fn in one transaction; retry says whether it failed before its
// commit because the server could not be reached.
func (s *Store) tx(ctx context.Context, fn func(tx *Tx) error) (retry bool, err error) {
	tx, err := s.begin(ctx)
	if err != nil {
		return Unreachable(err), fail.Infraf("store: %s: %w", s.where, err)
	}
	defer tx.rollback()
	if err := fn(tx); err != nil {
		return Unreachable(err), err
	}
	if err := tx.commit(ctx); err != nil {
		return false, fail.Infraf("store: %s: commit: %w", s.where, err)
	}
	return false, nil
}

// SetInputsTx stores what an evaluation's stages need to run from its id
// alone: inputs (a JSON document the runner owns) and the series' thread
// as an mbox (nil without one). A second call replaces both.
func (s *Store) SetInputsTx(tx *Tx, evalID int64, inputs, seriesMbox []byte) error {
	_, err := tx.Exec(`INSERT INTO evaluation_inputs (evaluation_id, inputs, series_mbox) VALUES (?, ?, ?)
		ON CONFLICT(evaluation_id) DO UPDATE SET inputs = excluded.inputs, series_mbox = excluded.series_mbox`,
		evalID, string(inputs), seriesMbox)
	if err != nil {
		return fail.Infraf("store: %s: inputs of evaluation %d: %w", s.where, evalID, err)
	}
	return nil
}

// Inputs returns what SetInputsTx stored. An evaluation without inputs
// (stored by `patcheval run`, or by a patcheval before schema 2) is a
// bad-input error.
func (s *Store) Inputs(evalID int64) (inputs, seriesMbox []byte, err error) {
	var in string
	err = s.db.QueryRow(`SELECT inputs, series_mbox FROM evaluation_inputs WHERE evaluation_id = ?`, evalID).Scan(&in, &seriesMbox)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fail.Inputf("store: %s: evaluation %d has no stored inputs (not submitted by a pipeline runner)", s.where, evalID)
	}
	if err != nil {
		return nil, nil, fail.Infraf("store: %s: inputs of evaluation %d: %w", s.where, evalID, err)
	}
	return []byte(in), seriesMbox, nil
}

// migrationResolvedSeries keeps, beside an evaluation's thread, its
// series as resolved from it when the evaluation was submitted (a JSON
// document the runner owns), so that the later stages read it instead of
// resolving the thread again; empty for an evaluation stored before it.
const migrationResolvedSeries = `ALTER TABLE evaluation_inputs ADD COLUMN resolved_series TEXT NOT NULL DEFAULT '';`

// SetResolvedSeriesTx stores evaluation id's series as resolved from the
// thread SetInputsTx stored (nil: none); it follows SetInputsTx, which
// leaves it as it is.
func (s *Store) SetResolvedSeriesTx(tx *Tx, evalID int64, series []byte) error {
	res, err := tx.Exec(`UPDATE evaluation_inputs SET resolved_series = ? WHERE evaluation_id = ?`, string(series), evalID)
	if err != nil {
		return fail.Infraf("store: %s: resolved series of evaluation %d: %w", s.where, evalID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fail.Infraf("store: %s: resolved series of evaluation %d: no stored inputs", s.where, evalID)
	}
	return nil
}

// ResolvedSeries returns what SetResolvedSeriesTx stored: nil when
// nothing was (an evaluation stored before schema 14, or one without a
// series), an input error like Inputs' without stored inputs.
func (s *Store) ResolvedSeries(evalID int64) ([]byte, error) {
	var series string
	err := s.db.QueryRow(`SELECT resolved_series FROM evaluation_inputs WHERE evaluation_id = ?`, evalID).Scan(&series)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fail.Inputf("store: %s: evaluation %d has no stored inputs (not submitted by a pipeline runner)", s.where, evalID)
	}
	if err != nil {
		return nil, fail.Infraf("store: %s: resolved series of evaluation %d: %w", s.where, evalID, err)
	}
	if series == "" {
		return nil, nil
	}
	return []byte(series), nil
}

// Applied is the series as applied onto the base: the branch head, its
// tree and the commits in order. Head is "" when the evaluation applies no
// series (its kernels build the base).
type Applied struct {
	Head    string          `json:"head,omitempty"`
	Tree    string          `json:"tree,omitempty"`
	Branch  string          `json:"branch,omitempty"`
	Commits []AppliedCommit `json:"commits,omitempty"`
}

// AppliedCommit is one commit the series became.
type AppliedCommit struct {
	Hash    string `json:"hash"`
	Tree    string `json:"tree,omitempty"`
	Subject string `json:"subject"`
}

// RecordAppliedTx records evaluation evalID's applied series (replacing a
// previous record, and an earlier apply failure).
func (s *Store) RecordAppliedTx(tx *Tx, evalID int64, a Applied) error {
	if _, err := tx.Exec(`INSERT INTO applied (evaluation_id, head, tree, branch, created) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(evaluation_id) DO UPDATE SET head = excluded.head, tree = excluded.tree, branch = excluded.branch,
		created = excluded.created`, evalID, a.Head, a.Tree, a.Branch, fmtTime(time.Now())); err != nil {
		return fail.Infraf("store: %s: applied series of evaluation %d: %w", s.where, evalID, err)
	}
	if _, err := tx.Exec(`DELETE FROM apply_failures WHERE evaluation_id = ?`, evalID); err != nil {
		return fail.Infraf("store: %s: apply failure of evaluation %d: %w", s.where, evalID, err)
	}
	if _, err := tx.Exec(`DELETE FROM applied_commits WHERE evaluation_id = ?`, evalID); err != nil {
		return fail.Infraf("store: %s: applied series of evaluation %d: %w", s.where, evalID, err)
	}
	for i, c := range a.Commits {
		if _, err := tx.Exec(`INSERT INTO applied_commits (evaluation_id, seq, hash, tree, subject) VALUES (?, ?, ?, ?, ?)`,
			evalID, i, c.Hash, c.Tree, c.Subject); err != nil {
			return fail.Infraf("store: %s: applied commit %d of evaluation %d: %w", s.where, i, evalID, err)
		}
	}
	return nil
}

// AppliedOf returns evaluation evalID's applied series, nil when it was
// not applied yet.
func (s *Store) AppliedOf(evalID int64) (*Applied, error) {
	var a Applied
	err := s.db.QueryRow(`SELECT head, tree, branch FROM applied WHERE evaluation_id = ?`, evalID).Scan(&a.Head, &a.Tree, &a.Branch)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fail.Infraf("store: %s: applied series of evaluation %d: %w", s.where, evalID, err)
	}
	rows, err := s.db.Query(`SELECT hash, tree, subject FROM applied_commits WHERE evaluation_id = ? ORDER BY seq`, evalID)
	if err != nil {
		return nil, fail.Infraf("store: %s: applied commits of evaluation %d: %w", s.where, evalID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var c AppliedCommit
		if err := rows.Scan(&c.Hash, &c.Tree, &c.Subject); err != nil {
			return nil, fail.Infraf("store: %s: %w", s.where, err)
		}
		a.Commits = append(a.Commits, c)
	}
	return &a, rows.Err()
}

// Timing is the time spent in one stage of an evaluation, over every
// process that worked on it: Duration is wall time (jobs of the stage that
// ran at the same time, such as kernels built together, count once), Busy
// the jobs' times added up when that is more.
type Timing struct {
	Stage    string        `json:"stage"`
	Duration time.Duration `json:"duration"`
	Busy     time.Duration `json:"busy,omitempty"`
	Note     string        `json:"note,omitempty"`
}

// migrationStageSpans keeps when each job of a stage ran, so that a
// stage's time is the wall time its jobs took together: kernels built at
// once under one -j budget, or boots on several slots, had their times
// added up (three kernels built side by side in 34 minutes read "build
// 1h42m").
const migrationStageSpans = `
CREATE TABLE stage_spans (
	evaluation_id INTEGER NOT NULL REFERENCES evaluations(id) ON DELETE CASCADE,
	stage         TEXT NOT NULL,
	started_ns    INTEGER NOT NULL,
	ended_ns      INTEGER NOT NULL
);
CREATE INDEX stage_spans_evaluation ON stage_spans(evaluation_id);
`

// AddSpanTx records a job of stage in evaluation evalID that ran for d
// from start, for stages whose jobs may run at the same time: its time is
// added (AddTimingTx) and its span kept, so that Timings counts
// overlapping jobs once.
func (s *Store) AddSpanTx(tx *Tx, evalID int64, stage string, start time.Time, d time.Duration, note string) error {
	if err := s.AddTimingTx(tx, evalID, stage, d, note); err != nil {
		return err
	}
	_, err := tx.Exec(`INSERT INTO stage_spans (evaluation_id, stage, started_ns, ended_ns) VALUES (?, ?, ?, ?)`,
		evalID, stage, start.UnixNano(), start.Add(d).UnixNano())
	if err != nil {
		return fail.Infraf("store: %s: span of %s in evaluation %d: %w", s.where, stage, evalID, err)
	}
	return nil
}

// AddTimingTx adds d to stage's time in evaluation evalID; a non-empty
// note replaces the stage's note.
func (s *Store) AddTimingTx(tx *Tx, evalID int64, stage string, d time.Duration, note string) error {
	_, err := tx.Exec(`INSERT INTO stage_timings (evaluation_id, stage, duration_ns, note) VALUES (?, ?, ?, ?)
		ON CONFLICT(evaluation_id, stage) DO UPDATE SET duration_ns = stage_timings.duration_ns + excluded.duration_ns,
		note = CASE WHEN excluded.note = '' THEN stage_timings.note ELSE excluded.note END`, evalID, stage, int64(d), note)
	if err != nil {
		return fail.Infraf("store: %s: timing %s of evaluation %d: %w", s.where, stage, evalID, err)
	}
	return nil
}

// Timings returns evaluation evalID's stage timings by stage name. The
// added-up times and the spans are read by one statement, so a stage that
// records both in one transaction is never seen half-recorded.
func (s *Store) Timings(evalID int64) (map[string]Timing, error) {
	rows, err := s.db.Query(`SELECT 0, stage, duration_ns, 0, note FROM stage_timings WHERE evaluation_id = ?
		UNION ALL SELECT 1, stage, started_ns, ended_ns, '' FROM stage_spans WHERE evaluation_id = ?
		ORDER BY 1, 2, 3`, evalID, evalID)
	if err != nil {
		return nil, fail.Infraf("store: %s: timings of evaluation %d: %w", s.where, evalID, err)
	}
	defer rows.Close()
	out := map[string]Timing{}
	byStage := map[string][][2]int64{}
	for rows.Next() {
		var kind int
		var stage, note string
		var a, b int64
		if err := rows.Scan(&kind, &stage, &a, &b, &note); err != nil {
			return nil, fail.Infraf("store: %s: %w", s.where, err)
		}
		if kind == 0 {
			out[stage] = Timing{Stage: stage, Duration: time.Duration(a), Note: note}
		} else {
			byStage[stage] = append(byStage[stage], [2]int64{a, b})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fail.Infraf("store: %s: %w", s.where, err)
	}
	for stage, sp := range byStage {
		t, ok := out[stage]
		if !ok {
			continue
		}
		wall, sum := spanUnion(sp)
		// Time added without a span (by a patcheval before spans were
		// kept, resuming this evaluation) counts as it was.
		if rest := t.Duration - sum; rest > 0 {
			wall += rest
		}
		if wall < t.Duration {
			t.Busy, t.Duration = t.Duration, wall
		}
		out[stage] = t
	}
	return out, nil
}

// spanUnion is the time covered by spans sorted by start (each counted
// once where they overlap) and their lengths added up.
func spanUnion(spans [][2]int64) (wall, sum time.Duration) {
	var curA, curB int64
	open := false
	for _, s := range spans {
		sum += time.Duration(s[1] - s[0])
		switch {
		case !open:
			curA, curB, open = s[0], s[1], true
		case s[0] > curB:
			wall += time.Duration(curB - curA)
			curA, curB = s[0], s[1]
		case s[1] > curB:
			curB = s[1]
		}
	}
	if open {
		wall += time.Duration(curB - curA)
	}
	return wall, sum
}

// StatusOf is the status a boot that ended with err is recorded with: ok,
// failed (the kernel under test failed) or infra (a resume tries again).
func StatusOf(err error) RunStatus {
	switch {
	case err == nil:
		return RunOK
	case fail.KindOf(err) == fail.KindInfra:
		return RunInfra
	}
	return RunFailed
}

// BootRecorder records the boots of evaluation EvalID: evaluate.Run's
// Recorder, the one way `patcheval run` and the pipeline runner keep their
// boots. A boot is begun (a "running" run) before it starts and finished in
// one transaction with its status (StatusOf its error), environment,
// console and samples.
type BootRecorder struct {
	Store  *Store
	EvalID int64
	// Also, when set, runs inside the transaction that finishes a boot,
	// after the run's own writes (the runner's timings and next stage).
	Also func(ctx context.Context, tx *Tx, rec evaluate.BootRecord) error
}

// Done is the evaluation's finished boots (FinishedRuns).
func (r *BootRecorder) Done(context.Context) (map[evaluate.BootKey]bool, error) {
	return r.Store.FinishedRuns(r.EvalID)
}

// Begin records that boot key starts now and returns its run's id.
func (r *BootRecorder) Begin(_ context.Context, key evaluate.BootKey) (int64, error) {
	return r.Store.BeginRun(r.EvalID, key.Variant, key.Boot)
}

// Finish records the end of run id from the boot's record, and Also, in
// one transaction. A boot that succeeded is recorded even when ctx was
// cancelled meanwhile (SIGINT after the work is done must not throw it
// away); Also still gets ctx, so a cancelled queue job enqueues nothing and
// its failing insert rolls the record back with it.
func (r *BootRecorder) Finish(ctx context.Context, id int64, rec evaluate.BootRecord) error {
	txCtx := ctx
	if rec.Err == nil {
		txCtx = context.WithoutCancel(ctx)
	}
	return r.Store.Tx(txCtx, func(tx *Tx) error {
		if err := r.Store.finishBootTx(tx, id, rec); err != nil {
			return err
		}
		if r.Also == nil {
			return nil
		}
		return r.Also(ctx, tx, rec)
	})
}

// finishBootTx records the end of run runID from a boot's record: the
// BootError's console when the target returned none.
func (s *Store) finishBootTx(tx *Tx, runID int64, rec evaluate.BootRecord) error {
	var env evaluate.Environment
	var console []byte
	if rec.Result != nil {
		env, console = rec.Result.Env, rec.Result.Console
	}
	var be *evaluate.BootError
	if console == nil && errors.As(rec.Err, &be) {
		console = be.Console
	}
	return s.FinishRunTx(tx, runID, StatusOf(rec.Err), env, console, rec.Samples, rec.Err)
}

// Interrupted begins the why of every InterruptRuns: it tells a run whose
// process died from one whose machine failed (both are RunInfra).
const Interrupted = "interrupted: "

// InterruptRuns ends the runs of boot (variant, boot) of evaluation evalID
// still marked running, whose process died (kill -9, power loss, a worker
// lost), as infrastructure failures saying why (after Interrupted): the
// dashboard no longer shows them running, and they never count as
// finished, so the boot is redone. It returns how many it ended.
func (s *Store) InterruptRuns(evalID int64, variant string, boot int, why string) (int64, error) {
	return s.interruptRuns(s.db, evalID, variant, boot, why)
}

// InterruptRunsTx is InterruptRuns in tx (a job rescued in the same
// transaction).
func (s *Store) InterruptRunsTx(tx *Tx, evalID int64, variant string, boot int, why string) (int64, error) {
	return s.interruptRuns(tx, evalID, variant, boot, why)
}

func (s *Store) interruptRuns(q querier, evalID int64, variant string, boot int, why string) (int64, error) {
	res, err := q.Exec(`UPDATE runs SET status = ?, finished = ?, error_kind = ?, error_text = ?
		WHERE evaluation_id = ? AND variant = ? AND boot = ? AND status = ?`,
		string(RunInfra), fmtTime(time.Now()), fail.KindInfra.String(), why, evalID, variant, boot, string(RunRunning))
	if err != nil {
		return 0, fail.Infraf("store: %s: interrupted runs of evaluation %d: %w", s.where, evalID, err)
	}
	return res.RowsAffected()
}
