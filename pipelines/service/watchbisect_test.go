package service

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testpg"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/pipelines/store"
)

// watchBisectFixture is a watch whose regression (v6.2-rc1..v6.2-rc2, 16
// commits: change 9 makes getppid 25% slower, change 12 does not build)
// was bisected once through the watch queue's jobs (RunWatchNow, the
// stand-in evaluator and measurer of testWatchSpec: no kernel), so that
// a test can put the event's bisection back into a state of its choosing,
// queue step jobs of its choosing, and work them.
type watchBisectFixture struct {
	t       *testing.T
	db      string
	root    string
	watchID int64
	eventID int64
	culprit string
	// ref is the bisection as it ended (found, its records).
	ref *watch.BisectState
	log string
}

func newWatchBisectFixture(t *testing.T, root, db string) *watchBisectFixture {
	r := newWatchRemote(t, root)
	rc1 := r.commit("", 0, "1000")
	r.tag("v6.2-rc1", rc1)
	st, w := r.addWatch(db, "mainline", true)
	defer st.Close()
	fx := &watchBisectFixture{t: t, db: db, root: root, watchID: w.ID, log: filepath.Join(root, "watch.log")}
	ws := &testWatchSpec{Log: fx.log, Out: filepath.Join(root, "watches")}
	cfg := fx.config()
	if _, err := RunWatchNow(t.Context(), cfg, ws.config, "mainline"); err != nil {
		t.Fatal(err)
	}
	commits := r.regression(rc1, 16, 9, 12)
	fx.culprit = commits[8]
	r.tag("v6.2-rc2", commits[15])
	if _, err := RunWatchNow(t.Context(), cfg, ws.config, "mainline"); err != nil {
		t.Fatal(err)
	}
	evs, err := st.WatchEvents(w.ID)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events %+v %v", evs, err)
	}
	fx.eventID = evs[0].ID
	fx.ref = fx.state()
	if fx.ref.Status != bisect.Found || fx.ref.Culprit == nil || fx.ref.Culprit.Hash != fx.culprit || len(fx.ref.Records) < 5 {
		t.Fatalf("the reference bisection: %s culprit %+v, %d records; want %s found", fx.ref.Status, fx.ref.Culprit, len(fx.ref.Records), fx.culprit)
	}
	return fx
}

func (fx *watchBisectFixture) config() Config {
	return Config{Database: fx.db, CacheDir: filepath.Join(fx.root, "cache"), From: testFrom, Log: testWriter{fx.t}, Grace: 5 * time.Second}
}

// state is the event's bisection as stored.
func (fx *watchBisectFixture) state() *watch.BisectState {
	fx.t.Helper()
	st, err := store.Open(fx.db)
	if err != nil {
		fx.t.Fatal(err)
	}
	defer st.Close()
	ev, err := st.WatchEvent(fx.eventID)
	if err != nil {
		fx.t.Fatal(err)
	}
	var bs watch.BisectState
	if err := json.Unmarshal(ev.Bisect, &bs); err != nil {
		fx.t.Fatal(err)
	}
	return &bs
}

// running is the bisection running as run gen with the reference's first
// n records.
func (fx *watchBisectFixture) running(gen int64, n int) *watch.BisectState {
	return &watch.BisectState{Result: bisect.Result{Status: watch.BisectRunning, GoodRef: "v6.2-rc1", BadRef: "v6.2-rc2",
		Benchmark: "getppid", Metric: "ns/op", Started: fx.ref.Started}, Gen: gen, Records: fx.ref.Records[:n:n]}
}

// service is a watch service on the fixture's database working the watch
// queue in this process (as `watch run-now` does), its watches
// configured by spec, and a hook to change them.
func (fx *watchBisectFixture) service(spec *testWatchSpec, hook func(s *Service, c *WatchConfig)) *Service {
	fx.t.Helper()
	s, own, err := watchService(fx.t.Context(), fx.config(), func(s *Service) WatchConfig {
		c := spec.config(s)
		if hook != nil {
			hook(s, &c)
		}
		return c
	})
	if err != nil {
		fx.t.Fatal(err)
	}
	if !own {
		s.Close()
		fx.t.Fatal("the watch queue is worked by another process")
	}
	return s
}

