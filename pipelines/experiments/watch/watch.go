// Package watch re-tests a kernel tree on every new tag: a watch names a
// remote, a tag glob (v6.*-rc*), a pipeline and a schedule; each tick
// lists the remote's tags without cloning, fetches only a new matching
// tag's objects into the local tree, evaluates the pipeline on it (the
// tree alone, or a series re-applied on the tag), keeps the history per
// tag in the evaluation store and compares consecutive tags with
// evaluate/stats: a significant change is an event, and a regression can
// start a bisection (pipelines/experiments/bisect).
//
// The entry point is Watcher.Tick (one look at one watch, in this
// process: the library's and the tests' form); Schedule fires on each
// watch's cron schedule (robfig/cron with Recover and SkipIfStillRunning).
// The commands run watches as queue work only (pipelines/service: serve,
// and `watch run-now` and `watch daemon` through the same jobs), which
// splits a tick into Watcher.Check (list and record), one re-test per
// entry (Watcher.Begin, the evaluation submitted to the service's stage
// graph (Planner), Watcher.Ended when it ends), and a bisection step by
// step (bisect.Resume), so that two processes never evaluate one tag
// twice. Tags are ordered by version
// (CompareTags), not by name. A remote that cannot be reached is an infra error recorded on the
// watch; the next tick retries and nothing recorded before is lost.
package watch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Evaluator evaluates a watch's pipeline on one fetched tag and returns
// the stored evaluation's id. An error of kind failed (internal/fail) is
// a result (the series does not apply, the kernel does not build or
// boot); an infra error is retried on the next tick.
type Evaluator interface {
	Evaluate(ctx context.Context, w *store.Watch, tag, commit string) (evalID int64, err error)
}

// EvaluatorFunc adapts a function to Evaluator.
type EvaluatorFunc func(ctx context.Context, w *store.Watch, tag, commit string) (int64, error)

// Evaluate calls f.
func (f EvaluatorFunc) Evaluate(ctx context.Context, w *store.Watch, tag, commit string) (int64, error) {
	return f(ctx, w, tag, commit)
}

// Bisector is called for a regression event of a watch with Bisect set,
// with the good (older) and bad (newer) tags; its result is stored on the
// event as JSON.
type Bisector func(ctx context.Context, w *store.Watch, ev *store.WatchEvent, good, bad *store.WatchTag) (any, error)

// Watcher runs ticks.
type Watcher struct {
	Store *store.Store
	Eval  Evaluator
	// Bisect, when set, bisects regression events of watches with Bisect.
	Bisect Bisector
	// Logf receives one line per thing done (nil: discarded).
	Logf func(format string, a ...any)
	// MinChange is the practical threshold (percent) of an event on
	// deterministic pipelines; 0 means 0.5 (instruction-count noise).
	MinChange float64
	// Deterministic says whether a watch's pipeline is deterministic
	// (sets MinChange); nil: no threshold.
	Deterministic func(w *store.Watch) bool

	mu      sync.Mutex
	running map[int64]bool
}

// TickResult says what one tick did.
type TickResult struct {
	Watch string `json:"watch"`
	// Listed is how many matching tags the remote has.
	Listed int `json:"listed"`
	// New are the tags seen for the first time; Evaluated the tags
	// evaluated in this tick (new ones, and earlier ones whose evaluation
	// failed for infrastructure reasons).
	New       []string            `json:"new,omitempty"`
	Evaluated []string            `json:"evaluated,omitempty"`
	Failed    []string            `json:"failed,omitempty"`
	Events    []*store.WatchEvent `json:"events,omitempty"`
	Bisected  []string            `json:"bisected,omitempty"`
	// Fixed are the reported regressions this tick's tags showed gone.
	Fixed []*Fixed `json:"fixed,omitempty"`
}

func (wr *Watcher) logf(format string, a ...any) {
	if wr.Logf != nil {
		wr.Logf(format, a...)
	}
}

// ErrBusy is returned by Tick when the watch is already being ticked.
var ErrBusy = errors.New("watch: a tick of this watch is already running")

