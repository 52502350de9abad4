// Package follow follows mailing lists on public-inbox (lore) and hands
// each new, complete series that matches a list's filters to the
// evaluation queue — patcheval as a bot (issue 13), after syz-cluster's
// series tracker.
//
// Follower.Poll reads every followed list once: it finds the list's
// newest git epoch (<list>/git/<N>.git, public-inbox v2: one commit per
// message), fetches it with go-git into a local bare mirror, and walks
// the commits after the last one it read (stored in the store's
// follow_lists; on first use, the commits since the list's start date).
// In steady state only the newest epoch is fetched; when a new epoch
// appears, the old one is read to its end first.
//
// Messages are kept in the store under their thread root (patches and
// replies in patch threads only; other discussion is dropped). Each
// touched thread is grouped into series with series.Resolve, one
// follow_series row per version: "collecting" until all N patches are
// there and the list's quiet period has passed since the last one (for
// stragglers and replies), then "filtered" (the list's path, subject,
// sender and RFC filters say no) or "submitted" (Submitter.Submit created
// the evaluation); a series still missing patches after incomplete_after
// is "incomplete": shown, never evaluated. A newer version of a series
// (the same thread, or the same author and title) supersedes the older
// ones: their queued evaluation is cancelled (Submitter.Cancel) and both
// stay listed. A message that cannot be parsed is logged, counted in the
// list's "skipped" and passed over; it never stops the follower.
//
// Run polls until its context ends: the loop for `patcheval serve` to run
// in the background (a service Loop), its Submitter being the service's
// submission (runner.Submit and the stage jobs).
package follow

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// Submitter hands a series to the evaluation queue.
type Submitter interface {
	// Submit creates (or finds again) the evaluation of s, version v of
	// a series seen on list l; thread holds its messages.
	Submit(ctx context.Context, l List, s *series.Series, thread *mbox.Thread) (evalID int64, err error)
	// Cancel cancels the queued or running work of an evaluation.
	Cancel(ctx context.Context, evalID int64) error
}

// ResolvingSubmitter is a Submitter that resolves a series as the
// evaluation it makes stores it (the service's: ServiceSubmitter): the
// follower filters and submits that series, resolved once.
type ResolvingSubmitter interface {
	Submitter
	// Resolve resolves version v of t's series as Submit resolves it
	// from the thread it stores.
	Resolve(ctx context.Context, t *mbox.Thread, v int) (*runner.Resolved, error)
	// SubmitResolved is Submit of the series r (Resolve of thread),
	// which the evaluation stores instead of resolving thread again.
	SubmitResolved(ctx context.Context, l List, r *runner.Resolved, thread *mbox.Thread) (evalID int64, err error)
}

// Follower polls lists.
type Follower struct {
	Store  *store.Store
	Lists  []List
	Submit Submitter
	// Dir holds the local mirrors of the lists' epochs (one bare
	// repository per list).
	Dir  string
	Log  *slog.Logger
	HTTP *http.Client
	// Now is the clock (tests).
	Now func() time.Time
	// Submitted, when set, is called after a series was submitted, e.g.
	// to queue "pending" Patchwork checks on its patches
	// (reporters.QueuePatchworkChecks). An error is logged only.
	Submitted func(l List, s *series.Series, evalID int64) error
	// Triage, when set, carries out the `#patcheval` commands of
	// permitted senders in replies to patcheval's reports (triage.go);
	// nil: commands are not read.
	Triage Triager
	// LookupTXT reads the DNS TXT records of a DKIM key (nil:
	// net.LookupTXT); tests give their own (trust.go).
	LookupTXT func(domain string) ([]string, error)
}