// put stores st as the event's bisection and queues jobs, in one
// transaction.
func (fx *watchBisectFixture) put(s *Service, st *watch.BisectState, jobs ...river.InsertManyParams) {
	fx.t.Helper()
	err := s.db.Store.Tx(fx.t.Context(), func(tx *store.Tx) error {
		if err := s.db.Store.SetEventBisectTx(tx, fx.eventID, st); err != nil {
			return err
		}
		if len(jobs) == 0 {
			return nil
		}
		return s.engine.insertManyTx(fx.t.Context(), tx, jobs)
	})
	if err != nil {
		fx.t.Fatal(err)
	}
}

// work works the watch's jobs until none is left, then closes s; it
// returns the measurements started meanwhile ("commit n").
func (fx *watchBisectFixture) work(s *Service) []string {
	fx.t.Helper()
	before := len(logLinesOf(fx.log, "start "))
	ctx, cancel := context.WithTimeout(fx.t.Context(), time.Minute)
	defer cancel()
	err := s.drainWatch(ctx, fx.watchID)
	s.Close()
	if err != nil {
		fx.t.Fatal(err)
	}
	var out []string
	for _, l := range logLinesOf(fx.log, "start ")[before:] {
		f := strings.Fields(l)
		out = append(out, f[2]+" "+f[3])
	}
	return out
}

// stepJobs are the watch's bisect_step jobs in every state, "gen seq
// state" each.
func stepJobs(t *testing.T, s *Service, watchID int64) []string {
	t.Helper()
	res, err := s.engine.client.JobList(t.Context(), river.NewJobListParams().Kinds(BisectStepArgs{}.Kind()).
		TagsAll(watchTag(watchID)).First(1000))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range res.Jobs {
		var a BisectStepArgs
		json.Unmarshal(j.EncodedArgs, &a)
		out = append(out, fmt.Sprintf("%d %d %s", a.Gen, a.Seq, j.State))
	}
	return out
}

// checkFound checks the bisection ended as the reference did, with the
// reference's records.
func (fx *watchBisectFixture) checkFound(what string) *watch.BisectState {
	fx.t.Helper()
	bs := fx.state()
	if bs.Status != bisect.Found || bs.Culprit == nil || bs.Culprit.Hash != fx.culprit {
		fx.t.Fatalf("%s: bisection %s (%s) culprit %+v, %d records; want %s found", what, bs.Status, bs.Error, bs.Culprit, len(bs.Records), fx.culprit)
	}
	if len(bs.Records) != len(fx.ref.Records) {
		fx.t.Fatalf("%s: %d records, want the reference's %d", what, len(bs.Records), len(fx.ref.Records))
	}
	for i, r := range bs.Records {
		if ref := fx.ref.Records[i]; r.Commit != ref.Commit || r.N != ref.N {
			fx.t.Fatalf("%s: record %d is %.12s/%d, want %.12s/%d", what, i, r.Commit, r.N, ref.Commit, ref.N)
		}
	}
	return bs
}

