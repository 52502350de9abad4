package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/patcheval/patcheval/internal/lazyre"
)

// The store runs the same SQL on two databases: SQLite (modernc.org/sqlite
// through database/sql, the embedded default) and PostgreSQL (pgx). The
// statements are written once, with "?" placeholders, in the subset both
// understand; the differences are few and all here:
//
//   - placeholders: Postgres wants $1, $2, ...: pgQ rewrites "?" outside
//     quoted strings (rebind);
//   - the schema's types: migrations are written for SQLite, and
//     pgSchema maps them (an "id INTEGER PRIMARY KEY" becomes an identity
//     column, INTEGER is 64-bit BIGINT, REAL is DOUBLE PRECISION, BLOB is
//     BYTEA);
//   - dialect: the few functions that differ (instr vs strpos);
//   - concurrency: SQLite runs one writing transaction at a time (BEGIN
//     IMMEDIATE), Postgres many (READ COMMITTED): a check-then-write
//     that two processes must not interleave takes Tx.Lock, a no-op on
//     SQLite and an advisory lock on Postgres.
//
// Everything else (ON CONFLICT upserts, RETURNING, text timestamps,
// integers for booleans) is the same on both.

// dialect holds what differs in statements between the databases.
type dialect struct {
	name string
	// instr is the function (haystack, needle) -> 1-based position or 0.
	instr string
}

var (
	sqliteDialect   = dialect{name: "sqlite", instr: "instr"}
	postgresDialect = dialect{name: "postgres", instr: "strpos"}
)

// Row is one result row (Scan returns an error matching sql.ErrNoRows
// when there is none).
type Row interface{ Scan(dest ...any) error }

// Rows is a result set: Next, Scan, then Err and Close.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// querier runs statements: the whole database or one transaction, on
// either database. The methods without a context use
// context.Background(), as database/sql's do.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) Row
	Exec(query string, args ...any) (sql.Result, error)
	Query(query string, args ...any) (Rows, error)
	QueryRow(query string, args ...any) Row
}

// ---- SQLite: database/sql ----

type sqlConn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type sqlQ struct{ c sqlConn }

func (q sqlQ) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return q.c.ExecContext(ctx, query, args...)
}

