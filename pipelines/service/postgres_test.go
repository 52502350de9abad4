package service

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/internal/testpg"
	"github.com/patcheval/patcheval/pipelines/store"
)

// eachDatabase runs f on a new SQLite file and on a new database on a real
// PostgreSQL 15 (internal/testpg).
func eachDatabase(t *testing.T, f func(t *testing.T, db string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, filepath.Join(t.TempDir(), "patcheval.db")) })
	t.Run("postgres", func(t *testing.T) { f(t, testpg.URL(t)) })
}

// TestOpenDBPostgres opens the service's database on Postgres: the
// store's tables and River's in one database, several processes at once
// (no lock file: a farm shares it), and a stage's transaction holding
// both: the store's write and River's insert commit together or not at
// all.
func TestOpenDBPostgres(t *testing.T) {
	ctx := context.Background()
	url := testpg.URL(t)
	s, err := New(ctx, Config{Database: url, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := OpenDB(ctx, url)
	if err != nil {
		t.Fatalf("a second process on the same Postgres database: %v", err)
	}
	defer other.Close()
	if !s.db.Postgres() || s.DatabasePath() != store.Redact(url) || s.DatabasePath() == url {
		t.Errorf("DatabasePath %q: want the URL without its password", s.DatabasePath())
	}
	if v, err := s.Store().Version(); err != nil || v != store.SchemaVersion() {
		t.Fatalf("store schema %d, %v", v, err)
	}
	e, _, err := s.Store().CreateOrResumeEvaluation("k", store.EvaluationMeta{Pipeline: "p"})
	if err != nil {
		t.Fatal(err)
	}
	countJobs := func() int {
		var n int
		if err := other.Store.QueryRow(ctx, `SELECT COUNT(*) FROM river_job WHERE kind = 'apply'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	boom := errors.New("boom")
	err = s.db.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := s.setStatus(tx, e.ID, StatusQueued); err != nil {
			return err
		}
		if err := s.engine.insertManyTx(ctx, tx, []river.InsertManyParams{applyJob(e.ID, 1)}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("tx: %v", err)
	}
	if got, _ := other.Store.Evaluation(e.ID); got.Status != store.StatusRunning || countJobs() != 0 {
		t.Fatalf("after a rolled back transaction: status %s, %d jobs; want neither written", got.Status, countJobs())
	}
	if err := s.enqueue(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := other.Store.Evaluation(e.ID); got.Status != StatusQueued || countJobs() != 1 {
		t.Fatalf("after enqueue: status %s, %d jobs; want queued and one apply job", got.Status, countJobs())
	}
}

// TestPostgresRestart restarts Postgres (pg_ctl stop -m fast, then start:
// every session ends, as in an administrator's restart or a failover)
// three times while the service runs the real chain: while it is idle,
// while the apply job runs (or right after it), and while a kernel build
// runs. The service reconnects and goes on: the submission, apply's
// record and the configure jobs it queued, the build jobs the last
// configure queued, the build, cancel and its jobs' states are all there
// afterwards, each once.
func TestPostgresRestart(t *testing.T) {
	repo := testenv.LinuxTree(t)
	inbox := testinbox.Start(t, backport)
	pg := testpg.New(t)
	s, base := testService(t, Config{Database: pg.Database(t), AllowTrees: []string{repo}, Lore: inbox.URL, CacheDir: t.TempDir(), Jobs: 1})
	ctx := t.Context()
	restart := func(when string) {
		t.Helper()
		start := time.Now()
		if err := pg.Restart(); err != nil {
			t.Fatalf("restarting Postgres %s: %v", when, err)
		}
		t.Logf("Postgres restarted %s (%s)", when, time.Since(start).Round(time.Millisecond))
	}
	restart("while the service is idle")

	req := SubmitRequest{MsgID: "20261102093000.4121-0-tester@example.org", Pipeline: "ppc-preempt-dynamic", Tree: repo, Boots: 1}
	code, _, raw := call(t, "POST", base+"/api/v1/evaluations", "", req)
	if code != 201 {
		t.Fatalf("submit after a restart: %d %s", code, raw)
	}
	var sub SubmitResponse
	json.Unmarshal(raw, &sub)
	id := sub.Evaluation.ID
	// jobs counts the evaluation's jobs by kind and state; nil while the
	// database cannot answer.
	jobs := func(states ...rivertype.JobState) map[string]int {
		js, err := s.Engine().Jobs(ctx, id, 100, states...)
		if err != nil {
			return nil
		}
		n := map[string]int{}
		for _, j := range js {
			n[j.Kind+"/"+string(j.State)]++
		}
		return n
	}
	waitFor := func(what string, cond func(n map[string]int) bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			if n := jobs(); n != nil && cond(n) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; jobs %v", what, jobs())
			}
		}
	}
	waitFor("apply to start", func(n map[string]int) bool { return n["apply/running"]+n["apply/completed"] > 0 })
	restart("during apply")
	waitFor("a running build", func(n map[string]int) bool { return n["build/running"] >= 1 })
	time.Sleep(time.Second) // into the build: checking out the applied series
	restart("during a build")

	if code, _, raw := call(t, "POST", base+"/api/v1/evaluations/"+itoa(id)+"/cancel", "", ""); code != 200 {
		t.Fatalf("cancel after the restarts: %d %s", code, raw)
	}
	waitFor("every job to end", func(n map[string]int) bool {
		for k, c := range n {
			if c > 0 && !strings.HasSuffix(k, "/completed") && !strings.HasSuffix(k, "/cancelled") {
				return false
			}
		}
		return true
	})
	if n := jobs(); n["apply/completed"] != 1 || n["configure/completed"] != 3 || n["build/cancelled"] != 3 || len(n) != 3 {
		t.Errorf("jobs after the restarts %v: want apply completed once, the 3 configures completed and the 3 builds cancelled, nothing else", n)
	}
	if a, err := s.Store().AppliedOf(id); err != nil || a == nil || len(a.Commits) != 1 {
		t.Errorf("applied series after the restarts: %+v %v; want one commit", a, err)
	}
	if e, err := s.Store().Evaluation(id); err != nil || e.Status != StatusCancelled {
		t.Errorf("evaluation after cancel: %+v %v", e, err)
	}
	evs, total, err := s.Store().List(ctx, store.ListFilter{})
	if err != nil || total != 1 || len(evs) != 1 {
		t.Errorf("evaluations stored: %d %v; want the one submitted", total, err)
	}
}
