package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

// migrationPosts is the reporters' outbox (pipelines/bots/reporters): one row
// per thing a reporter posts (a Patchwork check on one patch, a GitHub
// status, a reply mail), with its delivery state, so that a retry or a
// restart never posts twice and a failure is retried and shown.
const migrationPosts = `
CREATE TABLE posts (
	id            INTEGER PRIMARY KEY,
	reporter      TEXT NOT NULL,
	target        TEXT NOT NULL,
	evaluation_id INTEGER REFERENCES evaluations(id) ON DELETE SET NULL,
	state         TEXT NOT NULL DEFAULT '',
	digest        TEXT NOT NULL,
	payload       TEXT NOT NULL,
	status        TEXT NOT NULL,
	remote_id     TEXT NOT NULL DEFAULT '',
	attempts      INTEGER NOT NULL DEFAULT 0,
	next_attempt  TEXT NOT NULL DEFAULT '',
	last_error    TEXT NOT NULL DEFAULT '',
	created       TEXT NOT NULL,
	updated       TEXT NOT NULL
);
CREATE INDEX posts_by_target ON posts(reporter, target, id);
CREATE INDEX posts_due ON posts(status, next_attempt);
`

// Post statuses.
const (
	// PostQueued: waiting to be delivered (again, after a failure, at
	// NextAttempt).
	PostQueued = "queued"
	// PostHeld: waiting for a person's approval (moderated mail).
	PostHeld = "held"
	// PostSending: the reporter recorded what it is about to send (e.g.
	// the mail's Message-ID) and then sent it; whether the far end got it
	// is unknown until PostSent. A post found in this state after a
	// restart is checked against the far end, never blindly resent.
	PostSending = "sending"
	// PostSent: delivered; RemoteID names it at the far end.
	PostSent = "sent"
	// PostSkipped: identical to what was posted last for the target, or
	// a step back (pending after a final state): never sent.
	PostSkipped = "skipped"
	// PostFailed: the far end refused it for good (401, 422, ...) or it
	// ran out of attempts. Shown on the dashboard with LastError.
	PostFailed = "failed"
)

// Post is one thing a reporter posts.
type Post struct {
	ID int64 `json:"id"`
	// Reporter names the reporter ("patchwork", "github", "mail").
	Reporter string `json:"reporter"`
	// Target is what the post is about at the far end, e.g. a patch's
	// Message-ID and check context: posts for one target replace each
	// other in order.
	Target       string `json:"target"`
	EvaluationID int64  `json:"evaluation_id,omitempty"`
	// State is the reported state (e.g. "pending", "success", "fail").
	State string `json:"state,omitempty"`
	// Digest identifies the content: a post whose digest equals the last
	// sent one for its target is skipped.
	Digest string `json:"digest"`
	// Payload is the reporter's own JSON.
	Payload     string    `json:"payload"`
	Status      string    `json:"status"`
	RemoteID    string    `json:"remote_id,omitempty"`
	Attempts    int       `json:"attempts"`
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	Created     time.Time `json:"created"`
	Updated     time.Time `json:"updated"`
}

const postColumns = `id, reporter, target, COALESCE(evaluation_id, 0), state, digest, payload, status, remote_id,
	attempts, next_attempt, last_error, created, updated`

func scanPost(row scanner) (*Post, error) {
	var p Post
	var next, created, updated string
	if err := row.Scan(&p.ID, &p.Reporter, &p.Target, &p.EvaluationID, &p.State, &p.Digest, &p.Payload, &p.Status,
		&p.RemoteID, &p.Attempts, &next, &p.LastError, &created, &updated); err != nil {
		return nil, err
	}
	p.NextAttempt, p.Created, p.Updated = parseTime(next), parseTime(created), parseTime(updated)
	return &p, nil
}

// Final reports whether a reported state is final: a pending state never
// follows a final one for the same target.
func finalState(s string) bool { return s != "" && s != "pending" }

