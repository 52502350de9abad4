package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/termsafe"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/artifact"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/service/dashboard"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Evaluation statuses the service adds to the store's running, done and
// failed.
const (
	// StatusQueued: submitted, its first job not started yet.
	StatusQueued = "queued"
	// StatusCancelled: cancelled through the API or the dashboard.
	StatusCancelled = "cancelled"
)

// Loop is a background loop serve runs beside the workers (the watches'
// scheduler is one, see Watch): Run gets a context cancelled at shutdown
// and the Service to submit evaluations with (Service.Submit). A loop that
// returns an error is logged and not restarted; one that returns nil is
// done.
type Loop struct {
	Name string
	Run  func(ctx context.Context, s *Service) error
}

// Config configures a Service.
type Config struct {
	// Database is the --db value as given (see ParseDatabase).
	Database string
	// CacheDir holds kernel builds and guest agents ("" = XDG default).
	CacheDir string
	// Jobs is the make -j budget shared by all builds (0: CPUs).
	Jobs int
	// CompilerCache is the builds' compiler cache: "kcc" (""), "ccache"
	// or "none".
	CompilerCache string
	// BootWorkers and BuildWorkers size those queues (EngineConfig).
	BootWorkers, BuildWorkers int
	// Grace is how long SIGTERM lets running jobs finish (default 30s).
	Grace time.Duration
	// OrphanCheck is how often a serve on Postgres looks for jobs left
	// running by dead processes, and OrphanConfirm how long such a job
	// must stay orphaned before it is queued again (defaults
	// DefaultOrphanCheck, DefaultOrphanConfirm; see orphans.go).
	OrphanCheck, OrphanConfirm time.Duration
	// StuckCheck is how often serve looks for evaluations that jobs wait
	// for but that nothing will end (no job of theirs left), and
	// StuckConfirm how long one must stay so before it is ended as
	// failed (defaults DefaultStuckCheck, DefaultStuckConfirm; see
	// stuck.go).
	StuckCheck, StuckConfirm time.Duration
	// Token, when set, is required (Authorization: Bearer) on every
	// mutating request, and on reads unless PublicRead.
	Token      []byte
	PublicRead bool
	// PublicURL is the dashboard's URL as others reach it (--public-url):
	// its host is one the server answers to (hosts.go).
	PublicURL string
	// AllowHosts are more names requests may address the server by
	// (--allow-host NAME[:PORT]): a proxy's or a farm's name for it.
	AllowHosts []string
	// Timeouts bound slow clients (zero: DefaultTimeouts).
	Timeouts Timeouts
	// MaxSubmissions is how many submissions one client may have under
	// way (0: DefaultMaxSubmissions; negative: no limit).
	MaxSubmissions int
	// AllowTrees are the kernel trees a submission may name (--tree must
	// be one of them or inside one). Empty: the pipelines' own tree.path
	// only.
	AllowTrees []string
	// Lore is the public-inbox base URL threads are fetched from ("":
	// PATCHEVAL_LORE, else lore.kernel.org).
	Lore string
	// From signs the reply drafts.
	From mbox.Address
	// Log receives the service's log and every evaluation's progress
	// (default: discard).
	Log io.Writer
	// Loops run in the background while the service runs.
	Loops []Loop
	// Notify, when set, is told when an evaluation is queued, done or
	// failed (EventQueued, EventDone, EventFailed): the bots' reporters
	// queue their posts there. It runs as a River job ("notify") inserted
	// in the same transaction as the event, so a crash never loses one;
	// a failing Notify is retried by River, and must be idempotent.
	Notify func(ctx context.Context, evalID int64, event string) error
	// Posts, when set, backs the dashboard's /posts page: the reporters'
	// outbox and its Approve button for held mails.
	Posts dashboard.Posts
	// Work, when set, are the stages this process runs itself (its
	// queues, Capabilities.Queues); the others wait for `patcheval
	// worker`s. nil: every stage of every arch and SSH target, the
	// embedded default (AllLocal).
	Work *Capabilities
	// Name names this process on the workers page (default
	// serve@<hostname>).
	Name string
	// Series makes the per-patch runs' and the bisections' measurements
	// (zero: the runner in this service's store and cache).
	Series SeriesMeasurers
	// SeriesBisect bisects inside the series, before the evaluation is
	// done, every evaluation whose whole series (of several patches)
	// regresses, as lore --pipeline does unless --no-series-bisect: the
	// report and the bots' replies then name the patch.
	SeriesBisect bool
	// SeriesBisected, when set, is told how a bisection inside a series
	// ended (text: the sentence naming the patch, or why there is none)
	// and who asked for it (BisectSeries' requesters). It runs as a River
	// job queued with the end, retried when it fails: it must be
	// idempotent.
	SeriesBisected func(ctx context.Context, evalID int64, requesters []string, text string) error
}

