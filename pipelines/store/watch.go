package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

const migrationWatches = `
CREATE TABLE watches (
	id              INTEGER PRIMARY KEY,
	name            TEXT NOT NULL UNIQUE,
	remote          TEXT NOT NULL,
	branch          TEXT NOT NULL DEFAULT '',
	tags            TEXT NOT NULL,
	pipeline        TEXT NOT NULL,
	series_msgid    TEXT NOT NULL DEFAULT '',
	schedule        TEXT NOT NULL,
	bisect          INTEGER NOT NULL DEFAULT 0,
	tree            TEXT NOT NULL DEFAULT '',
	origin          TEXT NOT NULL DEFAULT 'cli',
	created         TEXT NOT NULL,
	last_check      TEXT NOT NULL DEFAULT '',
	last_ok         TEXT NOT NULL DEFAULT '',
	last_error      TEXT NOT NULL DEFAULT '',
	last_error_kind TEXT NOT NULL DEFAULT ''
);
CREATE TABLE watch_tags (
	id            INTEGER PRIMARY KEY,
	watch_id      INTEGER NOT NULL REFERENCES watches(id) ON DELETE CASCADE,
	tag           TEXT NOT NULL,
	commit_id     TEXT NOT NULL DEFAULT '',
	seen          TEXT NOT NULL,
	status        TEXT NOT NULL,
	evaluation_id INTEGER REFERENCES evaluations(id) ON DELETE SET NULL,
	error_kind    TEXT NOT NULL DEFAULT '',
	error_text    TEXT NOT NULL DEFAULT '',
	updated       TEXT NOT NULL,
	UNIQUE (watch_id, tag)
);
CREATE TABLE watch_events (
	id         INTEGER PRIMARY KEY,
	watch_id   INTEGER NOT NULL REFERENCES watches(id) ON DELETE CASCADE,
	from_tag   TEXT NOT NULL,
	to_tag     TEXT NOT NULL,
	variant    TEXT NOT NULL,
	benchmark  TEXT NOT NULL,
	metric     TEXT NOT NULL,
	verdict    TEXT NOT NULL,
	change_pct REAL NOT NULL,
	ci_low     REAL NOT NULL DEFAULT 0,
	ci_high    REAL NOT NULL DEFAULT 0,
	reason     TEXT NOT NULL DEFAULT '',
	created    TEXT NOT NULL,
	bisect     TEXT NOT NULL DEFAULT '',
	UNIQUE (watch_id, from_tag, to_tag, variant, benchmark, metric)
);
`

// Watch is a scheduled re-test: a remote's tags matching a glob, each new
// one evaluated with a pipeline (optionally with a series re-applied).
type Watch struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	Remote   string `json:"remote"`
	Branch   string `json:"branch,omitempty"`
	Tags     string `json:"tags"`
	Pipeline string `json:"pipeline"`
	SeriesID string `json:"series_msgid,omitempty"`
	Schedule string `json:"schedule"`
	Bisect   bool   `json:"bisect"`
	// Regzbot puts regzbot's commands (#regzbot introduced:, title:,
	// resolve:) in the drafts of this watch's regressions, for lists
	// whose regressions regzbot tracks.
	Regzbot bool `json:"regzbot,omitempty"`
	// Tree is the local git repository new tags are fetched into.
	Tree string `json:"tree"`
	// Origin is "cli" (watch add) or "config" (a [[watch]] table).
	Origin  string    `json:"origin"`
	Created time.Time `json:"created"`
	// LastCheck is the last tick; LastOK the last one that reached the
	// remote; LastError why the last tick failed (empty after a good one).
	LastCheck     time.Time `json:"last_check,omitzero"`
	LastOK        time.Time `json:"last_ok,omitzero"`
	LastError     string    `json:"last_error,omitempty"`
	LastErrorKind string    `json:"last_error_kind,omitempty"`
}

// Watch tag statuses.
const (
	// TagKnown: the tag existed when the watch first looked; it is the
	// reference point only when it is the newest (then it is evaluated).
	TagKnown   = "known"
	TagQueued  = "queued"
	TagRunning = "running"
	TagDone    = "done"
	// TagFailed: evaluated and failed (does not build, boot, or the series
	// does not apply); TagInfra: the machine failed, retried next tick.
	TagFailed = "failed"
	TagInfra  = "infra"
)