func (q sqlQ) QueryContext(ctx context.Context, query string, args ...any) (Rows, error) {
	r, err := q.c.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (q sqlQ) QueryRowContext(ctx context.Context, query string, args ...any) Row {
	return q.c.QueryRowContext(ctx, query, args...)
}

func (q sqlQ) Exec(query string, args ...any) (sql.Result, error) {
	return q.ExecContext(context.Background(), query, args...)
}

func (q sqlQ) Query(query string, args ...any) (Rows, error) {
	return q.QueryContext(context.Background(), query, args...)
}

func (q sqlQ) QueryRow(query string, args ...any) Row {
	return q.QueryRowContext(context.Background(), query, args...)
}

// ---- Postgres: pgx ----

type pgConn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pgQ runs the store's statements on a pool (pooled: each statement is
// retried while the server cannot be reached, see retryPg) or in a
// transaction.
type pgQ struct {
	c      pgConn
	pooled bool
	s      *Store
}

func (q pgQ) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	query = rebind(query)
	var tag pgconn.CommandTag
	err := q.retry(ctx, func() (err error) {
		tag, err = q.c.Exec(ctx, query, args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return pgResult(tag.RowsAffected()), nil
}

func (q pgQ) QueryContext(ctx context.Context, query string, args ...any) (Rows, error) {
	query = rebind(query)
	var rows pgx.Rows
	err := q.retry(ctx, func() (err error) {
		rows, err = q.c.Query(ctx, query, args...)
		if err == nil {
			// pgx reports a failed send or a server error at the first
			// Next; look at it here so that it is retried like the others.
			if !rows.Next() {
				rows.Close()
				if err = rows.Err(); err == nil {
					rows = emptyRows{}
				}
				return err
			}
			rows = &firstRow{Rows: rows}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return pgRows{rows}, nil
}

func (q pgQ) QueryRowContext(ctx context.Context, query string, args ...any) Row {
	query = rebind(query)
	return rowFunc(func(dest ...any) error {
		return q.retry(ctx, func() error { return q.c.QueryRow(ctx, query, args...).Scan(dest...) })
	})
}

func (q pgQ) Exec(query string, args ...any) (sql.Result, error) {
	return q.ExecContext(context.Background(), query, args...)
}

func (q pgQ) Query(query string, args ...any) (Rows, error) {
	return q.QueryContext(context.Background(), query, args...)
}

func (q pgQ) QueryRow(query string, args ...any) Row {
	return q.QueryRowContext(context.Background(), query, args...)
}

func (q pgQ) retry(ctx context.Context, f func() error) error {
	if !q.pooled {
		return f()
	}
	return q.s.retryPg(ctx, f)
}

type rowFunc func(dest ...any) error

func (f rowFunc) Scan(dest ...any) error { return f(dest...) }

type pgResult int64

func (r pgResult) LastInsertId() (int64, error) {
	return 0, errors.New("store: LastInsertId is not supported on Postgres (use RETURNING)")
}
func (r pgResult) RowsAffected() (int64, error) { return int64(r), nil }

// pgRows is pgx.Rows as Rows (whose Close returns an error).
type pgRows struct{ pgx.Rows }

func (r pgRows) Close() error { r.Rows.Close(); return nil }

// firstRow is rows whose first Next was already called (and was true).
type firstRow struct {
	pgx.Rows
	started bool
}

func (r *firstRow) Next() bool {
	if !r.started {
		r.started = true
		return true
	}
	return r.Rows.Next()
}

// emptyRows is a finished result without rows.
type emptyRows struct{ pgx.Rows }

func (emptyRows) Next() bool             { return false }
func (emptyRows) Err() error             { return nil }
func (emptyRows) Close()                 {}
func (emptyRows) Scan(dest ...any) error { return sql.ErrNoRows }

// rebind turns "?" placeholders into Postgres's $1, $2, ... (a "?"
// inside a quoted string or identifier is left alone).
func rebind(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

var (
	pgIdentity = lazyre.New(`\bid(\s+)INTEGER PRIMARY KEY\b`)
	pgInteger  = lazyre.New(`\bINTEGER\b`)
	pgReal     = lazyre.New(`\bREAL\b`)
	pgBlob     = lazyre.New(`\bBLOB\b`)
)

// pgSchema is a migration (written for SQLite) for Postgres: an "id
// INTEGER PRIMARY KEY" (SQLite's rowid) is an identity column, INTEGER
// is BIGINT (SQLite's integers are 64-bit), REAL is DOUBLE PRECISION and
// BLOB is BYTEA. Type names are upper case in the migrations, column
// names lower case, so the rewrite never touches a name.
func pgSchema(m string) string {
	m = pgIdentity.ReplaceAllString(m, "id${1}BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY")
	m = pgInteger.ReplaceAllString(m, "BIGINT")
	m = pgReal.ReplaceAllString(m, "DOUBLE PRECISION")
	return pgBlob.ReplaceAllString(m, "BYTEA")
}

// IsPostgres reports whether a database locator is a Postgres URL
// (postgres:// or postgresql://) rather than a SQLite file.
func IsPostgres(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// ReconnectFor is how long a store on Postgres keeps trying a statement
// (or a transaction) while the server cannot be reached (restarting,
// failing over) before it reports an infrastructure error.
const ReconnectFor = 2 * time.Minute

// Unreachable reports whether err means the Postgres server could not be
// reached or ended the session (connection refused or reset, the server
// shutting down or starting up): the statement did not commit, and the
// same work may be tried again on a new connection.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// 08: connection exception; 57P01-03: admin or crash shutdown,
		// cannot connect now (starting up).
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ne net.Error
	return errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &ne)
}

// safeToRepeat reports whether a single autocommit statement that failed
// with err certainly did not run: it failed connecting, before anything
// was sent, or the server refused the session. (A connection lost while
// the statement ran is not: it may have committed.)
func safeToRepeat(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03")
}

// retryPg runs f until it succeeds, fails for another reason than an
// unreachable server, or the store's reconnect time runs out; it backs
// off from 50 ms to 2 s between tries.
func (s *Store) retryPg(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(s.reconnectFor)
	wait := 50 * time.Millisecond
	for {
		err := f()
		if err == nil || !safeToRepeat(err) || time.Now().After(deadline) {
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

// Tx is one transaction on the store's database. The store's *Tx methods
// write through it; a job queue on the same database (River) takes its
// native transaction (SQLite or Postgres) to enqueue and complete jobs in
// it.
type Tx struct {
	querier
	sqlTx *sql.Tx
	pgTx  pgx.Tx
}

// SQLite is the database/sql transaction on a SQLite store (nil on
// Postgres).
func (tx *Tx) SQLite() *sql.Tx { return tx.sqlTx }

// Postgres is the pgx transaction on a Postgres store (nil on SQLite).
func (tx *Tx) Postgres() pgx.Tx { return tx.pgTx }

// Postgres is the store's pgx pool on Postgres (nil on SQLite): a job
// queue on the same database (riverpgxv5) uses it.
func (s *Store) Postgres() *pgxpool.Pool { return s.pool }

// SQLite is the store's database/sql handle on SQLite (nil on Postgres).
func (s *Store) SQLite() *sql.DB { return s.sqlDB }

// Dialect is "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.d.name }

// begin starts a transaction.
func (s *Store) begin(ctx context.Context) (*Tx, error) {
	if s.pool != nil {
		var tx pgx.Tx
		err := s.retryPg(ctx, func() (err error) {
			tx, err = s.pool.Begin(ctx)
			return err
		})
		if err != nil {
			return nil, err
		}
		return &Tx{querier: pgQ{c: tx}, pgTx: tx}, nil
	}
	tx, err := s.sqlDB.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &Tx{querier: sqlQ{tx}, sqlTx: tx}, nil
}

func (tx *Tx) commit(ctx context.Context) error {
	if tx.pgTx != nil {
		return tx.pgTx.Commit(ctx)
	}
	return tx.sqlTx.Commit()
}

func (tx *Tx) rollback() {
	if tx.pgTx != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tx.pgTx.Rollback(ctx)
		return
	}
	tx.sqlTx.Rollback()
}

// Lock serialises the transactions that name the same key until they end
// (a check-then-write two processes must not interleave, e.g. "is another
// run of this boot finished?"). SQLite's transactions are serialised
// already (BEGIN IMMEDIATE: one writer at a time); on Postgres it takes a
// transaction-scoped advisory lock on the key's hash.
func (tx *Tx) Lock(key ...string) error {
	if tx.pgTx == nil {
		return nil
	}
	_, err := tx.Exec(`SELECT pg_advisory_xact_lock(hashtextextended(?, 0))`, strings.Join(key, "\x1f"))
	if err != nil {
		return fmt.Errorf("store: locking %q: %w", strings.Join(key, " "), err)
	}
	return nil
}

// uniqueViolation reports whether err is a UNIQUE constraint failing
// (SQLite's "UNIQUE constraint failed", Postgres's SQLSTATE 23505).
func uniqueViolation(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23505"
	}
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// Query runs a read-only query on the store's database (a table beside
// the store's own, e.g. a job queue's), with "?" placeholders on both
// databases.
func (s *Store) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	return s.db.QueryContext(ctx, query, args...)
}

// QueryRow is Query for one row.
func (s *Store) QueryRow(ctx context.Context, query string, args ...any) Row {
	return s.db.QueryRowContext(ctx, query, args...)
}
