package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"errors"
	"io"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

// migrationFollow is the list follower's state (pipelines/bots/follow): per
// list the public-inbox epoch and the last commit read; the messages of
// threads that may still become series; and the series seen, with their
// state and evaluation.
const migrationFollow = `
CREATE TABLE follow_lists (
	name        TEXT PRIMARY KEY,
	url         TEXT NOT NULL,
	epoch       INTEGER NOT NULL DEFAULT -1,
	last_commit TEXT NOT NULL DEFAULT '',
	messages    INTEGER NOT NULL DEFAULT 0,
	skipped     INTEGER NOT NULL DEFAULT 0,
	last_poll   TEXT NOT NULL DEFAULT '',
	last_ok     TEXT NOT NULL DEFAULT '',
	last_error  TEXT NOT NULL DEFAULT ''
);
CREATE TABLE follow_messages (
	id      INTEGER PRIMARY KEY,
	list    TEXT NOT NULL,
	msgid   TEXT NOT NULL,
	root    TEXT NOT NULL,
	raw     BLOB NOT NULL,
	seen    TEXT NOT NULL,
	UNIQUE (list, msgid)
);
CREATE INDEX follow_messages_by_root ON follow_messages(list, root);
CREATE TABLE follow_series (
	id            INTEGER PRIMARY KEY,
	list          TEXT NOT NULL,
	root          TEXT NOT NULL,
	version       INTEGER NOT NULL,
	msgid         TEXT NOT NULL DEFAULT '',
	title         TEXT NOT NULL DEFAULT '',
	author        TEXT NOT NULL DEFAULT '',
	total         INTEGER NOT NULL DEFAULT 0,
	found         INTEGER NOT NULL DEFAULT 0,
	status        TEXT NOT NULL,
	reason        TEXT NOT NULL DEFAULT '',
	evaluation_id INTEGER REFERENCES evaluations(id) ON DELETE SET NULL,
	first_seen    TEXT NOT NULL,
	last_seen     TEXT NOT NULL,
	updated       TEXT NOT NULL,
	UNIQUE (list, root, version)
);
CREATE INDEX follow_series_by_status ON follow_series(list, status);
`

// Follow series statuses.
const (
	// SeriesCollecting: not all patches arrived, or the quiet period for
	// stragglers has not passed.
	SeriesCollecting = "collecting"
	// SeriesIncomplete: patches still missing after the timeout; shown,
	// never evaluated.
	SeriesIncomplete = "incomplete"
	// SeriesFiltered: complete, but the list's filters do not select it.
	SeriesFiltered = "filtered"
	// SeriesSubmitted: an evaluation was created for it.
	SeriesSubmitted = "submitted"
	// SeriesSuperseded: a newer version arrived; its queued work was
	// cancelled.
	SeriesSuperseded = "superseded"
	// SeriesFailed: submitting it failed for good (Reason says why).
	SeriesFailed = "failed"
)

// FollowStatus reports whether status is one of the follow series
// statuses.
func FollowStatus(status string) bool {
	for _, s := range FollowStatuses {
		if s == status {
			return true
		}
	}
	return false
}

// FollowStatuses are the follow series statuses, in their usual order.
var FollowStatuses = []string{SeriesCollecting, SeriesIncomplete, SeriesFiltered, SeriesSubmitted, SeriesSuperseded, SeriesFailed}

// FollowList is one followed list's cursor.
type FollowList struct {
	Name       string    `json:"name"`
	URL        string    `json:"url"`
	Epoch      int       `json:"epoch"`
	LastCommit string    `json:"last_commit,omitempty"`
	Messages   int       `json:"messages"`
	Skipped    int       `json:"skipped"`
	LastPoll   time.Time `json:"last_poll,omitzero"`
	LastOK     time.Time `json:"last_ok,omitzero"`
	LastError  string    `json:"last_error,omitempty"`
}

// FollowSeries is one version of a series seen on a followed list.
type FollowSeries struct {
	ID           int64     `json:"id"`
	List         string    `json:"list"`
	Root         string    `json:"root"`
	Version      int       `json:"version"`
	MsgID        string    `json:"msgid,omitempty"`
	Title        string    `json:"title,omitempty"`
	Author       string    `json:"author,omitempty"`
	Total        int       `json:"total"`
	Found        int       `json:"found"`
	Status       string    `json:"status"`
	Reason       string    `json:"reason,omitempty"`
	EvaluationID int64     `json:"evaluation_id,omitempty"`
	FirstSeen    time.Time `json:"first_seen"`
	LastSeen     time.Time `json:"last_seen"`
	// Updated is the last change of the row (a message, or a state).
	Updated time.Time `json:"updated"`
}

