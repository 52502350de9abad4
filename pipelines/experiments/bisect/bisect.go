// Package bisect finds the commit that caused a performance regression:
// a binary search over the first-parent commits between a good and a bad
// revision, each step built and measured by a Measurer (pipelines: one
// kernel build of the commit, incrementally in the same O= directory and
// kcc store as every other build of the recipe, then boots).
//
// Deterministic measurements (QEMU -icount) take one boot per step and
// classify the value by where it lies between the good and bad end
// points' values, with the end points' own spread as the noise band.
// Others (real hardware) are noise-aware: a step boots again, and the end
// points too when their few samples are what keeps it open, until a
// sequential test decides on which side of the midpoint between the good
// and bad means the step lies (z of the step's mean against the midpoint,
// with the pooled noise of every sample, beyond the 99.5% quantile),
// bounded by MaxBoots; a step still undecided is reported inconclusive
// and searched around like a skipped one, never guessed (the result lists
// the candidates it leaves). A step whose build or boot fails (an error
// of kind failed) is skipped like `git bisect skip`. The culprit is
// confirmed before it is reported: its parent measured good and it
// measured bad again, and, on a noisy target, the change culprit vs
// parent is a significant regression whose CI holds the range's change.
//
// The entry point is Run; Report renders the result (text, Markdown,
// JSON, KCIDB issue and incident, reply draft to the culprit's author).
package bisect

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/linuxtree"
	"github.com/patcheval/patcheval/series/maintainers"
	"github.com/patcheval/patcheval/series/recipients"
)

// Measurement is what one measurement of a commit gave.
type Measurement struct {
	// Values of the bisected benchmark metric, one per sample.
	Values []float64
	Unit   string
	// Built says the kernel was compiled for this measurement (false: a
	// cached artifact was used); BuildTime how long that took.
	Built     bool
	BuildTime time.Duration
	BootTime  time.Duration
	// Note is a line for the step table (e.g. "3 files recompiled").
	Note string
}

// Measurer builds a commit and measures it with boots boots. An error of
// kind failed (internal/fail) means the commit does not build or boot:
// the step is skipped. Any other error stops the bisection.
type Measurer interface {
	Measure(ctx context.Context, commit string, boots int) (*Measurement, error)
}

// Options steer Run.
type Options struct {
	// Repo is the git repository; Good and Bad any revisions in it, Good a
	// first-parent ancestor of Bad.
	Repo, Good, Bad string
	Measurer        Measurer
	// Benchmark, Metric and HigherIsBetter name what is bisected (for the
	// report and the direction of "worse").
	Benchmark, Metric string
	HigherIsBetter    bool
	// Deterministic: one boot per step (QEMU -icount).
	Deterministic bool
	// Threshold is the smallest regression (percent, worse direction)
	// between Good and Bad worth bisecting; 0 means 1.
	Threshold float64
	// MinBoots and MaxBoots bound the boots per step when not
	// deterministic; 0 means 3 and 10.
	MinBoots, MaxBoots int
	// MaxCommits bounds the first-parent walk from Bad to Good; 0 means
	// 100000.
	MaxCommits int
	// NoConfirm skips the confirmation (tests of the search only).
	NoConfirm bool
	Logf      func(format string, a ...any)
}

// Commit identifies one commit of the range.
type Commit struct {
	Hash    string `json:"hash"`
	Subject string `json:"subject"`
	Author  string `json:"author"`
	Email   string `json:"email"`
	Date    string `json:"date,omitempty"`
	// Link is the commit message's Link: trailer (lore), when present.
	Link string `json:"link,omitempty"`
	// Lists are the mailing lists MAINTAINERS (L:) names for the files
	// the commit changes (set on the culprit when the tree has a
	// MAINTAINERS file).
	Lists []string `json:"lists,omitempty"`
	// Index is the position in the range (0 = oldest after Good); -1 is
	// Good itself.
	Index int `json:"index"`
}

// Verdicts of a step.
const (
	Good         = "good"
	Bad          = "bad"
	Skip         = "skip"
	Inconclusive = "inconclusive"
)