// Service is patcheval serve: the database, the River engine and its
// workers, the HTTP API and the dashboard.
type Service struct {
	cfg    Config
	db     *DB
	engine *Engine
	dash   *dashboard.Dashboard
	log    io.Writer
	lore   string
	// workerID names this process's River client (attempted_by of the
	// jobs it runs); on Postgres its presence lock says it is alive.
	workerID string

	// budget is the -j budget the running builds share (Config.Jobs).
	budget *build.Budget

	mu   sync.Mutex
	logs map[int64]*evalLog

	// artifacts is where builds put their artifacts and boots on other
	// machines fetch them: on Postgres, serve's own store (Artifacts) and
	// a worker's Client to it; nil on SQLite (one machine).
	artifacts artifact.Store
	// sources is runner.Env.Sources of the stage jobs: on a worker with a
	// Server, its mirrors of the coordinator's trees (nil: builds read the
	// evaluation's tree at its recorded path).
	sources func(ctx context.Context, id int64, tree, commit string) (string, error)
	// forward, when set, is given every progress line (a worker's
	// forwarder to serve's log, logfwd.go).
	forward func(id int64, line string)

	// watchCfg and watcher are set by Watch (nil: no watches).
	watchCfg *WatchConfig
	watcher  *watch.Watcher

	// beat is this process's heartbeat on the workers page.
	beat *heartbeat

	// ui is riverui under RiverUIPath (riverui.go).
	ui riverUI

	// hosts is the Host allow-list (hosts.go).
	hosts hostList
}