// FollowListState returns the cursor of list name (Epoch -1 and no
// commit when the list was never read).
func (s *Store) FollowListState(name string) (*FollowList, error) {
	var l FollowList
	var poll, ok string
	err := s.db.QueryRow(`SELECT name, url, epoch, last_commit, messages, skipped, last_poll, last_ok, last_error
		FROM follow_lists WHERE name = ?`, name).Scan(&l.Name, &l.URL, &l.Epoch, &l.LastCommit, &l.Messages, &l.Skipped, &poll, &ok, &l.LastError)
	if errors.Is(err, sql.ErrNoRows) {
		return &FollowList{Name: name, Epoch: -1}, nil
	}
	if err != nil {
		return nil, fail.Infraf("store: %s: list %s: %w", s.where, name, err)
	}
	l.LastPoll, l.LastOK = parseTime(poll), parseTime(ok)
	return &l, nil
}

// FollowPoll records one poll of list name: where it stopped (epoch and
// commit) and how many messages it read and skipped as malformed; pollErr
// nil marks a good poll.
func (s *Store) FollowPoll(name, url string, epoch int, commit string, read, skipped int, pollErr error) error {
	now := fmtTime(time.Now())
	okAt, msg := now, ""
	if pollErr != nil {
		okAt, msg = "", pollErr.Error()
	}
	_, err := s.db.Exec(`INSERT INTO follow_lists (name, url, epoch, last_commit, messages, skipped, last_poll, last_ok, last_error)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(name) DO UPDATE SET url = excluded.url, epoch = excluded.epoch, last_commit = excluded.last_commit,
			messages = follow_lists.messages + excluded.messages, skipped = follow_lists.skipped + excluded.skipped, last_poll = excluded.last_poll,
			last_ok = CASE WHEN excluded.last_ok = '' THEN follow_lists.last_ok ELSE excluded.last_ok END, last_error = excluded.last_error`,
		name, url, epoch, commit, read, skipped, now, okAt, msg)
	if err != nil {
		return fail.Infraf("store: %s: list %s: %w", s.where, name, err)
	}
	return nil
}

// FollowMessage is one message to keep (AddFollowMessages).
type FollowMessage struct {
	MsgID, Root string
	Raw         []byte
}

// AddFollowMessages keeps messages of list in one transaction (one sync
// for a whole poll); messages seen before are not stored twice.
func (s *Store) AddFollowMessages(list string, msgs []FollowMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	now := fmtTime(time.Now())
	return s.Tx(context.Background(), func(tx *Tx) error {
		for _, m := range msgs {
			if _, err := tx.Exec(`INSERT INTO follow_messages (list, msgid, root, raw, seen) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT(list, msgid) DO NOTHING`, list, m.MsgID, m.Root, gz(m.Raw), now); err != nil {
				return fail.Infraf("store: %s: message <%s>: %w", s.where, m.MsgID, err)
			}
		}
		return nil
	})
}

func gz(raw []byte) []byte {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(raw)
	w.Close()
	return z.Bytes()
}