func (f *Follower) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func (f *Follower) log() *slog.Logger {
	if f.Log != nil {
		return f.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (f *Follower) httpClient() *http.Client {
	if f.HTTP != nil {
		return f.HTTP
	}
	return &http.Client{Timeout: 2 * time.Minute}
}

// Run polls every list at its interval until ctx ends. A failed poll is
// recorded in the list's state and tried again at the next tick.
func (f *Follower) Run(ctx context.Context) error {
	next := map[string]time.Time{}
	for {
		wait := time.Minute
		for _, l := range f.Lists {
			now := f.now()
			if at, ok := next[l.Name]; ok && now.Before(at) {
				wait = min(wait, at.Sub(now))
				continue
			}
			if err := f.PollList(ctx, l); err != nil && ctx.Err() == nil {
				f.log().Warn("follow: poll failed", "list", l.Name, "err", err)
			}
			poll := l.Poll
			if poll <= 0 {
				poll = 5 * time.Minute
			}
			next[l.Name] = f.now().Add(poll)
			wait = min(wait, poll)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// Poll polls every list once and returns the first error (each list is
// polled regardless).
func (f *Follower) Poll(ctx context.Context) error {
	var first error
	for _, l := range f.Lists {
		if err := f.PollList(ctx, l); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// PollList reads list l's new messages and moves its series on.
func (f *Follower) PollList(ctx context.Context, l List) error {
	st, err := f.Store.FollowListState(l.Name)
	if err != nil {
		return err
	}
	read, skipped, err := f.read(ctx, l, st)
	if perr := f.Store.FollowPoll(l.Name, l.URL, st.Epoch, st.LastCommit, read, skipped, err); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	return f.advance(ctx, l)
}

// read fetches and files the new messages; st's cursor moves as it goes.
func (f *Follower) read(ctx context.Context, l List, st *store.FollowList) (read, skipped int, err error) {
	r, mst, err := f.mirror(l.Name)
	if err != nil {
		return 0, 0, err
	}
	defer mst.Close()
	newest, err := f.newestEpoch(ctx, l.URL, st.Epoch)
	if err != nil {
		return 0, 0, err
	}
	first := st.Epoch < 0
	if first {
		// First use: the newest epoch only, from the start date.
		st.Epoch = newest
	}
	since := l.Since
	if since.IsZero() && first {
		since = f.now()
	}
	for {
		head, err := f.fetchEpoch(ctx, r, l.URL, st.Epoch)
		if err != nil {
			return read, skipped, err
		}
		var keep func(*object.Commit) bool
		if first {
			keep = func(c *object.Commit) bool { return !c.Committer.When.Before(since) }
		}
		commits, err := newCommits(r, head, plumbing.NewHash(st.LastCommit), keep)
		if err != nil {
			return read, skipped, err
		}
		touched := map[string]bool{}
		b := &batch{roots: map[string]string{}}
		for _, c := range commits {
			raw, ok, err := messageOf(c)
			switch {
			case err != nil:
				skipped++
				f.log().Warn("follow: unreadable message commit, skipped", "list", l.Name, "commit", c.Hash.String(), "err", err)
			case ok:
				root, ferr := f.file(l, b, raw, c.Hash.String())
				if ferr != nil {
					if fail.KindOf(ferr) == fail.KindInfra {
						return read, skipped, ferr
					}
					skipped++
					f.log().Warn("follow: malformed message skipped", "list", l.Name, "commit", c.Hash.String(), "err", ferr)
				} else if root != "" {
					touched[root] = true
				}
				read++
			}
		}
		if err := f.Store.AddFollowMessages(l.Name, b.msgs); err != nil {
			return read, skipped, err
		}
		if err := f.triage(ctx, l, b.msgs); err != nil {
			return read, skipped, err
		}
		if len(commits) > 0 {
			st.LastCommit = commits[len(commits)-1].Hash.String()
		}
		if len(commits) == 0 && st.LastCommit == "" && !head.IsZero() {
			// First use with nothing since the start date: start here.
			st.LastCommit = head.String()
		}
		if err := f.group(l, touched); err != nil {
			return read, skipped, err
		}
		if st.Epoch >= newest {
			return read, skipped, nil
		}
		// The old epoch is read to its end: go on with the next one.
		st.Epoch++
		st.LastCommit = ""
		first = false
		if err := f.Store.FollowPoll(l.Name, l.URL, st.Epoch, "", 0, 0, nil); err != nil {
			return read, skipped, err
		}
	}
}

// batch is the messages of one poll, stored together.
type batch struct {
	msgs  []store.FollowMessage
	roots map[string]string
}

// file adds one message to b under its thread root and returns the root
// ("" when the message is not part of a patch thread and is dropped).
func (f *Follower) file(l List, b *batch, raw []byte, source string) (string, error) {
	m, err := mbox.ParseMessage(raw, l.Name+"@"+source)
	if err != nil {
		return "", fail.Inputf("parsing: %v", err)
	}
	if m.NoMessageID || m.MessageID == "" {
		return "", fail.Inputf("no Message-ID")
	}
	if m.Subject == "" && m.InReplyTo == "" {
		return "", fail.Inputf("<%s>: neither a subject nor In-Reply-To", m.MessageID)
	}
	// The root is the root of the first known parent, else the oldest
	// reference, else the message itself.
	root := ""
	for _, p := range append([]string{m.InReplyTo}, reverse(m.References)...) {
		if p == "" {
			continue
		}
		if r := b.roots[p]; r != "" {
			root = r
			break
		}
		if r, err := f.Store.FollowRootOf(l.Name, p); err != nil {
			return "", err
		} else if r != "" {
			root = r
			break
		}
	}
	known := root != ""
	if !known {
		switch {
		case len(m.References) > 0:
			root = m.References[0]
		case m.InReplyTo != "":
			root = m.InReplyTo
		default:
			root = m.MessageID
		}
	}
	if !known && !series.ParseSubject(m.Subject).IsPatch {
		return "", nil // not about a patch thread we know
	}
	if b.roots[m.MessageID] == "" {
		b.roots[m.MessageID] = root
		b.msgs = append(b.msgs, store.FollowMessage{MsgID: m.MessageID, Root: root, Raw: raw})
	}
	return root, nil
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// group re-resolves the touched threads and records each version.
func (f *Follower) group(l List, touched map[string]bool) error {
	roots := make([]string, 0, len(touched))
	for r := range touched {
		roots = append(roots, r)
	}
	sort.Strings(roots)
	var all []store.FollowSeries
	for _, root := range roots {
		t, err := f.thread(l, root)
		if err != nil {
			return err
		}
		s, err := series.Resolve(t, series.Options{})
		if err != nil {
			continue // no patch in this thread (yet): replies only
		}
		for _, v := range s.Versions {
			fs := store.FollowSeries{List: l.Name, Root: root, Version: v.Version, MsgID: v.MessageID, Title: v.Title,
				Total: v.Total, Found: len(v.Found)}
			if v.Version == s.Version {
				fs.Author = s.Author.Email
				if first := s.First(); first != nil {
					fs.MsgID = first.MessageID
				}
			} else if m := t.ByID(v.MessageID); m != nil {
				// An older version keeps its sender (the dashboard
				// lists it beside the newer one).
				fs.Author = m.From.Email
			}
			all = append(all, fs)
		}
	}
	// One transaction: with synchronous=FULL every commit is a sync.
	return f.Store.NoteFollowSeriesAll(all, f.now())
}

func (f *Follower) thread(l List, root string) (*mbox.Thread, error) {
	return threadOf(f.Store, l, root)
}

// threadOf is the thread under root of list l, from the stored messages.
func threadOf(st *store.Store, l List, root string) (*mbox.Thread, error) {
	raws, err := st.FollowMessages(l.Name, root)
	if err != nil {
		return nil, err
	}
	var msgs []*mbox.Message
	for _, raw := range raws {
		m, err := mbox.ParseMessage(raw, l.Name)
		if err == nil {
			msgs = append(msgs, m)
		}
	}
	return mbox.NewThread(msgs, l.URL+"/"+root), nil
}

// advance moves the list's collecting series on: supersede, give up,
// filter or submit.
func (f *Follower) advance(ctx context.Context, l List) error {
	all, err := f.Store.FollowSeriesList(l.Name, "")
	if err != nil {
		return err
	}
	if err := f.supersede(ctx, all); err != nil {
		return err
	}
	now := f.now()
	for _, s := range all {
		if s.Status != store.SeriesCollecting {
			continue
		}
		complete := s.Total > 0 && s.Found >= s.Total
		switch {
		case !complete && now.Sub(s.FirstSeen) >= l.IncompleteAfter:
			reason := fmt.Sprintf("%d of %d patches after %s", s.Found, s.Total, l.IncompleteAfter)
			if err := f.Store.SetFollowSeries(s.ID, store.SeriesIncomplete, reason, 0); err != nil {
				return err
			}
		case complete && now.Sub(s.LastSeen) >= l.Quiet:
			if err := f.decide(ctx, l, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// supersede marks every series that a newer version of the same series
// (same thread, or same author and title) exists for.
func (f *Follower) supersede(ctx context.Context, all []*store.FollowSeries) error {
	newest := map[string]*store.FollowSeries{}
	keys := func(s *store.FollowSeries) []string {
		k := []string{"root\x00" + s.Root}
		if s.Author != "" && s.Title != "" {
			k = append(k, "title\x00"+strings.ToLower(s.Author)+"\x00"+strings.ToLower(s.Title))
		}
		return k
	}
	for _, s := range all {
		for _, k := range keys(s) {
			if n := newest[k]; n == nil || s.Version > n.Version {
				newest[k] = s
			}
		}
	}
	for _, s := range all {
		if s.Status == store.SeriesSuperseded {
			continue
		}
		for _, k := range keys(s) {
			n := newest[k]
			if n.Version <= s.Version {
				continue
			}
			reason := fmt.Sprintf("v%d arrived (%s)", n.Version, n.MsgID)
			if s.EvaluationID > 0 && s.Status == store.SeriesSubmitted {
				if err := f.Submit.Cancel(ctx, s.EvaluationID); err != nil {
					return err
				}
				reason += fmt.Sprintf("; evaluation %d cancelled", s.EvaluationID)
			}
			f.log().Info("follow: superseded", "list", s.List, "series", s.MsgID, "version", s.Version, "by", n.Version)
			if err := f.Store.SetFollowSeries(s.ID, store.SeriesSuperseded, reason, 0); err != nil {
				return err
			}
			s.Status = store.SeriesSuperseded
			break
		}
	}
	return nil
}

// decide applies l's filters to a complete series and submits it.
func (f *Follower) decide(ctx context.Context, l List, fs *store.FollowSeries) error {
	t, err := f.thread(l, fs.Root)
	if err != nil {
		return err
	}
	// A submitter that resolves the series as its evaluation stores it
	// (the service's) has it resolved once: filtered and submitted.
	rs, resolving := f.Submit.(ResolvingSubmitter)
	var s *series.Series
	var r *runner.Resolved
	if resolving {
		r, err = rs.Resolve(ctx, t, fs.Version)
		s = r.Series()
	} else {
		s, err = series.Resolve(t, series.Options{Version: fs.Version})
	}
	if err != nil {
		return f.Store.SetFollowSeries(fs.ID, store.SeriesFailed, err.Error(), 0)
	}
	if why := filterOut(l, s); why != "" {
		return f.Store.SetFollowSeries(fs.ID, store.SeriesFiltered, why, 0)
	}
	var id int64
	if resolving {
		id, err = rs.SubmitResolved(ctx, l, r, t)
	} else {
		id, err = f.Submit.Submit(ctx, l, s, t)
	}
	if err != nil {
		if fail.KindOf(err) == fail.KindInfra {
			return err // the queue is down: tried again next poll
		}
		return f.Store.SetFollowSeries(fs.ID, store.SeriesFailed, err.Error(), 0)
	}
	f.log().Info("follow: submitted", "list", l.Name, "series", fs.MsgID, "version", fs.Version, "evaluation", id)
	if err := f.Store.SetFollowSeries(fs.ID, store.SeriesSubmitted, "", id); err != nil {
		return err
	}
	if f.Submitted != nil {
		if err := f.Submitted(l, s, id); err != nil {
			f.log().Warn("follow: after submitting", "list", l.Name, "series", fs.MsgID, "err", err)
		}
	}
	return nil
}

var diffPathRe = lazyre.New(`(?m)^diff --git a/(\S+) b/(\S+)`)

// Files lists the paths a series' patches touch.
func Files(s *series.Series) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range s.Patches {
		if p == nil {
			continue
		}
		for _, m := range diffPathRe.FindAllStringSubmatch(p.Diff, -1) {
			for _, f := range m[1:] {
				if !seen[f] {
					seen[f] = true
					out = append(out, f)
				}
			}
		}
	}
	return out
}

// filterOut says why l's filters leave s alone ("" when they select it).
func filterOut(l List, s *series.Series) string {
	rfc := false
	for _, p := range s.Patches {
		if p != nil && p.Subject.RFC {
			rfc = true
		}
	}
	if s.Cover != nil && series.ParseSubject(s.Cover.Subject).RFC {
		rfc = true
	}
	if rfc && !l.RFC {
		return "RFC (set rfc = true to evaluate RFC series)"
	}
	if l.Subject != nil && !l.Subject.MatchString(s.Title) {
		return fmt.Sprintf("title %q does not match subject /%s/", s.Title, l.Subject)
	}
	from := s.Author.Email
	for _, d := range l.Deny {
		if matchSender(d, from) {
			return fmt.Sprintf("sender %s is denied (%s)", from, d)
		}
	}
	if len(l.Allow) > 0 {
		ok := false
		for _, a := range l.Allow {
			ok = ok || matchSender(a, from)
		}
		if !ok {
			return fmt.Sprintf("sender %s is not allowed", from)
		}
	}
	if len(l.Paths) > 0 {
		files := Files(s)
		for _, f := range files {
			for _, g := range l.Paths {
				if matchPath(g, f) {
					return ""
				}
			}
		}
		return fmt.Sprintf("touches none of %s (%d files)", strings.Join(l.Paths, ", "), len(files))
	}
	return ""
}
