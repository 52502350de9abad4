package service

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Watches from the command line (issue 12). `patcheval watch run-now`
// and `patcheval watch daemon` run watches through the same jobs as
// serve, never beside them: RunWatchNow queues a tick job into the
// database; when a serve works that database's watch queue (SQLite: it
// holds the service lock; Postgres: a live process's heartbeat lists the
// queue) it waits for serve to work the tick's jobs, otherwise it works
// the watch queue itself, in this process, until the watch has no
// unfinished job. RunWatchDaemon is serve's scheduler and watch queue
// without the HTTP side. Whichever process works them, the jobs are the
// same and so are their unique keys: a re-test is unique by its watch and
// entry while unfinished (RetestArgs), a bisection step by its event and
// step, so two runners never evaluate one tag, or measure one step,
// twice.

// watchKinds are the watch queue's job kinds.
var watchKinds = []string{WatchTickArgs{}.Kind(), RetestArgs{}.Kind(), RetestedArgs{}.Kind(), BisectStepArgs{}.Kind(), BisectMeasuredArgs{}.Kind()}

// WatchRun is what RunWatchNow did: the history entries and events the
// watch's jobs added or changed while it waited.
type WatchRun struct {
	Watch string `json:"watch"`
	// TickJob is the tick's River job. Served says another process (a
	// serve) worked the jobs; this one queued the tick and waited.
	TickJob int64 `json:"tick_job"`
	Served  bool  `json:"served"`
	// New are the entries seen for the first time; Evaluated those
	// evaluated; Failed those whose evaluation failed (with why).
	New       []string            `json:"new,omitempty"`
	Evaluated []string            `json:"evaluated,omitempty"`
	Failed    []string            `json:"failed,omitempty"`
	Events    []*store.WatchEvent `json:"events,omitempty"`
}