// Tick looks at w's remote once: new matching tags are recorded and
// evaluated in version order, events computed, regressions bisected. The
// outcome of reaching the remote is recorded on the watch (LastError).
func (wr *Watcher) Tick(ctx context.Context, w *store.Watch) (*TickResult, error) {
	wr.mu.Lock()
	if wr.running == nil {
		wr.running = map[int64]bool{}
	}
	if wr.running[w.ID] {
		wr.mu.Unlock()
		return nil, ErrBusy
	}
	wr.running[w.ID] = true
	wr.mu.Unlock()
	defer func() {
		wr.mu.Lock()
		delete(wr.running, w.ID)
		wr.mu.Unlock()
	}()

	res, err := wr.tick(ctx, w)
	if rerr := wr.Store.RecordCheck(w.ID, time.Now(), err); rerr != nil && err == nil {
		err = rerr
	}
	return res, err
}

func (wr *Watcher) tick(ctx context.Context, w *store.Watch) (*TickResult, error) {
	res, todo, err := wr.check(ctx, w)
	if err != nil {
		return res, err
	}
	for _, t := range todo {
		r, err := wr.Retest(ctx, w, t)
		res.Evaluated = append(res.Evaluated, r.Evaluated...)
		res.Failed = append(res.Failed, r.Failed...)
		res.Fixed = append(res.Fixed, r.Fixed...)
		if err != nil {
			return res, err
		}
		for _, ev := range r.Events {
			res.Events = append(res.Events, ev.Event)
			if ev.Bisect && wr.Bisect != nil {
				out, berr := wr.Bisect(ctx, w, ev.Event, ev.Good, ev.Bad)
				if berr != nil {
					out = map[string]string{"status": "failed", "error": berr.Error(), "kind": fail.KindOf(berr).String()}
					wr.logf("watch %s: bisection %s..%s: %v", w.Name, ev.Event.From, ev.Event.To, berr)
				} else {
					res.Bisected = append(res.Bisected, ev.Event.From+".."+ev.Event.To)
				}
				if err := wr.Store.SetEventBisect(ev.Event.ID, out); err != nil {
					return res, err
				}
			}
		}
	}
	return res, nil
}

// Check looks at w's remote once without evaluating anything: new
// matching tags (and the branch's new head) are recorded, and the entries
// to evaluate are returned in version order: queued ones, and those an
// infrastructure failure or a dead process left, that the remote still
// has. The outcome of reaching the remote is recorded on the watch.
// `patcheval serve` queues one re-test job per returned entry.
func (wr *Watcher) Check(ctx context.Context, w *store.Watch) (*TickResult, []*store.WatchTag, error) {
	res, todo, err := wr.check(ctx, w)
	if rerr := wr.Store.RecordCheck(w.ID, time.Now(), err); rerr != nil && err == nil {
		err = rerr
	}
	return res, todo, err
}

func (wr *Watcher) check(ctx context.Context, w *store.Watch) (*TickResult, []*store.WatchTag, error) {
	res := &TickResult{Watch: w.Name}
	refs, err := listRefs(ctx, w.Remote)
	if err != nil {
		wr.logf("watch %s: %v", w.Name, err)
		return res, nil, err
	}
	var remote []RemoteTag
	if w.Tags != "" {
		remote = tagsOf(refs, w.Tags)
	}
	res.Listed = len(remote)
	head := ""
	if w.Branch != "" {
		if head = headOf(refs, w.Branch); head == "" {
			return res, nil, fail.Inputf("watch %s: remote %s has no branch %s", w.Name, w.Remote, w.Branch)
		}
	}
	known, err := wr.Store.WatchTags(w.ID)
	if err != nil {
		return res, nil, err
	}
	seen := map[string]bool{}
	for _, t := range known {
		seen[t.Tag] = true
	}
	first := len(known) == 0
	for i, t := range remote {
		if seen[t.Name] {
			continue
		}
		status := store.TagQueued
		if first && i < len(remote)-1 {
			// The first look records history as it is: only the newest
			// tag is evaluated, as the reference for the next one.
			status = store.TagKnown
		}
		if _, added, err := wr.Store.AddWatchTag(w.ID, t.Name, t.Commit, status); err != nil {
			return res, nil, err
		} else if added {
			res.New = append(res.New, t.Name)
		}
	}
	if head != "" {
		// The branch head is re-tested whenever it moves (KernelCI's
		// polling of branch heads): each head it had is a history entry
		// branch@<commit>, after the tags, in the order seen.
		entry := HeadEntry(w.Branch, head)
		if !seen[entry] {
			if _, added, err := wr.Store.AddWatchTag(w.ID, entry, head, store.TagQueued); err != nil {
				return res, nil, err
			} else if added {
				res.New = append(res.New, entry)
			}
		}
	}
	if len(res.New) > 0 {
		wr.logf("watch %s: %d new tag(s): %s", w.Name, len(res.New), strings.Join(res.New, " "))
	}

	// What is queued (and what infra failures left), in version order.
	tags, err := wr.Store.WatchTags(w.ID)
	if err != nil {
		return res, nil, err
	}
	sortEntries(w, tags)
	onRemote := map[string]bool{}
	for _, t := range remote {
		onRemote[t.Name] = true
	}
	if head != "" {
		// A head the branch has moved past is kept as it was, like a
		// deleted tag: only the current head is worth a build.
		onRemote[HeadEntry(w.Branch, head)] = true
	}
	var todo []*store.WatchTag
	for _, t := range tags {
		if t.Status != store.TagQueued && t.Status != store.TagInfra && t.Status != store.TagRunning {
			continue
		}
		if !onRemote[t.Tag] {
			continue // deleted upstream since; kept in the history as it was
		}
		todo = append(todo, t)
	}
	return res, todo, nil
}