// New opens the database (see OpenDB: one serve per database) and sets up
// the engine, API and dashboard. Close it when Run has returned.
func New(ctx context.Context, cfg Config) (*Service, error) {
	db, err := OpenDB(ctx, cfg.Database)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, db: db, log: cfg.Log, lore: mbox.LoreBase(cfg.Lore), logs: map[int64]*evalLog{}, workerID: newWorkerID()}
	s.ui.ctx, s.ui.cancel = context.WithCancel(context.WithoutCancel(ctx))
	// --lore may name the server, its all index, a list or a message
	// (mbox.SplitLore): links and the submitted URLs' check use its base.
	if _, _, err := mbox.SplitLore(s.lore); err != nil {
		db.Close()
		return nil, fail.Inputf("--lore: %v", err)
	}
	if s.log == nil {
		s.log = io.Discard
	}
	if s.hosts, err = newHostList(cfg.PublicURL, cfg.AllowHosts); err != nil {
		db.Close()
		return nil, err
	}
	for i, t := range cfg.AllowTrees {
		if s.cfg.AllowTrees[i], err = canonicalTree(t); err != nil {
			db.Close()
			return nil, fail.Inputf("--allow-tree %s: %v", t, err)
		}
	}
	if s.budget, err = build.NewBudget(cfg.Jobs); err != nil {
		db.Close()
		return nil, fail.Infra(err)
	}
	if err := s.newEngine(); err != nil {
		s.Close()
		return nil, err
	}
	if db.Postgres() {
		s.artifacts = s.Artifacts()
	}
	s.dash, err = dashboard.New(source{s}, dashboard.Options{Where: db.Where, Lore: mbox.LoreLink(s.lore), Pipelines: pipelines.List(),
		Posts: cfg.Posts})
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// newEngine makes the River engine working the queues of s.cfg.Work (nil:
// all of them) and the heartbeat that shows them on the workers page.
func (s *Service) newEngine() error {
	caps, anySSH := AllLocal(runtime.NumCPU()), true
	if s.cfg.Work != nil {
		caps, anySSH = *s.cfg.Work, false
	}
	name := s.cfg.Name
	if name == "" {
		name = defaultName("serve")
	}
	workers := river.NewWorkers()
	s.addWorkers(workers)
	var err error
	s.engine, err = newEngine(s.db, EngineConfig{BootWorkers: s.cfg.BootWorkers, BuildWorkers: s.cfg.BuildWorkers, Grace: s.cfg.Grace,
		Logger:       slog.New(slog.NewTextHandler(s.log, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Capabilities: caps, AnySSH: anySSH, ID: s.workerID}, workers)
	if err != nil {
		return err
	}
	s.beat = newHeartbeat(s.db.Store, name, caps, s.engine)
	return nil
}

// Close closes the database.
func (s *Service) Close() error {
	if s.ui.cancel != nil {
		s.ui.cancel()
	}
	if s.budget != nil {
		s.budget.Close()
	}
	return s.db.Close()
}

// Store is the evaluation store.
func (s *Service) Store() *store.Store { return s.db.Store }

// Engine is the job engine.
func (s *Service) Engine() *Engine { return s.engine }

// WorkerID names this process's River client: the jobs it runs list it
// in attempted_by.
func (s *Service) WorkerID() string { return s.workerID }

// DatabasePath names the database: the SQLite file, or the Postgres URL
// without its password.
func (s *Service) DatabasePath() string { return s.db.Where }

// OutDir is where evaluation id's reports go: evaluations/<id> in the
// state directory (beside a SQLite database file).
func (s *Service) OutDir(id int64) string {
	return filepath.Join(s.db.Dir, "evaluations", strconv.FormatInt(id, 10))
}

// StateDir is the service's state directory (beside a SQLite database
// file): evaluations/ and watches/ hold the reports.
func (s *Service) StateDir() string { return s.db.Dir }

// logf writes one line to the service's log, its control characters
// escaped (messages quote mail subjects, workers' names and errors).
func (s *Service) logf(format string, a ...any) {
	fmt.Fprintf(s.log, "%s %s\n", time.Now().UTC().Format("15:04:05"), termsafe.Line(fmt.Sprintf(format, a...)))
}

// Run serves HTTP on ln and works jobs until ctx is cancelled (SIGTERM):
// then it stops taking jobs, gives running ones the grace period, cancels
// the rest (they are retried on the next start), stops the loops and
// returns. Without ln it serves no HTTP (`patcheval watch daemon`).
func (s *Service) Run(ctx context.Context, ln net.Listener) error {
	stopJobs, err := s.startJobs(ctx)
	if err != nil {
		if ctx.Err() != nil {
			// Stopped while the jobs were starting (a query cut short
			// by the cancelled context): a stop, not a failure.
			return nil
		}
		return err
	}
	loopCtx, stopLoops := context.WithCancel(ctx)
	var wg sync.WaitGroup
	loops := s.cfg.Loops
	if s.watchCfg != nil {
		loops = append(loops[:len(loops):len(loops)], Loop{Name: "watch scheduler", Run: func(ctx context.Context, s *Service) error {
			return s.scheduleWatches(ctx)
		}})
	}
	for _, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Run(loopCtx, s); err != nil && loopCtx.Err() == nil {
				s.logf("loop %s stopped: %v", l.Name, err)
			}
		}()
	}
	var srv *http.Server
	errc := make(chan error, 1)
	if ln != nil {
		srv = s.httpServer(s.Handler())
		srv.BaseContext = func(net.Listener) context.Context { return ctx }
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.logf("stopping: no new jobs; running ones get %s to finish", s.engineGrace())
	stopLoops()
	if srv != nil {
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		srv.Shutdown(shut)
		cancel()
	}
	if serr := stopJobs(); serr != nil && err == nil {
		err = serr
	}
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// startJobs starts working jobs: on Postgres it holds this process's
// presence lock and watches for orphaned jobs, on SQLite (one process per
// file) it queues again the jobs a dead process left running; then River
// and the heartbeat start. stop stops taking jobs, gives running ones the
// grace period, cancels the rest and releases the presence lock.
func (s *Service) startJobs(ctx context.Context) (stop func() error, err error) {
	var bg sync.WaitGroup
	var pres *presence
	bgCtx, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	release := func() {
		stopBg()
		bg.Wait()
		if pres != nil {
			pres.release()
		}
	}
	if s.db.Postgres() {
		// Other processes may share the database: this one's presence
		// lock tells them its jobs are not orphans, held until River
		// has stopped (see orphans.go).
		p, err := s.db.holdPresence(ctx, s.workerID, s.logf)
		if err != nil {
			release()
			return nil, err
		}
		pres = p
		bg.Add(2)
		go func() { defer bg.Done(); p.keep(bgCtx) }()
		go func() { defer bg.Done(); s.watchOrphans(bgCtx) }()
	} else {
		// One serve per SQLite file (OpenDB's lock): a running job is an
		// orphan.
		if n, err := s.RescueOrphans(ctx); err != nil {
			release()
			return nil, err
		} else if n > 0 {
			s.logf("%d job(s) were running when the previous serve died: queued again", n)
		}
	}
	s.logf("jobs run as worker %s", s.workerID)
	// River runs on its own context: shutdown goes through Stop, which
	// lets running jobs finish within the grace period.
	if err := s.engine.Start(context.WithoutCancel(ctx)); err != nil {
		release()
		return nil, err
	}
	// Evaluations waited for that nothing will end (stuck.go).
	bg.Add(1)
	go func() { defer bg.Done(); s.watchStuck(bgCtx) }()
	beatCtx, stopBeat := context.WithCancel(ctx)
	beatDone := s.beat.run(beatCtx)
	return func() error {
		stopCtx, cancel := context.WithTimeout(context.Background(), s.engineGrace()+30*time.Second)
		defer cancel()
		err := s.engine.Stop(stopCtx)
		stopBeat()
		<-beatDone
		s.beat.stopped()
		release()
		return err
	}, nil
}

func (s *Service) engineGrace() time.Duration {
	if s.cfg.Grace > 0 {
		return s.cfg.Grace
	}
	return 30 * time.Second
}

// ArtifactsPath is where serve mounts the artifact store.
const ArtifactsPath = "/api/v1/artifacts/"

// Artifacts is the coordinator's artifact store: artifacts/ in the state
// directory.
func (s *Service) Artifacts() artifact.Dir {
	return artifact.Dir{Path: filepath.Join(s.db.Dir, "artifacts")}
}

// Handler is the service's HTTP handler: /api/v1/, riverui under
// /riverui/ and the dashboard, behind the token check.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", s.api())
	// The farm's content-addressed artifact store (pipelines/artifact):
	// writes need the token, whatever else is open.
	mux.Handle(ArtifactsPath, artifact.Handler(ArtifactsPath, s.Artifacts(), s.cfg.Token))
	// The evaluations' trees, fetch only, for workers' builds (sources.go).
	mux.Handle(GitPath, s.gitHandler())
	mux.Handle(RiverUIPath+"/", s.riverUIHandler())
	mux.Handle("/", s.dash)
	return s.auth(mux)
}

// ---- evaluation state ----

// setStatus records an evaluation's status, in tx when given.
func (s *Service) setStatus(tx *store.Tx, id int64, status string) error {
	if tx != nil {
		return s.db.Store.SetEvaluationStatusTx(tx, id, status)
	}
	return s.db.Store.SetEvaluationStatus(id, status)
}

// Cancel cancels evaluation id: its queued jobs never run, its running
// ones are cancelled (a boot's QEMU is killed, the partial boot does not
// count), finished work is kept. The evaluations it waits for (a
// per-patch prefix's, a series bisection step's measurement) are
// cancelled with it unless another live waiter waits for them too
// (cancelTx). An evaluation that is not queued or running is a
// bad-input error.
func (s *Service) Cancel(ctx context.Context, id int64) error {
	e, err := s.db.Store.Evaluation(id)
	if err != nil {
		return err
	}
	if !dashboard.Active(e.Status) {
		return fail.Inputf("evaluation %d is %s, not queued or running: nothing to cancel", id, e.Status)
	}
	// The status first: a job that starts meanwhile sees it and stops.
	// The jobs waiting for it are queued with it (waiters.go).
	var with []int64
	if err := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		var err error
		with, err = s.cancelTx(ctx, tx, id)
		return err
	}); err != nil {
		return err
	}
	n, err := s.engine.CancelEvaluation(ctx, id)
	if err != nil {
		return err
	}
	s.logf("evaluation %d cancelled (%d job(s))", id, n)
	s.evalLog(id).printf("cancelled (%d job(s))", n)
	return s.cancelledWith(ctx, id, with)
}