// measuredOnce fails when a measurement is in got twice, or got is not
// the reference's records from the from-th on.
func (fx *watchBisectFixture) measuredOnce(what string, got []string, from int) {
	fx.t.Helper()
	var want []string
	for _, r := range fx.ref.Records[from:] {
		want = append(want, fmt.Sprintf("%s %d", r.Commit, r.N))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		fx.t.Fatalf("%s: measured\n%s\nwant (each once)\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWatchBisectStepAheadOfItsRecords: a bisect_step job whose event's
// bisection has fewer measurements recorded than its step (the state and
// the queue disagree: a state written back from an older copy, a
// database restored from a backup; no job is at the records' step)
// carries the bisection on from its records, as a new run, instead of
// cancelling itself and leaving the bisection running for ever; the
// bisection names the culprit with the records it had, and no
// measurement is made twice, also when a job of the old run at the
// records' step is queued too (it then does nothing). On SQLite and
// PostgreSQL.
func TestWatchBisectStepAheadOfItsRecords(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, root, db string) {
		fx := newWatchBisectFixture(t, root, db)
		spec := &testWatchSpec{Log: fx.log, Out: filepath.Join(root, "watches")}

		// Only a step ahead of the records (step 5, 2 recorded).
		s := fx.service(spec, nil)
		fx.put(s, fx.running(7, 2), bisectStepJob(fx.watchID, fx.eventID, 7, 4))
		measured := fx.work(s)
		bs := fx.checkFound("a step ahead of its records")
		fx.measuredOnce("a step ahead of its records", measured, 2)
		if bs.Gen == 7 {
			t.Errorf("the bisection went on as run %d, want a new run", bs.Gen)
		}
		s = fx.service(spec, nil)
		jobs := stepJobs(t, s, fx.watchID)
		s.Close()
		fx.oneJob(jobs, "the step ahead of its records", 7, 4, "completed")
		fx.oneJob(jobs, "the new run's first step", bs.Gen, 2, "completed")

		// Again with the old run's job at the records' step queued too,
		// after the step ahead (which runs first).
		s = fx.service(spec, nil)
		fx.put(s, fx.running(8, 2), bisectStepJob(fx.watchID, fx.eventID, 8, 4), bisectStepJob(fx.watchID, fx.eventID, 8, 2))
		measured = fx.work(s)
		bs = fx.checkFound("a step ahead of its records, and the old run's step at them")
		fx.measuredOnce("a step ahead of its records, and the old run's step at them", measured, 2)
		if bs.Gen == 8 {
			t.Errorf("the bisection ended as run %d: the old run's step at the records measured, want the step ahead first and a new run", bs.Gen)
		}
		s = fx.service(spec, nil)
		jobs = stepJobs(t, s, fx.watchID)
		s.Close()
		fx.oneJob(jobs, "the step ahead of its records", 8, 4, "completed")
		fx.oneJob(jobs, "the old run's step at the records", 8, 2, "completed")
		fx.oneJob(jobs, "the new run's first step", bs.Gen, 2, "completed")
	})
}

// oneJob fails unless jobs (stepJobs) hold step seq of run gen once, in
// state state.
func (fx *watchBisectFixture) oneJob(jobs []string, what string, gen int64, seq int, state string) {
	fx.t.Helper()
	prefix := fmt.Sprintf("%d %d ", gen, seq)
	var got []string
	for _, j := range jobs {
		if strings.HasPrefix(j, prefix) {
			got = append(got, j)
		}
	}
	if len(got) != 1 || got[0] != prefix+state {
		fx.t.Errorf("%s: jobs %q, want one %s%s", what, got, prefix, state)
	}
}

// TestWatchBisectLastAttemptEnds: a bisect_step job whose last attempt
// fails for an infrastructure reason (the bisection's reports cannot be
// written; its measurement fails) ends the bisection as failed, with
// why, instead of being discarded with the bisection left running and no
// job to carry it on. On SQLite and PostgreSQL.
func TestWatchBisectLastAttemptEnds(t *testing.T) {
	t.Run("finish", func(t *testing.T) { onBothDatabases(t, testWatchBisectLastFinishEnds) })
	t.Run("measure", func(t *testing.T) { onBothDatabases(t, testWatchBisectLastMeasureEnds) })
}

// failingMeasurer's measurements fail for an infrastructure reason.
type failingMeasurer struct{ n *int }

func (m failingMeasurer) Measure(ctx context.Context, commit string, boots int) (*bisect.Measurement, error) {
	*m.n++
	return nil, fail.Infraf("measuring %.12s: the test's farm is unreachable", commit)
}

func testWatchBisectLastMeasureEnds(t *testing.T, root, db string) {
	fx := newWatchBisectFixture(t, root, db)
	tried := 0
	s := fx.service(&testWatchSpec{Log: fx.log, Out: filepath.Join(root, "watches")}, func(s *Service, c *WatchConfig) {
		c.Bisection.NewMeasurer = func(*pipelines.Pipeline, *store.Watch, *store.WatchEvent, string) (bisect.Measurer, error) {
			return failingMeasurer{&tried}, nil
		}
	})
	step := bisectStepJob(fx.watchID, fx.eventID, 12, 2)
	step.InsertOpts.MaxAttempts = 1
	fx.put(s, fx.running(12, 2), step)
	fx.work(s)
	if tried != 1 {
		t.Errorf("%d measurement(s) tried, want 1", tried)
	}
	bs := fx.state()
	if bs.Status != watch.BisectFailed || !strings.Contains(bs.Error, "the test's farm is unreachable") || bs.Kind != "infrastructure" ||
		len(bs.Records) != 2 || bs.Next != nil {
		t.Fatalf("bisection %s %q (%s) with %d records, next %+v; want failed on the measurement (infrastructure), the 2 records kept, nothing next",
			bs.Status, bs.Error, bs.Kind, len(bs.Records), bs.Next)
	}
}

func testWatchBisectLastFinishEnds(t *testing.T, root, db string) {
	fx := newWatchBisectFixture(t, root, db)
	out := filepath.Join(root, "not-a-directory")
	if err := os.WriteFile(out, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := fx.service(&testWatchSpec{Log: fx.log, Out: out}, nil)
	// Every measurement recorded: the step writes the reports.
	last := bisectStepJob(fx.watchID, fx.eventID, 9, len(fx.ref.Records))
	last.InsertOpts.MaxAttempts = 1
	fx.put(s, fx.running(9, len(fx.ref.Records)), last)
	if measured := fx.work(s); len(measured) != 0 {
		t.Errorf("measured %q, want nothing (every measurement was recorded)", measured)
	}
	bs := fx.state()
	if bs.Status != watch.BisectFailed || !strings.Contains(bs.Error, "not-a-directory") || len(bs.Records) != len(fx.ref.Records) {
		t.Fatalf("bisection %s %q with %d records; want failed on the reports' directory, the %d records kept",
			bs.Status, bs.Error, len(bs.Records), len(fx.ref.Records))
	}
}

// TestWatchBisectStepRecordedMeanwhile: a bisect_step job whose step is
// recorded while it starts (another attempt of the same job, in another
// process or rescued by River, measured it and queued the next step)
// writes nothing over that record and does not measure the step again:
// every change it makes to the event's bisection reads the state again
// in the transaction that writes it. The bisection ends as the reference
// did. On SQLite and PostgreSQL.
func TestWatchBisectStepRecordedMeanwhile(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, root, db string) {
		fx := newWatchBisectFixture(t, root, db)
		const at = 3
		planned := 0
		hook := func(s *Service, c *WatchConfig) {
			nm := c.Bisection.NewMeasurer
			c.Bisection.NewMeasurer = func(p *pipelines.Pipeline, w *store.Watch, ev *store.WatchEvent, dir string) (bisect.Measurer, error) {
				if planned++; planned == 1 {
					// The other attempt records step at and queues the
					// next, while this one plans the same step.
					st := fx.running(10, at+1)
					st.Next = nil
					fx.put(s, st, bisectStepJob(fx.watchID, fx.eventID, 10, at+1))
				}
				return nm(p, w, ev, dir)
			}
		}
		s := fx.service(&testWatchSpec{Log: fx.log, Out: filepath.Join(root, "watches")}, hook)
		fx.put(s, fx.running(10, at), bisectStepJob(fx.watchID, fx.eventID, 10, at))
		measured := fx.work(s)
		fx.checkFound("a step recorded meanwhile")
		fx.measuredOnce("a step recorded meanwhile", measured, at+1)
	})
}