// Step is one measured commit.
type Step struct {
	N      int    `json:"n"`
	Commit Commit `json:"commit"`
	// Role is "good end", "bad end", "step", "confirm culprit" or
	// "confirm parent".
	Role    string    `json:"role"`
	Values  []float64 `json:"values,omitempty"`
	Mean    float64   `json:"mean,omitempty"`
	Verdict string    `json:"verdict"`
	Reason  string    `json:"reason"`
	// Position is where the mean lies from good (0) to bad (1).
	Position     float64 `json:"position"`
	Built        bool    `json:"built"`
	BuildSeconds float64 `json:"build_seconds"`
	BootSeconds  float64 `json:"boot_seconds"`
	Note         string  `json:"note,omitempty"`
	Error        string  `json:"error,omitempty"`
}

// Statuses of a Result.
const (
	// Found: one culprit, confirmed unless Confirmed is false.
	Found = "found"
	// Ambiguous: skipped commits leave more than one candidate.
	Ambiguous = "ambiguous"
)

// Result is a finished bisection.
type Result struct {
	Status     string   `json:"status"`
	Repo       string   `json:"repo"`
	GoodRef    string   `json:"good_ref"`
	BadRef     string   `json:"bad_ref"`
	Good       Commit   `json:"good"`
	Bad        Commit   `json:"bad"`
	Culprit    *Commit  `json:"culprit,omitempty"`
	Parent     *Commit  `json:"parent,omitempty"`
	Candidates []Commit `json:"candidates,omitempty"`
	Confirmed  bool     `json:"confirmed"`
	// Commits is N, the first-parent commits in (Good, Bad].
	Commits int `json:"commits"`
	// Builds are the kernels compiled; Measured the commits measured
	// (cached kernels are measured without a build); Bound is
	// ceil(log2(N)) + 2, the end points plus a binary search.
	Builds   int `json:"builds"`
	Measured int `json:"measured"`
	Bound    int `json:"bound"`
	Boots    int `json:"boots"`
	Skipped  int `json:"skipped"`

	Benchmark      string  `json:"benchmark"`
	Metric         string  `json:"metric"`
	Unit           string  `json:"unit,omitempty"`
	HigherIsBetter bool    `json:"higher_is_better"`
	Deterministic  bool    `json:"deterministic"`
	GoodValue      float64 `json:"good_value"`
	BadValue       float64 `json:"bad_value"`
	// Band is the noise band (metric units) used to classify steps.
	Band float64 `json:"band"`
	// Change is the regression, culprit vs parent, in percent (CI from the
	// statistics when there are repeated samples).
	Change    float64       `json:"change_pct"`
	CILow     float64       `json:"ci_low_pct"`
	CIHigh    float64       `json:"ci_high_pct"`
	Steps     []Step        `json:"steps"`
	Started   time.Time     `json:"started"`
	Wall      time.Duration `json:"wall_ns"`
	BuildTime time.Duration `json:"build_ns"`
	Notes     []string      `json:"notes,omitempty"`
}

// Bound is ceil(log2(n)) + 2.
func Bound(n int) int {
	if n <= 1 {
		return 2
	}
	return int(math.Ceil(math.Log2(float64(n)))) + 2
}

type run struct {
	o       Options
	res     *Result
	commits []Commit // the range, oldest first
	good    []float64
	bad     []float64
	// goodStep and badStep index the end points' steps in res.Steps
	// (more boots of an end point are added to them).
	goodStep, badStep int
	built             map[string]bool
	measured          map[string]bool
}

func (r *run) logf(format string, a ...any) {
	if r.o.Logf != nil {
		r.o.Logf(format, a...)
	}
}

