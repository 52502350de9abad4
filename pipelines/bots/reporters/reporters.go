// Package reporters posts finished (and queued) evaluations where a
// maintainer looks: Patchwork checks (patchwork.go), GitHub and reply
// mails. Every reporter is idempotent through one outbox in the store
// (store.Post, table posts):
//
//   - Enqueue records what is to be posted for a target (a patch and a
//     check context, a commit, a thread) and skips it when it is
//     identical to the last post for that target, or when it would move a
//     check back to "pending" after a final state;
//   - Outbox.Flush delivers the due posts: it first records the post as
//     "sending" (with the far end's id when it is known beforehand, e.g.
//     a mail's Message-ID), then delivers, then records "sent". A post
//     found "sending" after a crash is delivered with resumed set: the
//     reporter checks the far end before it posts again, so nothing is
//     ever posted twice;
//   - a failure is retried with exponential backoff (or at the time the
//     far end asked for, e.g. Retry-After); a refusal (401, 422) fails the
//     post for good. Both keep the error in the post's row, which the
//     dashboard reads (store.Posts).
//
// Outbox.Run is the background loop `patcheval serve` starts.
package reporters

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Reporter delivers one kind of post.
type Reporter interface {
	// Name is the reporter's name in store.Post.Reporter.
	Name() string
	// RemoteID is what p will be known as at the far end when the
	// reporter knows it before delivering (a mail's Message-ID), else "".
	// The outbox stores it before Deliver.
	RemoteID(p *store.Post) string
	// Deliver posts p and returns its id at the far end. resumed is true
	// when an earlier attempt may have reached the far end (the post was
	// found "sending"): the reporter looks there first and returns
	// ErrAlreadyPosted (with the id it found) when it finds p.
	Deliver(ctx context.Context, p *store.Post, resumed bool) (remoteID string, err error)
}

// ErrAlreadyPosted says the far end already shows the post.
var ErrAlreadyPosted = errors.New("already posted")

// permanent marks an error a retry cannot mend.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as one no retry mends (the far end refused the post:
// bad token, invalid fields): the post fails at once.
func Permanent(err error) error { return permanent{err} }

// RetryAfter is a failure the far end said to retry after a time (rate
// limits, 503 with Retry-After).
type RetryAfter struct {
	At  time.Time
	Err error
}

func (r *RetryAfter) Error() string {
	return fmt.Sprintf("%v (retry after %s)", r.Err, r.At.UTC().Format(time.RFC3339))
}
func (r *RetryAfter) Unwrap() error { return r.Err }

// instanceName is a reporter's name in the outbox: its kind, or
// kind/instance when several reporters of a kind post (one per followed
// list, each with its own Patchwork, repository or archive).
func instanceName(kind, instance string) string {
	if instance == "" {
		return kind
	}
	return kind + "/" + instance
}

