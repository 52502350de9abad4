package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/artifact"
	"github.com/patcheval/patcheval/pipelines/store"
)

// WorkerConfig configures a `patcheval worker`: a process on any machine
// that works the build and boot jobs its Capabilities name, from the
// coordinator's Postgres database.
type WorkerConfig struct {
	// Database is the coordinator's postgres:// URL (a SQLite database
	// belongs to the one serve that has it open).
	Database string
	// Name names the worker on the workers page (default
	// worker@<hostname>-<pid>); two live workers must not share one.
	Name string
	// CacheDir holds this machine's kernel builds and guest agents.
	CacheDir string
	// Jobs is this machine's make -j budget (0: its CPUs).
	Jobs int
	// CompilerCache is its builds' compiler cache: "kcc" (""), "ccache"
	// or "none".
	CompilerCache string
	// BootWorkers and BuildWorkers: boots and builds at once (defaults 1
	// and DefaultBuildWorkers).
	BootWorkers, BuildWorkers int
	// Grace is how long SIGTERM lets running jobs finish.
	Grace time.Duration
	// Capabilities are what it runs (DetectCapabilities); Coordinator is
	// ignored: the coordinator's stages stay with serve.
	Capabilities Capabilities
	// Log receives the worker's log and its jobs' progress.
	Log io.Writer
	// Server is the coordinator's URL: kernels built here are put into
	// its artifact store, and kernels built elsewhere fetched from it
	// (cached in CacheDir); a build's sources are fetched from its trees
	// (GitPath) into this machine's mirror. Token authenticates the puts
	// and fetches. Without a Server, builds read the evaluation's tree at
	// its path and builds and boots must share a filesystem.
	Server string
	Token  []byte
}

// Worker is `patcheval worker`: the service's core (its database, River
// engine and the jobs of the queues it works; no API, dashboard or loops:
// it serves no HTTP) and what only a worker has: its presence and
// heartbeat while it runs (Run) and, with a Server, its progress lines
// forwarded to serve's log.
type Worker struct {
	s *Service
	// fwd sends the progress lines to serve (logfwd.go); nil without a
	// Server.
	fwd *logForwarder
}

// notifyOnCoordinator is a worker's Config.Notify. The coordinator's
// Notify is not known here, so a worker inserts the notify job of every
// event its stages end with (notifyJobs inserts them when there is a
// Notify) and the coordinator's notify worker runs it (doing nothing
// without a Notify of its own). A worker never runs one: notify jobs are
// in QueueReport, a coordinator queue.
func notifyOnCoordinator(context.Context, int64, string) error {
	return fail.Infraf("notify jobs run on the coordinator, not on a worker")
}

// NewWorker opens the database and sets up the engine on the queues of
// cfg.Capabilities.
func NewWorker(ctx context.Context, cfg WorkerConfig) (*Worker, error) {
	loc, err := ParseDatabase(cfg.Database)
	if err != nil {
		return nil, err
	}
	if !store.IsPostgres(loc) {
		return nil, fail.Inputf("--db %s: a worker needs the coordinator's postgres:// database (a SQLite file belongs to the one serve that has it open)", store.Redact(cfg.Database))
	}
	caps := cfg.Capabilities
	caps.Coordinator = false
	if len(caps.Queues()) == 0 {
		return nil, fail.Inputf("this worker can run nothing: no cross compiler, no QEMU and no --ssh-target (install e.g. gcc-powerpc64le-linux-gnu or qemu-system-ppc)")
	}
	name := cfg.Name
	if name == "" {
		name = defaultName("worker")
	}
	db, err := OpenDB(ctx, loc)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: Config{Database: cfg.Database, CacheDir: cfg.CacheDir, Jobs: cfg.Jobs, CompilerCache: cfg.CompilerCache, BootWorkers: cfg.BootWorkers,
		BuildWorkers: cfg.BuildWorkers, Grace: cfg.Grace, Log: cfg.Log, Work: &caps, Name: name, Notify: notifyOnCoordinator},
		db: db, log: cfg.Log, lore: mbox.LoreBase(""), logs: map[int64]*evalLog{}, workerID: newWorkerID()}
	if s.log == nil {
		s.log = io.Discard
	}
	if s.budget, err = build.NewBudget(cfg.Jobs); err != nil {
		db.Close()
		return nil, fail.Infra(err)
	}
	if err := s.newEngine(); err != nil {
		s.Close()
		return nil, err
	}
	w := &Worker{s: s}
	if cfg.Server != "" {
		u, err := url.Parse(cfg.Server)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			s.Close()
			return nil, fail.Inputf("--server %q: want the coordinator's http(s):// URL", cfg.Server)
		}
		cache := cfg.CacheDir
		if cache == "" {
			cache = xdg.CacheDir()
		}
		server := strings.TrimRight(cfg.Server, "/")
		s.artifacts = &artifact.Client{Base: server + ArtifactsPath, Token: cfg.Token,
			Cache: artifact.Dir{Path: filepath.Join(cache, "artifact-store")}}
		// Builds fetch their sources into mirrors of the coordinator's
		// trees.
		s.sources = (&mirrors{dir: filepath.Join(cache, "trees", "farm"), server: server, token: cfg.Token}).sources
		w.fwd = newLogForwarder(server, cfg.Token, s.beat.w.Name, s.logf)
		s.forward = w.fwd.send
	}
	return w, nil
}