// Run bisects. Errors: bad input (revisions, no regression between the
// end points, an end point that does not build) and infra errors from the
// Measurer; a finished bisection is a Result, also when ambiguous.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Measurer == nil {
		return nil, fail.Inputf("bisect: no measurer")
	}
	if o.Threshold <= 0 {
		o.Threshold = 1
	}
	if o.MinBoots <= 0 {
		o.MinBoots = 3
	}
	if o.MaxBoots < o.MinBoots {
		o.MaxBoots = max(10, o.MinBoots)
	}
	if o.MaxCommits <= 0 {
		o.MaxCommits = 100000
	}
	start := time.Now()
	good, bad, commits, err := FirstParentRange(o.Repo, o.Good, o.Bad, o.MaxCommits)
	if err != nil {
		return nil, err
	}
	r := &run{o: o, commits: commits, built: map[string]bool{}, measured: map[string]bool{},
		res: &Result{Repo: o.Repo, GoodRef: o.Good, BadRef: o.Bad, Good: good, Bad: bad, Commits: len(commits),
			Bound: Bound(len(commits)), Benchmark: o.Benchmark, Metric: o.Metric, HigherIsBetter: o.HigherIsBetter,
			Deterministic: o.Deterministic, Started: start}}
	defer func() { r.res.Wall = time.Since(start) }()
	r.logf("bisect: %d first-parent commit(s) in %s..%s (at most %d builds: ceil(log2(%d)) + 2)",
		len(commits), o.Good, o.Bad, r.res.Bound, len(commits))

	if err := r.measureEnds(ctx, good, bad); err != nil {
		return r.res, err
	}

	// Binary search: lo is the newest known good index (-1: Good), hi the
	// oldest known bad (len-1: Bad).
	lo, hi := -1, len(commits)-1
	skipped := map[int]bool{}
	for hi-lo > 1 {
		mid, ok := pick(lo, hi, skipped)
		if !ok {
			break
		}
		st, err := r.step(ctx, commits[mid], "step")
		if err != nil {
			return r.res, err
		}
		switch st.Verdict {
		case Good:
			lo = mid
		case Bad:
			hi = mid
		default:
			skipped[mid] = true
			r.res.Skipped++
		}
	}
	if hi-lo > 1 {
		r.res.Status = Ambiguous
		r.res.Candidates = append([]Commit(nil), commits[lo+1:hi+1]...)
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("%d commit(s) could not be measured (skipped); the culprit is one of %d candidates",
			r.res.Skipped, hi-lo))
		return r.res, nil
	}
	culprit := commits[hi]
	parent := good
	if hi > 0 {
		parent = commits[hi-1]
	}
	r.res.Status = Found
	if lists, err := culpritLists(o.Repo, culprit.Hash); err != nil {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("the culprit's mailing lists are unknown: %v", err))
	} else {
		culprit.Lists = lists
	}
	r.res.Culprit, r.res.Parent = &culprit, &parent
	if note := singleCommitNote(o, culprit, len(commits)); note != "" {
		r.res.Notes = append(r.res.Notes, note)
	}

	if err := r.confirm(ctx, culprit, parent); err != nil {
		return r.res, err
	}
	r.logf("bisect: %s %s is the first bad commit (%+.1f%% %s %s; %d builds, %d measured, bound %d)",
		short(culprit.Hash), culprit.Subject, r.res.Change, o.Benchmark, o.Metric, r.res.Builds, r.res.Measured, r.res.Bound)
	return r.res, nil
}

// measureEnds measures the end points, good and bad, until they differ
// clearly (settleEnds), and refuses ends that do not build or boot or do
// not differ (checkEnds).
func (r *run) measureEnds(ctx context.Context, good, bad Commit) error {
	o := r.o
	gs, err := r.measure(ctx, good, "good end", r.endBoots())
	if err != nil {
		return err
	}
	if gs.Verdict == Skip {
		return fail.Inputf("bisect: the good end %s does not build or boot: %s", o.Good, gs.Error)
	}
	r.good, r.goodStep = gs.Values, len(r.res.Steps)-1
	bs, err := r.measure(ctx, bad, "bad end", r.endBoots())
	if err != nil {
		return err
	}
	if bs.Verdict == Skip {
		return fail.Inputf("bisect: the bad end %s does not build or boot: %s", o.Bad, bs.Error)
	}
	r.bad, r.badStep = bs.Values, len(r.res.Steps)-1
	r.setStep(r.goodStep, Good, "the good end point")
	r.setStep(r.badStep, Bad, "the bad end point")
	if err := r.settleEnds(ctx); err != nil {
		return err
	}
	if err := r.checkEnds(); err != nil {
		return err
	}
	r.setStep(r.goodStep, Good, fmt.Sprintf("the good end point (n=%d)", len(r.good)))
	r.setStep(r.badStep, Bad, fmt.Sprintf("the bad end point (n=%d)", len(r.bad)))
	return nil
}

