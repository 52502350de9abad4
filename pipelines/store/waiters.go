package store

import (
	"encoding/json"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

// A job that waits for an evaluation to end (pipelines/service: a
// watch's re-test waits for the evaluation it submitted) is stored here
// as its continuation: the kind and arguments of the River job to queue,
// with the queue, tags and attempts to queue it with. The transaction
// that ends the evaluation (done, failed or cancelled) takes the
// evaluation's waiters (TakeWaitersTx) and queues their jobs, so a
// waiter survives a restart: it is in the database, not in a process.
const migrationWaiters = `
CREATE TABLE evaluation_waiters (
	id            INTEGER PRIMARY KEY,
	evaluation_id INTEGER NOT NULL REFERENCES evaluations(id) ON DELETE CASCADE,
	kind          TEXT NOT NULL,
	args          TEXT NOT NULL,
	queue         TEXT NOT NULL,
	tags          TEXT NOT NULL DEFAULT '',
	max_attempts  INTEGER NOT NULL DEFAULT 0,
	created       TEXT NOT NULL
);
CREATE INDEX evaluation_waiters_by_evaluation ON evaluation_waiters(evaluation_id);
CREATE INDEX evaluation_waiters_by_kind ON evaluation_waiters(kind);
`

// Waiter is a job waiting for evaluation EvaluationID to end: Kind and
// Args (JSON) are the job to queue then, in Queue with Tags and
// MaxAttempts (0: River's default).
type Waiter struct {
	ID           int64           `json:"id"`
	EvaluationID int64           `json:"evaluation_id"`
	Kind         string          `json:"kind"`
	Args         json.RawMessage `json:"args"`
	Queue        string          `json:"queue"`
	Tags         []string        `json:"tags,omitempty"`
	MaxAttempts  int             `json:"max_attempts,omitempty"`
	Created      time.Time       `json:"created"`
}

// AddWaiterTx stores w in tx; its id is returned.
func (s *Store) AddWaiterTx(tx *Tx, w Waiter) (int64, error) {
	if w.EvaluationID == 0 || w.Kind == "" || w.Queue == "" || len(w.Args) == 0 {
		return 0, fail.Inputf("store: a waiter needs an evaluation, a kind, a queue and arguments")
	}
	tags, err := json.Marshal(w.Tags)
	if err != nil {
		return 0, fail.Infraf("store: waiter: %w", err)
	}
	var id int64
	err = tx.QueryRow(`INSERT INTO evaluation_waiters (evaluation_id, kind, args, queue, tags, max_attempts, created)
		VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`, w.EvaluationID, w.Kind, string(w.Args), w.Queue, string(tags), w.MaxAttempts,
		fmtTime(time.Now())).Scan(&id)
	if err != nil {
		return 0, fail.Infraf("store: %s: waiter of evaluation %d: %w", s.where, w.EvaluationID, err)
	}
	return id, nil
}

// TakeWaitersTx removes evaluation evalID's waiters in tx and returns
// them, oldest first: the transaction that ends the evaluation queues
// their jobs.
func (s *Store) TakeWaitersTx(tx *Tx, evalID int64) ([]*Waiter, error) {
	out, err := s.waiters(tx, `WHERE evaluation_id = ?`, evalID)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	if _, err := tx.Exec(`DELETE FROM evaluation_waiters WHERE evaluation_id = ?`, evalID); err != nil {
		return nil, fail.Infraf("store: %s: waiters of evaluation %d: %w", s.where, evalID, err)
	}
	return out, nil
}

// AllWaitersTx are every stored waiter, read in tx, oldest first (a
// waiter lives only while its evaluation runs: they are few).
func (s *Store) AllWaitersTx(tx *Tx) ([]*Waiter, error) {
	return s.waiters(tx, ``)
}

// Waiters are the stored waiters whose job is of kind, oldest first.
func (s *Store) Waiters(kind string) ([]*Waiter, error) {
	return s.waiters(s.db, `WHERE kind = ?`, kind)
}

// WaitersTx is Waiters read in tx.
func (s *Store) WaitersTx(tx *Tx, kind string) ([]*Waiter, error) {
	return s.waiters(tx, `WHERE kind = ?`, kind)
}

func (s *Store) waiters(q querier, where string, args ...any) ([]*Waiter, error) {
	rows, err := q.Query(`SELECT id, evaluation_id, kind, args, queue, tags, max_attempts, created FROM evaluation_waiters `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fail.Infraf("store: %s: waiters: %w", s.where, err)
	}
	defer rows.Close()
	var out []*Waiter
	for rows.Next() {
		var w Waiter
		var a, tags, created string
		if err := rows.Scan(&w.ID, &w.EvaluationID, &w.Kind, &a, &w.Queue, &tags, &w.MaxAttempts, &created); err != nil {
			return nil, fail.Infraf("store: %s: waiters: %w", s.where, err)
		}
		w.Args = json.RawMessage(a)
		if tags != "" {
			if err := json.Unmarshal([]byte(tags), &w.Tags); err != nil {
				return nil, fail.Infraf("store: %s: waiter %d: tags: %w", s.where, w.ID, err)
			}
		}
		w.Created = parseTime(created)
		out = append(out, &w)
	}
	if err := rows.Err(); err != nil {
		return nil, fail.Infraf("store: %s: waiters: %w", s.where, err)
	}
	return out, nil
}