// WatchTag is one tag a watch saw.
type WatchTag struct {
	ID           int64     `json:"id"`
	WatchID      int64     `json:"watch_id"`
	Tag          string    `json:"tag"`
	Commit       string    `json:"commit,omitempty"`
	Seen         time.Time `json:"seen"`
	Status       string    `json:"status"`
	EvaluationID int64     `json:"evaluation_id,omitempty"`
	ErrorKind    string    `json:"error_kind,omitempty"`
	ErrorText    string    `json:"error_text,omitempty"`
	Updated      time.Time `json:"updated"`
}

// WatchEvent is a significant change between two consecutive tags.
type WatchEvent struct {
	ID        int64     `json:"id"`
	WatchID   int64     `json:"watch_id"`
	From      string    `json:"from_tag"`
	To        string    `json:"to_tag"`
	Variant   string    `json:"variant"`
	Benchmark string    `json:"benchmark"`
	Metric    string    `json:"metric"`
	Verdict   string    `json:"verdict"`
	Change    float64   `json:"change_pct"`
	CILow     float64   `json:"ci_low_pct"`
	CIHigh    float64   `json:"ci_high_pct"`
	Reason    string    `json:"reason"`
	Created   time.Time `json:"created"`
	// Bisect is the bisection's state or result (JSON), empty when none.
	Bisect json.RawMessage `json:"bisect,omitempty"`
	// Fixed is what a later tag showed of a reported regression (JSON:
	// the tag on which the metric is back, the regzbot commands said),
	// empty while it is not known to be gone (SetEventFixed).
	Fixed json.RawMessage `json:"fixed,omitempty"`
}

const watchColumns = `id, name, remote, branch, tags, pipeline, series_msgid, schedule, bisect, tree, origin,
	created, last_check, last_ok, last_error, last_error_kind, regzbot`

// migrationEventFixed records on a regression event that a later tag
// brought the metric back (see SetEventFixed).
const migrationEventFixed = `ALTER TABLE watch_events ADD COLUMN fixed TEXT NOT NULL DEFAULT '';`

// migrationWatchRegzbot adds the watches' regzbot opt-in.
const migrationWatchRegzbot = `ALTER TABLE watches ADD COLUMN regzbot INTEGER NOT NULL DEFAULT 0;`

func scanWatch(row scanner) (*Watch, error) {
	var w Watch
	var bisect, regzbot int
	var created, check, ok string
	if err := row.Scan(&w.ID, &w.Name, &w.Remote, &w.Branch, &w.Tags, &w.Pipeline, &w.SeriesID, &w.Schedule, &bisect,
		&w.Tree, &w.Origin, &created, &check, &ok, &w.LastError, &w.LastErrorKind, &regzbot); err != nil {
		return nil, err
	}
	w.Bisect, w.Regzbot = bisect != 0, regzbot != 0
	w.Created, w.LastCheck, w.LastOK = parseTime(created), parseTime(check), parseTime(ok)
	return &w, nil
}