// Regression is an event found by a re-test; Bisect says it is a
// regression of a watch that bisects and has no bisection yet.
type Regression struct {
	Event     *store.WatchEvent
	Good, Bad *store.WatchTag
	Bisect    bool
}

// RetestResult is what one re-test did.
type RetestResult struct {
	Evaluated []string
	Failed    []string
	Events    []Regression
	// Fixed are the regressions reported to regzbot that this entry
	// shows gone, each said once (watches with regzbot on).
	Fixed []*Fixed
}

// Retest fetches one history entry's objects, evaluates it and compares
// it with the previous evaluated entry; every significant change is
// recorded as an event (and returned). It is idempotent: an entry that is
// done already is not evaluated again, only compared (the events exist;
// those still without a bisection come back with Bisect set). A fetch or
// infrastructure failure is recorded on the entry (queued again or
// infra: the next check retries it) and returned as an error; one of
// kind failed (does not apply, build or boot) is the entry's result.
//
// It is Begin, the evaluation (Eval) and Ended in one call; a driver
// that runs the evaluation as stage jobs (pipelines/service) calls Begin,
// submits the evaluation (Planner) and calls Ended when it ends.
func (wr *Watcher) Retest(ctx context.Context, w *store.Watch, t *store.WatchTag) (*RetestResult, error) {
	if !NeedsEvaluation(t) {
		return wr.Ended(ctx, w, t, "", 0, nil)
	}
	commit, err := wr.Begin(ctx, w, t)
	if err != nil {
		return &RetestResult{}, err
	}
	evID, evErr := wr.Eval.Evaluate(ctx, w, t.Tag, commit)
	if evErr != nil && ctx.Err() != nil {
		// Shut down mid-evaluation: the entry stays running; the
		// evaluation resumes when it is retried.
		return &RetestResult{}, evErr
	}
	return wr.Ended(ctx, w, t, commit, evID, evErr)
}

// NeedsEvaluation says whether history entry t is still to be evaluated
// (not done or failed): Retest only compares the others.
func NeedsEvaluation(t *store.WatchTag) bool {
	return t.Status != store.TagDone && t.Status != store.TagFailed
}

// Begin starts the re-test of entry t: it fetches the entry's objects
// into the watch's tree and records the entry as running at the fetched
// commit, which it returns. A failed fetch leaves the entry queued for
// the next check (recorded on it and on the watch) and is returned.
func (wr *Watcher) Begin(ctx context.Context, w *store.Watch, t *store.WatchTag) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fail.Infra(err)
	}
	var commit string
	var err error
	if IsHeadEntry(w, t.Tag) {
		commit, err = FetchHead(ctx, w.Tree, w.Remote, w.Branch, "refs/patcheval/watch/"+w.Name+"/heads/"+w.Branch, t.Commit)
	} else {
		commit, err = FetchTag(ctx, w.Tree, w.Remote, t.Tag)
	}
	if err != nil {
		// The remote went away: what is recorded stays, the entry
		// stays queued for the next check.
		wr.logf("watch %s: %v", w.Name, err)
		if ctx.Err() == nil {
			_ = wr.Store.SetWatchTag(t.ID, store.TagQueued, "", 0, err)
			_ = wr.Store.RecordCheck(w.ID, time.Now(), err)
		}
		return "", err
	}
	if err := wr.Store.SetWatchTag(t.ID, store.TagRunning, commit, 0, nil); err != nil {
		return "", err
	}
	wr.logf("watch %s: evaluating %s (%s) with %s", w.Name, t.Tag, short(commit), w.Pipeline)
	return commit, nil
}