// confirm measures the culprit's parent and the culprit again, each with
// a fresh boot of its (cached) kernel (unless NoConfirm), and sets the
// result's change and its confidence interval.
func (r *run) confirm(ctx context.Context, culprit, parent Commit) error {
	o := r.o
	cv, pv := r.valuesOf(culprit.Hash), r.valuesOf(parent.Hash)
	if !o.NoConfirm {
		ps, err := r.step(ctx, parent, "confirm parent")
		if err != nil {
			return err
		}
		cs, err := r.step(ctx, culprit, "confirm culprit")
		if err != nil {
			return err
		}
		r.res.Confirmed = ps.Verdict == Good && cs.Verdict == Bad
		if !r.res.Confirmed {
			r.res.Notes = append(r.res.Notes, fmt.Sprintf("NOT confirmed: re-measured, the parent was %s and the culprit %s", ps.Verdict, cs.Verdict))
		}
		cv, pv = append(cv, cs.Values...), append(pv, ps.Values...)
	}
	c := stats.CompareWith(pv, cv, stats.Options{HigherIsBetter: o.HigherIsBetter})
	r.res.Change, r.res.CILow, r.res.CIHigh = c.Change, c.CILow, c.CIHigh
	if !c.CIBounded {
		r.res.CILow, r.res.CIHigh = c.Change, c.Change
	}
	if !o.NoConfirm && !o.Deterministic && r.res.Confirmed {
		r.matchesRange(c)
	}
	return nil
}

// pick chooses the commit to measure in (lo, hi): the middle, or the
// nearest one not skipped, alternating above and below (git bisect skip
// moves away from skipped commits the same way).
func pick(lo, hi int, skipped map[int]bool) (int, bool) {
	mid := lo + (hi-lo)/2
	for d := 0; d < hi-lo; d++ {
		for _, c := range []int{mid + d, mid - d} {
			if c > lo && c < hi && !skipped[c] {
				return c, true
			}
		}
	}
	return 0, false
}

func (r *run) endBoots() int {
	if r.o.Deterministic {
		return 1
	}
	return r.o.MinBoots
}

func (r *run) valuesOf(hash string) []float64 { return r.res.valuesOf(hash) }

// settleEnds boots the end points of a noisy target again, the one with
// fewer samples first, while they do not differ significantly, up to
// MaxBoots each: a few boots may not show a regression the range has.
func (r *run) settleEnds(ctx context.Context) error {
	if r.o.Deterministic {
		return nil
	}
	for {
		c := stats.CompareWith(r.good, r.bad, stats.Options{HigherIsBetter: r.o.HigherIsBetter})
		if c.Verdict == stats.Regression {
			return nil
		}
		grew, err := r.moreEnd(ctx)
		if err != nil || !grew {
			return err
		}
	}
}

// checkEnds requires a regression between the end points and sets the
// noise band.
func (r *run) checkEnds() error {
	g, b := stats.Summarize(r.good), stats.Summarize(r.bad)
	r.res.GoodValue, r.res.BadValue = g.Mean, b.Mean
	if g.N == 0 || b.N == 0 || g.Mean == 0 {
		return fail.Inputf("bisect: no %s %s values at the end points (is the benchmark in the pipeline?)", r.o.Benchmark, r.o.Metric)
	}
	change := 100 * (b.Mean/g.Mean - 1)
	worse := change
	if r.o.HigherIsBetter {
		worse = -change
	}
	if worse < r.o.Threshold {
		return fail.Inputf("bisect: no regression to bisect: %s %s goes from %.4g (good, %s) to %.4g (bad, %s), %+.2f%%; the threshold is a %.2g%% change for the worse",
			r.o.Benchmark, r.o.Metric, g.Mean, r.o.Good, b.Mean, r.o.Bad, change, r.o.Threshold)
	}
	if !r.o.Deterministic {
		c := stats.CompareWith(r.good, r.bad, stats.Options{HigherIsBetter: r.o.HigherIsBetter})
		if c.Verdict != stats.Regression {
			return fail.Inputf("bisect: the end points do not differ significantly (%s: %s): boot more (--max-boots) or check the range",
				c.Verdict, c.Reason)
		}
	}
	// The noise band: the end points' own spread, at least 0.1% of the
	// good value, so a deterministic step that repeats the good value to
	// the instruction is good.
	r.res.Band = math.Max(math.Max(g.Max-g.Min, b.Max-b.Min), 0.001*math.Abs(g.Mean))
	return nil
}