// AddWatch stores a new watch (its name must be unused) and returns it
// with its id. The caller validates the fields (pipelines/experiments/watch does).
func (s *Store) AddWatch(w Watch) (*Watch, error) {
	if w.Name == "" || w.Remote == "" || w.Tags == "" || w.Pipeline == "" || w.Schedule == "" {
		return nil, fail.Inputf("store: a watch needs a name, remote, tag pattern, pipeline and schedule")
	}
	if w.Origin == "" {
		w.Origin = "cli"
	}
	if w.Created.IsZero() {
		w.Created = time.Now()
	}
	err := s.db.QueryRow(`INSERT INTO watches (name, remote, branch, tags, pipeline, series_msgid, schedule, bisect, tree, origin, created, regzbot)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		w.Name, w.Remote, w.Branch, w.Tags, w.Pipeline, w.SeriesID, w.Schedule, b2i(w.Bisect), w.Tree, w.Origin, fmtTime(w.Created),
		b2i(w.Regzbot)).Scan(&w.ID)
	if err != nil {
		if uniqueViolation(err) {
			return nil, fail.Inputf("store: a watch named %q exists already (see 'patcheval watch list')", w.Name)
		}
		return nil, fail.Infraf("store: %s: adding watch %s: %w", s.where, w.Name, err)
	}
	return &w, nil
}

// UpdateWatch rewrites a watch's settings (not its check state).
func (s *Store) UpdateWatch(w Watch) error {
	res, err := s.db.Exec(`UPDATE watches SET remote = ?, branch = ?, tags = ?, pipeline = ?, series_msgid = ?, schedule = ?,
		bisect = ?, tree = ?, origin = ?, regzbot = ? WHERE id = ?`,
		w.Remote, w.Branch, w.Tags, w.Pipeline, w.SeriesID, w.Schedule, b2i(w.Bisect), w.Tree, w.Origin, b2i(w.Regzbot), w.ID)
	if err != nil {
		return fail.Infraf("store: %s: updating watch %s: %w", s.where, w.Name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fail.Inputf("store: %s: no watch %d", s.where, w.ID)
	}
	return nil
}

// Watches lists every watch by id.
func (s *Store) Watches() ([]*Watch, error) {
	rows, err := s.db.Query(`SELECT ` + watchColumns + ` FROM watches ORDER BY id`)
	if err != nil {
		return nil, fail.Infraf("store: %s: listing watches: %w", s.where, err)
	}
	defer rows.Close()
	var out []*Watch
	for rows.Next() {
		w, err := scanWatch(rows)
		if err != nil {
			return nil, fail.Infraf("store: %s: %w", s.where, err)
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// FindWatch returns the watch named (or numbered) ref.
func (s *Store) FindWatch(ref string) (*Watch, error) {
	w, err := scanWatch(s.db.QueryRow(`SELECT `+watchColumns+` FROM watches WHERE name = ? OR CAST(id AS TEXT) = ? ORDER BY name = ? DESC LIMIT 1`, ref, ref, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fail.Inputf("no watch %q (see 'patcheval watch list')", ref)
	}
	if err != nil {
		return nil, fail.Infraf("store: %s: watch %s: %w", s.where, ref, err)
	}
	return w, nil
}

// RemoveWatch deletes a watch with its tags and events (the evaluations
// stay).
func (s *Store) RemoveWatch(id int64) error {
	res, err := s.db.Exec(`DELETE FROM watches WHERE id = ?`, id)
	if err != nil {
		return fail.Infraf("store: %s: removing watch %d: %w", s.where, id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fail.Inputf("store: %s: no watch %d", s.where, id)
	}
	return nil
}

// RecordCheck records a tick: when, and why it failed (nil: it reached
// the remote).
func (s *Store) RecordCheck(id int64, at time.Time, checkErr error) error {
	var err error
	if checkErr == nil {
		_, err = s.db.Exec(`UPDATE watches SET last_check = ?, last_ok = ?, last_error = '', last_error_kind = '' WHERE id = ?`,
			fmtTime(at), fmtTime(at), id)
	} else {
		_, err = s.db.Exec(`UPDATE watches SET last_check = ?, last_error = ?, last_error_kind = ? WHERE id = ?`,
			fmtTime(at), checkErr.Error(), fail.KindOf(checkErr).String(), id)
	}
	if err != nil {
		return fail.Infraf("store: %s: watch %d: %w", s.where, id, err)
	}
	return nil
}

// AddWatchTag records that the watch saw tag at commit, with status,
// unless it saw it before; added says whether it is new.
func (s *Store) AddWatchTag(watchID int64, tag, commit, status string) (t *WatchTag, added bool, err error) {
	now := fmtTime(time.Now())
	res, err := s.db.Exec(`INSERT INTO watch_tags (watch_id, tag, commit_id, seen, status, updated) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT(watch_id, tag) DO NOTHING`, watchID, tag, commit, now, status, now)
	if err != nil {
		return nil, false, fail.Infraf("store: %s: watch %d tag %s: %w", s.where, watchID, tag, err)
	}
	n, _ := res.RowsAffected()
	t, err = s.watchTag(`watch_id = ? AND tag = ?`, watchID, tag)
	return t, n == 1, err
}

// SetWatchTag records a tag's status, evaluation and error.
func (s *Store) SetWatchTag(id int64, status, commit string, evalID int64, tagErr error) error {
	return s.setWatchTag(s.db, id, status, commit, evalID, tagErr)
}

// SetWatchTagTx is SetWatchTag in tx.
func (s *Store) SetWatchTagTx(tx *Tx, id int64, status, commit string, evalID int64, tagErr error) error {
	return s.setWatchTag(tx, id, status, commit, evalID, tagErr)
}

func (s *Store) setWatchTag(q querier, id int64, status, commit string, evalID int64, tagErr error) error {
	var kind, text string
	if tagErr != nil {
		kind, text = fail.KindOf(tagErr).String(), tagErr.Error()
	}
	var ev any
	if evalID > 0 {
		ev = evalID
	}
	_, err := q.Exec(`UPDATE watch_tags SET status = ?, commit_id = CASE WHEN ? = '' THEN commit_id ELSE ? END,
		evaluation_id = COALESCE(?, evaluation_id), error_kind = ?, error_text = ?, updated = ? WHERE id = ?`,
		status, commit, commit, ev, kind, text, fmtTime(time.Now()), id)
	if err != nil {
		return fail.Infraf("store: %s: watch tag %d: %w", s.where, id, err)
	}
	return nil
}

const watchTagColumns = `id, watch_id, tag, commit_id, seen, status, COALESCE(evaluation_id, 0), error_kind, error_text, updated`

func (s *Store) watchTag(where string, args ...any) (*WatchTag, error) {
	rows, err := s.watchTags(where, args...)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fail.Inputf("store: %s: no such watch tag", s.where)
	}
	return rows[0], nil
}

func (s *Store) watchTags(where string, args ...any) ([]*WatchTag, error) {
	rows, err := s.db.Query(`SELECT `+watchTagColumns+` FROM watch_tags WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fail.Infraf("store: %s: watch tags: %w", s.where, err)
	}
	defer rows.Close()
	var out []*WatchTag
	for rows.Next() {
		var t WatchTag
		var seen, upd string
		if err := rows.Scan(&t.ID, &t.WatchID, &t.Tag, &t.Commit, &seen, &t.Status, &t.EvaluationID, &t.ErrorKind, &t.ErrorText, &upd); err != nil {
			return nil, fail.Infraf("store: %s: %w", s.where, err)
		}
		t.Seen, t.Updated = parseTime(seen), parseTime(upd)
		out = append(out, &t)
	}
	return out, rows.Err()
}