// Ended records the end of entry t's evaluation evID at commit (evErr:
// how it failed) and compares the entry with the previous evaluated one
// (Retest). An entry that is not to be evaluated (NeedsEvaluation) is
// only compared.
func (wr *Watcher) Ended(ctx context.Context, w *store.Watch, t *store.WatchTag, commit string, evID int64, evErr error) (*RetestResult, error) {
	res := &RetestResult{}
	if NeedsEvaluation(t) {
		status := store.TagDone
		switch {
		case evErr == nil:
		case fail.KindOf(evErr) == fail.KindFailed || fail.KindOf(evErr) == fail.KindInput:
			status = store.TagFailed
			if !strings.Contains(evErr.Error(), t.Tag) {
				evErr = fmt.Errorf("%s: %w", t.Tag, evErr)
			}
		default:
			status = store.TagInfra
		}
		if err := wr.Store.SetWatchTag(t.ID, status, commit, evID, evErr); err != nil {
			return res, err
		}
		t.Status = status
		if status == store.TagInfra {
			wr.logf("watch %s: %s: %v (retried next tick)", w.Name, t.Tag, evErr)
			return res, evErr
		}
		if status == store.TagFailed {
			res.Failed = append(res.Failed, fmt.Sprintf("%v", evErr))
			wr.logf("watch %s: %v", w.Name, evErr)
			return res, nil
		}
		res.Evaluated = append(res.Evaluated, t.Tag)
	}
	if t.Status != store.TagDone {
		return res, nil
	}
	evs, err := wr.events(w, t.Tag)
	if err != nil {
		return res, err
	}
	for _, ev := range evs {
		if ev.added {
			wr.logf("watch %s: %s %s..%s %s %s %s %+.1f%%", w.Name, ev.event.Verdict, ev.event.From, ev.event.To,
				ev.event.Variant, ev.event.Benchmark, ev.event.Metric, ev.event.Change)
		}
		res.Events = append(res.Events, Regression{Event: ev.event, Good: ev.good, Bad: ev.bad,
			Bisect: ev.event.Verdict == string(stats.Regression) && w.Bisect && len(ev.event.Bisect) == 0})
	}
	// A regression reported to regzbot that this tag shows gone.
	res.Fixed, err = wr.fixes(ctx, w, t.Tag)
	return res, err
}

type newEvent struct {
	event     *store.WatchEvent
	good, bad *store.WatchTag
	added     bool
}

// events compares tag with the previous evaluated tag (by version) and
// records every significant change.
func (wr *Watcher) events(w *store.Watch, tag string) ([]newEvent, error) {
	h, err := Load(wr.Store, w)
	if err != nil {
		return nil, err
	}
	idx := -1
	for i, t := range h.Tags {
		if t.Tag == tag {
			idx = i
		}
	}
	prev := -1
	for i := idx - 1; i >= 0; i-- {
		if h.Tags[i].Status == store.TagDone {
			prev = i
			break
		}
	}
	if idx < 0 || prev < 0 {
		return nil, nil
	}
	opts, minChange := wr.statsOptions(w)
	var out []newEvent
	for _, s := range h.Series {
		a, b := s.Values[prev].samples, s.Values[idx].samples
		if len(a) == 0 || len(b) == 0 {
			continue
		}
		o := opts
		o.HigherIsBetter = s.HigherIsBetter
		c := stats.CompareWith(a, b, o)
		// An event is a significant change, of at least MinChange when
		// the watch has one.
		if !c.Verdict.Significant() || minChange > 0 && c.BelowThreshold {
			continue
		}
		ev, added, err := wr.Store.AddWatchEvent(store.WatchEvent{WatchID: w.ID, From: h.Tags[prev].Tag, To: tag,
			Variant: s.Variant, Benchmark: s.Benchmark, Metric: s.Metric, Verdict: string(c.Verdict),
			Change: c.Change, CILow: c.CILow, CIHigh: c.CIHigh, Reason: c.Reason})
		if err != nil {
			return nil, err
		}
		out = append(out, newEvent{event: ev, good: h.Tags[prev].WatchTag, bad: h.Tags[idx].WatchTag, added: added})
	}
	return out, nil
}

