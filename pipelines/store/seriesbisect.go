package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
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
// SetSeriesBisectionTx stored it (JSON), nil when there is none.
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

// SeriesBisectionTx is SeriesBisection read in tx for a change written
// back in it with SetSeriesBisectionTx: tx holds evaluation evalID's
// series bisection until it ends, against every other transaction that
// reads it so (the state is one document: a step recording its
// measurement and a request adding its requester must not each write
// back a copy that lacks the other's change). SQLite's write
// transactions are alone already; on Postgres the row is read FOR UPDATE,
// after an advisory lock on the evaluation (which also serialises the
// transactions that find no row yet and insert one).
//
// Before those, tx holds the evaluation's row (EvaluationStatusTx): the
// one lock order of the transactions that change both, whichever they
// change first (the report's sets the evaluation's status and then looks
// at its bisection; the bisection's end changes its state and then sets
// the status). The other order deadlocked them on Postgres.
func (s *Store) SeriesBisectionTx(tx *Tx, evalID int64) ([]byte, error) {
	if _, err := s.EvaluationStatusTx(tx, evalID); err != nil {
		return nil, err
	}
	if err := tx.Lock("series_bisections", strconv.FormatInt(evalID, 10)); err != nil {
		return nil, fail.Infraf("store: %s: series bisection of evaluation %d: %w", s.where, evalID, err)
	}
	q := `SELECT state FROM series_bisections WHERE evaluation_id = ?`
	if tx.pgTx != nil {
		q += ` FOR UPDATE`
	}
	var state string
	err := tx.QueryRow(q, evalID).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fail.Infraf("store: %s: series bisection of evaluation %d: %w", s.where, evalID, err)
	}
	return []byte(state), nil
}

// SetSeriesBisectionTx stores v (as JSON) as evaluation evalID's series
// bisection state, in tx (a change to what SeriesBisectionTx read in
// it; a step records its measurement and queues the next step
// together).
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

// EvaluationStatusTx is evaluation evalID's status read in tx, which then
// holds the evaluation's row until it ends (on Postgres FOR NO KEY
// UPDATE, which is what an UPDATE of its status takes: rows that refer
// to it can still be added; SQLite's write transactions are alone
// already).
func (s *Store) EvaluationStatusTx(tx *Tx, evalID int64) (string, error) {
	q := `SELECT status FROM evaluations WHERE id = ?`
	if tx.pgTx != nil {
		q += ` FOR NO KEY UPDATE`
	}
	var status string
	err := tx.QueryRow(q, evalID).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fail.Inputf("store: %s: no evaluation %d", s.where, evalID)
	}
	if err != nil {
		return "", fail.Infraf("store: %s: evaluation %d: %w", s.where, evalID, err)
	}
	return status, nil
}