// WatchTags lists the tags a watch saw, in the order it saw them (sort
// by version for history: pipelines/experiments/watch.SortTags).
func (s *Store) WatchTags(watchID int64) ([]*WatchTag, error) {
	return s.watchTags(`watch_id = ?`, watchID)
}

// AddWatchEvent records an event unless the same one exists; added says
// whether it is new.
func (s *Store) AddWatchEvent(e WatchEvent) (*WatchEvent, bool, error) {
	if e.Created.IsZero() {
		e.Created = time.Now()
	}
	res, err := s.db.Exec(`INSERT INTO watch_events (watch_id, from_tag, to_tag, variant, benchmark, metric, verdict,
		change_pct, ci_low, ci_high, reason, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(watch_id, from_tag, to_tag, variant, benchmark, metric) DO NOTHING`,
		e.WatchID, e.From, e.To, e.Variant, e.Benchmark, e.Metric, e.Verdict, e.Change, e.CILow, e.CIHigh, e.Reason, fmtTime(e.Created))
	if err != nil {
		return nil, false, fail.Infraf("store: %s: watch %d event %s..%s: %w", s.where, e.WatchID, e.From, e.To, err)
	}
	n, _ := res.RowsAffected()
	evs, err := s.watchEvents(`watch_id = ? AND from_tag = ? AND to_tag = ? AND variant = ? AND benchmark = ? AND metric = ?`,
		e.WatchID, e.From, e.To, e.Variant, e.Benchmark, e.Metric)
	if err != nil || len(evs) == 0 {
		return nil, false, err
	}
	return evs[0], n == 1, nil
}

// SetEventBisect stores an event's bisection state or result (JSON).
func (s *Store) SetEventBisect(id int64, v any) error { return s.setEventBisect(s.db, id, v) }