func (r *run) setStep(i int, verdict, reason string) {
	r.res.Steps[i].Verdict, r.res.Steps[i].Reason = verdict, reason
	r.res.Steps[i].Position = r.position(r.res.Steps[i].Mean)
}

func (r *run) position(v float64) float64 {
	g, b := stats.Summarize(r.good).Mean, stats.Summarize(r.bad).Mean
	if b == g {
		return 0
	}
	return (v - g) / (b - g)
}

// measure measures one commit with boots boots and records the step
// (verdict unset unless it failed to build or boot).
func (r *run) measure(ctx context.Context, c Commit, role string, boots int) (*Step, error) {
	r.logf("bisect: %s %s %s (%d boot(s))", role, short(c.Hash), c.Subject, boots)
	m, err := r.o.Measurer.Measure(ctx, c.Hash, boots)
	st := Step{N: len(r.res.Steps) + 1, Commit: c, Role: role}
	if m != nil {
		st.Built, st.BuildSeconds, st.BootSeconds, st.Note = m.Built, m.BuildTime.Seconds(), m.BootTime.Seconds(), m.Note
		if m.Built && !r.built[c.Hash] {
			r.built[c.Hash] = true
			r.res.Builds++
		}
		r.res.BuildTime += m.BuildTime
		r.res.Boots += len(m.Values)
		if r.res.Unit == "" {
			r.res.Unit = m.Unit
		}
	}
	if !r.measured[c.Hash] {
		r.measured[c.Hash] = true
		r.res.Measured++
	}
	if err != nil {
		if fail.KindOf(err) != fail.KindFailed || ctx.Err() != nil {
			return nil, err
		}
		st.Verdict, st.Error = Skip, firstLine(err.Error())
		st.Reason = "does not build or boot: skipped like git bisect skip"
		r.res.Steps = append(r.res.Steps, st)
		r.logf("bisect:   skip: %s", st.Error)
		return &r.res.Steps[len(r.res.Steps)-1], nil
	}
	if m == nil || len(m.Values) == 0 {
		return nil, fail.Infraf("bisect: %s: the measurement gave no %s %s value", short(c.Hash), r.o.Benchmark, r.o.Metric)
	}
	st.Values = append([]float64(nil), m.Values...)
	st.Mean = stats.Summarize(st.Values).Mean
	r.res.Steps = append(r.res.Steps, st)
	return &r.res.Steps[len(r.res.Steps)-1], nil
}

// step measures a commit of the range and classifies it.
func (r *run) step(ctx context.Context, c Commit, role string) (Step, error) {
	boots := r.endBoots()
	st, err := r.measure(ctx, c, role, boots)
	if err != nil {
		return Step{}, err
	}
	if st.Verdict == Skip {
		return *st, nil
	}
	for {
		verdict, reason, more, moreEnds := r.classify(st.Values)
		if more && moreEnds {
			// The end points' few samples keep the step open: one more
			// boot of the end with fewer (reused by every later step).
			grew, err := r.moreEnd(ctx)
			if err != nil {
				return Step{}, err
			}
			if grew {
				continue
			}
		}
		if !more || len(st.Values) >= r.o.MaxBoots {
			if more {
				verdict, reason = Inconclusive, reason+fmt.Sprintf("; still undecided after %d boots: not guessed, searched around like git bisect skip", len(st.Values))
			}
			st.Verdict, st.Reason = verdict, reason
			st.Position = r.position(st.Mean)
			r.logf("bisect:   %s: %.6g %s (%s)", verdict, st.Mean, r.res.Unit, reason)
			return *st, nil
		}
		m, err := r.o.Measurer.Measure(ctx, c.Hash, 1)
		if err != nil {
			if fail.KindOf(err) == fail.KindFailed && ctx.Err() == nil {
				st.Verdict, st.Error, st.Reason = Skip, firstLine(err.Error()), "a further boot failed: skipped"
				return *st, nil
			}
			return Step{}, err
		}
		r.res.Boots += len(m.Values)
		st.Values = append(st.Values, m.Values...)
		st.Mean = stats.Summarize(st.Values).Mean
		st.BootSeconds += m.BootTime.Seconds()
	}
}