// AddFollowMessage keeps one message of list (raw, gzipped) under its
// thread root; a message seen before is not stored twice (added false).
func (s *Store) AddFollowMessage(list, msgid, root string, raw []byte) (added bool, err error) {
	res, err := s.db.Exec(`INSERT INTO follow_messages (list, msgid, root, raw, seen) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(list, msgid) DO NOTHING`, list, msgid, root, gz(raw), fmtTime(time.Now()))
	if err != nil {
		return false, fail.Infraf("store: %s: message <%s>: %w", s.where, msgid, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// FollowRootOf is the thread root a stored message of list was filed
// under ("" when the message is unknown).
func (s *Store) FollowRootOf(list, msgid string) (string, error) {
	var root string
	err := s.db.QueryRow(`SELECT root FROM follow_messages WHERE list = ? AND msgid = ?`, list, msgid).Scan(&root)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fail.Infraf("store: %s: %w", s.where, err)
	}
	return root, nil
}

// FollowMessages returns the raw messages of list filed under root, in
// the order they were read.
func (s *Store) FollowMessages(list, root string) ([][]byte, error) {
	rows, err := s.db.Query(`SELECT raw FROM follow_messages WHERE list = ? AND root = ? ORDER BY id`, list, root)
	if err != nil {
		return nil, fail.Infraf("store: %s: %w", s.where, err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var z []byte
		if err := rows.Scan(&z); err != nil {
			return nil, fail.Infraf("store: %s: %w", s.where, err)
		}
		r, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			return nil, fail.Infraf("store: %s: a stored message: %w", s.where, err)
		}
		raw, err := io.ReadAll(r)
		if err != nil {
			return nil, fail.Infraf("store: %s: a stored message: %w", s.where, err)
		}
		out = append(out, raw)
	}
	return out, rows.Err()
}

const followSeriesColumns = `id, list, root, version, msgid, title, author, total, found, status, reason,
	COALESCE(evaluation_id, 0), first_seen, last_seen, updated`

func scanFollowSeries(row scanner) (*FollowSeries, error) {
	var f FollowSeries
	var first, last, updated string
	if err := row.Scan(&f.ID, &f.List, &f.Root, &f.Version, &f.MsgID, &f.Title, &f.Author, &f.Total, &f.Found,
		&f.Status, &f.Reason, &f.EvaluationID, &first, &last, &updated); err != nil {
		return nil, err
	}
	f.FirstSeen, f.LastSeen, f.Updated = parseTime(first), parseTime(last), parseTime(updated)
	return &f, nil
}

const noteFollowSeries = `INSERT INTO follow_series (list, root, version, msgid, title, author, total, found, status, first_seen, last_seen, updated)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT(list, root, version) DO UPDATE SET msgid = excluded.msgid, title = excluded.title, author = excluded.author,
		total = excluded.total, found = excluded.found, last_seen = excluded.last_seen, updated = excluded.updated
	RETURNING ` + followSeriesColumns

func noteArgs(f FollowSeries, at string) []any {
	return []any{f.List, f.Root, f.Version, f.MsgID, f.Title, f.Author, f.Total, f.Found, SeriesCollecting, at, at, at}
}

// NoteFollowSeries records that a message of version v of the series
// under root arrived at seen (creating it as collecting), with what is
// known of it so far, and returns it.
func (s *Store) NoteFollowSeries(f FollowSeries, seen time.Time) (*FollowSeries, error) {
	out, err := scanFollowSeries(s.db.QueryRow(noteFollowSeries, noteArgs(f, fmtTime(seen))...))
	if err != nil {
		return nil, fail.Infraf("store: %s: series %s v%d: %w", s.where, f.Root, f.Version, err)
	}
	return out, nil
}

// NoteFollowSeriesAll is NoteFollowSeries for many series in one
// transaction (one sync for a whole poll instead of one per series).
func (s *Store) NoteFollowSeriesAll(fs []FollowSeries, seen time.Time) error {
	if len(fs) == 0 {
		return nil
	}
	at := fmtTime(seen)
	return s.Tx(context.Background(), func(tx *Tx) error {
		for _, f := range fs {
			if _, err := scanFollowSeries(tx.QueryRow(noteFollowSeries, noteArgs(f, at)...)); err != nil {
				return fail.Infraf("store: %s: series %s v%d: %w", s.where, f.Root, f.Version, err)
			}
		}
		return nil
	})
}

// SetFollowSeries records a series' status, why, and its evaluation
// (0: none).
func (s *Store) SetFollowSeries(id int64, status, reason string, evalID int64) error {
	var eval any
	if evalID > 0 {
		eval = evalID
	}
	_, err := s.db.Exec(`UPDATE follow_series SET status = ?, reason = ?, evaluation_id = COALESCE(?, evaluation_id), updated = ?
		WHERE id = ?`, status, reason, eval, fmtTime(time.Now()), id)
	if err != nil {
		return fail.Infraf("store: %s: series %d: %w", s.where, id, err)
	}
	return nil
}

// FollowSeriesList lists a list's series (all lists when list is empty)
// in the given status (all when empty), oldest first.
func (s *Store) FollowSeriesList(list, status string) ([]*FollowSeries, error) {
	rows, err := s.db.Query(`SELECT `+followSeriesColumns+` FROM follow_series
		WHERE (? = '' OR list = ?) AND (? = '' OR status = ?) ORDER BY id`, list, list, status, status)
	if err != nil {
		return nil, fail.Infraf("store: %s: %w", s.where, err)
	}
	defer rows.Close()
	var out []*FollowSeries
	for rows.Next() {
		f, err := scanFollowSeries(rows)
		if err != nil {
			return nil, fail.Infraf("store: %s: %w", s.where, err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// FollowSeriesOfEvaluation is the followed series evaluation evalID was
// submitted for (the newest such row), nil when it came from elsewhere.
func (s *Store) FollowSeriesOfEvaluation(evalID int64) (*FollowSeries, error) {
	f, err := scanFollowSeries(s.db.QueryRow(`SELECT `+followSeriesColumns+` FROM follow_series
		WHERE evaluation_id = ? ORDER BY id DESC LIMIT 1`, evalID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fail.Infraf("store: %s: the series of evaluation %d: %w", s.where, evalID, err)
	}
	return f, nil
}
