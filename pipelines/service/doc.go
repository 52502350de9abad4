// Package service is `patcheval serve`: the evaluation stages of
// pipelines/runner run as River jobs (github.com/riverqueue/river), with
// an HTTP API under /api/v1 and the dashboard (pipelines/service/dashboard)
// in one process. New opens it, Service.Run serves until its context ends.
//
// # Jobs
//
// Job kinds are the steps of runner's stage graph (runner.Next): apply,
// configure (one per kernel), build (one per kernel), boot (one per
// planned boot), more (plans the boots, then adaptive rounds), report,
// then per_patch and series_bisect when the evaluation has them. A job
// takes its step and asks runner.Next what follows; graph.go only maps
// those steps to jobs and queues, never their order. The builds follow
// the last configure to finish, so every kernel is configured and
// verified before any compiles, as in a local run: a variant the tree
// cannot give fails the evaluation (naming the variant and why) before
// minutes of compiling, and no build job is queued. apply, more and
// report (with notify) have a queue each; configures and builds go to
// build-<arch> (configuring needs the arch's toolchain, which a farm's
// build workers have) and boots to boot-<arch> or, on an SSH target,
// boot-ssh-<host> (Capabilities.Queues), each with its own concurrency
// (EngineConfig) and one slot budget per process across the arches.
// An evaluation's boots form a chain, each inserting the next, so they run
// one at a time in the pipeline's interleaving order while other
// evaluations' boots may run beside them. Builds share one make -j budget
// (split between the build workers). Every stage is idempotent (runner):
// a retried job finds finished work in the store and the build cache,
// never redoes a finished boot and never duplicates a sample. Where a
// stage records its result, the next job is inserted and the current one
// completed in the same transaction (runner.Env.Record with River's
// InsertManyTx and JobCompleteTx). The inserted job wakes its queue at
// once through River's insert notification (LISTEN/NOTIFY on Postgres,
// the river_notification outbox on SQLite): the chain waits ~10 ms
// between stages, and the queues poll only every FetchPoll, as a
// fallback, so that an idle serve takes no CPU from the boots.
//
// Cancelling an evaluation marks it cancelled and cancels its unfinished
// jobs: queued ones never run, a running one's context is cancelled (QEMU
// is killed; the boot's row stays "running" or becomes "infra", neither
// counts as finished, so the partial boot is discarded). The evaluations
// it waits for (a per-patch prefix's, a series bisection step's
// measurement) are cancelled with it, unless another live waiter waits
// for them too (a measurement shared with another series or a watch:
// cancelTx in waiters.go). SIGTERM (Run's
// context) stops fetching jobs, lets running ones finish for the grace
// period, then cancels them; River records them as retryable and they run
// again on the next start. An evaluation that jobs wait for (waiters.go)
// but that has no job of its own left that may run, so that nothing will
// ever end it (its jobs discarded or deleted outside the service), is
// found by serve's stuck check (stuck.go, every Config.StuckCheck) and
// ended as failed ("stuck: no stage job left for evaluation N"), which
// wakes its waiters.
//
// Watches (Service.Watch, pipelines/experiments/watch) are jobs too, in their own
// queue: the scheduler queues a tick when a watch is due, the tick queues
// the re-tests of new tags one after another, and a regression's
// bisection is one job per measurement, resumable after a crash
// (watchjobs.go). `patcheval watch run-now` and `watch daemon` go through
// the same jobs (RunWatchNow, RunWatchDaemon in watchrun.go): run-now
// queues a tick into the database and waits for the serve that works it,
// or works the watch queue itself when none does; a re-test is unique by
// watch and tag while unfinished, so no tag is evaluated twice. A
// re-test's evaluation runs as the stage jobs of any evaluation: the
// re-test submits it and ends, and the transaction that ends the
// evaluation queues the job that records the tag's result (a waiter:
// waiters.go); a bisection step's measurement likewise (watchsteps.go).
//
// An evaluation submitted with per-patch (runner.Options.PerPatch) is
// taken apart by a per_patch job after its report, in the "series" queue
// (seriesjobs.go): the series is measured after each patch
// (pipelines/experiments/perpatch), each prefix an evaluation of the
// stage jobs recorded by its waiter (perpatchsteps.go), the reports are
// written again with the per-patch table, and only then is the
// evaluation done and Notify told. The
// bisection inside a series (BisectSeries: #patcheval bisect, POST
// /api/v1/evaluations/{id}/bisect) is one series_bisect job per
// measurement in the same queue, its state in the store, resumable after
// a crash like a watch's bisection; a measurement is an evaluation of the
// stage jobs, recorded by the waiter its end queues (seriessteps.go), as
// a watch bisection's is; when it ends, a series_bisected job tells
// Config.SeriesBisected (the bots answer in the command's thread).
// Both bisections' steps check and change their state the same way
// (bisectsteps.go): each job names its run and measurement, every change
// reads the state again in the transaction that writes it, and a step
// ahead of the recorded measurements carries the bisection on from them
// as a new run.
//
// # One SQLite database, two pools
//
// The store (pipelines/store) and River's tables (migrated by rivermigrate
// beside the store's own numbered migrations) live in the same SQLite
// file, so a stage's result and the next job commit together. River's
// SQLite driver wants a pool of one connection (its goroutines would
// otherwise meet SQLITE_BUSY); the store keeps its own pool, used by the
// stages, the API and the pages. Both open the file the same way
// (store.DSN): WAL, a 10 s busy timeout and BEGIN IMMEDIATE transactions.
// So:
//
//   - writers in either pool, and in other processes, queue on SQLite's
//     one write lock instead of failing: an IMMEDIATE transaction takes
//     the lock when it begins, so no two transactions deadlock upgrading
//     read locks, and every transaction is short (no stage holds one while
//     it builds or boots);
//   - River's own statements inside a stage's transaction run on the
//     store's connection (InsertManyTx and JobCompleteTx take that
//     *sql.Tx), so the single River connection is never needed twice;
//   - readers never wait: in WAL mode `patcheval runs` in another process,
//     and the dashboard, read the last committed state while jobs write.
//
// One `patcheval serve` owns a SQLite database at a time (a lock file
// beside it); any River job found "running" when it starts belongs to a
// serve that died (kill -9, power loss) and is made available again at
// once (Service.RescueOrphans). A `patcheval lore --pipeline` against the same
// file is just another writer.
//
// # Postgres
//
// --db postgres://... puts the same store (pipelines/store: one
// schema, the same numbered migrations) and River's tables in one
// Postgres database. River runs on riverpgxv5 over the store's own pgx
// pool, and a stage's transaction is a pgx.Tx that the store writes in
// and River inserts the next job and completes the current one in
// (store.Tx.Postgres); the Engine holds the River client for whichever
// database it is (River's client is generic over the transaction type).
// Many processes may share the database, so there is no lock file: each
// process names its River client (Service.WorkerID) and holds a session
// advisory lock on that name while it lives; a job still running whose
// last attempt's worker holds no such lock was left by a dead process,
// and every serve queues such jobs again (at start and every
// Config.OrphanCheck, once seen twice Config.OrphanConfirm apart, since a
// Postgres restart drops live processes' locks for a moment), ending the
// boot run the dead process left running in the same transaction.
// River's stuck-job rescuer (RescueStuckJobsAfter) stays the last resort.
// "The last configure queues the builds" and "the last build plans
// the boots" take store.Tx.Lock (an advisory lock; SQLite serialises
// writers anyway). When the server restarts, the pool reconnects: the
// store repeats a transaction that lost its server before committing,
// River's fetch loop and listener reconnect on their own, and a stage
// whose result could not be recorded fails and is retried by River (its
// work is idempotent).
//
// # Farm: serve and workers
//
// On Postgres, `patcheval worker --db postgres://...` (NewWorker)
// on any machine works the build and boot queues its capabilities name
// (DetectCapabilities: a toolchain per arch, QEMU per arch, KVM, the SSH
// targets it owns, its cores); serve runs every queue itself unless told
// otherwise (--work coordinator: only apply, more and report). Every
// process heartbeats into the store's workers table (name, capabilities,
// queues, current jobs, last seen); the dashboard's /workers page lists
// them, and a job whose queue no live worker works is shown waiting with
// what it needs (WaitReasons), not failed: it runs when such a worker
// joins. A worker holds a presence lock like serve (orphans.go): killed
// mid-job, its job is found orphaned by serve's watch and queued again
// for another worker.
//
// # Security
//
// serve listens on loopback by default; another address needs a token
// (--token-file), and then every mutating request needs Authorization:
// Bearer (HTTP Basic with the token as password is accepted too, for
// browsers), compared in constant time; reads too unless --public-read.
// Without a token, mutating requests from other sites' pages are refused
// (Sec-Fetch-Site / Origin). Submissions name shipped pipelines only, a
// Message-ID or a URL on the service's own lore (never a local path or
// another server), and a tree under an --allow-tree path. The token lives
// only in this process's memory: builds and guests get runner's scrubbed
// environment and the token is never logged.
//
// # riverui
//
// riverqueue.com/riverui, River's own job and queue browser (its
// prebuilt JavaScript ships inside the Go module), is mounted under
// /riverui (riverui.go), on SQLite and Postgres alike, behind the same
// auth as the dashboard: its pages and reads follow the dashboard's
// rules, and its mutations (cancel, retry and delete jobs; pause,
// resume and change queues) need the token even on loopback, so without
// --token-file it is read-only. It is started on its first request, so
// that its background count queries cost nothing to a serve nobody
// browses. The dashboard's /queue page stays the plain view: running,
// queued, retrying, failed, retried and cancelled jobs with their errors.
package service
