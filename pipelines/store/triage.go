package store

import (
	"database/sql"
	"errors"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

// migrationTriage: the `#patcheval` commands read in replies to
// patcheval's reports (pipelines/bots/follow), one row per command, so that a
// reply read twice does one thing.
const migrationTriage = `
CREATE TABLE triage_commands (
	id            INTEGER PRIMARY KEY,
	list          TEXT NOT NULL,
	msgid         TEXT NOT NULL,
	idx           INTEGER NOT NULL,
	sender        TEXT NOT NULL,
	command       TEXT NOT NULL,
	evaluation_id INTEGER REFERENCES evaluations(id) ON DELETE SET NULL,
	status        TEXT NOT NULL,
	note          TEXT NOT NULL DEFAULT '',
	created       TEXT NOT NULL,
	updated       TEXT NOT NULL,
	UNIQUE(list, msgid, idx)
);
`

// Triage command statuses.
const (
	TriageClaimed = "claimed" // read, being carried out
	TriageDone    = "done"
	TriageIgnored = "ignored" // the sender may not command (logged)
	TriageFailed  = "failed"
)

// TriageCommand is one `#patcheval` command of a reply.
type TriageCommand struct {
	ID   int64  `json:"id"`
	List string `json:"list"`
	// MsgID is the reply's Message-ID, Index the command's number in it.
	MsgID        string    `json:"msgid"`
	Index        int       `json:"index"`
	Sender       string    `json:"sender"`
	Command      string    `json:"command"`
	EvaluationID int64     `json:"evaluation_id,omitempty"`
	Status       string    `json:"status"`
	Note         string    `json:"note,omitempty"`
	Created      time.Time `json:"created"`
	Updated      time.Time `json:"updated"`
}

// ClaimTriage records command c as claimed; false when (list, msgid,
// index) was read before (it is not carried out again).
func (s *Store) ClaimTriage(c TriageCommand) (id int64, claimed bool, err error) {
	now := fmtTime(time.Now())
	var ev any
	if c.EvaluationID > 0 {
		ev = c.EvaluationID
	}
	// RETURNING, not LastInsertId: the same statement runs on Postgres.
	err = s.db.QueryRow(`INSERT INTO triage_commands (list, msgid, idx, sender, command, evaluation_id, status, created, updated)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(list, msgid, idx) DO NOTHING RETURNING id`,
		c.List, c.MsgID, c.Index, c.Sender, c.Command, ev, TriageClaimed, now, now).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil // read before
	}
	if err != nil {
		return 0, false, fail.Infraf("store: %s: triage command: %w", s.where, err)
	}
	return id, true, nil
}

// FinishTriage sets a claimed command's status and note.
func (s *Store) FinishTriage(id int64, status, note string) error {
	if _, err := s.db.Exec(`UPDATE triage_commands SET status = ?, note = ?, updated = ? WHERE id = ?`,
		status, note, fmtTime(time.Now()), id); err != nil {
		return fail.Infraf("store: %s: triage command %d: %w", s.where, id, err)
	}
	return nil
}

// TriageCommands lists list's commands ("" all), oldest first.
func (s *Store) TriageCommands(list string) ([]TriageCommand, error) {
	rows, err := s.db.Query(`SELECT id, list, msgid, idx, sender, command, COALESCE(evaluation_id, 0), status, note, created, updated
		FROM triage_commands WHERE ? = '' OR list = ? ORDER BY id`, list, list)
	if err != nil {
		return nil, fail.Infraf("store: %s: triage commands: %w", s.where, err)
	}
	defer rows.Close()
	var out []TriageCommand
	for rows.Next() {
		var c TriageCommand
		var created, updated string
		if err := rows.Scan(&c.ID, &c.List, &c.MsgID, &c.Index, &c.Sender, &c.Command, &c.EvaluationID, &c.Status, &c.Note, &created, &updated); err != nil {
			return nil, fail.Infraf("store: %s: %w", s.where, err)
		}
		c.Created, c.Updated = parseTime(created), parseTime(updated)
		out = append(out, c)
	}
	return out, rows.Err()
}

// PostByRemoteID is reporter's post whose remote id (a mail's
// Message-ID) is remoteID, or nil.
func (s *Store) PostByRemoteID(reporter, remoteID string) (*Post, error) {
	ps, err := s.queryPosts(`SELECT `+postColumns+` FROM posts WHERE reporter = ? AND remote_id = ? ORDER BY id DESC LIMIT 1`, reporter, remoteID)
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	return ps[0], nil
}
