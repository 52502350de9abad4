package service

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Orphans: a River job stays "running" when the process working it dies
// (kill -9, power loss, a lost machine). The service finds such jobs and
// makes them available again at once, ending the boot run the dead
// process left "running" in the same transaction (so the dashboard never
// shows a dead boot as running, and the retried job boots it again);
// River's own stuck-job rescuer (RescueStuckJobsAfter, hours) stays the
// last resort.
//
// On SQLite one serve owns the database (OpenDB's lock file), so every
// job found running when it starts is an orphan: they are rescued before
// the River client starts.
//
// On Postgres many processes share the database. Each one names its River
// client (workerID) and holds a session advisory lock on that name on a
// connection of its own for as long as it lives (presence). A process's
// death ends its sessions and so releases the lock: a running job whose
// last attempt was made by a client whose lock nobody holds is an orphan.
// Every serve looks for them when it starts and then every OrphanCheck;
// a job must be found orphaned twice, OrphanConfirm apart, at the same
// attempt, before it is rescued, because a Postgres restart also ends the
// live processes' sessions: they take their locks again within a second
// or two (presence.keep), well inside OrphanConfirm. The presence
// connection asks the server for TCP keepalives and a user timeout, so
// that a machine that vanished without closing its connection loses its
// lock within about a minute.

// Default orphan-check intervals on Postgres (Config.OrphanCheck,
// Config.OrphanConfirm).
const (
	DefaultOrphanCheck   = 30 * time.Second
	DefaultOrphanConfirm = 5 * time.Second
)

// presencePing is how often a presence connection is checked (and, when
// lost, made again with the lock).
const presencePing = time.Second

// workerSeq numbers the River clients of one process (serve and workers in
// one test binary start within the same second).
var workerSeq atomic.Int64

// newWorkerID names this process's River client: host, process id, start
// time and the client's number in the process, unique among the
// processes sharing a database.
func newWorkerID() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, host)
	if host == "" {
		host = "unknown_host"
	}
	return fmt.Sprintf("patcheval_%.50s_%d_%s_%d", host, os.Getpid(), time.Now().UTC().Format("20060102T150405"), workerSeq.Add(1))
}

// presenceKey is the advisory lock key of a worker id (SQL, bigint).
const presenceKey = `hashtextextended('patcheval worker ' || ?, 0)`

// presentSQL is true when some session of this database holds the
// presence lock of the worker id in its one parameter (pg_locks shows a
// bigint advisory key as classid = high and objid = low 32 bits,
// objsubid 1).
var presentSQL = `EXISTS (SELECT 1 FROM pg_locks l, (SELECT ` + presenceKey + ` AS k) w
	WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
	AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND l.classid = ((w.k >> 32) & 4294967295)::oid AND l.objid = (w.k & 4294967295)::oid)`

// presence holds the advisory lock naming a worker on a Postgres
// connection of its own.
type presence struct {
	id   string
	cfg  *pgx.ConnConfig
	conn *pgx.Conn
	logf func(format string, a ...any)
}