// Digest is the hex SHA-256 of v's JSON: the content identity of a post.
func Digest(v any) string {
	b, _ := json.Marshal(v)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Enqueue stores a post of reporter r for target with payload (any JSON
// value). held keeps it until store.ApprovePost (moderated mail). The
// returned post's Status is store.PostSkipped when it repeats the last one.
func Enqueue(st *store.Store, r string, target string, evalID int64, state string, payload any, held bool) (*store.Post, error) {
	return enqueue(st, r, target, evalID, state, payload, Digest(payload), held)
}

// enqueue is Enqueue with the content identity given (a mail's digest
// leaves out its Date and Message-ID, which change with every render).
func enqueue(st *store.Store, r string, target string, evalID int64, state string, payload any, digest string, held bool) (*store.Post, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, fail.Inputf("reporters: %s post for %s: %w", r, target, err)
	}
	return st.EnqueuePost(store.Post{Reporter: r, Target: target, EvaluationID: evalID, State: state,
		Digest: digest, Payload: string(b)}, held)
}

// Outbox delivers the store's due posts through its reporters.
type Outbox struct {
	Store     *store.Store
	Reporters []Reporter
	// Backoff is the first retry delay (default 30 s), doubled per
	// attempt up to MaxBackoff (default 1 h).
	Backoff, MaxBackoff time.Duration
	// MaxAttempts fails a post after that many attempts (default 20).
	MaxAttempts int
	Log         *slog.Logger
	// Now is the clock (tests).
	Now func() time.Time

	// mu makes flushes one at a time: a post found "sending" is taken
	// as left over from a crash, so two flushes must never overlap.
	mu   sync.Mutex
	kick chan struct{}
	once sync.Once
}

func (o *Outbox) kicks() chan struct{} {
	o.once.Do(func() { o.kick = make(chan struct{}, 1) })
	return o.kick
}

// Kick makes Run flush now (e.g. after a mail was approved) instead of
// at its next tick.
func (o *Outbox) Kick() {
	select {
	case o.kicks() <- struct{}{}:
	default:
	}
}

func (o *Outbox) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o *Outbox) log() *slog.Logger {
	if o.Log != nil {
		return o.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (o *Outbox) reporter(name string) Reporter {
	for _, r := range o.Reporters {
		if r.Name() == name {
			return r
		}
	}
	return nil
}

// backoff is the delay before attempt n+1 after n failed ones.
func (o *Outbox) backoff(n int) time.Duration {
	b, m := o.Backoff, o.MaxBackoff
	if b <= 0 {
		b = 30 * time.Second
	}
	if m <= 0 {
		m = time.Hour
	}
	for i := 1; i < n && b < m; i++ {
		b *= 2
	}
	return min(b, m)
}

// Flush delivers every due post once, in order, and returns how many it
// sent. Posts of reporters this outbox does not have stay queued. A
// delivery failure is recorded in the post (and retried later), never
// returned; the error is the store's.
func (o *Outbox) Flush(ctx context.Context) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	names := make([]string, 0, len(o.Reporters))
	for _, r := range o.Reporters {
		names = append(names, r.Name())
	}
	if len(names) == 0 {
		return 0, nil
	}
	due, err := o.Store.DuePosts(o.now(), 200, names...)
	if err != nil {
		return 0, err
	}
	sent := 0
	for _, p := range due {
		if ctx.Err() != nil {
			return sent, nil
		}
		r := o.reporter(p.Reporter)
		if r == nil {
			continue
		}
		resumed := p.Status == store.PostSending
		remote := p.RemoteID
		if !resumed {
			remote = r.RemoteID(p)
		}
		ok, err := o.Store.MarkPostSending(p.ID, remote)
		if err != nil {
			return sent, err
		}
		if !ok {
			continue
		}
		p.Attempts++
		p.RemoteID = remote
		got, derr := r.Deliver(ctx, p, resumed)
		switch {
		case derr == nil:
			if got == "" {
				got = remote
			}
			if err := o.Store.MarkPostSent(p.ID, got); err != nil {
				return sent, err
			}
			sent++
			o.log().Info("posted", "reporter", p.Reporter, "target", p.Target, "state", p.State, "remote", got)
		case errors.Is(derr, ErrAlreadyPosted) && resumed:
			// Our own earlier attempt got through before the crash.
			if got == "" {
				got = remote
			}
			if err := o.Store.MarkPostSent(p.ID, got); err != nil {
				return sent, err
			}
		case errors.Is(derr, ErrAlreadyPosted):
			if err := o.Store.MarkPostSkipped(p.ID, derr.Error()); err != nil {
				return sent, err
			}
		default:
			if err := o.failed(p, derr); err != nil {
				return sent, err
			}
		}
	}
	return sent, nil
}

func (o *Outbox) failed(p *store.Post, derr error) error {
	max := o.MaxAttempts
	if max <= 0 {
		max = 20
	}
	var perm permanent
	if errors.As(derr, &perm) || p.Attempts >= max {
		o.log().Warn("post failed", "reporter", p.Reporter, "target", p.Target, "attempts", p.Attempts, "err", derr)
		return o.Store.FailPost(p.ID, derr)
	}
	next := o.now().Add(o.backoff(p.Attempts))
	var ra *RetryAfter
	if errors.As(derr, &ra) && ra.At.After(next) {
		next = ra.At
	}
	o.log().Info("post retried later", "reporter", p.Reporter, "target", p.Target, "at", next, "err", derr)
	return o.Store.RetryPost(p.ID, derr, next)
}

// Run flushes the outbox every interval (default 10 s), and when kicked,
// until ctx ends.
func (o *Outbox) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := o.Flush(ctx); err != nil {
			o.log().Warn("outbox", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-o.kicks():
		}
	}
}
