package service

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/internal/testpg"
)

// noopArgs is a job that does nothing: the benchmarks measure River's
// dispatch, not a stage.
type noopArgs struct {
	Sent int64 `json:"sent"` // UnixNano at insert
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	started chan time.Duration
	done    *atomic.Int64
}

func (w *noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	if w.started != nil {
		w.started <- time.Since(time.Unix(0, job.Args.Sent))
	}
	if w.done != nil {
		w.done.Add(1)
	}
	return nil
}

// noopClient is a River client on db's database working queue "noop"
// with n workers, configured as the service's engine is (fetch poll
// FetchPoll, cooldown FetchCooldown: a job's insert notification wakes the producer, on SQLite
// through River's polled river_notification outbox).
func noopClient(b *testing.B, db *DB, n int, w *noopWorker) riverClientInserter {
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	rc := &river.Config{Queues: map[string]river.QueueConfig{"noop": {MaxWorkers: n}}, Workers: workers,
		FetchPollInterval: FetchPoll, FetchCooldown: FetchCooldown, JobTimeout: -1}
	if db.pgDriver != nil {
		c, err := river.NewClient(db.pgDriver, rc)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	c, err := river.NewClient(db.sqliteDriver, rc)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

type riverClientInserter interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	InsertMany(ctx context.Context, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error)
}

// BenchmarkDispatch measures the time from a job's insert to a worker
// starting it, one job at a time, on SQLite and a real PostgreSQL 15
// (reported as p50 and p99).
func BenchmarkDispatch(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchDispatch(b, filepath.Join(b.TempDir(), "patcheval.db")) })
	b.Run("postgres", func(b *testing.B) { benchDispatch(b, testpg.URL(b)) })
}

func benchDispatch(b *testing.B, database string) {
	ctx := context.Background()
	db, err := OpenDB(ctx, database)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	w := &noopWorker{started: make(chan time.Duration, 1)}
	c := noopClient(b, db, 1, w)
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer c.Stop(ctx)
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Insert(ctx, noopArgs{Sent: time.Now().UnixNano()}, &river.InsertOpts{Queue: "noop"}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, <-w.started)
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkNoopJobs puts 10,000 no-op jobs through River on a real
// PostgreSQL 15 with 4 clients (4 worker processes' worth, 10 workers
// each) and reports jobs/s from the first start to the last completion.
func BenchmarkNoopJobs(b *testing.B) {
	ctx := context.Background()
	const jobs, clients = 10000, 4
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		db, err := OpenDB(ctx, testpg.URL(b))
		if err != nil {
			b.Fatal(err)
		}
		params := make([]river.InsertManyParams, jobs)
		for j := range params {
			params[j] = river.InsertManyParams{Args: noopArgs{Sent: int64(j)}, InsertOpts: &river.InsertOpts{Queue: "noop"}}
		}
		var done atomic.Int64
		var cs []riverClientInserter
		for k := 0; k < clients; k++ {
			cs = append(cs, noopClient(b, db, 10, &noopWorker{done: &done}))
		}
		if _, err := cs[0].InsertMany(ctx, params); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		for _, c := range cs {
			if err := c.Start(ctx); err != nil {
				b.Fatal(err)
			}
		}
		for done.Load() < jobs {
			time.Sleep(5 * time.Millisecond)
		}
		took := time.Since(start)
		b.StopTimer()
		for _, c := range cs {
			c.Stop(ctx)
		}
		db.Close()
		b.ReportMetric(float64(jobs)/took.Seconds(), "jobs/s")
	}
}

// BenchmarkIdleWorkers measures what an idle `patcheval worker` costs
// Postgres (docs/farm.md, "what breaks first at 100 workers"): on a real
// PostgreSQL 15, for 1 and then 4 workers (each a real Worker with a
// build and a boot queue, default heartbeats and fetch polling, no
// jobs), the database's transactions per second over 20 s and the
// connections they hold, per worker. The figures come from
// pg_stat_database and pg_stat_activity (River's leader election and
// maintenance are in them; the benchmark's own queries and connection
// are not).
func BenchmarkIdleWorkers(b *testing.B) {
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchIdleWorkers(b, n)
			}
		})
	}
}

func benchIdleWorkers(b *testing.B, n int) {
	b.StopTimer()
	ctx := context.Background()
	pg := testpg.New(b)
	url := pg.Database(b)
	db, err := OpenDB(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	// count is the connections to the database but the one asking; own
	// is this benchmark's, before any worker starts.
	count := func() int {
		var c int
		if err := db.Store.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&c); err != nil {
			b.Fatal(err)
		}
		return c
	}
	own := count()
	ctx, cancel := context.WithCancel(ctx)
	var done []chan error
	for k := range n {
		w, err := NewWorker(ctx, WorkerConfig{Database: url, Name: fmt.Sprintf("idle-%d", k), CacheDir: b.TempDir(), Grace: time.Second,
			Capabilities: Capabilities{Build: []string{"x86_64"}, QEMU: []string{"x86_64"}, Cores: 1}, Log: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		d := make(chan error, 1)
		go func() { d <- w.Run(ctx) }()
		done = append(done, d)
	}
	defer func() {
		cancel()
		for _, d := range done {
			<-d
		}
	}()
	time.Sleep(3 * time.Second) // started, first heartbeats written
	// xacts is the database's committed and rolled-back transactions,
	// less the ones this benchmark made (one per call).
	calls := 0
	xacts := func() float64 {
		calls++
		var x int64
		if err := db.Store.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&x); err != nil {
			b.Fatal(err)
		}
		return float64(x - int64(calls))
	}
	// The statistics collector reports with a delay: take the counts
	// from snapshots a window apart.
	const window = 20 * time.Second
	b.StartTimer()
	x0, t0 := xacts(), time.Now()
	time.Sleep(window)
	x1, took := xacts(), time.Since(t0)
	b.StopTimer()
	conns := count() - own
	b.ReportMetric((x1-x0)/took.Seconds()/float64(n), "xact/s/worker")
	b.ReportMetric(float64(conns)/float64(n), "conns/worker")
}
