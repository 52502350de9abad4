package store

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testpg"
)

// A series bisection's state is stored, replaced inside a transaction
// and read back; an evaluation without one has none. On both databases.
func TestSeriesBisectionState(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, _ := openTemp(t, db)
		e, _, err := s.CreateOrResumeEvaluation("k", EvaluationMeta{Pipeline: "p"})
		if err != nil {
			t.Fatal(err)
		}
		if b, err := s.SeriesBisection(e.ID); err != nil || b != nil {
			t.Fatalf("before: %s %v, want none", b, err)
		}
		ctx := context.Background()
		err = s.Tx(ctx, func(tx *Tx) error {
			if b, err := s.SeriesBisectionTx(tx, e.ID); err != nil || b != nil {
				t.Errorf("before, in a transaction: %s %v, want none", b, err)
			}
			return s.SetSeriesBisectionTx(tx, e.ID, map[string]any{"status": "queued"})
		})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Tx(ctx, func(tx *Tx) error {
			if b, err := s.SeriesBisectionTx(tx, e.ID); err != nil || string(b) != `{"status":"queued"}` {
				t.Errorf("in a transaction: %s %v", b, err)
			}
			return s.SetSeriesBisectionTx(tx, e.ID, map[string]any{"status": "running", "records": []int{1}})
		})
		if err != nil {
			t.Fatal(err)
		}
		if b, err := s.SeriesBisection(e.ID); err != nil || string(b) != `{"records":[1],"status":"running"}` {
			t.Fatalf("after: %s %v", b, err)
		}
	})
}

// Read-modify-writes of a series bisection's state through
// SeriesBisectionTx do not lose each other's changes: writers that each
// append to the stored state at the same time, starting with no row,
// leave every append. On both databases (on Postgres, READ COMMITTED
// without the lock loses some).
func TestSeriesBisectionTxSerialises(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, _ := openTemp(t, db)
		e, _, err := s.CreateOrResumeEvaluation("k", EvaluationMeta{Pipeline: "p"})
		if err != nil {
			t.Fatal(err)
		}
		const writers, each = 4, 10
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					err := s.Tx(context.Background(), func(tx *Tx) error {
						b, err := s.SeriesBisectionTx(tx, e.ID)
						if err != nil {
							return err
						}
						var st struct{ Records []int }
						if b != nil {
							if err := json.Unmarshal(b, &st); err != nil {
								return err
							}
						}
						st.Records = append(st.Records, w*each+i)
						return s.SetSeriesBisectionTx(tx, e.ID, st)
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b, err := s.SeriesBisection(e.ID)
		if err != nil {
			t.Fatal(err)
		}
		var st struct{ Records []int }
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, r := range st.Records {
			seen[r] = true
		}
		if len(st.Records) != writers*each || len(seen) != writers*each {
			t.Fatalf("%d records (%d distinct) after %d appends: changes were lost", len(st.Records), len(seen), writers*each)
		}
	})
}

// The report's transaction (the evaluation's status, then its series
// bisection) and the bisection's end (its state, then the evaluation's
// status) at the same time on Postgres: both commit. SeriesBisectionTx
// takes the evaluation's row first, so the second waits for the first
// instead of holding the bisection while it waits for the row (Postgres
// then aborted one of them: deadlock detected).
func TestSeriesBisectionLockOrder(t *testing.T) {
	s, _ := openTemp(t, testpg.URL(t))
	e, _, err := s.CreateOrResumeEvaluation("k", EvaluationMeta{Pipeline: "p"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	updated, locked, ended, reported := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	errs := make(chan error, 2)
	go func() { // the report
		defer close(reported)
		errs <- s.Tx(ctx, func(tx *Tx) error {
			if err := s.SetEvaluationStatusTx(tx, e.ID, StatusDone); err != nil {
				return err
			}
			close(updated)
			// On until the end holds the bisection or waits for a lock
			// (or has ended: failed before either).
			deadline := time.After(2 * time.Minute)
			for waiting := 0; waiting == 0; {
				select {
				case <-locked:
					waiting = 1
				case <-ended:
					waiting = 1
				case <-deadline:
					return errors.New("the bisection's end neither took the bisection nor waited for a lock in 2 minutes")
				case <-time.After(20 * time.Millisecond):
					if err := s.QueryRow(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
						return err
					}
				}
			}
			if _, err := s.SeriesBisectionTx(tx, e.ID); err != nil {
				return err
			}
			return s.SetSeriesBisectionTx(tx, e.ID, map[string]any{"status": "queued"})
		})
	}()
	go func() { // the bisection's end
		defer close(ended)
		select {
		case <-updated:
		case <-reported: // failed before its update
			errs <- errors.New("the report's transaction ended before it updated the evaluation")
			return
		}
		errs <- s.Tx(ctx, func(tx *Tx) error {
			if _, err := s.SeriesBisectionTx(tx, e.ID); err != nil {
				return err
			}
			close(locked)
			if err := s.SetSeriesBisectionTx(tx, e.ID, map[string]any{"status": "found"}); err != nil {
				return err
			}
			return s.SetEvaluationStatusTx(tx, e.ID, StatusDone)
		})
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if b, err := s.SeriesBisection(e.ID); err != nil || string(b) != `{"status":"found"}` {
		t.Errorf("after both: %s %v; want the end's state, written after the report's", b, err)
	}
}
