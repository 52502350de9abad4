package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

// A bisection inside an evaluation's series run as queue work
// (pipelines/service: one job per measurement) keeps its state here: the
// measurements recorded so far (bisect.Resume replays them), what it
// measures next, its result, and who asked for it. Its jobs write the
// state in the transaction that queues the next one, so a serve killed
// mid-bisection resumes at the step it was on.
const migrationSeriesBisections = `
CREATE TABLE series_bisections (
	evaluation_id INTEGER PRIMARY KEY REFERENCES evaluations(id) ON DELETE CASCADE,
	state         TEXT NOT NULL,
	updated       TEXT NOT NULL
);
`

// SeriesBisection is evaluation evalID's series bisection state as
// SetSeriesBisection stored it (JSON), nil when there is none.
func (s *Store) SeriesBisection(evalID int64) ([]byte, error) {
	var state string
	err := s.db.QueryRow(`SELECT state FROM series_bisections WHERE evaluation_id = ?`, evalID).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fail.Infraf("store: %s: series bisection of evaluation %d: %w", s.where, evalID, err)
	}
	return []byte(state), nil
}

// SetSeriesBisection stores v (as JSON) as evaluation evalID's series
// bisection state.
func (s *Store) SetSeriesBisection(evalID int64, v any) error {
	return s.setSeriesBisection(s.db, evalID, v)
}

// SetSeriesBisectionTx is SetSeriesBisection in tx (a step records its
// measurement and queues the next step together).
func (s *Store) SetSeriesBisectionTx(tx *Tx, evalID int64, v any) error {
	return s.setSeriesBisection(tx, evalID, v)
}

func (s *Store) setSeriesBisection(q querier, evalID int64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fail.Infraf("store: series bisection of evaluation %d: %w", evalID, err)
	}
	if _, err := q.Exec(`INSERT INTO series_bisections (evaluation_id, state, updated) VALUES (?, ?, ?)
		ON CONFLICT(evaluation_id) DO UPDATE SET state = excluded.state, updated = excluded.updated`,
		evalID, string(b), fmtTime(time.Now())); err != nil {
		return fail.Infraf("store: %s: series bisection of evaluation %d: %w", s.where, evalID, err)
	}
	return nil
}
