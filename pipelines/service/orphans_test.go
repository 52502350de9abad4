package service

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/testpg"
	"github.com/patcheval/patcheval/pipelines/store"
)

// orphanFixture is an evaluation with boot runs left "running" and their
// River boot jobs "running" as made by the given workers (one job and one
// run per worker, variant v0, v1, ...). The jobs sit on a queue no serve
// works, so that once rescued they stay available for the test to see.
type orphanFixture struct {
	t    *testing.T
	db   *DB
	eval int64
	jobs []int64
	runs []int64
}

func newOrphanFixture(t *testing.T, db *DB, workers ...string) *orphanFixture {
	t.Helper()
	ctx := t.Context()
	e, _, err := db.Store.CreateOrResumeEvaluation(store.Key("orphans", t.Name()), store.EvaluationMeta{Pipeline: "ppc-preempt-dynamic"})
	if err != nil {
		t.Fatal(err)
	}
	f := &orphanFixture{t: t, db: db, eval: e.ID}
	for i, w := range workers {
		k := evaluate.BootKey{Variant: "v" + itoa(int64(i)), Boot: 0}
		run, err := db.Store.BeginRun(e.ID, k.Variant, k.Boot)
		if err != nil {
			t.Fatal(err)
		}
		args, _ := json.Marshal(BootArgs{EvaluationID: e.ID, Gen: 1, Boot: k})
		now := time.Now().UTC().Add(-time.Minute)
		p := &riverdriver.JobInsertFullParams{Attempt: 1, AttemptedAt: &now, AttemptedBy: []string{w}, CreatedAt: &now,
			EncodedArgs: args, Kind: BootArgs{}.Kind(), MaxAttempts: 5, Metadata: []byte(`{}`), Priority: 1,
			Queue: "orphans-test-idle", ScheduledAt: &now, State: rivertype.JobStateRunning, Tags: []string{evalTag(e.ID)}}
		var row *rivertype.JobRow
		if db.Postgres() {
			row, err = db.pgDriver.GetExecutor().JobInsertFull(ctx, p)
		} else {
			row, err = db.sqliteDriver.GetExecutor().JobInsertFull(ctx, p)
		}
		if err != nil {
			t.Fatal(err)
		}
		f.jobs, f.runs = append(f.jobs, row.ID), append(f.runs, run)
	}
	return f
}

// job is job i's state and errors.
func (f *orphanFixture) job(i int) (state string, errs []string) {
	f.t.Helper()
	var raw string
	q := `SELECT state, coalesce(json(errors), '[]') FROM river_job WHERE id = ?`
	if f.db.Postgres() {
		q = `SELECT state::text, coalesce(array_to_json(errors)::text, '[]') FROM river_job WHERE id = ?`
	}
	if err := f.db.Store.QueryRow(f.t.Context(), q, f.jobs[i]).Scan(&state, &raw); err != nil {
		f.t.Fatal(err)
	}
	var es []rivertype.AttemptError
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &es); err != nil {
			f.t.Fatalf("job %d errors %q: %v", f.jobs[i], raw, err)
		}
	}
	for _, e := range es {
		errs = append(errs, e.Error)
	}
	return state, errs
}

// run is run i.
func (f *orphanFixture) run(i int) store.Run {
	f.t.Helper()
	runs, err := f.db.Store.RunsOf(f.eval)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range runs {
		if r.ID == f.runs[i] {
			return r
		}
	}
	f.t.Fatalf("run %d is gone", f.runs[i])
	return store.Run{}
}

// rescued waits up to d for job i to be available again with its run
// ended as interrupted, the error naming who (once: not rescued twice).
func (f *orphanFixture) rescued(i int, who string, d time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(d)
	for {
		state, errs := f.job(i)
		if state == string(rivertype.JobStateAvailable) {
			n := 0
			for _, e := range errs {
				if strings.Contains(e, who) && strings.Contains(e, "died") {
					n++
				}
			}
			if n != 1 {
				f.t.Errorf("rescued job %d: errors %q, want one saying %s died", f.jobs[i], errs, who)
			}
			r := f.run(i)
			if r.Status != store.RunInfra || !strings.Contains(r.ErrorText, "interrupted") || !strings.Contains(r.ErrorText, who) {
				f.t.Errorf("run %d of the rescued boot: %s %q, want infra, interrupted, naming %s", r.ID, r.Status, r.ErrorText, who)
			}
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("job %d left running by %s: still %s after %s (errors %q)", f.jobs[i], who, state, d, errs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// untouched requires job i and its run to be running still.
func (f *orphanFixture) untouched(i int, why string) {
	f.t.Helper()
	if state, errs := f.job(i); state != string(rivertype.JobStateRunning) || len(errs) != 0 {
		f.t.Errorf("%s: job %d is %s (errors %q), want running, untouched", why, f.jobs[i], state, errs)
	}
	if r := f.run(i); r.Status != store.RunRunning {
		f.t.Errorf("%s: its run %d is %s %q, want running", why, r.ID, r.Status, r.ErrorText)
	}
}

// TestOrphansOnPostgres: on Postgres several serves share the database,
// so a running job is an orphan only if the process that runs it died.
// A real serve process (a child) is alive: its job is left alone, also
// across a Postgres restart (which ends its sessions, presence lock
// included, until it takes the lock again). A job of a worker that never
// existed, and then the child's job after a kill -9 of the child, are
// queued again within seconds by another serve (not after River's hours
// of RescueStuckJobsAfter), their boot runs ended as interrupted in the
// same transaction, each once.
func TestOrphansOnPostgres(t *testing.T) {
	pg := testpg.New(t)
	url := pg.Database(t)
	tree := gitRepo(t, t.TempDir())
	specJSON, _ := json.Marshal(map[string]string{"DB": url, "Tree": tree, "Cache": t.TempDir(), "State": t.TempDir()})
	child := startServe(t, string(specJSON))

	const confirm = time.Second
	s, _ := testService(t, Config{Database: url, OrphanCheck: 300 * time.Millisecond, OrphanConfirm: confirm})
	const gone = "patcheval_gone_host_1_20260101T000000_000000"
	f := newOrphanFixture(t, s.db, child.worker, gone)

	f.rescued(1, gone, 15*time.Second)
	time.Sleep(3 * confirm)
	f.untouched(0, "while its serve is alive")

	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	// The child takes its presence lock again (presencePing).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var present bool
		err := s.Store().QueryRow(t.Context(), `SELECT `+presentSQL, child.worker).Scan(&present)
		if err == nil && present {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the serve did not take its presence lock again after Postgres restarted (%v)", err)
		}
	}
	time.Sleep(3 * confirm)
	f.untouched(0, "after a Postgres restart, its serve alive")

	if err := child.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-child.done
	f.rescued(0, child.worker, 15*time.Second)
}

// TestOrphansOnSQLite: on SQLite a serve owns the file, so every job
// found running at start is an orphan: rescued before River starts, its
// boot run ended as interrupted.
func TestOrphansOnSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "patcheval.db")
	db, err := OpenDB(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	const dead = "patcheval_dead_host_2_20260101T000000_000000"
	f := newOrphanFixture(t, db, dead, dead)
	db.Close()

	s, _ := testService(t, Config{Database: path})
	f.db = s.db
	for i := range 2 {
		f.rescued(i, "the process running this job died", 5*time.Second)
	}
}
