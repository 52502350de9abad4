package store

import (
	"context"
	"testing"
)

// A series bisection's state is stored, replaced (also inside a
// transaction) and read back; an evaluation without one has none. On
// both databases.
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
		if err := s.SetSeriesBisection(e.ID, map[string]any{"status": "queued"}); err != nil {
			t.Fatal(err)
		}
		err = s.Tx(context.Background(), func(tx *Tx) error {
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