// EnqueuePost queues p (status PostQueued, or PostHeld when held) unless
// the last post for its target that was not skipped or failed has the
// same digest, or p is "pending" and a final state was posted or queued
// before it. It returns the stored post (with its status: PostSkipped
// when it was not queued) in one transaction, so that two callers never
// both queue it.
func (s *Store) EnqueuePost(p Post, held bool) (*Post, error) {
	if p.Reporter == "" || p.Target == "" || p.Digest == "" {
		return nil, fail.Inputf("store: a post needs a reporter, a target and a digest")
	}
	err := s.Tx(context.Background(), func(tx *Tx) error { return s.enqueuePostTx(tx, &p, held) })
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// enqueuePostTx is EnqueuePost's transaction; it fills in p.
func (s *Store) enqueuePostTx(tx *Tx, p *Post, held bool) error {
	// Two callers queueing for one target: one after the other.
	if err := tx.Lock("post", p.Reporter, p.Target); err != nil {
		return err
	}
	var lastDigest string
	err := tx.QueryRow(`SELECT digest FROM posts WHERE reporter = ? AND target = ? AND status NOT IN (?, ?)
		ORDER BY id DESC LIMIT 1`, p.Reporter, p.Target, PostSkipped, PostFailed).Scan(&lastDigest)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fail.Infraf("store: %s: %w", s.where, err)
	}
	var finals int
	if !finalState(p.State) {
		if err := tx.QueryRow(`SELECT COUNT(*) FROM posts WHERE reporter = ? AND target = ? AND state NOT IN ('', 'pending')
			AND status NOT IN (?, ?)`, p.Reporter, p.Target, PostSkipped, PostFailed).Scan(&finals); err != nil {
			return fail.Infraf("store: %s: %w", s.where, err)
		}
	}
	p.Status = PostQueued
	if held {
		p.Status = PostHeld
	}
	if lastDigest == p.Digest || finals > 0 {
		p.Status = PostSkipped
	}
	now := time.Now()
	p.Created, p.Updated, p.Attempts, p.NextAttempt = now, now, 0, time.Time{}
	var eval any
	if p.EvaluationID > 0 {
		eval = p.EvaluationID
	}
	if err := tx.QueryRow(`INSERT INTO posts (reporter, target, evaluation_id, state, digest, payload, status, created, updated)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, p.Reporter, p.Target, eval, p.State, p.Digest, p.Payload, p.Status,
		fmtTime(now), fmtTime(now)).Scan(&p.ID); err != nil {
		return fail.Infraf("store: %s: queueing a %s post for %s: %w", s.where, p.Reporter, p.Target, err)
	}
	return nil
}

// DuePosts lists the queued posts whose next attempt is due at now, and
// the posts left "sending" (a restart must settle them), oldest first;
// only those of the named reporters when reporters are given (posts of a
// reporter no longer configured must not crowd out the others).
func (s *Store) DuePosts(now time.Time, limit int, reporters ...string) ([]*Post, error) {
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT ` + postColumns + ` FROM posts
		WHERE ((status = ? AND (next_attempt = '' OR next_attempt <= ?)) OR status = ?)`
	args := []any{PostQueued, fmtTime(now), PostSending}
	if len(reporters) > 0 {
		q += ` AND reporter IN (?` + strings.Repeat(", ?", len(reporters)-1) + `)`
		for _, r := range reporters {
			args = append(args, r)
		}
	}
	return s.queryPosts(q+` ORDER BY id LIMIT ?`, append(args, limit)...)
}

// Posts lists posts, newest first: of one evaluation when evalID > 0,
// in one status when status is not empty.
func (s *Store) Posts(evalID int64, status string, limit int) ([]*Post, error) {
	if limit <= 0 {
		limit = 100
	}
	return s.queryPosts(`SELECT `+postColumns+` FROM posts
		WHERE (? = 0 OR evaluation_id = ?) AND (? = '' OR status = ?) ORDER BY id DESC LIMIT ?`,
		evalID, evalID, status, status, limit)
}

// Post returns one post.
func (s *Store) Post(id int64) (*Post, error) {
	p, err := scanPost(s.db.QueryRow(`SELECT `+postColumns+` FROM posts WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fail.Inputf("store: %s: no post %d", s.where, id)
	}
	if err != nil {
		return nil, fail.Infraf("store: %s: post %d: %w", s.where, id, err)
	}
	return p, nil
}

func (s *Store) queryPosts(q string, args ...any) ([]*Post, error) {
	rows, err := s.db.Query(q, args...)
	if err != nil {
		return nil, fail.Infraf("store: %s: listing posts: %w", s.where, err)
	}
	defer rows.Close()
	var out []*Post
	for rows.Next() {
		p, err := scanPost(rows)
		if err != nil {
			return nil, fail.Infraf("store: %s: %w", s.where, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fail.Infraf("store: %s: %w", s.where, err)
	}
	return out, nil
}

// setPost moves post id from one of the statuses in from to status; it
// reports false when the post was in none of them (another worker moved
// it, or it was approved/cancelled meanwhile).
func (s *Store) setPost(id int64, from []string, set string, args ...any) (bool, error) {
	q := `UPDATE posts SET ` + set + `, updated = ? WHERE id = ? AND status IN (`
	all := append(append([]any{}, args...), fmtTime(time.Now()), id)
	for i, f := range from {
		if i > 0 {
			q += ", "
		}
		q += "?"
		all = append(all, f)
	}
	res, err := s.db.Exec(q+")", all...)
	if err != nil {
		return false, fail.Infraf("store: %s: post %d: %w", s.where, id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// MarkPostSending records, before the send, that post id is being sent
// and what it will be known as at the far end (remoteID, e.g. the mail's
// Message-ID). It reports false when the post was no longer queued.
func (s *Store) MarkPostSending(id int64, remoteID string) (bool, error) {
	return s.setPost(id, []string{PostQueued, PostSending}, `status = ?, remote_id = ?, attempts = attempts + 1`,
		PostSending, remoteID)
}

// MarkPostSent records that post id was delivered as remoteID.
func (s *Store) MarkPostSent(id int64, remoteID string) error {
	_, err := s.setPost(id, []string{PostQueued, PostSending}, `status = ?, remote_id = ?, last_error = ''`, PostSent, remoteID)
	return err
}

// MarkPostSkipped records that post id was not sent because the far end
// already shows the same thing (why says so).
func (s *Store) MarkPostSkipped(id int64, why string) error {
	_, err := s.setPost(id, []string{PostQueued, PostSending}, `status = ?, last_error = ?`, PostSkipped, why)
	return err
}

// RetryPost records a failed attempt of post id; it is tried again at
// next.
func (s *Store) RetryPost(id int64, cause error, next time.Time) error {
	_, err := s.setPost(id, []string{PostQueued, PostSending}, `status = ?, last_error = ?, next_attempt = ?`,
		PostQueued, cause.Error(), fmtTime(next))
	return err
}

// FailPost records that post id failed for good.
func (s *Store) FailPost(id int64, cause error) error {
	_, err := s.setPost(id, []string{PostQueued, PostSending}, `status = ?, last_error = ?`, PostFailed, cause.Error())
	return err
}

// ApprovePost releases a held post (a moderated mail) for delivery.
func (s *Store) ApprovePost(id int64) error {
	ok, err := s.setPost(id, []string{PostHeld}, `status = ?`, PostQueued)
	if err != nil {
		return err
	}
	if !ok {
		return fail.Inputf("store: %s: post %d is not waiting for approval", s.where, id)
	}
	return nil
}