// TestWatchBisectQueuedOnceAcrossALostConnection: the re-test that queues
// a regression's bisection does it in one transaction, which Store.Tx
// runs again on Postgres when the connection is lost before its commit;
// the try that commits queues only its own first step, of the run it
// stored, not the lost try's too (a step of a run the bisection never
// had). Here Postgres ends the session while the first try inserts the
// step's job (a trigger, once), as a restart or a failover would.
func TestWatchBisectQueuedOnceAcrossALostConnection(t *testing.T) {
	root := t.TempDir()
	fx := newWatchBisectFixture(t, root, testpg.URL(t))
	spec := &testWatchSpec{Log: fx.log, Out: filepath.Join(root, "watches")}
	s := fx.service(spec, nil)
	before := map[string]bool{}
	for _, j := range stepJobs(t, s, fx.watchID) {
		before[j] = true
	}
	pool := s.db.Store.Postgres()
	ctx := t.Context()
	for _, q := range []string{
		`UPDATE watch_events SET bisect = '' WHERE id = ` + fmt.Sprint(fx.eventID),
		`CREATE SEQUENCE lose_once`,
		`CREATE FUNCTION lose_once() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('lose_once') = 1 THEN
				PERFORM pg_terminate_backend(pg_backend_pid());
			END IF;
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER lose_once BEFORE INSERT ON river_job FOR EACH ROW WHEN (NEW.kind = 'bisect_step') EXECUTE FUNCTION lose_once()`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tags, err := s.db.Store.WatchTags(fx.watchID)
	if err != nil {
		t.Fatal(err)
	}
	var rc2 int64
	for _, tg := range tags {
		if tg.Tag == "v6.2-rc2" {
			rc2 = tg.ID
		}
	}
	// v6.2-rc2 is re-tested again: it is only compared, and its event,
	// with no bisection now, is bisected again.
	if err := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		return s.engine.insertManyTx(ctx, tx, []river.InsertManyParams{retestJob(fx.watchID, []int64{rc2}, time.Now().UnixNano())})
	}); err != nil {
		t.Fatal(err)
	}
	fx.work(s)
	bs := fx.checkFound("a bisection queued across a lost connection")
	s = fx.service(spec, nil)
	defer s.Close()
	var lost int64
	if err := s.db.Store.Postgres().QueryRow(ctx, `SELECT last_value FROM lose_once`).Scan(&lost); err != nil || lost < 2 {
		t.Fatalf("the trigger ran %d time(s) (%v): want the first try's session lost and the step queued by another", lost, err)
	}
	jobs := stepJobs(t, s, fx.watchID)
	n := 0
	for _, j := range jobs {
		if before[j] {
			continue
		}
		n++
		if !strings.HasPrefix(j, fmt.Sprintf("%d ", bs.Gen)) {
			t.Errorf("step job %s, want only steps of the run stored (%d)", j, bs.Gen)
		}
	}
	if n != len(bs.Records)+1 {
		t.Errorf("%d new step jobs %q, want the %d of run %d", n, jobs, len(bs.Records)+1, bs.Gen)
	}
}