// History is a watch's results per tag, ordered by version.
type History struct {
	Watch  *store.Watch        `json:"watch"`
	Tags   []TagEntry          `json:"tags"`
	Series []Series            `json:"series"`
	Events []*store.WatchEvent `json:"events"`
}

// Latest is the tag the watch evaluated last (a tag that existed before
// the watch, "known", is not one), nil when none.
func (h *History) Latest() *store.WatchTag {
	var out *store.WatchTag
	for _, t := range h.Tags {
		if t.WatchTag == nil || t.Status == store.TagKnown {
			continue
		}
		if out == nil || t.Updated.After(out.Updated) {
			out = t.WatchTag
		}
	}
	return out
}

// CheckSummary is the last good check in words that do not hide its
// tags: "remote listed" says only that the remote answered; the latest
// tag's own status follows ("ok" only when nothing it evaluated failed).
func (h *History) CheckSummary() string {
	t := h.Latest()
	switch {
	case t == nil:
		return "ok (remote listed; no new tag yet)"
	case t.Status == store.TagFailed || t.Status == store.TagInfra:
		s := fmt.Sprintf("remote listed, but the latest tag %s %s", t.Tag, t.Status)
		if t.ErrorText != "" {
			s += ": " + strings.SplitN(t.ErrorText, "\n", 2)[0]
		}
		return s
	case t.Status == store.TagDone:
		return "ok (latest tag " + t.Tag + " done)"
	}
	return fmt.Sprintf("ok so far (latest tag %s %s)", t.Tag, t.Status)
}

// TagEntry is one tag of the history.
type TagEntry struct {
	*store.WatchTag
	// Build sums the tag's evaluation's kernel builds (nil when none
	// was recorded): how many objects the compiler really compiled and
	// how many the compiler cache answered, the re-test's incremental
	// ratio (Compiled / Objects) over the tag before.
	Build *runner.CompileStats `json:"build,omitempty"`
}

// buildOf sums evaluation id's successful builds; Cached only when every
// kernel came from the build cache.
func buildOf(st *store.Store, id int64) (*runner.CompileStats, error) {
	builds, err := st.BuildsOf(id)
	if err != nil {
		return nil, err
	}
	var out *runner.CompileStats
	for _, b := range builds {
		if b.Status != "ok" {
			continue
		}
		c := runner.BuildCompileStats(b)
		if out == nil {
			out = &runner.CompileStats{Cached: true}
		}
		out.Cached = out.Cached && c.Cached
		out.Objects += c.Objects
		out.Compiled += c.Compiled
		out.Reused += c.Reused
		out.Seconds += c.Seconds
	}
	return out, nil
}

// Series is one (variant, benchmark, metric) across the tags.
type Series struct {
	Variant        string  `json:"variant"`
	Benchmark      string  `json:"benchmark"`
	Metric         string  `json:"metric"`
	Unit           string  `json:"unit,omitempty"`
	HigherIsBetter bool    `json:"higher_is_better"`
	Values         []Point `json:"values"` // one per History.Tags entry
}

// Point is one tag's value: the mean with its 95% confidence interval
// (Student t; equal to the mean when all samples agree or n = 1).
type Point struct {
	Tag    string  `json:"tag"`
	N      int     `json:"n"`
	Mean   float64 `json:"mean,omitempty"`
	CILow  float64 `json:"ci_low,omitempty"`
	CIHigh float64 `json:"ci_high,omitempty"`
	StdDev float64 `json:"stddev,omitempty"`
	// samples are the values (for comparisons).
	samples []float64
}

