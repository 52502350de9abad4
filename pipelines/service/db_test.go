package service

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/store"
)

func TestParseDatabase(t *testing.T) {
	for in, want := range map[string]string{
		"/x/p.db": "/x/p.db", "sqlite:///x/p.db": "/x/p.db", "sqlite:/x/p.db": "/x/p.db", "file:/x/p.db": "/x/p.db", "rel.db": "rel.db",
	} {
		got, err := ParseDatabase(in)
		if err != nil || got != want {
			t.Errorf("ParseDatabase(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, err := ParseDatabase("postgres://u:secret@127.0.0.1/db"); err != nil || got != "postgres://u:secret@127.0.0.1/db" {
		t.Errorf("ParseDatabase(postgres://...) = %q, %v", got, err)
	}
	for _, in := range []string{"mysql://u:secret@x/y", "sqlite:"} {
		_, err := ParseDatabase(in)
		if err == nil || fail.KindOf(err) != fail.KindInput {
			t.Errorf("ParseDatabase(%q) = %v, want a bad-input error", in, err)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseDatabase(%q) error shows the password: %v", in, err)
		}
	}
}

// TestOpenDBSharesTheStore opens the service's database: the store and
// River's tables in one file, one serve at a time, and a second process's
// store (patcheval runs) reading and writing beside it.
func TestOpenDBSharesTheStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "patcheval.db")
	db, err := OpenDB(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.Store.QueryRow(ctx, `SELECT COUNT(*) FROM river_job`).Scan(&n); err != nil {
		t.Fatalf("River's tables are missing: %v", err)
	}
	if v, err := db.Store.Version(); err != nil || v != store.SchemaVersion() {
		t.Fatalf("store schema %d, %v; want %d", v, err, store.SchemaVersion())
	}
	if _, err := OpenDB(ctx, path); err == nil || !strings.Contains(err.Error(), "in use by another") {
		t.Fatalf("a second serve on the same database: %v, want refused", err)
	}
	// Another process's view (patcheval runs, lore --pipeline): its own
	// pool, writing while River's one connection holds a transaction open
	// for a moment.
	other, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := db.sqlitePool.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`UPDATE river_job SET kind = kind`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := other.CreateOrResumeEvaluation("k1", store.EvaluationMeta{Pipeline: "p"})
		done <- err
	}()
	if evs, err := other.ListEvaluations(); err != nil || len(evs) != 0 {
		t.Fatalf("reading while a write transaction is open: %v, %d evaluations", err, len(evs))
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("a writer waiting for River's transaction failed instead of waiting: %v", err)
	}
	evs, total, err := db.Store.List(ctx, store.ListFilter{Pipeline: "p", Limit: 10})
	if err != nil || total != 1 || len(evs) != 1 {
		t.Fatalf("the service's store does not see the other process's evaluation: %v, %d", err, total)
	}
	if o, err := db.orphans(ctx, "self"); err != nil || len(o) != 0 {
		t.Fatalf("orphans on an empty queue = %v, %v", o, err)
	}
}