// classify says whether values look good or bad, or need more samples
// (more); moreEnds says the end points' samples are most of the
// uncertainty, so booting an end point again helps more than the step.
func (r *run) classify(values []float64) (verdict, reason string, more, moreEnds bool) {
	v := stats.Summarize(values).Mean
	pos := r.position(v)
	g, b := r.res.GoodValue, r.res.BadValue
	if r.o.Deterministic {
		dg, db := math.Abs(v-g), math.Abs(v-b)
		switch {
		case dg <= r.res.Band:
			return Good, fmt.Sprintf("within the noise band (±%.3g) of the good value", r.res.Band), false, false
		case db <= r.res.Band:
			return Bad, fmt.Sprintf("within the noise band (±%.3g) of the bad value", r.res.Band), false, false
		case pos < 0.5:
			return Good, fmt.Sprintf("closer to good: %.0f%% of the way from good to bad", 100*pos), false, false
		default:
			return Bad, fmt.Sprintf("closer to bad: %.0f%% of the way from good to bad", 100*pos), false, false
		}
	}
	return r.classifyNoisy(values)
}

// decideZ is the sequential test's bound: the step is decided once its
// mean lies this many standard errors to one side of the midpoint (the
// 99.5% normal quantile: a step that truly sits on one side is called for
// the other about once in 200 decisions, fewer as samples grow).
const decideZ = 2.576

// classifyNoisy decides on which side of the midpoint between the good
// and bad means the step's mean lies: z = (mean - midpoint) / se towards
// bad, se from the pooled standard deviation of the end points' and the
// step's samples, including the end means' own uncertainty
// (sd * sqrt(1/n + (1/ng + 1/nb)/4)).
func (r *run) classifyNoisy(values []float64) (verdict, reason string, more, moreEnds bool) {
	g, b, st := stats.Summarize(r.good), stats.Summarize(r.bad), stats.Summarize(values)
	n, ng, nb := float64(st.N), float64(g.N), float64(b.N)
	df := ng + nb + n - 3
	if st.N < 2 || df < 1 {
		return "", fmt.Sprintf("n=%d: too few samples", st.N), true, false
	}
	sd := math.Sqrt(((ng-1)*g.StdDev*g.StdDev + (nb-1)*b.StdDev*b.StdDev + (n-1)*st.StdDev*st.StdDev) / df)
	dir := 1.0
	if b.Mean < g.Mean {
		dir = -1
	}
	endShare := (1/ng + 1/nb) / 4
	se := sd * math.Sqrt(1/n+endShare)
	pos := r.position(st.Mean)
	if se == 0 {
		if pos < 0.5 {
			return Good, fmt.Sprintf("no noise at all, closer to good (n=%d)", st.N), false, false
		}
		return Bad, fmt.Sprintf("no noise at all, closer to bad (n=%d)", st.N), false, false
	}
	z := dir * (st.Mean - (g.Mean+b.Mean)/2) / se
	desc := fmt.Sprintf("n=%d, %.0f%% of the way from good to bad, z=%+.2f against the midpoint (decided beyond ±%.2f; noise %.2g%%)",
		st.N, 100*pos, z, decideZ, 100*sd/math.Abs(g.Mean))
	switch {
	case z >= decideZ:
		return Bad, "on the bad side: " + desc, false, false
	case z <= -decideZ:
		return Good, "on the good side: " + desc, false, false
	}
	return "", desc, true, endShare > 1/n
}

