package store

import (
	"sort"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

// migrationWorkers: the processes that work jobs (`patcheval serve` and
// `patcheval worker`, pipelines/service), with what they can run and
// their heartbeat, for the dashboard's workers page and for telling a job
// no live worker can take from one that waits its turn.
const migrationWorkers = `
CREATE TABLE workers (
	name         TEXT PRIMARY KEY,
	host         TEXT NOT NULL DEFAULT '',
	capabilities TEXT NOT NULL DEFAULT '',
	queues       TEXT NOT NULL DEFAULT '',
	current      TEXT NOT NULL DEFAULT '',
	state        TEXT NOT NULL DEFAULT '',
	started      TEXT NOT NULL,
	last_seen    TEXT NOT NULL
);
`

// Worker states.
const (
	WorkerRunning = "running"
	WorkerStopped = "stopped" // left cleanly
)

// Worker is one process that works jobs, as its last heartbeat left it.
type Worker struct {
	Name string `json:"name"`
	Host string `json:"host"`
	// Capabilities is the worker's own JSON description of what it can
	// run (pipelines/service.Capabilities); Queues the queues it works,
	// space-separated; Current its running jobs, one per line.
	Capabilities string    `json:"capabilities"`
	Queues       string    `json:"queues"`
	Current      string    `json:"current"`
	State        string    `json:"state"`
	Started      time.Time `json:"started"`
	LastSeen     time.Time `json:"last_seen"`
}

// Heartbeat records worker w as seen now (LastSeen is set here), adding
// it when new.
func (s *Store) Heartbeat(w Worker) error {
	now := fmtTime(time.Now())
	if w.Started.IsZero() {
		w.Started = time.Now()
	}
	_, err := s.db.Exec(`INSERT INTO workers (name, host, capabilities, queues, current, state, started, last_seen)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(name) DO UPDATE SET host = excluded.host, capabilities = excluded.capabilities, queues = excluded.queues,
			current = excluded.current, state = excluded.state, started = excluded.started, last_seen = excluded.last_seen`,
		w.Name, w.Host, w.Capabilities, w.Queues, w.Current, w.State, fmtTime(w.Started), now)
	if err != nil {
		return fail.Infraf("store: %s: heartbeat of worker %s: %w", s.where, w.Name, err)
	}
	return nil
}

// Workers lists the workers, most recently seen first.
func (s *Store) Workers() ([]Worker, error) {
	rows, err := s.db.Query(`SELECT name, host, capabilities, queues, current, state, started, last_seen FROM workers`)
	if err != nil {
		return nil, fail.Infraf("store: %s: workers: %w", s.where, err)
	}
	defer rows.Close()
	var out []Worker
	for rows.Next() {
		var w Worker
		var started, seen string
		if err := rows.Scan(&w.Name, &w.Host, &w.Capabilities, &w.Queues, &w.Current, &w.State, &started, &seen); err != nil {
			return nil, fail.Infraf("store: %s: workers: %w", s.where, err)
		}
		w.Started, w.LastSeen = parseTime(started), parseTime(seen)
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fail.Infraf("store: %s: workers: %w", s.where, err)
	}
	// In Go: RFC 3339 text with its trailing zeros trimmed does not sort
	// as time does.
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].LastSeen.Equal(out[j].LastSeen) {
			return out[i].LastSeen.After(out[j].LastSeen)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}