// TestWatchBisectStepEventGoneCancels: a bisect_step job whose event is
// removed with its watch, or whose stored bisection becomes unreadable,
// after the job read it (here while it plans its step) is cancelled when
// its transaction reads the state again, rather than retried and then
// discarded (nothing it can end is left); it measures nothing. On SQLite
// and PostgreSQL.
func TestWatchBisectStepEventGoneCancels(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(st *store.Store, fx *watchBisectFixture) error
	}{
		{"removed", func(st *store.Store, fx *watchBisectFixture) error { return st.RemoveWatch(fx.watchID) }},
		{"unreadable", func(st *store.Store, fx *watchBisectFixture) error {
			return st.SetEventBisect(fx.eventID, "not a bisection")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			onBothDatabases(t, func(t *testing.T, root, db string) {
				fx := newWatchBisectFixture(t, root, db)
				planned := 0
				hook := func(s *Service, wc *WatchConfig) {
					nm := wc.Bisection.NewMeasurer
					wc.Bisection.NewMeasurer = func(p *pipelines.Pipeline, w *store.Watch, ev *store.WatchEvent, dir string) (bisect.Measurer, error) {
						if planned++; planned == 1 {
							if err := c.change(s.db.Store, fx); err != nil {
								t.Error(err)
							}
						}
						return nm(p, w, ev, dir)
					}
				}
				s := fx.service(&testWatchSpec{Log: fx.log, Out: filepath.Join(root, "watches")}, hook)
				step := bisectStepJob(fx.watchID, fx.eventID, 11, 2)
				step.InsertOpts.MaxAttempts = 1
				fx.put(s, fx.running(11, 2), step)
				if measured := fx.work(s); len(measured) != 0 {
					t.Errorf("measured %q, want nothing", measured)
				}
				if planned != 1 {
					t.Fatalf("the step was planned %d time(s), want once", planned)
				}
				s = fx.service(&testWatchSpec{Log: fx.log, Out: filepath.Join(root, "watches")}, nil)
				jobs := stepJobs(t, s, fx.watchID)
				s.Close()
				if !slices.Contains(jobs, "11 2 cancelled") {
					t.Errorf("step jobs %q, want 11 2 cancelled", jobs)
				}
			})
		})
	}
}