// Name is the worker's name on the workers page.
func (w *Worker) Name() string { return w.s.beat.w.Name }

// Queues are the queues it works.
func (w *Worker) Queues() []string { return w.s.engine.WorkedQueues() }

// Close stops forwarding progress lines and closes the database.
func (w *Worker) Close() error {
	if w.fwd != nil {
		w.fwd.close()
	}
	return w.s.Close()
}

// Run works jobs until ctx is cancelled (SIGTERM), then stops taking
// jobs, gives running ones the grace period and cancels the rest (River
// retries them, here or on another worker). Losing the database
// (a restart) is waited out: River's fetch loop and the store reconnect.
func (w *Worker) Run(ctx context.Context) error {
	s := w.s
	// The presence lock tells serve's orphan watch that this process's
	// running jobs are not orphans (orphans.go); once it is gone (kill -9,
	// a lost machine) they are queued again for another worker.
	pres, err := s.db.holdPresence(ctx, s.workerID, s.logf)
	if err != nil {
		return err
	}
	presCtx, stopPres := context.WithCancel(context.WithoutCancel(ctx))
	presDone := make(chan struct{})
	go func() { defer close(presDone); pres.keep(presCtx) }()
	defer func() {
		stopPres()
		<-presDone
		pres.release()
	}()
	if err := s.engine.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	s.logf("worker %s: working %s", s.beat.w.Name, strings.Join(s.engine.WorkedQueues(), " "))
	beatDone := s.beat.run(ctx)
	<-ctx.Done()
	s.logf("worker %s: stopping: no new jobs; running ones get %s to finish", s.beat.w.Name, s.engineGrace())
	stopCtx, cancel := context.WithTimeout(context.Background(), s.engineGrace()+30*time.Second)
	defer cancel()
	err = s.engine.Stop(stopCtx)
	<-beatDone
	s.beat.stopped()
	return err
}

// ---- heartbeats ----

// HeartbeatEvery is how often a worker (and serve) records that it is
// alive; one not seen for LiveWithin is taken for dead on the workers
// page and for the jobs waiting on its queues.
var (
	HeartbeatEvery = 5 * time.Second
	LiveWithin     = 30 * time.Second
)

// heartbeat records its process in the store's workers table every
// HeartbeatEvery: its capabilities, queues and running jobs.
type heartbeat struct {
	st *store.Store
	e  *Engine

	mu      sync.Mutex
	w       store.Worker
	current map[int64]string
}

func newHeartbeat(st *store.Store, name string, caps Capabilities, e *Engine) *heartbeat {
	host, _ := os.Hostname()
	c, _ := json.Marshal(caps)
	return &heartbeat{st: st, e: e, current: map[int64]string{},
		w: store.Worker{Name: name, Host: host, Capabilities: string(c), State: store.WorkerRunning, Started: time.Now()}}
}

func defaultName(role string) string {
	host, _ := os.Hostname()
	if role == "serve" {
		return "serve@" + host
	}
	return fmt.Sprintf("%s@%s-%d", role, host, os.Getpid())
}

// begin and end bracket a running job (the page's "current job").
func (h *heartbeat) begin(id int64, desc string) {
	h.mu.Lock()
	h.current[id] = desc
	h.mu.Unlock()
}

func (h *heartbeat) end(id int64) {
	h.mu.Lock()
	delete(h.current, id)
	h.mu.Unlock()
}

// beat records the worker as seen now.
func (h *heartbeat) beat() error {
	h.mu.Lock()
	w := h.w
	w.Queues = strings.Join(h.e.WorkedQueues(), " ")
	var cur []string
	for id, d := range h.current {
		cur = append(cur, fmt.Sprintf("job %d: %s", id, d))
	}
	slices.Sort(cur)
	w.Current = strings.Join(cur, "\n")
	h.mu.Unlock()
	return h.st.Heartbeat(w)
}

// run beats until ctx ends; the channel closes then. A failed beat (the
// database restarting) is retried at the next one.
func (h *heartbeat) run(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(HeartbeatEvery)
		defer t.Stop()
		for {
			_ = h.beat()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return done
}

// stopped records that the worker left cleanly.
func (h *heartbeat) stopped() {
	h.mu.Lock()
	h.w.State = store.WorkerStopped
	clear(h.current)
	h.mu.Unlock()
	_ = h.beat()
}

// ---- jobs no live worker can take ----

// Live reports whether w was seen within LiveWithin of now and did not
// leave.
func Live(w store.Worker, now time.Time) bool {
	return w.State != store.WorkerStopped && now.Sub(w.LastSeen) <= LiveWithin
}

// WaitReasons says, for each available or scheduled job in jobs whose
// queue no live worker works, why it waits: what a worker needs to take
// it. Such a job is waiting, not failed; it runs when such a worker joins.
func WaitReasons(workers []store.Worker, jobs []*rivertype.JobRow, now time.Time) map[int64]string {
	served := map[string]bool{}
	for _, w := range workers {
		if Live(w, now) {
			for _, q := range strings.Fields(w.Queues) {
				served[q] = true
			}
		}
	}
	out := map[int64]string{}
	for _, j := range jobs {
		switch j.State {
		case rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRetryable:
		default:
			continue
		}
		if !served[j.Queue] {
			out[j.ID] = fmt.Sprintf("waiting: no live worker takes queue %s; needs %s", j.Queue, queueNeeds(j.Queue))
		}
	}
	return out
}
