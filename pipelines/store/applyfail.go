package store

import (
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

// migrationApplyFailures keeps why an evaluation's series did not apply
// (which patch, file and hunk, the error, the base), and the reply that
// says so, for the dashboard and the bots' reporters.
const migrationApplyFailures = `
CREATE TABLE apply_failures (
	evaluation_id INTEGER PRIMARY KEY REFERENCES evaluations(id) ON DELETE CASCADE,
	patch         INTEGER NOT NULL DEFAULT 0,
	total         INTEGER NOT NULL DEFAULT 0,
	label         TEXT NOT NULL DEFAULT '',
	message_id    TEXT NOT NULL DEFAULT '',
	applied       INTEGER NOT NULL DEFAULT 0,
	file          TEXT NOT NULL DEFAULT '',
	hunk          INTEGER NOT NULL DEFAULT 0,
	hunk_header   TEXT NOT NULL DEFAULT '',
	reason        TEXT NOT NULL DEFAULT '',
	error_kind    TEXT NOT NULL DEFAULT '',
	tree          TEXT NOT NULL DEFAULT '',
	base          TEXT NOT NULL DEFAULT '',
	base_subject  TEXT NOT NULL DEFAULT '',
	base_reason   TEXT NOT NULL DEFAULT '',
	three_way     TEXT NOT NULL DEFAULT '',
	reply         TEXT NOT NULL DEFAULT '',
	created       TEXT NOT NULL
);
`

// ApplyFailure is why evaluation EvaluationID's series did not apply
// (series/apply.Failure as stored).
type ApplyFailure struct {
	EvaluationID int64 `json:"evaluation_id"`
	// Patch is the failing patch's 1-based position, Total the number
	// of patches; Label names it ("2/3 subject"), MessageID is its mail.
	Patch     int    `json:"patch"`
	Total     int    `json:"total"`
	Label     string `json:"label"`
	MessageID string `json:"message_id,omitempty"`
	// Applied patches before it applied.
	Applied int `json:"applied"`
	// File, Hunk and HunkHeader: where it failed ("", 0 when not one
	// file's or hunk's fault).
	File       string `json:"file,omitempty"`
	Hunk       int    `json:"hunk,omitempty"`
	HunkHeader string `json:"hunk_header,omitempty"`
	// Reason is the error in full (several lines for a hunk).
	Reason string `json:"reason"`
	// ErrorKind is "failed" (does not apply) or "input" (no valid diff).
	ErrorKind string `json:"error_kind"`
	// Tree is the kernel tree, Base the commit tried, BaseSubject its
	// title and BaseReason why that commit.
	Tree        string `json:"tree,omitempty"`
	Base        string `json:"base"`
	BaseSubject string `json:"base_subject,omitempty"`
	BaseReason  string `json:"base_reason,omitempty"`
	// ThreeWay is the `git am -3` fallback's error when it was tried.
	ThreeWay string `json:"three_way,omitempty"`
	// Reply is the reply mail saying so (the report package's Draft as
	// JSON), "" when there is nobody to tell.
	Reply   string    `json:"reply,omitempty"`
	Created time.Time `json:"created"`
}

// RecordApplyFailure records (or replaces) why evaluation f.EvaluationID's
// series did not apply.
func (s *Store) RecordApplyFailure(f ApplyFailure) error {
	_, err := s.db.Exec(`INSERT INTO apply_failures (evaluation_id, patch, total, label, message_id, applied, file, hunk,
		hunk_header, reason, error_kind, tree, base, base_subject, base_reason, three_way, reply, created)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(evaluation_id) DO UPDATE SET patch = excluded.patch, total = excluded.total, label = excluded.label,
		message_id = excluded.message_id, applied = excluded.applied, file = excluded.file, hunk = excluded.hunk,
		hunk_header = excluded.hunk_header, reason = excluded.reason, error_kind = excluded.error_kind,
		tree = excluded.tree, base = excluded.base, base_subject = excluded.base_subject,
		base_reason = excluded.base_reason, three_way = excluded.three_way, reply = excluded.reply,
		created = excluded.created`,
		f.EvaluationID, f.Patch, f.Total, f.Label, f.MessageID, f.Applied, f.File, f.Hunk, f.HunkHeader, f.Reason,
		f.ErrorKind, f.Tree, f.Base, f.BaseSubject, f.BaseReason, f.ThreeWay, f.Reply, fmtTime(time.Now()))
	if err != nil {
		return fail.Infraf("store: %s: apply failure of evaluation %d: %w", s.where, f.EvaluationID, err)
	}
	return nil
}

// ApplyFailureOf is why evaluation evalID's series did not apply, nil
// when no apply failed.
func (s *Store) ApplyFailureOf(evalID int64) (*ApplyFailure, error) {
	f := ApplyFailure{EvaluationID: evalID}
	var created string
	err := s.db.QueryRow(`SELECT patch, total, label, message_id, applied, file, hunk, hunk_header, reason, error_kind,
		tree, base, base_subject, base_reason, three_way, reply, created FROM apply_failures WHERE evaluation_id = ?`, evalID).
		Scan(&f.Patch, &f.Total, &f.Label, &f.MessageID, &f.Applied, &f.File, &f.Hunk, &f.HunkHeader, &f.Reason, &f.ErrorKind,
			&f.Tree, &f.Base, &f.BaseSubject, &f.BaseReason, &f.ThreeWay, &f.Reply, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fail.Infraf("store: %s: apply failure of evaluation %d: %w", s.where, evalID, err)
	}
	f.Created = parseTime(created)
	return &f, nil
}

// Where names the failing patch and the base in a few words: `patch 2/3
// ("title")` and `0123456789ab ("Linux 6.1")`.
func (f *ApplyFailure) Where() (patch, base string) {
	num, title, _ := strings.Cut(f.Label, " ")
	patch = "patch " + num
	if title != "" {
		patch += ` ("` + title + `")`
	}
	base = f.Base
	if len(base) > 12 {
		base = base[:12]
	}
	if f.BaseSubject != "" {
		base += ` ("` + f.BaseSubject + `")`
	}
	return patch, base
}

// Summary is the failure in one line: `patch 2/3 does not apply to
// 0123456789ab ("Linux 6.1"): lib/x.c: hunk #1 @@ -7,7 +7,7 @@ does
// not apply at line 7 or anywhere near`.
func (f *ApplyFailure) Summary() string {
	num, _, _ := strings.Cut(f.Label, " ")
	_, base := f.Where()
	what := "does not apply to " + base
	if f.ErrorKind == "input" {
		what = "is not a valid patch"
	}
	line := "patch " + num + " " + what + ": "
	if f.File != "" {
		line += f.File + ": "
	}
	reason, _, _ := strings.Cut(f.Reason, "\n")
	return line + reason
}