// ---- per-evaluation progress ----

// evalLog keeps an evaluation's recent progress lines for the page and
// its server-sent events.
type evalLog struct {
	mu    sync.Mutex
	lines []string
	subs  map[chan string]bool
	part  []byte
	out   io.Writer
	id    int64
	// fwd, on a worker with a server, sends the lines to serve's log
	// (Service.forward).
	fwd func(id int64, line string)
}

const logLines = 200

func (s *Service) evalLog(id int64) *evalLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[id]
	if l == nil {
		l = &evalLog{subs: map[chan string]bool{}, out: s.log, id: id, fwd: s.forward}
		s.logs[id] = l
	}
	return l
}

// Write takes progress output (progress.Reporter writes whole lines).
func (l *evalLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		line := string(bytes.TrimRight(l.part[:i], "\r"))
		l.part = l.part[i+1:]
		l.add(line)
	}
	return len(p), nil
}

func (l *evalLog) printf(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.add(time.Now().UTC().Format("15:04:05") + " " + fmt.Sprintf(format, a...))
}

// add records one progress line. It comes from builds, boots, mail and
// workers: its control characters are escaped (termsafe.Line) before it
// reaches serve's stderr, the page or the event stream, where an ESC
// would drive a terminal and a CR start a forged line or SSE field.
func (l *evalLog) add(line string) {
	line = termsafe.Line(line)
	fmt.Fprintf(l.out, "evaluation %d: %s\n", l.id, line)
	if l.fwd != nil {
		l.fwd(l.id, line)
	}
	l.lines = append(l.lines, line)
	if len(l.lines) > logLines {
		l.lines = l.lines[len(l.lines)-logLines:]
	}
	for c := range l.subs {
		select {
		case c <- line:
		default: // a slow reader misses lines, never blocks a job
		}
	}
}