// moreEnd boots the end point with fewer samples once more (up to
// MaxBoots each) and reports whether it did.
func (r *run) moreEnd(ctx context.Context) (bool, error) {
	vals, idx := &r.good, r.goodStep
	if len(r.bad) < len(r.good) {
		vals, idx = &r.bad, r.badStep
	}
	if len(*vals) >= r.o.MaxBoots {
		vals, idx = &r.bad, r.badStep
		if len(r.bad) >= len(r.good) {
			vals, idx = &r.good, r.goodStep
		}
		if len(*vals) >= r.o.MaxBoots {
			return false, nil
		}
	}
	st := &r.res.Steps[idx]
	m, err := r.o.Measurer.Measure(ctx, st.Commit.Hash, 1)
	if err != nil {
		if fail.KindOf(err) == fail.KindFailed && ctx.Err() == nil {
			return false, nil // it booted before: keep what it gave
		}
		return false, err
	}
	r.res.Boots += len(m.Values)
	*vals = append(*vals, m.Values...)
	st.Values = append(st.Values, m.Values...)
	st.Mean = stats.Summarize(st.Values).Mean
	st.BootSeconds += m.BootTime.Seconds()
	st.Reason = fmt.Sprintf("the %s end point (n=%d: booted again when the ends or a step needed it)", st.Verdict, len(st.Values))
	g, b := stats.Summarize(r.good), stats.Summarize(r.bad)
	r.res.GoodValue, r.res.BadValue = g.Mean, b.Mean
	r.logf("bisect:   %s end booted again: n=%d, mean %.6g", st.Verdict, len(st.Values), st.Mean)
	return true, nil
}

// matchesRange requires the confirmed culprit's change (culprit vs
// parent) to be a significant regression of the range's size: its
// difference from the range's own change (bad vs good) is within 2.576
// standard errors of both estimates (from their 95% CIs). A culprit that
// explains only part of the range's regression (two regressions in the
// range) is named but not confirmed.
func (r *run) matchesRange(c stats.Comparison) {
	rc := stats.CompareWith(r.good, r.bad, stats.Options{HigherIsBetter: r.o.HigherIsBetter})
	se := math.Hypot((c.CIHigh-c.CILow)/3.92, (rc.CIHigh-rc.CILow)/3.92)
	switch {
	case c.Verdict != stats.Regression:
		r.res.Confirmed = false
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("NOT confirmed: culprit vs parent is %s (%s), not a regression", c.Verdict, c.Reason))
	case !c.CIBounded || !rc.CIBounded || math.Abs(c.Change-rc.Change) > 2.576*se:
		r.res.Confirmed = false
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("NOT confirmed: culprit vs parent changes %+.2f%% [%+.2f%%, %+.2f%%], not the range's %+.2f%% [%+.2f%%, %+.2f%%] (another change in the range?)",
			c.Change, c.CILow, c.CIHigh, rc.Change, rc.CILow, rc.CIHigh))
	default:
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("culprit vs parent %+.2f%% [%+.2f%%, %+.2f%%] matches the range's %+.2f%% [%+.2f%%, %+.2f%%]",
			c.Change, c.CILow, c.CIHigh, rc.Change, rc.CILow, rc.CIHigh))
	}
}