// Load reads a watch's history from the store.
func Load(st *store.Store, w *store.Watch) (*History, error) {
	tags, err := st.WatchTags(w.ID)
	if err != nil {
		return nil, err
	}
	sortEntries(w, tags)
	h := &History{Watch: w}
	type key struct{ v, b, m string }
	idx := map[key]int{}
	for i, t := range tags {
		h.Tags = append(h.Tags, TagEntry{WatchTag: t})
		if t.Status != store.TagDone || t.EvaluationID == 0 {
			continue
		}
		if h.Tags[i].Build, err = buildOf(st, t.EvaluationID); err != nil {
			return nil, err
		}
		samples, err := st.Samples(t.EvaluationID)
		if err != nil {
			return nil, err
		}
		for _, set := range stats.Sets(stats.Primary(samples)) {
			k := key{set.Variant, set.Benchmark, set.Metric}
			j, ok := idx[k]
			if !ok {
				j = len(h.Series)
				idx[k] = j
				h.Series = append(h.Series, Series{Variant: set.Variant, Benchmark: set.Benchmark, Metric: set.Metric,
					Unit: set.Unit, HigherIsBetter: set.HigherIsBetter})
			}
			for len(h.Series[j].Values) < i {
				h.Series[j].Values = append(h.Series[j].Values, Point{Tag: tags[len(h.Series[j].Values)].Tag})
			}
			h.Series[j].Values = append(h.Series[j].Values, point(t.Tag, set.Values))
		}
	}
	for j := range h.Series {
		for len(h.Series[j].Values) < len(tags) {
			h.Series[j].Values = append(h.Series[j].Values, Point{Tag: tags[len(h.Series[j].Values)].Tag})
		}
	}
	sort.SliceStable(h.Series, func(a, b int) bool {
		x, y := h.Series[a], h.Series[b]
		if x.Benchmark != y.Benchmark {
			return x.Benchmark < y.Benchmark
		}
		if x.Metric != y.Metric {
			return x.Metric < y.Metric
		}
		return x.Variant < y.Variant
	})
	if h.Events, err = st.WatchEvents(w.ID); err != nil {
		return nil, err
	}
	return h, nil
}

func point(tag string, xs []float64) Point {
	s := stats.Summarize(xs)
	p := Point{Tag: tag, N: s.N, Mean: s.Mean, CILow: s.Mean, CIHigh: s.Mean, StdDev: s.StdDev, samples: xs}
	if s.N >= 2 && s.StdDev > 0 {
		half := stats.TQuantile(0.975, float64(s.N-1)) * s.StdDev / math.Sqrt(float64(s.N))
		p.CILow, p.CIHigh = s.Mean-half, s.Mean+half
	}
	return p
}

// sortEntries orders a watch's history: tags by version (CompareTags),
// then the branch's heads in the order they were seen.
func sortEntries(w *store.Watch, tags []*store.WatchTag) {
	sort.SliceStable(tags, func(i, j int) bool {
		a, b := tags[i], tags[j]
		ha, hb := IsHeadEntry(w, a.Tag), IsHeadEntry(w, b.Tag)
		switch {
		case ha && hb:
			return a.ID < b.ID
		case ha != hb:
			return hb
		}
		return CompareTags(a.Tag, b.Tag) < 0
	})
}

var nameRe = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Validate checks a watch before it is stored; every problem is named.
// pipelineOK resolves the pipeline name (nil: not checked).
func Validate(w *store.Watch, pipelineOK func(string) error) error {
	var errs []string
	if !nameRe.MatchString(w.Name) {
		errs = append(errs, fmt.Sprintf("name %q: letters, digits, '.', '_' and '-' only, at most 64", w.Name))
	}
	if w.Remote == "" {
		errs = append(errs, "no remote (--remote URL)")
	} else if u, err := url.Parse(w.Remote); err != nil || (u.Scheme == "" && !strings.HasPrefix(w.Remote, "/")) {
		errs = append(errs, fmt.Sprintf("remote %q: want a URL (https://..., git://..., file:///...) or an absolute path", w.Remote))
	}
	if w.Branch != "" {
		if err := plumbing.NewBranchReferenceName(w.Branch).Validate(); err != nil || strings.HasPrefix(w.Branch, "refs/") {
			errs = append(errs, fmt.Sprintf("branch %q: not a branch name (want e.g. master or for-next/core, without refs/heads/)", w.Branch))
		}
	}
	if w.Tags != "" || w.Branch == "" {
		// Without a branch the tags are all there is to watch.
		if err := ValidGlob(w.Tags); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if w.Schedule == "" {
		w.Schedule = DefaultSchedule
	}
	if _, err := ParseSchedule(w.Schedule); err != nil {
		errs = append(errs, err.Error())
	}
	if w.Pipeline == "" {
		errs = append(errs, "no pipeline (--pipeline NAME|FILE)")
	} else if pipelineOK != nil {
		if err := pipelineOK(w.Pipeline); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if w.Tree == "" {
		errs = append(errs, "no local tree to fetch tags into (--tree PATH)")
	} else if fi, err := os.Stat(w.Tree); err != nil || !fi.IsDir() {
		errs = append(errs, fmt.Sprintf("local tree %s: not a directory", w.Tree))
	}
	if len(errs) > 0 {
		return fail.Inputf("watch %s: %s", w.Name, strings.Join(errs, "; "))
	}
	return nil
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
