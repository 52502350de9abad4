package service

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines/store"
)

// DB is the service's database: the evaluation store and River's job
// tables in the same database, SQLite (a file) or Postgres.
type DB struct {
	// Store is the evaluation store.
	Store *store.Store
	// URL is the database as given (a path, or a URL with its password);
	// Where names it in messages (no password).
	URL, Where string
	// Dir is the state directory: reports go under it. SQLite: the
	// database file's directory; Postgres: the XDG state directory.
	Dir string

	// SQLite: River's own pool on the file (one connection) and driver.
	sqlitePool   *sql.DB
	sqliteDriver *riversqlite.Driver
	// Postgres: River's driver on the store's pgx pool.
	pgDriver *riverpgxv5.Driver

	lock *os.File
}

// Postgres reports whether the database is Postgres.
func (db *DB) Postgres() bool { return db.pgDriver != nil }

// ParseDatabase turns a --db value into the locator store.Open takes
// (store.ParseLocator: a SQLite path, sqlite:PATH, a postgres:// URL or a
// libpq key=value string; anything ambiguous is a bad-input error that
// never shows a password); "" is the state directory's patcheval.db.
func ParseDatabase(u string) (string, error) {
	loc, err := store.ParseLocator(u)
	if err == nil && loc == "" {
		loc = store.DefaultPath()
	}
	return loc, err
}

// OpenDB opens the database named by u (see ParseDatabase) and brings the
// store's schema and River's up to date.
//
// On SQLite it takes the service lock: one serve per database file, so
// that any River job found "running" at start was left so by a process
// that died (kill -9, power loss) and can be made available again at once
// (Service.RescueOrphans) instead of waiting for River's stuck-job rescuer.
//
// On Postgres many processes may share the database (serve, workers):
// River's tables live beside the store's, and River runs on the store's
// pgx pool (riverpgxv5), so that a stage's transaction holds both. Each
// process names its River client and holds a presence lock on that name
// (see orphans.go), which is how the others tell its jobs are orphans.
func OpenDB(ctx context.Context, u string) (*DB, error) {
	db, inUse, err := openDB(ctx, u, true)
	if inUse {
		return nil, fail.Inputf("database %s is in use by another 'patcheval serve' (lock %s held)", db.URL, db.URL+".serve.lock")
	}
	return db, err
}

// openDB opens the database named by u. exclusive takes the service lock
// on SQLite; a lock held by another process returns inUse (and a DB
// holding only the path). Without exclusive, a SQLite database is opened
// beside the serve that has it, to insert and list jobs only (no
// migrations: that serve made them).
func openDB(ctx context.Context, u string, exclusive bool) (db *DB, inUse bool, err error) {
	loc, err := ParseDatabase(u)
	if err != nil {
		return nil, false, err
	}
	if store.IsPostgres(loc) {
		db, err := openPostgres(ctx, loc)
		return db, false, err
	}
	path := loc
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, false, fail.Infraf("database %s: %w", path, err)
	}
	var lock *os.File
	if exclusive {
		if lock, err = lockSQLite(path); err != nil {
			return nil, false, err
		}
		if lock == nil {
			return &DB{URL: path}, true, nil
		}
	}
	st, err := store.OpenSQLite(path)
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		return nil, false, err
	}
	pool, err := sql.Open("sqlite", store.DSN(path))
	if err != nil {
		st.Close()
		if lock != nil {
			lock.Close()
		}
		return nil, false, fail.Infraf("database %s: %w", path, err)
	}
	// River's advice for SQLite: one connection, so River's own goroutines
	// (fetch, complete, leader election, maintenance) queue in-process
	// instead of meeting SQLITE_BUSY.
	pool.SetMaxOpenConns(1)
	db = &DB{Store: st, URL: path, Where: path, Dir: filepath.Dir(path), sqlitePool: pool, sqliteDriver: riversqlite.New(pool), lock: lock}
	if !exclusive {
		return db, false, nil
	}
	m, err := rivermigrate.New(db.sqliteDriver, nil)
	if err == nil {
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err == nil {
		_, err = pool.ExecContext(ctx, riverJobIndexes)
	}
	if err != nil {
		db.Close()
		return nil, false, fail.Infraf("database %s: River migrations: %w", path, err)
	}
	return db, false, nil
}

// lockSQLite takes the service lock of the SQLite database at path: nil
// (and no error) when another process holds it.
func lockSQLite(path string) (*os.File, error) {
	lock, err := os.OpenFile(path+".serve.lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fail.Infraf("database %s: lock file: %w", path, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, nil
	}
	return lock, nil
}

// riverMigrationLock is the advisory lock River's migrations run under on
// Postgres, so that processes starting together migrate in turn.
const riverMigrationLock = 0x7269766572 // "river"

// migrateRiverPg brings River's tables up to date under a session
// advisory lock (one process at a time). River's migrations need a
// transaction each (one adds an enum value that the next one uses), so
// they cannot share one transaction holding a transaction-scoped lock.
func migrateRiverPg(ctx context.Context, db *DB) error {
	m, err := rivermigrate.New(db.pgDriver, nil)
	if err != nil {
		return err
	}
	conn, err := db.Store.Postgres().Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(riverMigrationLock)); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(riverMigrationLock))
	if _, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, riverJobIndexes)
	return err
}

// riverJobIndexes index River's jobs by the evaluation their
// arguments name, which is how the dashboard, the API and cancellation
// find an evaluation's jobs (evalJobs): River's tags cannot be indexed
// (a JSON array on SQLite), and a tag filter read every job ever kept,
// 15,000 of them with 1,000 evaluations. The same SQL fits both
// databases (->> with a bare key is $.key on SQLite). The second index
// finds the few jobs that took more than one attempt (the queue page's
// retried jobs) without reading the others.
const riverJobIndexes = `CREATE INDEX IF NOT EXISTS patcheval_river_job_evaluation ON river_job ((args ->> 'evaluation_id'), id);
CREATE INDEX IF NOT EXISTS patcheval_river_job_retried ON river_job (id) WHERE attempt > 1`

func openPostgres(ctx context.Context, u string) (*DB, error) {
	st, err := store.Open(u)
	if err != nil {
		return nil, err
	}
	db := &DB{Store: st, URL: u, Where: st.Where(), Dir: xdg.StateDir(), pgDriver: riverpgxv5.New(st.Postgres())}
	if err := migrateRiverPg(ctx, db); err != nil {
		st.Close()
		return nil, fail.Infraf("database %s: River migrations: %w", db.Where, err)
	}
	return db, nil
}

// Close closes the database and releases the service lock.
func (db *DB) Close() error {
	var err error
	if db.sqlitePool != nil {
		err = db.sqlitePool.Close()
	}
	err = errors.Join(err, db.Store.Close())
	if db.lock != nil {
		db.lock.Close()
	}
	return err
}

func (db *DB) String() string {
	if db.pgDriver != nil {
		return "postgres " + db.Where
	}
	return fmt.Sprintf("sqlite %s", db.URL)
}