// holdPresence connects and takes worker id's lock; keep holds it.
func (db *DB) holdPresence(ctx context.Context, id string, logf func(string, ...any)) (*presence, error) {
	cfg := db.Store.Postgres().Config().ConnConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = "patcheval " + id
	// A peer that vanished (power, network) must not keep the lock for
	// the kernel's default two hours of keepalive.
	cfg.RuntimeParams["tcp_keepalives_idle"] = "20"
	cfg.RuntimeParams["tcp_keepalives_interval"] = "10"
	cfg.RuntimeParams["tcp_keepalives_count"] = "3"
	cfg.RuntimeParams["tcp_user_timeout"] = "60000"
	p := &presence{id: id, cfg: cfg, logf: logf}
	deadline := time.Now().Add(store.ReconnectFor)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := p.lock(ctx)
		if err == nil {
			return p, nil
		}
		if !store.Unreachable(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fail.Infraf("database %s: worker %s: %w", db.Where, id, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// lock connects and takes the lock.
func (p *presence) lock(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, p.cfg)
	if err != nil {
		return err
	}
	var got bool
	q := strings.Replace(`SELECT pg_try_advisory_lock(`+presenceKey+`)`, "?", "$1", 1)
	if err := conn.QueryRow(ctx, q, p.id).Scan(&got); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return err
	}
	if !got {
		conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("another process runs as worker %s", p.id)
	}
	p.conn = conn
	return nil
}

// keep checks the connection every presencePing until ctx ends, and
// takes the lock again on a new connection when the old one is gone
// (the server restarted).
func (p *presence) keep(ctx context.Context) {
	t := time.NewTicker(presencePing)
	defer t.Stop()
	failing := false // logged the first failure to take the lock again
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if p.conn != nil {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := p.conn.Ping(pctx)
			cancel()
			if err == nil || ctx.Err() != nil {
				continue
			}
			p.logf("worker %s: lost its presence lock (%v); taking it again", p.id, err)
			p.conn.Close(context.WithoutCancel(ctx))
			p.conn = nil
		}
		if err := p.lock(ctx); err != nil {
			if ctx.Err() == nil && !failing {
				p.logf("worker %s: presence lock: %v (trying again every %s)", p.id, err, presencePing)
			}
			failing = true
			continue
		}
		failing = false
		p.logf("worker %s: presence lock taken again", p.id)
	}
}

// release drops the lock (closing its connection). Call it after keep
// has returned.
func (p *presence) release() {
	if p.conn != nil {
		p.conn.Close(context.Background())
		p.conn = nil
	}
}

// orphan is a River job left running by a dead process.
type orphan struct {
	ID      int64
	Kind    string
	Args    []byte
	Attempt int
	By      string // the client that made the last attempt ("" on SQLite)
}

// orphans lists the running jobs whose process died: on SQLite (one
// serve per file, called before the River client starts) every running
// job; on Postgres those whose last attempt's client holds no presence
// lock, other than self's.
func (db *DB) orphans(ctx context.Context, self string) ([]orphan, error) {
	var rows store.Rows
	var err error
	if db.Postgres() {
		rows, err = db.Store.Query(ctx, `SELECT id, kind, args::text, attempt, attempted_by[array_length(attempted_by, 1)] FROM river_job
			WHERE state = 'running' AND coalesce(array_length(attempted_by, 1), 0) > 0
			AND attempted_by[array_length(attempted_by, 1)] <> ?
			AND NOT `+strings.ReplaceAll(presentSQL, "?", "attempted_by[array_length(attempted_by, 1)]")+` ORDER BY id`, self)
	} else {
		rows, err = db.Store.Query(ctx, `SELECT id, kind, json(args), attempt, '' FROM river_job WHERE state = 'running' ORDER BY id`)
	}
	if err != nil {
		return nil, fail.Infraf("database %s: orphaned jobs: %w", db.Where, err)
	}
	defer rows.Close()
	var out []orphan
	for rows.Next() {
		var o orphan
		if err := rows.Scan(&o.ID, &o.Kind, &o.Args, &o.Attempt, &o.By); err != nil {
			return nil, fail.Infraf("database %s: orphaned jobs: %w", db.Where, err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fail.Infraf("database %s: orphaned jobs: %w", db.Where, err)
	}
	return out, nil
}

// rescue makes orphan o available again, in one transaction with ending
// the run its boot left running, if it is still running at the same
// attempt (another serve may have rescued it first). It reports whether
// it did.
func (s *Service) rescue(ctx context.Context, o orphan) (bool, error) {
	who := "the process running this job died (found running when patcheval serve started)"
	if o.By != "" {
		who = fmt.Sprintf("worker %s, which ran this job, died (its presence lock is gone)", o.By)
	}
	done, interrupted := false, false
	var a BootArgs
	err := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		done, interrupted = false, false
		q := `SELECT queue FROM river_job WHERE id = ? AND state = 'running' AND attempt = ?`
		if s.db.Postgres() {
			q += ` FOR UPDATE`
		}
		rows, err := tx.Query(q, o.ID, o.Attempt)
		if err != nil {
			return err
		}
		var queue string
		still := rows.Next()
		if still {
			err = rows.Scan(&queue)
		}
		rows.Close()
		if err != nil {
			return err
		}
		if !still {
			return nil
		}
		if o.Kind == a.Kind() && json.Unmarshal(o.Args, &a) == nil {
			n, err := s.db.Store.InterruptRunsTx(tx, a.EvaluationID, a.Boot.Variant, a.Boot.Boot,
				store.Interrupted+fmt.Sprintf("%s (job %d, attempt %d)", who, o.ID, o.Attempt))
			if err != nil {
				return err
			}
			interrupted = n > 0
		}
		now := time.Now().UTC()
		e, _ := json.Marshal(rivertype.AttemptError{At: now, Attempt: o.Attempt, Error: who})
		p := &riverdriver.JobRescueManyParams{ID: []int64{o.ID}, Error: [][]byte{e}, FinalizedAt: []*time.Time{nil},
			// Scheduled a day back: it runs before the jobs queued
			// behind it, as it would have without the death.
			ScheduledAt: []time.Time{now.Add(-24 * time.Hour)}, State: []string{string(rivertype.JobStateAvailable)},
			StuckHorizon: now.Add(time.Second)}
		var ex riverdriver.ExecutorTx
		if ptx := tx.Postgres(); ptx != nil {
			ex = s.db.pgDriver.UnwrapExecutor(ptx)
		} else {
			ex = s.db.sqliteDriver.UnwrapExecutor(tx.SQLite())
		}
		if _, err := ex.JobRescueMany(ctx, p); err != nil {
			return err
		}
		// Wake the queue's producers now, as River's own insert does
		// (its "river_insert" notification): they poll only every
		// FetchPoll.
		if err := ex.NotifyMany(ctx, &riverdriver.NotifyManyParams{Topic: "river_insert",
			Payload: []string{fmt.Sprintf(`{"queue": %q}`, queue)}}); err != nil {
			return err
		}
		done = true
		return nil
	})
	if err != nil {
		return false, fail.Infraf("database %s: rescuing orphaned job %d: %w", s.db.Where, o.ID, err)
	}
	if interrupted {
		s.evalLog(a.EvaluationID).printf("boot %s #%d was interrupted (%s): it runs again", a.Boot.Variant, a.Boot.Boot+1, who)
	}
	return done, nil
}