// watchService opens cfg's database for a watch command: one that works
// the watch queue only (own), or, when a serve works the database's watch
// queue, one that only inserts and lists jobs. watches configures the
// watches on the service (as serve does).
func watchService(ctx context.Context, cfg Config, watches func(*Service) WatchConfig) (s *Service, own bool, err error) {
	db, inUse, err := openDB(ctx, cfg.Database, true)
	if err != nil {
		return nil, false, err
	}
	insertOnly := inUse
	if inUse {
		if db, _, err = openDB(ctx, cfg.Database, false); err != nil {
			return nil, false, err
		}
	} else if db.Postgres() {
		if insertOnly, err = watchQueueServed(db.Store); err != nil {
			db.Close()
			return nil, false, err
		}
	}
	s = &Service{cfg: cfg, db: db, log: cfg.Log, lore: mbox.LoreBase(cfg.Lore), logs: map[int64]*evalLog{}, workerID: newWorkerID()}
	if s.log == nil {
		s.log = io.Discard
	}
	if s.budget, err = build.NewBudget(cfg.Jobs); err != nil {
		db.Close()
		return nil, false, fail.Infra(err)
	}
	workers := river.NewWorkers()
	s.addWorkers(workers)
	// The watch queue and the stages' (a re-test's evaluation runs as
	// stage jobs), as serve's embedded default works them.
	caps := AllLocal(runtime.NumCPU())
	s.engine, err = newEngine(db, EngineConfig{BootWorkers: cfg.BootWorkers, BuildWorkers: cfg.BuildWorkers, Grace: cfg.Grace,
		Logger:       slog.New(slog.NewTextHandler(s.log, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Capabilities: caps, AnySSH: true, InsertOnly: insertOnly, ID: s.workerID}, workers)
	if err != nil {
		s.Close()
		return nil, false, err
	}
	name := cfg.Name
	if name == "" {
		name = defaultName("watch")
	}
	s.beat = newHeartbeat(db.Store, name, caps, s.engine)
	s.Watch(watches(s))
	return s, !insertOnly, nil
}

// watchQueueServed says whether a live process (by its heartbeat) works
// the watch queue.
func watchQueueServed(st *store.Store) (bool, error) {
	ws, err := st.Workers()
	if err != nil {
		return false, err
	}
	now := time.Now()
	for _, w := range ws {
		if Live(w, now) && slices.Contains(strings.Fields(w.Queues), QueueWatch) {
			return true, nil
		}
	}
	return false, nil
}

// servedElsewhere says whether the process that works s's watch queue
// still does (s being insert-only): false once the serve has gone.
func (s *Service) servedElsewhere() bool {
	if s.db.Postgres() {
		served, err := watchQueueServed(s.db.Store)
		return err != nil || served
	}
	lock, err := lockSQLite(s.db.URL)
	if err != nil || lock == nil {
		return true
	}
	lock.Close()
	return false
}

// RunWatchNow ticks watch name now through the watch queue (see above)
// and returns when the tick's re-tests and bisections have ended. A serve
// that stops meanwhile is taken over: the jobs it left are worked here.
// A remote that could not be reached, or an entry whose evaluation failed
// for infrastructure reasons, is an infra error beside the result.
func RunWatchNow(ctx context.Context, cfg Config, watches func(*Service) WatchConfig, name string) (*WatchRun, error) {
	loc, err := ParseDatabase(cfg.Database)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(loc)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	w, err := st.FindWatch(name)
	if err != nil {
		return nil, err
	}
	beforeTags, err := st.WatchTags(w.ID)
	if err != nil {
		return nil, err
	}
	beforeEvents, err := st.WatchEvents(w.ID)
	if err != nil {
		return nil, err
	}
	run := &WatchRun{Watch: w.Name}
	start := time.Now()
	for {
		s, own, err := watchService(ctx, cfg, watches)
		if err != nil {
			return run, err
		}
		if run.TickJob == 0 {
			if run.TickJob, err = s.TickWatch(ctx, w.ID); err != nil {
				s.Close()
				return run, err
			}
		}
		again := false
		if own {
			err = s.drainWatch(ctx, w.ID)
		} else {
			run.Served = true
			s.logf("watch %s: tick queued as job %d; the serve on %s works it", w.Name, run.TickJob, s.db.Where)
			again, err = s.awaitWatch(ctx, w.ID, func() bool { return !s.servedElsewhere() })
			if again {
				s.logf("watch %s: the serve has gone: working the watch's jobs here", w.Name)
			}
		}
		s.Close()
		if err != nil {
			return run, err
		}
		if !again {
			break
		}
	}
	return run, run.since(st, w, beforeTags, beforeEvents, start)
}

// since fills in what changed on w since the before state, and returns
// the errors of the tick: the remote's, and infrastructure failures of
// re-tests.
func (run *WatchRun) since(st *store.Store, w *store.Watch, beforeTags []*store.WatchTag, beforeEvents []*store.WatchEvent, start time.Time) error {
	cur, err := st.FindWatch(w.Name)
	if err != nil {
		return err
	}
	h, err := watch.Load(st, cur)
	if err != nil {
		return err
	}
	before := map[string]*store.WatchTag{}
	for _, t := range beforeTags {
		before[t.Tag] = t
	}
	var infra []string
	for _, e := range h.Tags {
		t, b := e.WatchTag, before[e.Tag]
		if b == nil {
			run.New = append(run.New, t.Tag)
		}
		changed := b == nil || b.Status != t.Status || b.EvaluationID != t.EvaluationID || !b.Updated.Equal(t.Updated)
		if !changed {
			continue
		}
		switch t.Status {
		case store.TagDone:
			run.Evaluated = append(run.Evaluated, t.Tag)
		case store.TagFailed:
			run.Failed = append(run.Failed, t.ErrorText)
		case store.TagInfra:
			infra = append(infra, t.Tag+": "+t.ErrorText)
		}
	}
	old := map[int64]*store.WatchEvent{}
	for _, e := range beforeEvents {
		old[e.ID] = e
	}
	for _, e := range h.Events {
		if o := old[e.ID]; o == nil || !bytes.Equal(o.Bisect, e.Bisect) {
			run.Events = append(run.Events, e)
		}
	}
	if !cur.LastCheck.Before(start.Truncate(time.Second)) && cur.LastError != "" {
		if cur.LastErrorKind == fail.KindInput.String() {
			return fail.Inputf("watch %s: %s", w.Name, cur.LastError)
		}
		return fail.Infraf("watch %s: %s", w.Name, cur.LastError)
	}
	if len(infra) > 0 {
		return fail.Infraf("watch %s: re-tests failed for infrastructure reasons (the next tick retries): %s", w.Name, strings.Join(infra, "; "))
	}
	return nil
}

// drainWatch works the watch queue in this process until watch id has no
// unfinished job.
func (s *Service) drainWatch(ctx context.Context, id int64) error {
	stop, err := s.startJobs(ctx)
	if err != nil {
		return err
	}
	_, err = s.awaitWatch(ctx, id, nil)
	if serr := stop(); err == nil {
		err = serr
	}
	return err
}

// awaitWatch waits until watch id has no unfinished job, or gone says the
// process working them has gone (then again is true).
func (s *Service) awaitWatch(ctx context.Context, id int64, gone func() bool) (again bool, err error) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		jobs, err := s.watchJobs(ctx, id, watchKinds...)
		if err != nil {
			return false, err
		}
		// A re-test or a bisection step waiting for its evaluation (its
		// stage jobs) is unfinished too.
		waiting, err := s.watchWaiting(id, RetestedArgs{}.Kind(), BisectMeasuredArgs{}.Kind())
		if err != nil {
			return false, err
		}
		if len(jobs) == 0 && waiting == 0 {
			return false, nil
		}
		if gone != nil && gone() {
			// Its jobs stay: the caller works them itself.
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, fail.Infraf("watch: stopped waiting for the watch's jobs (they stay queued): %w", ctx.Err())
		case <-t.C:
		}
	}
}

// RunWatchDaemon runs the watches on their schedules until ctx ends: the
// scheduler queues their ticks and this process works the watch queue,
// as serve does, without HTTP. A database whose watch queue a serve works
// already is a bad-input error (the daemon would only tick beside it).
func RunWatchDaemon(ctx context.Context, cfg Config, watches func(*Service) WatchConfig) error {
	s, own, err := watchService(ctx, cfg, watches)
	if err != nil {
		return err
	}
	defer s.Close()
	if !own {
		return fail.Inputf("database %s: a running 'patcheval serve' works its watches already (it runs them on their schedules; 'patcheval watch run-now' queues a tick for it)", s.db.Where)
	}
	return s.Run(ctx, nil)
}