// SetEventBisectTx is SetEventBisect in tx (a bisection step records its
// measurement and queues the next step together), a change to what
// EventBisectTx read in it.
func (s *Store) SetEventBisectTx(tx *Tx, id int64, v any) error { return s.setEventBisect(tx, id, v) }

// EventBisectTx is event id's bisection state (JSON, nil when none) read
// in tx for a change written back in it with SetEventBisectTx: tx holds
// the event's row until it ends, against every other transaction that
// reads it so (the state is one document: a step recording its
// measurement must not write back a copy read before another's change).
// SQLite's write transactions are alone already; on Postgres the row is
// read FOR UPDATE. A transaction that changes several events' states
// reads them in the order of their ids (the one lock order). A removed
// event (its watch removed) is a bad-input error.
func (s *Store) EventBisectTx(tx *Tx, id int64) ([]byte, error) {
	q := `SELECT bisect FROM watch_events WHERE id = ?`
	if tx.pgTx != nil {
		q += ` FOR UPDATE`
	}
	var state string
	err := tx.QueryRow(q, id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fail.Inputf("store: %s: no watch event %d (its watch was removed?)", s.where, id)
	}
	if err != nil {
		return nil, fail.Infraf("store: %s: event %d: %w", s.where, id, err)
	}
	if state == "" {
		return nil, nil
	}
	return []byte(state), nil
}

func (s *Store) setEventBisect(q querier, id int64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fail.Infraf("store: event %d: %w", id, err)
	}
	res, err := q.Exec(`UPDATE watch_events SET bisect = ? WHERE id = ?`, string(b), id)
	if err != nil {
		return fail.Infraf("store: %s: event %d: %w", s.where, id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fail.Inputf("store: %s: no watch event %d (its watch was removed?)", s.where, id)
	}
	return nil
}

// SetEventFixed records once that event id's regression is gone (v as
// JSON): set says whether this call recorded it, false when the event
// was marked fixed already (by this process or another), so that what
// says so is produced once.
func (s *Store) SetEventFixed(id int64, v any) (set bool, err error) {
	b, err := json.Marshal(v)
	if err != nil {
		return false, fail.Infraf("store: event %d: %w", id, err)
	}
	res, err := s.db.Exec(`UPDATE watch_events SET fixed = ? WHERE id = ? AND fixed = ''`, string(b), id)
	if err != nil {
		return false, fail.Infraf("store: %s: event %d: %w", s.where, id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// WatchEvent returns event id.
func (s *Store) WatchEvent(id int64) (*WatchEvent, error) {
	evs, err := s.watchEvents(`id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		return nil, fail.Inputf("store: %s: no watch event %d", s.where, id)
	}
	return evs[0], nil
}

// WatchTag returns tag id of a watch.
func (s *Store) WatchTag(id int64) (*WatchTag, error) { return s.watchTag(`id = ?`, id) }

// WatchEvents lists a watch's events, oldest first.
func (s *Store) WatchEvents(watchID int64) ([]*WatchEvent, error) {
	return s.watchEvents(`watch_id = ?`, watchID)
}

func (s *Store) watchEvents(where string, args ...any) ([]*WatchEvent, error) {
	rows, err := s.db.Query(`SELECT id, watch_id, from_tag, to_tag, variant, benchmark, metric, verdict, change_pct,
		ci_low, ci_high, reason, created, bisect, fixed FROM watch_events WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fail.Infraf("store: %s: watch events: %w", s.where, err)
	}
	defer rows.Close()
	var out []*WatchEvent
	for rows.Next() {
		var e WatchEvent
		var created, bis, fixed string
		if err := rows.Scan(&e.ID, &e.WatchID, &e.From, &e.To, &e.Variant, &e.Benchmark, &e.Metric, &e.Verdict, &e.Change,
			&e.CILow, &e.CIHigh, &e.Reason, &created, &bis, &fixed); err != nil {
			return nil, fail.Infraf("store: %s: %w", s.where, err)
		}
		e.Created = parseTime(created)
		if bis != "" {
			e.Bisect = json.RawMessage(bis)
		}
		if fixed != "" {
			e.Fixed = json.RawMessage(fixed)
		}
		out = append(out, &e)
	}
	return out, rows.Err()
}