// RescueOrphans rescues every orphaned job now and returns how many it
// rescued. On SQLite call it only before the engine starts (then every
// running job is an orphan); on Postgres a job is rescued only if its
// worker holds no presence lock (without the confirmation watchOrphans
// waits for).
func (s *Service) RescueOrphans(ctx context.Context) (int, error) {
	found, err := s.db.orphans(ctx, s.workerID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range found {
		ok, err := s.rescue(ctx, o)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// watchOrphans looks for orphaned jobs on Postgres until ctx ends: at
// once, then every OrphanCheck, or OrphanConfirm after finding one (it is
// rescued when found again at the same attempt).
func (s *Service) watchOrphans(ctx context.Context) {
	every, confirm := s.cfg.OrphanCheck, s.cfg.OrphanConfirm
	if every <= 0 {
		every = DefaultOrphanCheck
	}
	if confirm <= 0 {
		confirm = DefaultOrphanConfirm
	}
	type sighting struct {
		attempt int
		at      time.Time
	}
	seen := map[int64]sighting{}
	for {
		wait := every
		found, err := s.db.orphans(ctx, s.workerID)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.logf("looking for orphaned jobs: %v", err)
		} else {
			next := map[int64]sighting{}
			for _, o := range found {
				prev, ok := seen[o.ID]
				if !ok || prev.attempt != o.Attempt {
					next[o.ID] = sighting{o.Attempt, time.Now()}
					wait = min(wait, confirm)
					continue
				}
				if d := time.Since(prev.at); d < confirm {
					next[o.ID] = prev
					wait = min(wait, confirm-d)
					continue
				}
				ok, err := s.rescue(ctx, o)
				if err != nil {
					s.logf("%v", err)
					next[o.ID] = prev
					continue
				}
				if ok {
					s.logf("job %d (%s, attempt %d) was running on worker %s, which died: queued again", o.ID, o.Kind, o.Attempt, o.By)
				}
			}
			seen = next
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