func (l *evalLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func (l *evalLog) subscribe() (<-chan string, func()) {
	c := make(chan string, 64)
	l.mu.Lock()
	l.subs[c] = true
	l.mu.Unlock()
	return c, func() {
		l.mu.Lock()
		delete(l.subs, c)
		l.mu.Unlock()
	}
}

// source is the dashboard's view of the service.
type source struct{ s *Service }

func (src source) Store() *store.Store                        { return src.s.db.Store }
func (src source) OutDir(id int64) string                     { return src.s.OutDir(id) }
func (src source) Log(id int64) []string                      { return src.s.evalLog(id).snapshot() }
func (src source) Cancel(ctx context.Context, id int64) error { return src.s.Cancel(ctx, id) }
func (src source) Rerun(ctx context.Context, id int64) error {
	_, err := src.s.Rerun(ctx, id)
	return err
}
func (src source) Waiting(jobs []*rivertype.JobRow) map[int64]string {
	ws, err := src.s.db.Store.Workers()
	if err != nil {
		return nil
	}
	return WaitReasons(ws, jobs, time.Now())
}
func (src source) Live(w store.Worker) bool { return Live(w, time.Now()) }

// BuildFile opens a file of b's artifact directory; a kernel built on a
// worker is read from the artifact store by the manifest its row
// records (the directory is on the worker).
func (src source) BuildFile(ctx context.Context, b store.Build, name string) (io.ReadCloser, error) {
	if b.ArtifactDir != "" {
		f, err := os.Open(filepath.Join(b.ArtifactDir, name))
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return f, err
		}
	}
	key, ok := runner.BuildFiles(b)[name]
	if !ok || src.s.artifacts == nil {
		return nil, fmt.Errorf("build %d: no %s: %w", b.ID, name, fs.ErrNotExist)
	}
	return src.s.artifacts.Open(ctx, key)
}
func (src source) JobCounts(ctx context.Context) (map[string]map[rivertype.JobState]int, error) {
	return src.s.engine.JobCounts(ctx)
}
func (src source) RetriedJobs(ctx context.Context, limit int) ([]*rivertype.JobRow, error) {
	return src.s.engine.RetriedJobs(ctx, limit)
}
func (src source) Jobs(ctx context.Context, evalID int64, limit int, states ...rivertype.JobState) ([]*rivertype.JobRow, error) {
	return src.s.engine.Jobs(ctx, evalID, limit, states...)
}
