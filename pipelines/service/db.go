package service

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/internal/fail"
)

// DB is the service's database: the evaluation store and River's job
// tables in the same SQLite file.
type DB struct {
	// Store is the evaluation store (its own pool of connections).
	Store *store.Store
	// Pool is River's pool on the same file: one connection.
	Pool *sql.DB
	// Driver is River's driver over Pool.
	Driver *riversqlite.Driver
	// URL is the database as given (or the default path).
	URL string

	lock *os.File
}

// ParseDatabase turns a --database value into the SQLite file path it
// names: "" (the state directory's patcheval.db), a path, file:PATH or
// sqlite:PATH / sqlite:///PATH. A postgres:// URL is recognised and
// refused until the farm issue (14) adds riverpgxv5; anything else is a
// bad-input error naming the flag.
func ParseDatabase(u string) (string, error) {
	switch {
	case u == "":
		return store.DefaultPath(), nil
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		return "", fail.Inputf("--database %s: Postgres is not supported yet (farm issue 14); use a SQLite file path", redact(u))
	case strings.HasPrefix(u, "sqlite:"), strings.HasPrefix(u, "file:"):
		pu, err := url.Parse(u)
		if err != nil {
			return "", fail.Inputf("--database %q: %v", u, err)
		}
		p := pu.Path
		if p == "" {
			p = pu.Opaque
		}
		if p == "" {
			return "", fail.Inputf("--database %q: no file path", u)
		}
		return p, nil
	case strings.Contains(u, "://"):
		return "", fail.Inputf("--database %q: unknown scheme (want a SQLite file path, sqlite:PATH, or postgres:// once issue 14 lands)", redact(u))
	default:
		return u, nil
	}
}

// redact drops a URL's password so that errors never print it.
func redact(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return pu.Redacted()
}

// OpenDB opens the database named by u (see ParseDatabase), brings the
// store's schema and River's up to date and takes the service lock: one
// serve per SQLite database, so that any River job found "running" at
// start was left so by a process that died (kill -9, power loss) and can
// be made available again at once (RescueOrphans) instead of waiting for
// River's stuck-job rescuer.
func OpenDB(ctx context.Context, u string) (*DB, error) {
	path, err := ParseDatabase(u)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fail.Infraf("database %s: %w", path, err)
	}
	lock, err := os.OpenFile(path+".serve.lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fail.Infraf("database %s: lock file: %w", path, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fail.Inputf("database %s is in use by another 'patcheval serve' (lock %s held)", path, lock.Name())
	}
	st, err := store.Open(path)
	if err != nil {
		lock.Close()
		return nil, err
	}
	pool, err := sql.Open("sqlite", store.DSN(path))
	if err != nil {
		st.Close()
		lock.Close()
		return nil, fail.Infraf("database %s: %w", path, err)
	}
	// River's advice for SQLite: one connection, so River's own goroutines
	// (fetch, complete, leader election, maintenance) queue in-process
	// instead of meeting SQLITE_BUSY.
	pool.SetMaxOpenConns(1)
	db := &DB{Store: st, Pool: pool, Driver: riversqlite.New(pool), URL: path, lock: lock}
	m, err := rivermigrate.New(db.Driver, nil)
	if err != nil {
		db.Close()
		return nil, fail.Infraf("database %s: River migrations: %w", path, err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		db.Close()
		return nil, fail.Infraf("database %s: River migrations: %w", path, err)
	}
	return db, nil
}

// Close closes both pools and releases the service lock.
func (db *DB) Close() error {
	err := errors.Join(db.Pool.Close(), db.Store.Close())
	if db.lock != nil {
		db.lock.Close()
	}
	return err
}

// RescueOrphans makes every River job left "running" available again and
// returns how many there were. Only call it holding the service lock
// (OpenDB), before the River client starts: then no process runs them.
func (db *DB) RescueOrphans(ctx context.Context) (int, error) {
	rows, err := db.Pool.QueryContext(ctx, `SELECT id, attempt FROM river_job WHERE state = 'running'`)
	if err != nil {
		return 0, fail.Infraf("database %s: orphaned jobs: %w", db.URL, err)
	}
	var p riverdriver.JobRescueManyParams
	now := time.Now().UTC()
	for rows.Next() {
		var id int64
		var attempt int
		if err := rows.Scan(&id, &attempt); err != nil {
			rows.Close()
			return 0, fail.Infraf("database %s: %w", db.URL, err)
		}
		e, _ := json.Marshal(rivertype.AttemptError{At: now, Attempt: attempt,
			Error: "the process running this job died (found running when patcheval serve started)"})
		p.ID = append(p.ID, id)
		p.Error = append(p.Error, e)
		p.FinalizedAt = append(p.FinalizedAt, nil)
		// Scheduled a day back: they run before the jobs queued behind
		// them, as they would have without the crash.
		p.ScheduledAt = append(p.ScheduledAt, now.Add(-24*time.Hour))
		p.State = append(p.State, string(rivertype.JobStateAvailable))
	}
	rows.Close()
	if len(p.ID) == 0 {
		return 0, nil
	}
	p.StuckHorizon = now.Add(time.Second)
	if _, err := db.Driver.GetExecutor().JobRescueMany(ctx, &p); err != nil {
		return 0, fail.Infraf("database %s: rescuing %d orphaned job(s): %w", db.URL, len(p.ID), err)
	}
	return len(p.ID), nil
}

func (db *DB) String() string { return fmt.Sprintf("sqlite %s", db.URL) }