// FirstParentRange resolves good and bad and lists the first-parent
// commits in (good, bad], oldest first (`git rev-list --first-parent
// --reverse good..bad` when good is a first-parent ancestor of bad): the
// commits a bisection steps through. It reads only the commits of the
// range (gittree.Open's storage: no step that grows with the repository),
// and gives up after limit commits.
func FirstParentRange(repoPath, goodRef, badRef string, limit int) (good, bad Commit, commits []Commit, err error) {
	repo, st, _, err := gittree.Open(repoPath, 8)
	if err != nil {
		return good, bad, nil, fail.Inputf("bisect: %s: %v", repoPath, err)
	}
	defer st.Close()
	resolve := func(ref, what string) (*object.Commit, error) {
		h, err := repo.ResolveRevision(plumbing.Revision(ref))
		if err != nil {
			return nil, fail.Inputf("bisect: %s revision %q not found in %s: %v", what, ref, repoPath, err)
		}
		c, err := repo.CommitObject(*h)
		if err != nil {
			return nil, fail.Inputf("bisect: %s revision %q is not a commit: %v", what, ref, err)
		}
		return c, nil
	}
	gc, err := resolve(goodRef, "good")
	if err != nil {
		return good, bad, nil, err
	}
	bc, err := resolve(badRef, "bad")
	if err != nil {
		return good, bad, nil, err
	}
	good, bad = info(gc, -1), info(bc, 0)
	if gc.Hash == bc.Hash {
		return good, bad, nil, fail.Inputf("bisect: good %s and bad %s are the same commit", goodRef, badRef)
	}
	// Newest first, each commit kept as its Commit (hash, subject,
	// author, date, link) rather than go-git's whole object.
	var rev []Commit
	for c := bc; c.Hash != gc.Hash; {
		rev = append(rev, info(c, 0))
		if len(rev) > limit {
			return good, bad, nil, fail.Inputf("bisect: good %s is not within %d first-parent commits of bad %s", goodRef, limit, badRef)
		}
		if c.NumParents() == 0 {
			return good, bad, nil, fail.Inputf("bisect: good %s is not a first-parent ancestor of bad %s (reached the root %s)",
				goodRef, badRef, short(c.Hash.String()))
		}
		p, err := st.ReadCommit(c.ParentHashes[0])
		if err != nil {
			return good, bad, nil, fail.Infraf("bisect: parent of %s: %w", short(c.Hash.String()), err)
		}
		c = p
	}
	commits = make([]Commit, 0, len(rev))
	for i := len(rev) - 1; i >= 0; i-- {
		rev[i].Index = len(commits)
		commits = append(commits, rev[i])
	}
	bad = commits[len(commits)-1]
	return good, bad, commits, nil
}

// culpritLists is the mailing lists (L:) among recipients.ForCommit's
// recipients of the culprit: what its parent's MAINTAINERS lists for
// the files and keywords it changes, as get_maintainer.pl --no-git
// would, and the same reading the reply draft addresses its people
// from. None when the tree has no MAINTAINERS file or the culprit no
// parent.
func culpritLists(repoPath, hash string) ([]string, error) {
	rs, err := recipients.ForCommit(repoPath, hash)
	if err != nil {
		if fail.KindOf(err) == fail.KindInput {
			return nil, nil
		}
		return nil, err
	}
	var lists []string
	for _, rc := range rs {
		if rc.Kind == maintainers.List && !slices.Contains(lists, rc.Email) {
			lists = append(lists, rc.Email)
		}
	}
	return lists, nil
}

func info(c *object.Commit, idx int) Commit {
	subject, _, _ := strings.Cut(c.Message, "\n")
	out := Commit{Hash: c.Hash.String(), Subject: subject, Author: c.Author.Name, Email: c.Author.Email,
		Date: c.Author.When.UTC().Format(time.RFC3339), Index: idx}
	for rest := c.Message; rest != "" && out.Link == ""; {
		var l string
		l, rest, _ = strings.Cut(rest, "\n")
		if v, ok := strings.CutPrefix(l, "Link: "); ok {
			out.Link = strings.TrimSpace(v)
		}
	}
	return out
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// singleCommitNote says what a range of one commit means: bisection
// cannot go below it, and when that commit is a whole release imported as
// one (patcheval tree import: Debian's point releases follow one another
// as single commits), it holds every change between the two releases.
func singleCommitNote(o Options, culprit Commit, commits int) string {
	if commits != 1 {
		return ""
	}
	rel, ok := linuxtree.ImportedRelease(o.Repo, culprit.Hash)
	if !ok {
		return fmt.Sprintf("the range %s..%s is one commit: bisection cannot go below %s", o.Good, o.Bad, short(culprit.Hash))
	}
	// Name both ends by their releases (a watch bisects between commit
	// ids).
	good := o.Good
	if prev, ok := linuxtree.ImportedRelease(o.Repo, o.Good); ok {
		good = prev.Tag
	}
	return fmt.Sprintf("the range %s..%s is one commit, %s imported as a whole release (%s): it holds every change between the two releases, "+
		"so this is as far as this history goes; a finer answer needs the real history between them (e.g. the stable tree's commits from %s to %s)",
		good, rel.Tag, rel.Tag, rel.Origin, good, rel.Tag)
}
