// Package store keeps every evaluation in a database: the evaluations
// (one pipeline applied to one Series on one tree), the kernel builds per
// Variant, the runs (one boot of one Variant's kernel, with its
// Environment and console log) and every Sample a run produced.
//
// By default the database is an embedded SQLite file, <state
// dir>/patcheval.db (see internal/xdg), opened in WAL mode with a busy
// timeout and foreign keys on, so that `patcheval runs` can read while an
// evaluation writes. Open also takes a postgres:// URL (pgx): the same
// schema and the same statements, with the few differences in db.go; a
// farm's processes share one Postgres database.
//
// Crash safety: a run is recorded in two steps. BeginRun inserts a row in
// state "running"; FinishRun writes the run's status, Environment, console
// log and all of its samples in ONE transaction. A process killed with
// SIGKILL therefore loses at most the run in flight: every finished run and
// its samples survive, and FinishedRuns (the resume set) never counts a
// half-started run. Re-running the same command finds the evaluation again
// by its key (CreateOrResumeEvaluation) and skips the finished runs.
//
// The schema is versioned: migrations is an ordered list applied in one
// transaction each, recorded in the schema_version table; the same list
// serves both databases (pgSchema maps its types for Postgres).
package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/redact"
	"github.com/patcheval/patcheval/internal/xdg"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// FileName is the database's file name inside the state directory.
const FileName = "patcheval.db"

// DefaultPath is <state dir>/patcheval.db; PATCHEVAL_STATE_DIR (then
// XDG_DATA_HOME) moves the state directory.
func DefaultPath() string { return filepath.Join(xdg.StateDir(), FileName) }

// Store is an open database. It is safe for concurrent use.
type Store struct {
	db querier
	d  dialect
	// path is what Open was given (a file, or a URL with its password, to
	// open it again); where names it in messages (no password).
	path, where string
	// sqlDB (SQLite) or pool (Postgres) is the database.
	sqlDB        *sql.DB
	pool         *pgxpool.Pool
	reconnectFor time.Duration
}

// Evaluation statuses.
const (
	StatusRunning = "running"
	StatusDone    = "done"
	StatusFailed  = "failed"
)

// RunStatus is the state of one run.
type RunStatus string

const (
	// RunRunning: BeginRun was called, FinishRun not (yet). A run left in
	// this state by a crash is not finished and is redone on resume.
	RunRunning RunStatus = "running"
	// RunOK: the boot and every benchmark succeeded.
	RunOK RunStatus = "ok"
	// RunFailed: the kernel under test failed (panic, agent failure that is
	// the kernel's fault). An evaluated result: counts as finished.
	RunFailed RunStatus = "failed"
	// RunInfra: the machine failed (QEMU killed, hang, ssh lost). Not
	// counted as finished: a resume tries it again.
	RunInfra RunStatus = "infra"
)

// Finished reports whether a run in this state counts as done for resume.
func (s RunStatus) Finished() bool { return s == RunOK || s == RunFailed }

func (s RunStatus) valid() bool {
	switch s {
	case RunRunning, RunOK, RunFailed, RunInfra:
		return true
	}
	return false
}

// EvaluationMeta describes what an evaluation evaluates.
type EvaluationMeta struct {
	Pipeline      string `json:"pipeline"`
	SeriesMsgID   string `json:"series_msgid,omitempty"`
	SeriesTitle   string `json:"series_title,omitempty"`
	SeriesVersion int    `json:"series_version,omitempty"`
	Tree          string `json:"tree,omitempty"`
	Base          string `json:"base,omitempty"`
}

// Evaluation is one stored evaluation.
type Evaluation struct {
	ID  int64  `json:"id"`
	Key string `json:"key"`
	EvaluationMeta
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Status  string    `json:"status"`
	// Counts, filled by ListEvaluations and Evaluation.
	Builds       int `json:"builds"`
	Runs         int `json:"runs"`
	FinishedRuns int `json:"finished_runs"`
	Samples      int `json:"samples"`
}

