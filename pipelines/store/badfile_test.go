package store

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

// A state file that is not a SQLite database is refused with its path
// (exit 3: the machine's state, not the series) and left as it was: the
// runs it may still hold are not overwritten.
func TestCorruptStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "patcheval.db")
	junk := bytes.Repeat([]byte("not a database\x00\xff"), 512)
	if err := os.WriteFile(path, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err == nil {
		s.Close()
		t.Fatal("opened a corrupt file")
	}
	if fail.KindOf(err) != fail.KindInfra || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a database") {
		t.Errorf("err %v (kind %v)", err, fail.KindOf(err))
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, junk) {
		t.Error("the corrupt file was changed")
	}
}

// A state file locked by another writer: patcheval waits (busy timeout)
// and, when the lock is not released, fails naming the file; once it is
// released, the same command works and nothing stored is lost.
func TestLockedStateFile(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 10 s busy timeout")
	}
	s, path := openTemp(t, filepath.Join(t.TempDir(), "patcheval.db"))
	e, _, err := s.CreateOrResumeEvaluation("k", EvaluationMeta{Pipeline: "p"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	other, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.BeginTx(context.Background(), nil) // IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`CREATE TABLE holder (x)`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s2, err := Open(path)
	if err == nil {
		s2.Close()
		t.Fatal("opened while another writer holds the lock")
	}
	if d := time.Since(start); d < 5*time.Second {
		t.Errorf("gave up after %v, before the busy timeout", d)
	}
	if fail.KindOf(err) != fail.KindInfra || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "locked") && !strings.Contains(err.Error(), "busy") {
		t.Errorf("err %v (kind %v)", err, fail.KindOf(err))
	}
	tx.Rollback()
	s3, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if _, resumed, err := s3.CreateOrResumeEvaluation("k", EvaluationMeta{Pipeline: "p"}); err != nil || !resumed {
		t.Errorf("after the lock: resumed=%v %v (evaluation %d lost?)", resumed, err, e.ID)
	}
}
