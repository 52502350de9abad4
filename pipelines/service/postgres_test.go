package service

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/internal/testpg"
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