// Build is one kernel build of an evaluation (one Variant on one arch; a
// build shared by several runtime-only variants is recorded once per
// variant, or once under the name of the variant that owns it).
type Build struct {
	ID           int64           `json:"id"`
	EvaluationID int64           `json:"evaluation_id"`
	Variant      string          `json:"variant"`
	Arch         string          `json:"arch"`
	Commit       string          `json:"commit,omitempty"`
	ConfigHash   string          `json:"config_hash,omitempty"`
	ArtifactDir  string          `json:"artifact_dir,omitempty"`
	Status       string          `json:"status"` // "ok", "failed", "infra", ...
	ErrorKind    string          `json:"error_kind,omitempty"`
	ErrorText    string          `json:"error_text,omitempty"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	Created      time.Time       `json:"created"`
}

// Run is one stored run (one boot of one Variant).
type Run struct {
	ID           int64                `json:"id"`
	EvaluationID int64                `json:"evaluation_id"`
	Variant      string               `json:"variant"`
	Boot         int                  `json:"boot"`
	Status       RunStatus            `json:"status"`
	Env          evaluate.Environment `json:"environment"`
	Started      time.Time            `json:"started"`
	Finished     time.Time            `json:"finished,omitzero"`
	ErrorKind    string               `json:"error_kind,omitempty"`
	ErrorText    string               `json:"error_text,omitempty"`
	Samples      int                  `json:"samples"`
	ConsoleBytes int                  `json:"console_bytes"`
}

// Key is a content hash over parts (length-prefixed, so that ("ab","c")
// and ("a","bc") differ): use it for the evaluation key, e.g.
// Key(pipelineHash, seriesMsgID, seriesVersion, treeCommit).
func Key(parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		io.WriteString(h, p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Open opens the database at path and brings its schema up to date: a
// SQLite file (created, with its directories, when missing; "" means
// DefaultPath()) or a Postgres database named by a postgres:// URL (see
// IsPostgres; the database must exist).
//
// path is a --db value as the user gave it (ParseLocator: a postgres
// key=value string opens Postgres, sqlite:PATH the file PATH, anything
// ambiguous is a bad-input error that shows no password).
func Open(path string) (*Store, error) {
	loc, err := ParseLocator(path)
	if err != nil {
		return nil, err
	}
	if IsPostgres(loc) {
		return openPostgres(context.Background(), loc)
	}
	return OpenSQLite(loc)
}

// OpenSQLite opens the SQLite file at path as it is (no ParseLocator:
// its name may hold '='); "" is DefaultPath().
func OpenSQLite(path string) (*Store, error) {
	if path == "" {
		path = DefaultPath()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fail.Infraf("store: creating the state directory for %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		return nil, fail.Infraf("store: opening %s: %w", path, err)
	}
	s := &Store{db: sqlQ{db}, d: sqliteDialect, path: path, where: path, sqlDB: db}
	if err := s.migrate(context.Background()); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// openPostgres opens the Postgres database at URL u with a pgx pool.
func openPostgres(ctx context.Context, u string) (*Store, error) {
	where := Redact(u)
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		return nil, fail.Inputf("store: %s: %v", where, redactErr(err, u))
	}
	if !strings.Contains(u, "pool_max_conns") {
		// pgx's default (4 on a small machine) is too few once a job queue
		// shares the pool: River holds one for LISTEN and uses several
		// more while stages hold their transactions.
		cfg.MaxConns = 20
	}
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		// Every query here reads a few rows through an index. With
		// statistics gone stale (a table grown since autovacuum last
		// analysed it) Postgres can estimate one costly enough to
		// compile it first: 1 s of JIT for 18 ms of work (a dashboard
		// page of 50 evaluations of 1,000).
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fail.Infraf("store: %s: %w", where, err)
	}
	// Opening fails at once when the server cannot be reached (a command
	// says so instead of hanging); once open, the store reconnects.
	s := &Store{d: postgresDialect, path: u, where: where, pool: pool}
	s.db = pgQ{c: pool, pooled: true, s: s}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fail.Infraf("%s", redactErr(err, u))
	}
	s.reconnectFor = ReconnectFor
	return s, nil
}

// Redact is a database locator fit for messages: its passwords masked
// (internal/redact: a URL's user:PASSWORD@ and password parameters, a
// key=value string's password), a file path as it is.
func Redact(u string) string { return redact.String(u) }

// redactErr is err's text without the passwords of locator u.
func redactErr(err error, u string) string { return redact.Error(err.Error(), u) }

// DSN is the database/sql data source name (driver "sqlite") Open uses
// for path: WAL, a 10 s busy timeout, foreign keys, synchronous=FULL and
// BEGIN IMMEDIATE transactions. Another pool on the same file (River's job
// tables, in pipelines/service) opens it the same way, so that writers in
// different pools and processes wait for each other instead of failing.
func DSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	// FULL: a committed run survives power loss too, not only kill -9;
	// one fsync per finished run is cheap next to a kernel boot.
	q.Add("_pragma", "synchronous(FULL)")
	// IMMEDIATE: a transaction takes the write lock when it begins, so two
	// writers never deadlock upgrading read locks; the busy timeout queues
	// them.
	q.Set("_txlock", "immediate")
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Path is what Open was given (the SQLite file's path, or the Postgres
// URL with its password): Open(s.Path()) opens the same database.
func (s *Store) Path() string { return s.path }

// Where names the database in messages (a Postgres URL without its
// password).
func (s *Store) Where() string { return s.where }

// Close closes the database.
func (s *Store) Close() error {
	if s.pool != nil {
		s.pool.Close()
		return nil
	}
	return s.sqlDB.Close()
}

// migrations is the ordered schema history; migrations[i] brings the
// schema from version i to i+1. Never edit a released entry: append.
var migrations = []string{
	// 1: evaluations, builds, runs, samples.
	`
CREATE TABLE evaluations (
	id             INTEGER PRIMARY KEY,
	key            TEXT NOT NULL UNIQUE,
	pipeline       TEXT NOT NULL,
	series_msgid   TEXT NOT NULL DEFAULT '',
	series_title   TEXT NOT NULL DEFAULT '',
	series_version INTEGER NOT NULL DEFAULT 0,
	tree           TEXT NOT NULL DEFAULT '',
	base           TEXT NOT NULL DEFAULT '',
	created        TEXT NOT NULL,
	updated        TEXT NOT NULL,
	status         TEXT NOT NULL
);
CREATE TABLE builds (
	id            INTEGER PRIMARY KEY,
	evaluation_id INTEGER NOT NULL REFERENCES evaluations(id) ON DELETE CASCADE,
	variant       TEXT NOT NULL,
	arch          TEXT NOT NULL,
	commit_id     TEXT NOT NULL DEFAULT '',
	config_hash   TEXT NOT NULL DEFAULT '',
	artifact_dir  TEXT NOT NULL DEFAULT '',
	status        TEXT NOT NULL,
	error_kind    TEXT NOT NULL DEFAULT '',
	error_text    TEXT NOT NULL DEFAULT '',
	metadata      TEXT NOT NULL DEFAULT '',
	created       TEXT NOT NULL,
	UNIQUE (evaluation_id, variant, arch)
);
CREATE TABLE runs (
	id              INTEGER PRIMARY KEY,
	evaluation_id   INTEGER NOT NULL REFERENCES evaluations(id) ON DELETE CASCADE,
	variant         TEXT NOT NULL,
	boot            INTEGER NOT NULL,
	status          TEXT NOT NULL,
	kernel_release  TEXT NOT NULL DEFAULT '',
	config_hash     TEXT NOT NULL DEFAULT '',
	cmdline         TEXT NOT NULL DEFAULT '',
	target          TEXT NOT NULL DEFAULT '',
	qemu_args       TEXT NOT NULL DEFAULT '',
	host            TEXT NOT NULL DEFAULT '',
	agent_version   TEXT NOT NULL DEFAULT '',
	deterministic   INTEGER NOT NULL DEFAULT 0,
	kvm             INTEGER NOT NULL DEFAULT 0,
	started         TEXT NOT NULL,
	finished        TEXT NOT NULL DEFAULT '',
	error_kind      TEXT NOT NULL DEFAULT '',
	error_text      TEXT NOT NULL DEFAULT '',
	console         BLOB,
	console_format  TEXT NOT NULL DEFAULT '',
	console_bytes   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_evaluation ON runs(evaluation_id, variant, boot);
CREATE TABLE samples (
	id               INTEGER PRIMARY KEY,
	run_id           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	benchmark        TEXT NOT NULL,
	metric           TEXT NOT NULL,
	unit             TEXT NOT NULL DEFAULT '',
	value            REAL NOT NULL,
	higher_is_better INTEGER NOT NULL DEFAULT 0,
	iteration        INTEGER NOT NULL DEFAULT 0,
	extra            TEXT NOT NULL DEFAULT '',
	time             TEXT NOT NULL DEFAULT ''
);
CREATE INDEX samples_by_run ON samples(run_id);
`,
	// 2: watches (scheduled re-tests of a remote's tags), the tags each
	// saw with their evaluations, and the regression events between
	// consecutive tags (see watch.go).
	migrationWatches,
	// 3: the reporters' outbox: what each reporter posted or will post,
	// with its delivery state (see posts.go).
	migrationPosts,
	// 4: the list follower's cursors, messages and series (follow.go).
	migrationFollow,
	// 5: what an evaluation's stages need to run from its id alone, and
	// the perf events a run's guest counts (see stages.go,
	// pipelines/runner).
	migrationStages,
	// 6: the `#patcheval` commands read in replies to patcheval's
	// reports (see triage.go, pipelines/bots/follow).
	migrationTriage,
	// 7: why an evaluation's series did not apply, and the reply that
	// says so (see applyfail.go).
	migrationApplyFailures,
	// 8: the processes that work jobs and their heartbeats (see
	// workers.go, pipelines/service).
	migrationWorkers,
	// 9: bisections inside a series run as queue work (see
	// seriesbisect.go, pipelines/service).
	migrationSeriesBisections,
	// 10: when each job of a stage ran, for stages whose jobs run at the
	// same time (see stages.go).
	migrationStageSpans,
	// 11: a watch's opt-in to regzbot's commands in its drafts (see
	// watch.go).
	migrationWatchRegzbot,
	// 12: the build-id each run's kernel showed, and whether it was
	// verified (see buildid.go).
	migrationBuildID,
	// 13: a reported regression that a later tag showed gone (see
	// watch.go, SetEventFixed).
	migrationEventFixed,
	// 14: an evaluation's series as resolved when it was submitted,
	// beside its thread (see stages.go, pipelines/runner).
	migrationResolvedSeries,
	// 15: jobs that wait for an evaluation to end, queued by the
	// transaction that ends it (see waiters.go, pipelines/service).
	migrationWaiters,
}

// SchemaVersion is the schema version this code writes.
func SchemaVersion() int { return len(migrations) }

// migrationLock is the Postgres advisory lock key migrations hold, so
// that processes starting together migrate one after another.
const migrationLock = 0x7061746368657661 // "patcheva"

func (s *Store) migrate(ctx context.Context) error {
	if s.pool != nil {
		// Two processes starting at once: CREATE TABLE IF NOT EXISTS is not
		// safe to race on Postgres, so it waits for the lock too.
		err := s.Tx(ctx, func(tx *Tx) error {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, int64(migrationLock)); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)`)
			return err
		})
		if err != nil {
			return fail.Infraf("store: %s: creating schema_version: %w", s.where, err)
		}
	} else if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fail.Infraf("store: %s: creating schema_version: %w", s.where, err)
	}
	for {
		done := false
		err := s.Tx(ctx, func(tx *Tx) error {
			if s.pool != nil {
				if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, int64(migrationLock)); err != nil {
					return fail.Infraf("store: %s: %w", s.where, err)
				}
			}
			v, err := versionTx(ctx, tx)
			if err != nil {
				return fail.Infraf("store: %s: reading schema_version: %w", s.where, err)
			}
			if v > len(migrations) {
				return fail.Infraf("store: %s has schema version %d, newer than this patcheval knows (%d): upgrade patcheval or use another --db", s.where, v, len(migrations))
			}
			if v == len(migrations) {
				done = true
				return nil
			}
			m := migrations[v]
			if s.pool != nil {
				m = pgSchema(m)
			}
			if _, err := tx.ExecContext(ctx, m); err != nil {
				return fail.Infraf("store: %s: migration %d: %w", s.where, v+1, err)
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM schema_version`); err != nil {
				return fail.Infraf("store: %s: %w", s.where, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version(version) VALUES (?)`, v+1); err != nil {
				return fail.Infraf("store: %s: %w", s.where, err)
			}
			return nil
		})
		if err != nil || done {
			return err
		}
	}
}

func versionTx(ctx context.Context, tx *Tx) (int, error) {
	var v sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_version`).Scan(&v)
	if err != nil {
		return 0, err
	}
	return int(v.Int64), nil
}

// Version is the database's current schema version.
func (s *Store) Version() (int, error) {
	var v sql.NullInt64
	if err := s.db.QueryRow(`SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil {
		return 0, fail.Infraf("store: %s: %w", s.where, err)
	}
	return int(v.Int64), nil
}

const timeFormat = time.RFC3339Nano

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeFormat)
}

func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, _ := time.Parse(timeFormat, s)
	return t
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// CreateOrResumeEvaluation returns the evaluation stored under key,
// creating it with meta when there is none. resumed is true when it
// existed: the caller then skips the runs in FinishedRuns.
func (s *Store) CreateOrResumeEvaluation(key string, meta EvaluationMeta) (*Evaluation, bool, error) {
	var id int64
	var resumed bool
	err := s.Tx(context.Background(), func(tx *Tx) error {
		var err error
		id, resumed, err = s.CreateOrResumeEvaluationTx(tx, key, meta)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	e, err := s.Evaluation(id)
	return e, resumed, err
}

// CreateOrResumeEvaluationTx is CreateOrResumeEvaluation inside tx; it
// returns the evaluation's id.
func (s *Store) CreateOrResumeEvaluationTx(tx *Tx, key string, meta EvaluationMeta) (id int64, resumed bool, err error) {
	if key == "" {
		return 0, false, fail.Inputf("store: an evaluation needs a key")
	}
	now := fmtTime(time.Now())
	res, err := tx.Exec(`INSERT INTO evaluations
		(key, pipeline, series_msgid, series_title, series_version, tree, base, created, updated, status)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO NOTHING`,
		key, meta.Pipeline, meta.SeriesMsgID, meta.SeriesTitle, meta.SeriesVersion, meta.Tree, meta.Base, now, now, StatusRunning)
	if err != nil {
		return 0, false, fail.Infraf("store: %s: creating evaluation %s: %w", s.where, key, err)
	}
	n, _ := res.RowsAffected()
	resumed = n == 0
	if err := tx.QueryRow(`SELECT id FROM evaluations WHERE key = ?`, key).Scan(&id); err != nil {
		return 0, false, fail.Infraf("store: %s: evaluation %s: %w", s.where, key, err)
	}
	if resumed {
		if _, err := tx.Exec(`UPDATE evaluations SET status = ?, updated = ? WHERE id = ?`, StatusRunning, now, id); err != nil {
			return 0, false, fail.Infraf("store: %s: %w", s.where, err)
		}
	}
	return id, resumed, nil
}

// SetEvaluationStatus records an evaluation's status (StatusDone,
// StatusFailed, ...).
func (s *Store) SetEvaluationStatus(id int64, status string) error {
	return s.setEvaluationStatus(s.db, id, status)
}

// SetEvaluationStatusTx is SetEvaluationStatus inside tx.
func (s *Store) SetEvaluationStatusTx(tx *Tx, id int64, status string) error {
	return s.setEvaluationStatus(tx, id, status)
}

func (s *Store) setEvaluationStatus(q querier, id int64, status string) error {
	res, err := q.Exec(`UPDATE evaluations SET status = ?, updated = ? WHERE id = ?`, status, fmtTime(time.Now()), id)
	if err != nil {
		return fail.Infraf("store: %s: %w", s.where, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fail.Inputf("store: %s: no evaluation %d", s.where, id)
	}
	return nil
}

// StartEvaluation moves evaluation id from "queued" to "running" (a stage
// job starting on it) and returns its status afterwards. Any other status
// is left as it is: a job that waited for its turn must not turn an
// evaluation that failed or was cancelled meanwhile back to running.
func (s *Store) StartEvaluation(ctx context.Context, id int64) (status string, err error) {
	err = s.Tx(ctx, func(tx *Tx) error {
		if status, err = s.EvaluationStatusTx(tx, id); err != nil || status != "queued" {
			return err
		}
		status = StatusRunning
		return s.SetEvaluationStatusTx(tx, id, status)
	})
	return status, err
}

// evalColumns are an evaluation's columns and counts. The samples are
// counted run by run, each through samples_by_run: written as a join,
// Postgres chose from stale statistics (a table grown since its last
// ANALYZE) to hash the whole samples table once per listed evaluation:
// 1.25 s for a page of 50 of 1,000 evaluations instead of 6 ms.
const evalColumns = `e.id, e.key, e.pipeline, e.series_msgid, e.series_title, e.series_version, e.tree, e.base,
	e.created, e.updated, e.status,
	(SELECT COUNT(*) FROM builds b WHERE b.evaluation_id = e.id),
	(SELECT COUNT(*) FROM runs r WHERE r.evaluation_id = e.id),
	(SELECT COUNT(*) FROM runs r WHERE r.evaluation_id = e.id AND r.status IN ('ok', 'failed')),
	(SELECT CAST(COALESCE(SUM((SELECT COUNT(*) FROM samples s WHERE s.run_id = r.id)), 0) AS BIGINT) FROM runs r WHERE r.evaluation_id = e.id)`

type scanner interface{ Scan(dest ...any) error }

func scanEvaluation(row scanner) (*Evaluation, error) {
	var e Evaluation
	var created, updated string
	err := row.Scan(&e.ID, &e.Key, &e.Pipeline, &e.SeriesMsgID, &e.SeriesTitle, &e.SeriesVersion, &e.Tree, &e.Base,
		&created, &updated, &e.Status, &e.Builds, &e.Runs, &e.FinishedRuns, &e.Samples)
	if err != nil {
		return nil, err
	}
	e.Created, e.Updated = parseTime(created), parseTime(updated)
	return &e, nil
}

// Evaluation returns one evaluation. An unknown id is a bad-input error.
func (s *Store) Evaluation(id int64) (*Evaluation, error) {
	e, err := scanEvaluation(s.db.QueryRow(`SELECT `+evalColumns+` FROM evaluations e WHERE e.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fail.Inputf("store: %s: no evaluation %d (see 'patcheval runs')", s.where, id)
	}
	if err != nil {
		return nil, fail.Infraf("store: %s: evaluation %d: %w", s.where, id, err)
	}
	return e, nil
}

// ListEvaluations returns every evaluation, newest first.
func (s *Store) ListEvaluations() ([]*Evaluation, error) {
	rows, err := s.db.Query(`SELECT ` + evalColumns + ` FROM evaluations e ORDER BY e.id DESC`)
	if err != nil {
		return nil, fail.Infraf("store: %s: listing evaluations: %w", s.where, err)
	}
	defer rows.Close()
	var out []*Evaluation
	for rows.Next() {
		e, err := scanEvaluation(rows)
		if err != nil {
			return nil, fail.Infraf("store: %s: %w", s.where, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fail.Infraf("store: %s: %w", s.where, err)
	}
	return out, nil
}

// RecordBuild stores (or replaces) the build of b.Variant on b.Arch in
// evaluation evalID and returns its id.
func (s *Store) RecordBuild(evalID int64, b Build) (int64, error) {
	return s.recordBuild(s.db, evalID, b)
}

// RecordBuildTx is RecordBuild inside tx.
func (s *Store) RecordBuildTx(tx *Tx, evalID int64, b Build) (int64, error) {
	return s.recordBuild(tx, evalID, b)
}

func (s *Store) recordBuild(q querier, evalID int64, b Build) (int64, error) {
	if b.Status == "" {
		b.Status = "ok"
	}
	if b.Created.IsZero() {
		b.Created = time.Now()
	}
	meta := ""
	if len(b.Metadata) > 0 {
		if !json.Valid(b.Metadata) {
			return 0, fail.Inputf("store: build %s/%s: metadata is not valid JSON", b.Variant, b.Arch)
		}
		meta = string(b.Metadata)
	}
	var id int64
	err := q.QueryRow(`INSERT INTO builds
		(evaluation_id, variant, arch, commit_id, config_hash, artifact_dir, status, error_kind, error_text, metadata, created)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(evaluation_id, variant, arch) DO UPDATE SET
			commit_id = excluded.commit_id, config_hash = excluded.config_hash,
			artifact_dir = excluded.artifact_dir, status = excluded.status,
			error_kind = excluded.error_kind, error_text = excluded.error_text,
			metadata = excluded.metadata, created = excluded.created
		RETURNING id`,
		evalID, b.Variant, b.Arch, b.Commit, b.ConfigHash, b.ArtifactDir, b.Status, b.ErrorKind, b.ErrorText, meta, fmtTime(b.Created)).Scan(&id)
	if err != nil {
		return 0, fail.Infraf("store: %s: recording build %s/%s of evaluation %d: %w", s.where, b.Variant, b.Arch, evalID, err)
	}
	return id, nil
}

// BuildsOf returns an evaluation's builds ordered by id.
func (s *Store) BuildsOf(evalID int64) ([]Build, error) {
	rows, err := s.db.Query(`SELECT id, evaluation_id, variant, arch, commit_id, config_hash, artifact_dir,
		status, error_kind, error_text, metadata, created FROM builds WHERE evaluation_id = ? ORDER BY id`, evalID)
	if err != nil {
		return nil, fail.Infraf("store: %s: builds of evaluation %d: %w", s.where, evalID, err)
	}
	defer rows.Close()
	var out []Build
	for rows.Next() {
		var b Build
		var meta, created string
		if err := rows.Scan(&b.ID, &b.EvaluationID, &b.Variant, &b.Arch, &b.Commit, &b.ConfigHash, &b.ArtifactDir,
			&b.Status, &b.ErrorKind, &b.ErrorText, &meta, &created); err != nil {
			return nil, fail.Infraf("store: %s: %w", s.where, err)
		}
		if meta != "" {
			b.Metadata = json.RawMessage(meta)
		}
		b.Created = parseTime(created)
		out = append(out, b)
	}
	return out, rows.Err()
}

// BeginRun records that boot number boot of variant starts now and
// returns the run's id. The run is not finished until FinishRun commits.
func (s *Store) BeginRun(evalID int64, variant string, boot int) (int64, error) {
	var id int64
	err := s.db.QueryRow(`INSERT INTO runs (evaluation_id, variant, boot, status, started) VALUES (?, ?, ?, ?, ?) RETURNING id`,
		evalID, variant, boot, string(RunRunning), fmtTime(time.Now())).Scan(&id)
	if err != nil {
		return 0, fail.Infraf("store: %s: beginning run %s#%d of evaluation %d: %w", s.where, variant, boot, evalID, err)
	}
	return id, nil
}

// FinishRun records the end of run runID: its status, Environment,
// console log and samples, in one transaction. The samples' Variant and
// Boot are the run's (their own fields are ignored).
func (s *Store) FinishRun(runID int64, status RunStatus, env evaluate.Environment, console []byte, samples []evaluate.Sample) error {
	return s.FinishRunErr(runID, status, env, console, samples, nil)
}

// FinishRunErr is FinishRun that also stores why the run failed: runErr's
// kind (internal/fail) and text.
func (s *Store) FinishRunErr(runID int64, status RunStatus, env evaluate.Environment, console []byte, samples []evaluate.Sample, runErr error) error {
	return s.Tx(context.Background(), func(tx *Tx) error {
		return s.FinishRunTx(tx, runID, status, env, console, samples, runErr)
	})
}

// FinishRunTx is FinishRunErr inside tx. A second finished run of the same
// (variant, boot) — two workers booted it at once — is recorded as infra
// "superseded" without samples: a boot's samples are never counted twice.
func (s *Store) FinishRunTx(tx *Tx, runID int64, status RunStatus, env evaluate.Environment, console []byte, samples []evaluate.Sample, runErr error) error {
	if !status.valid() || status == RunRunning {
		return fail.Inputf("store: run %d: cannot finish with status %q (want ok, failed or infra)", runID, status)
	}
	var qemu string
	if len(env.QEMUArgs) > 0 {
		b, _ := json.Marshal(env.QEMUArgs)
		qemu = string(b)
	}
	blob, format, err := encodeConsole(console)
	if err != nil {
		return fail.Infraf("store: run %d: compressing console: %w", runID, err)
	}
	var errKind, errText string
	if runErr != nil {
		errKind, errText = fail.KindOf(runErr).String(), runErr.Error()
	}
	if status.Finished() {
		// Two workers finishing the same boot at once: one after the other.
		var evalID int64
		var variant string
		var boot int
		err := tx.QueryRow(`SELECT evaluation_id, variant, boot FROM runs WHERE id = ?`, runID).Scan(&evalID, &variant, &boot)
		if errors.Is(err, sql.ErrNoRows) {
			return fail.Inputf("store: %s: run %d does not exist or is already finished", s.where, runID)
		}
		if err != nil {
			return fail.Infraf("store: %s: finishing run %d: %w", s.where, runID, err)
		}
		if err := tx.Lock("boot", strconv.FormatInt(evalID, 10), variant, strconv.Itoa(boot)); err != nil {
			return fail.Infraf("store: %s: finishing run %d: %w", s.where, runID, err)
		}
		var other int64
		err = tx.QueryRow(`SELECT o.id FROM runs o JOIN runs r ON o.evaluation_id = r.evaluation_id
			AND o.variant = r.variant AND o.boot = r.boot
			WHERE r.id = ? AND o.id != r.id AND o.status IN ('ok', 'failed') LIMIT 1`, runID).Scan(&other)
		if err == nil {
			status, samples = RunInfra, nil
			errKind, errText = fail.KindInfra.String(), fmt.Sprintf("superseded: run %d finished this boot first", other)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return fail.Infraf("store: %s: finishing run %d: %w", s.where, runID, err)
		}
	}
	res, err := tx.Exec(`UPDATE runs SET status = ?, kernel_release = ?, config_hash = ?, cmdline = ?, target = ?,
		qemu_args = ?, host = ?, agent_version = ?, deterministic = ?, kvm = ?, perf_events = ?, build_id = ?, verified = ?, finished = ?,
		error_kind = ?, error_text = ?, console = ?, console_format = ?, console_bytes = ?
		WHERE id = ? AND status = 'running'`,
		string(status), env.KernelRelease, env.ConfigHash, env.Cmdline, env.Target,
		qemu, env.Host, env.AgentVersion, b2i(env.Deterministic), b2i(env.KVM), env.PerfEvents, env.BuildID, b2i(env.Verified), fmtTime(time.Now()),
		errKind, errText, blob, format, len(console), runID)
	if err != nil {
		return fail.Infraf("store: %s: finishing run %d: %w", s.where, runID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fail.Inputf("store: %s: run %d does not exist or is already finished", s.where, runID)
	}
	for i, sm := range samples {
		extra := ""
		if len(sm.Extra) > 0 {
			b, err := json.Marshal(sm.Extra)
			if err != nil { // NaN or Inf in Extra
				return fail.Inputf("store: run %d sample %d (%s %s): extra: %w", runID, i, sm.Benchmark, sm.Metric, err)
			}
			extra = string(b)
		}
		if _, err := tx.Exec(`INSERT INTO samples (run_id, benchmark, metric, unit, value, higher_is_better, iteration, extra, time)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			runID, sm.Benchmark, sm.Metric, sm.Unit, sm.Value, b2i(sm.HigherIsBetter), sm.Iteration, extra, fmtTime(sm.Time)); err != nil {
			return fail.Infraf("store: %s: run %d sample %d: %w", s.where, runID, i, err)
		}
	}
	return nil
}

// consoleCompressMin is the size from which console logs are gzipped.
const consoleCompressMin = 512

func encodeConsole(c []byte) ([]byte, string, error) {
	if len(c) == 0 {
		return nil, "", nil
	}
	if len(c) < consoleCompressMin {
		return c, "text", nil
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if _, err := zw.Write(c); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), "gzip", nil
}

// FinishedRuns is the resume set: the (variant, boot) pairs of evaluation
// evalID with a finished run (status ok or failed). Runs left "running" by
// a crash and runs that failed for infrastructure reasons are absent.
func (s *Store) FinishedRuns(evalID int64) (map[evaluate.BootKey]bool, error) {
	rows, err := s.db.Query(`SELECT DISTINCT variant, boot FROM runs WHERE evaluation_id = ? AND status IN ('ok', 'failed')`, evalID)
	if err != nil {
		return nil, fail.Infraf("store: %s: finished runs of evaluation %d: %w", s.where, evalID, err)
	}
	defer rows.Close()
	out := map[evaluate.BootKey]bool{}
	for rows.Next() {
		var k evaluate.BootKey
		if err := rows.Scan(&k.Variant, &k.Boot); err != nil {
			return nil, fail.Infraf("store: %s: %w", s.where, err)
		}
		out[k] = true
	}
	return out, rows.Err()
}

// Samples returns every sample of evaluation evalID's finished runs, with
// Variant, Boot and Deterministic filled in from the run, ordered by run
// then insertion.
func (s *Store) Samples(evalID int64) ([]evaluate.Sample, error) {
	rows, err := s.db.Query(`SELECT r.variant, r.boot, s.benchmark, s.metric, s.unit, s.value, s.higher_is_better,
		s.iteration, s.extra, s.time, r.deterministic, r.build_id
		FROM samples s JOIN runs r ON s.run_id = r.id
		WHERE r.evaluation_id = ? AND r.status IN ('ok', 'failed')
		ORDER BY r.id, s.id`, evalID)
	if err != nil {
		return nil, fail.Infraf("store: %s: samples of evaluation %d: %w", s.where, evalID, err)
	}
	defer rows.Close()
	var out []evaluate.Sample
	for rows.Next() {
		var sm evaluate.Sample
		var hib, det int
		var extra, t string
		if err := rows.Scan(&sm.Variant, &sm.Boot, &sm.Benchmark, &sm.Metric, &sm.Unit, &sm.Value, &hib,
			&sm.Iteration, &extra, &t, &det, &sm.BuildID); err != nil {
			return nil, fail.Infraf("store: %s: %w", s.where, err)
		}
		sm.HigherIsBetter = hib != 0
		sm.Deterministic = det != 0 // the boot's: a sample is as deterministic as the run that measured it
		if extra != "" {
			if err := json.Unmarshal([]byte(extra), &sm.Extra); err != nil {
				return nil, fail.Infraf("store: %s: sample extra %q: %w", s.where, extra, err)
			}
		}
		sm.Time = parseTime(t)
		out = append(out, sm)
	}
	return out, rows.Err()
}

// RunsOf returns every run of evaluation evalID (all attempts, any
// status) in the order they began, with their sample counts.
func (s *Store) RunsOf(evalID int64) ([]Run, error) {
	rows, err := s.db.Query(`SELECT r.id, r.evaluation_id, r.variant, r.boot, r.status, r.kernel_release, r.config_hash,
		r.cmdline, r.target, r.qemu_args, r.host, r.agent_version, r.deterministic, r.kvm, r.perf_events, r.build_id, r.verified, r.started, r.finished,
		r.error_kind, r.error_text, r.console_bytes,
		(SELECT COUNT(*) FROM samples s WHERE s.run_id = r.id)
		FROM runs r WHERE r.evaluation_id = ? ORDER BY r.id`, evalID)
	if err != nil {
		return nil, fail.Infraf("store: %s: runs of evaluation %d: %w", s.where, evalID, err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var r Run
		var status, qemu, started, finished string
		var det, kvm, verified int
		if err := rows.Scan(&r.ID, &r.EvaluationID, &r.Variant, &r.Boot, &status, &r.Env.KernelRelease, &r.Env.ConfigHash,
			&r.Env.Cmdline, &r.Env.Target, &qemu, &r.Env.Host, &r.Env.AgentVersion, &det, &kvm, &r.Env.PerfEvents, &r.Env.BuildID, &verified, &started, &finished,
			&r.ErrorKind, &r.ErrorText, &r.ConsoleBytes, &r.Samples); err != nil {
			return nil, fail.Infraf("store: %s: %w", s.where, err)
		}
		r.Status = RunStatus(status)
		r.Env.Deterministic, r.Env.KVM, r.Env.Verified = det != 0, kvm != 0, verified != 0
		if qemu != "" {
			_ = json.Unmarshal([]byte(qemu), &r.Env.QEMUArgs)
		}
		r.Started, r.Finished = parseTime(started), parseTime(finished)
		out = append(out, r)
	}
	return out, rows.Err()
}

// Console returns run runID's console log as the target printed it.
func (s *Store) Console(runID int64) ([]byte, error) {
	var blob []byte
	var format string
	err := s.db.QueryRow(`SELECT console, console_format FROM runs WHERE id = ?`, runID).Scan(&blob, &format)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fail.Inputf("store: %s: no run %d (see 'patcheval runs show <evaluation>')", s.where, runID)
	}
	if err != nil {
		return nil, fail.Infraf("store: %s: console of run %d: %w", s.where, runID, err)
	}
	switch format {
	case "", "text":
		return blob, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(blob))
		if err != nil {
			return nil, fail.Infraf("store: %s: console of run %d: %w", s.where, runID, err)
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			return nil, fail.Infraf("store: %s: console of run %d: %w", s.where, runID, err)
		}
		return out, nil
	default:
		return nil, fail.Infraf("store: %s: console of run %d has unknown format %q", s.where, runID, format)
	}
}