// TestWatchBisectStuckResumedByATick: a watch bisection under way with
// no unfinished bisect_step job for its event (what older versions left
// after cancelling a step ahead of its records or discarding a failed
// last attempt; a lost job) is carried on by the watch's next tick, as a
// new run from its records, and names the culprit measuring each step
// once; one that has its step job queued is left to it. On SQLite and
// PostgreSQL.
func TestWatchBisectStuckResumedByATick(t *testing.T) {
	onBothDatabases(t, func(t *testing.T, root, db string) {
		fx := newWatchBisectFixture(t, root, db)
		spec := &testWatchSpec{Log: fx.log, Out: filepath.Join(root, "watches")}

		// With its step queued: untouched.
		s := fx.service(spec, nil)
		fx.put(s, fx.running(13, 2), bisectStepJob(fx.watchID, fx.eventID, 13, 2))
		w, err := s.db.Store.FindWatch("mainline")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.resumeStuckBisections(t.Context(), w); err != nil {
			t.Fatal(err)
		}
		if bs := fx.state(); bs.Gen != 13 || len(bs.Records) != 2 {
			t.Errorf("a bisection with its step queued became run %d with %d records, want run 13 untouched", bs.Gen, len(bs.Records))
		}
		fx.oneJob(stepJobs(t, s, fx.watchID), "the queued step", 13, 2, "available")
		s.Close()

		// Its step job cancelled (as an older version did), a job of an
		// older run still queued: the tick resumes it.
		s = fx.service(spec, nil)
		fx.put(s, fx.running(14, 3))
		s.Close()
		before := len(logLinesOf(fx.log, "start "))
		if _, err := RunWatchNow(t.Context(), fx.config(), spec.config, "mainline"); err != nil {
			t.Fatal(err)
		}
		var measured []string
		for _, l := range logLinesOf(fx.log, "start ")[before:] {
			f := strings.Fields(l)
			measured = append(measured, f[2]+" "+f[3])
		}
		bs := fx.checkFound("a bisection with no step job, after a tick")
		fx.measuredOnce("a bisection with no step job, after a tick", measured, 3)
		if bs.Gen == 14 {
			t.Errorf("the bisection went on as run %d, want a new run", bs.Gen)
		}
		s = fx.service(spec, nil)
		fx.oneJob(stepJobs(t, s, fx.watchID), "the new run's first step", bs.Gen, 3, "completed")
		s.Close()
	})
}
