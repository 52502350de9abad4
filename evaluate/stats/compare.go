package stats

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/aclements/go-moremath/mathx"
	ms "github.com/aclements/go-moremath/stats"
)

// Verdict is the outcome of a Comparison: one of Regression,
// Improvement, Equivalent and Inconclusive. Its string (and its JSON and
// text form) is the stable word: "regression", "improvement",
// "equivalent", "inconclusive".
type Verdict string

const (
	// Regression and Improvement: the change is significant (Welch's test
	// and the confidence interval agree) in the metric's worse (better)
	// direction. Comparison.BelowThreshold says when it is smaller than
	// the threshold T.
	Regression  Verdict = "regression"
	Improvement Verdict = "improvement"
	// Equivalent: no significant change, and the confidence interval lies
	// inside ±T: any change this run could have missed is smaller than T.
	Equivalent Verdict = "equivalent"
	// Inconclusive: no significant change, but the confidence interval
	// reaches past ±T (or could not be computed): the run cannot tell a
	// change that matters from none. Comparison.MoreBoots says what would
	// settle it.
	Inconclusive Verdict = "inconclusive"
)

// Verdicts lists the four verdicts in the order reports group them.
func Verdicts() []Verdict { return []Verdict{Regression, Improvement, Equivalent, Inconclusive} }

// legacyNoChange is the verdict of reports written before the threshold
// existed: it meant "not significant", which is read back as
// inconclusive (it never said the variants were equivalent).
const legacyNoChange = "no significant change"

// ParseVerdict reads a verdict word.
func ParseVerdict(s string) (Verdict, error) {
	for _, v := range Verdicts() {
		if s == string(v) {
			return v, nil
		}
	}
	if s == legacyNoChange {
		return Inconclusive, nil
	}
	return "", fmt.Errorf("stats: unknown verdict %q (want regression, improvement, equivalent or inconclusive)", s)
}

// String is the verdict word.
func (v Verdict) String() string { return string(v) }

// Significant reports a regression or an improvement.
func (v Verdict) Significant() bool { return v == Regression || v == Improvement }

// MarshalText writes the verdict word ("" for the zero Verdict); an
// unknown word is an error, so no report carries a verdict nobody can read.
func (v Verdict) MarshalText() ([]byte, error) {
	if v == "" {
		return nil, nil
	}
	if _, err := ParseVerdict(string(v)); err != nil || string(v) == legacyNoChange {
		return nil, fmt.Errorf("stats: cannot write verdict %q", string(v))
	}
	return []byte(v), nil
}

// UnmarshalText reads a verdict word (the legacy "no significant change"
// becomes Inconclusive).
func (v *Verdict) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*v = ""
		return nil
	}
	p, err := ParseVerdict(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// DefaultThreshold is T, in percent, when Options.Threshold is 0.
const DefaultThreshold = 1.0

// DefaultDeterministicThreshold is the T pipelines use for deterministic
// QEMU (instruction counting repeats within a fraction of a percent).
const DefaultDeterministicThreshold = 0.5

// Options steer CompareWith.
type Options struct {
	// HigherIsBetter is the metric's direction (ops/s: true, ns/op and
	// latencies: false).
	HigherIsBetter bool
	// Alpha is the significance level; 0 means 0.05. The confidence
	// interval is at 1-Alpha (95% for the default).
	Alpha float64
	// Threshold is T in percent, the smallest change that matters: a
	// non-significant comparison whose confidence interval lies inside ±T
	// is Equivalent, one whose interval reaches past ±T Inconclusive; a
	// significant change smaller than T keeps its verdict and is marked
	// BelowThreshold. 0 means DefaultThreshold.
	Threshold float64
	// SamplesPerBoot is how many samples of a variant one boot gives
	// (iterations x runs); it turns the samples MoreBoots needs into
	// boots. 0 means 1.
	SamplesPerBoot int
}

func (o Options) alpha() float64 {
	if o.Alpha <= 0 || o.Alpha >= 1 {
		return 0.05
	}
	return o.Alpha
}

func (o Options) threshold() float64 {
	if o.Threshold <= 0 || math.IsNaN(o.Threshold) || math.IsInf(o.Threshold, 0) {
		return DefaultThreshold
	}
	return o.Threshold
}

// Comparison is one variant set against its baseline.
type Comparison struct {
	Base  Summary `json:"base"`
	Other Summary `json:"other"`

	HigherIsBetter bool    `json:"higher_is_better"`
	Alpha          float64 `json:"alpha"`
	Confidence     float64 `json:"confidence"` // 1 - Alpha
	// Threshold is T in percent (see Options.Threshold).
	Threshold float64 `json:"threshold_pct"`

	// Diff is Other.Mean - Base.Mean, in the metric's unit.
	Diff float64 `json:"diff"`
	// Change is the relative change of the mean in percent:
	// (Other.Mean/Base.Mean - 1) * 100.
	Change float64 `json:"change_pct"`
	// CILow and CIHigh bound Change (percent) at Confidence, by Fieller's
	// theorem. CIBounded is false when the interval is unbounded (the base
	// mean is not distinguishable from zero); the bounds are 0 then.
	CILow     float64 `json:"ci_low_pct"`
	CIHigh    float64 `json:"ci_high_pct"`
	CIBounded bool    `json:"ci_bounded"`

	// Tested says Welch's t-test ran (n >= 2 each, some variance).
	Tested  bool    `json:"tested"`
	WelchT  float64 `json:"welch_t"`
	WelchDF float64 `json:"welch_df"`
	WelchP  float64 `json:"welch_p"`
	// UTested says the Mann–Whitney U test ran (not all values equal).
	UTested bool    `json:"utest_tested"`
	U       float64 `json:"mann_whitney_u"`
	UP      float64 `json:"mann_whitney_p"`

	// Exact is set when both variants gave constant samples: the
	// difference is taken as exact (deterministic execution), no test.
	Exact bool `json:"exact,omitempty"`

	Verdict Verdict `json:"verdict"`
	// BelowThreshold marks a significant change (Regression or
	// Improvement) smaller than Threshold: real, but smaller than what
	// the pipeline says matters.
	BelowThreshold bool `json:"below_threshold,omitempty"`
	// Reason explains this verdict with the numbers that decided it.
	Reason string `json:"reason"`
	// Resolution is the smallest change this run could have told from
	// none, in percent: the half width of the confidence interval (0 when
	// it is unbounded or exact).
	Resolution float64 `json:"resolution_pct,omitempty"`
	// MoreBoots, for an Inconclusive verdict, is about how many more boots
	// per variant would resolve ±Threshold at the observed noise (0: not
	// estimable, see Hint). Hint says it in words.
	MoreBoots int    `json:"more_boots,omitempty"`
	Hint      string `json:"hint,omitempty"`
	// Rule is the decision rule (the same for every comparison made with
	// the same options).
	Rule  string   `json:"rule"`
	Notes []string `json:"notes,omitempty"`
}

// Worse reports whether the change goes in the metric's bad direction.
func (c Comparison) Worse() bool {
	if c.HigherIsBetter {
		return c.Change < 0
	}
	return c.Change > 0
}

// Label is the verdict with its qualifier: "regression", "regression,
// below ±1%", "equivalent within ±1%", "inconclusive".
func (c Comparison) Label() string {
	switch {
	case c.Verdict.Significant() && c.BelowThreshold:
		return fmt.Sprintf("%s, below ±%s", c.Verdict, FormatPct(c.Threshold))
	case c.Verdict == Equivalent:
		return fmt.Sprintf("%s within ±%s", c.Verdict, FormatPct(c.Threshold))
	}
	return string(c.Verdict)
}

// Short is Label for narrow tables: "regression <1%", "equivalent".
func (c Comparison) Short() string {
	if c.Verdict.Significant() && c.BelowThreshold {
		return fmt.Sprintf("%s <%s", c.Verdict, FormatPct(c.Threshold))
	}
	return string(c.Verdict)
}

// FormatPct renders a threshold: "1%", "0.5%".
func FormatPct(t float64) string { return fmt.Sprintf("%g%%", t) }

// FormatConf renders a confidence level as a percentage a reader can take
// in: 0.95 is "95%", 0.999 "99.9%", and the level of a corrected alpha
// such as 1-0.05/35 "99.86%", not "99.85714285714286%". A level exact in
// four decimals is printed as it is (1-0.05/8 is "99.375%"); any other is
// rounded to two decimals, or to more where two would make it 100%.
func FormatConf(c float64) string {
	p := 100 * c
	if s := strconv.FormatFloat(p, 'f', -1, 64); !strings.Contains(s, ".") || len(s)-strings.Index(s, ".") <= 5 {
		return s + "%" // exact in at most four decimals: 95, 99.375
	}
	for d := 2; d < 8; d++ {
		s := strconv.FormatFloat(p, 'f', d, 64)
		if p < 100 && strings.HasPrefix(s, "100") {
			continue
		}
		return strings.TrimRight(strings.TrimRight(s, "0"), ".") + "%"
	}
	return strconv.FormatFloat(p, 'g', -1, 64) + "%"
}

// FormatAlpha renders a significance level to three significant digits:
// 0.05, 0.01, 0.00143 (0.05/35), never 0.0014285714285714286.
func FormatAlpha(a float64) string { return strconv.FormatFloat(a, 'g', 3, 64) }

// Rule returns the printed decision rule for these options.
func Rule(o Options) string {
	a := o.alpha()
	t := FormatPct(o.threshold())
	conf := FormatConf(1 - a)
	return fmt.Sprintf("regression (improvement): Welch's t-test p < %s and the %s "+
		"confidence interval of the change of the mean (Fieller) excludes 0 "+
		"in the worse (better) direction; a significant change smaller than "+
		"the threshold T = %s is reported as such (below ±%s). Otherwise "+
		"equivalent when the whole CI lies inside ±%s, inconclusive when it "+
		"reaches past ±%s (the run could not tell a change of that size from "+
		"none; the report estimates the boots that would), when it is "+
		"unbounded, or with fewer than 2 samples in a variant. Both variants "+
		"constant (zero variance, e.g. deterministic QEMU): identical values "+
		"are equivalent, different values a change in that direction, taken "+
		"as exact. The Mann-Whitney U p-value is reported as a check, not "+
		"used: with 3 samples per variant it cannot go below 0.1.", FormatAlpha(a), conf, t, t, t, t)
}

// Compare compares other against base: change of the mean with a
// (1-alpha) confidence interval, Welch and Mann–Whitney p-values and a
// verdict. alpha 0 means 0.05.
func Compare(base, other []float64, higherIsBetter bool, alpha float64) Comparison {
	return CompareWith(base, other, Options{HigherIsBetter: higherIsBetter, Alpha: alpha})
}

// CompareWith is Compare with all options.
func CompareWith(base, other []float64, o Options) Comparison {
	a := o.alpha()
	b, nb := finite(base)
	x, nx := finite(other)
	c := Comparison{
		Base: Summarize(base), Other: Summarize(other),
		HigherIsBetter: o.HigherIsBetter, Alpha: a, Confidence: 1 - a,
		Threshold: o.threshold(), Rule: Rule(o),
	}
	if nb > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("dropped %d NaN/Inf value(s) from the baseline", nb))
	}
	if nx > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("dropped %d NaN/Inf value(s) from the compared variant", nx))
	}
	sb, so := c.Base, c.Other
	if sb.N > 0 && so.N > 0 {
		c.Diff = so.Mean - sb.Mean
		if sb.Mean != 0 {
			c.Change = 100 * (so.Mean/sb.Mean - 1)
		}
	}

	// Mann–Whitney U (two-sided), a rank check next to the t-test.
	if len(b) > 0 && len(x) > 0 {
		if r, err := ms.MannWhitneyUTest(b, x, ms.LocationDiffers); err == nil {
			c.UTested, c.U, c.UP = true, r.U, r.P
		} else if errors.Is(err, ms.ErrSamplesEqual) {
			c.UTested, c.U, c.UP = true, float64(len(b)*len(x))/2, 1
		}
	}

	T := c.Threshold
	switch {
	case sb.N < 2 || so.N < 2:
		c.Verdict = Inconclusive
		c.Reason = fmt.Sprintf("n=%d and n=%d: at least 2 samples per variant are needed", sb.N, so.N)
		c.Hint = "boot each variant at least twice (--boots 2 or more) or run a benchmark that reports several iterations per boot"
		return c
	case sb.Mean == 0:
		c.Verdict = Inconclusive
		c.Reason = "the baseline mean is 0: a relative change is undefined"
		return c
	}

	if sb.StdDev == 0 && so.StdDev == 0 {
		c.Exact = true
		c.CILow, c.CIHigh, c.CIBounded = c.Change, c.Change, true
		if sb.Mean == so.Mean {
			c.Tested, c.WelchP = true, 1
			c.Verdict = Equivalent
			c.Reason = fmt.Sprintf("both variants gave the same constant value in every sample (n=%d, n=%d)", sb.N, so.N)
			return c
		}
		c.Tested, c.WelchP, c.WelchDF = true, 0, float64(sb.N+so.N-2)
		c.WelchT = math.Copysign(math.MaxFloat64, so.Mean-sb.Mean)
		c.Verdict = c.direction()
		c.Reason = fmt.Sprintf("both variants constant (zero variance, n=%d and n=%d) with different values: "+
			"the %+.2f%% change is exact, no test needed", sb.N, so.N, c.Change)
		c.sizeUp()
		return c
	}

	// Welch's t-test (two-sided), other - base.
	vb, vo := sb.StdDev*sb.StdDev/float64(sb.N), so.StdDev*so.StdDev/float64(so.N)
	se := math.Sqrt(vb + vo)
	c.WelchT = (so.Mean - sb.Mean) / se
	c.WelchDF = welchDF(vb, vo, sb.N, so.N)
	c.WelchP = tTwoSidedP(c.WelchT, c.WelchDF)
	c.Tested = true

	c.CILow, c.CIHigh, c.CIBounded = fieller(sb.Mean, so.Mean, vb, vo, sb.N, so.N, 1-a)
	if c.CIBounded {
		c.Resolution = (c.CIHigh - c.CILow) / 2
	}

	excludes := c.CIBounded && (c.CILow > 0 || c.CIHigh < 0)
	confPct := FormatConf(1 - a)
	ci := "unbounded"
	if c.CIBounded {
		ci = fmt.Sprintf("[%+.2f%%, %+.2f%%]", c.CILow, c.CIHigh)
	}
	if c.WelchP < a && excludes {
		c.Verdict = c.direction()
		c.Reason = fmt.Sprintf("Welch %s and the %s CI %s excludes 0", pVsAlpha(c.WelchP, a, "<"), confPct, ci)
		c.sizeUp()
		return c
	}
	why := fmt.Sprintf("Welch %s", pVsAlpha(c.WelchP, a, ">="))
	if c.WelchP < a {
		why = fmt.Sprintf("Welch %s but the CI does not exclude 0", pVsAlpha(c.WelchP, a, "<"))
	}
	if c.CIBounded && c.CILow >= -T && c.CIHigh <= T {
		c.Verdict = Equivalent
		c.Reason = fmt.Sprintf("no significant change (%s) and the %s CI %s lies inside ±%s", why, confPct, ci, FormatPct(T))
		return c
	}
	c.Verdict = Inconclusive
	if c.CIBounded {
		c.Reason = fmt.Sprintf("no significant change (%s), but the %s CI %s reaches past ±%s: "+
			"this run could not tell a change smaller than about ±%.3g%% from none",
			why, confPct, ci, FormatPct(T), c.Resolution)
	} else {
		c.Reason = fmt.Sprintf("no significant change (%s) and the %s CI is unbounded: "+
			"the baseline mean is not distinguishable from 0", why, confPct)
	}
	c.MoreBoots, c.Hint = moreBoots(sb, so, T, a, o.SamplesPerBoot)
	return c
}

// moreBoots estimates how many more boots per variant (of perBoot samples
// each) would make the CI narrow enough to resolve ±t wherever the mean
// lands: a half width of t/2 puts the whole CI inside ±t when the change
// is within ±t/2 and excludes 0 when it is not. The half width is
// projected from the observed variances (delta method for the ratio of
// means, Student quantile at the projected Welch degrees of freedom).
func moreBoots(sb, so Summary, t, alpha float64, perBoot int) (int, string) {
	if perBoot <= 0 {
		perBoot = 1
	}
	const maxN = 10_000_000
	if sb.StdDev == 0 && so.StdDev == 0 {
		return 0, ""
	}
	// Half width at n samples per variant: t(df(n)) * S / sqrt(n).
	target := t / 2
	r := so.Mean / sb.Mean
	A, B := r*r*sb.StdDev*sb.StdDev, so.StdDev*so.StdDev
	S := 100 * math.Sqrt(A+B) / math.Abs(sb.Mean)
	need := func(n int) float64 { // the n the quantile at df(n) asks for
		df := float64(n-1) * (A + B) * (A + B) / (A*A + B*B)
		q := TQuantile(1-alpha/2, df)
		return math.Ceil(q * q * S * S / (target * target))
	}
	// Fixed point from below: the normal quantile gives a lower bound,
	// and need(n) only falls as n grows.
	z := math.Sqrt2 * math.Erfinv(1-alpha)
	n := int(math.Max(math.Ceil(z*z*S*S/(target*target)), float64(max(sb.N, so.N))))
	for i := 0; ; i++ {
		if n > maxN {
			return 0, fmt.Sprintf("more than %s samples per variant would be needed to resolve ±%s at this noise: "+
				"reduce the noise (deterministic QEMU, pinned CPUs, more iterations per boot) or raise the threshold",
				groupThousands(maxN), FormatPct(t))
		}
		m := need(n)
		if m <= float64(n) || i == 50 {
			break
		}
		n = int(math.Min(m, maxN+1))
	}
	hi := max(n, max(sb.N, so.N)+1)
	more := hi - min(sb.N, so.N)
	boots := (more + perBoot - 1) / perBoot
	word := "boots"
	if boots == 1 {
		word = "boot"
	}
	return boots, fmt.Sprintf("about %s more %s per variant would resolve ±%s at this noise",
		groupThousands(boots), word, FormatPct(t))
}

// groupThousands writes n with thousands separators (1,234).
func groupThousands(n int) string {
	s := fmt.Sprint(n)
	var b []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	return string(b)
}

func pStr(p float64) string {
	if p < 0.001 {
		return "< 0.001"
	}
	return "= " + fmtP(p)
}

// pVsAlpha is "p < 0.001" or "p = 0.012 < 0.05".
func pVsAlpha(p, a float64, rel string) string {
	if p < 0.001 && a >= 0.001 && rel == "<" {
		return "p < 0.001"
	}
	return fmt.Sprintf("p %s %s %s", pStr(p), rel, FormatAlpha(a))
}

func (c *Comparison) direction() Verdict {
	if c.Worse() {
		return Regression
	}
	return Improvement
}

// sizeUp marks a significant change smaller than the threshold.
func (c *Comparison) sizeUp() {
	if math.Abs(c.Change) < c.Threshold {
		c.BelowThreshold = true
		c.Reason += fmt.Sprintf("; significant but below the ±%s threshold", FormatPct(c.Threshold))
	}
}

// welchDF is the Welch–Satterthwaite degrees of freedom for the difference
// of two means with squared standard errors vb, vo.
func welchDF(vb, vo float64, nb, no int) float64 {
	den := 0.0
	if vb > 0 {
		den += vb * vb / float64(nb-1)
	}
	if vo > 0 {
		den += vo * vo / float64(no-1)
	}
	return (vb + vo) * (vb + vo) / den
}

// tTwoSidedP is P(|T| >= |t|) for Student's t with df degrees of freedom,
// computed from the regularized incomplete beta function directly (no
// 1-CDF cancellation, so tiny p-values keep their precision).
func tTwoSidedP(t, df float64) float64 {
	if math.IsInf(t, 0) {
		return 0
	}
	return mathx.BetaInc(df/(df+t*t), df/2, 0.5)
}

// TQuantile returns the q quantile (0 < q < 1) of Student's t with df
// degrees of freedom.
func TQuantile(q, df float64) float64 {
	if q == 0.5 {
		return 0
	}
	if q < 0.5 {
		return -TQuantile(1-q, df)
	}
	target := 2 * (1 - q) // two-sided tail mass at x
	lo, hi := 0.0, 1.0
	for tTwoSidedP(hi, df) > target {
		lo, hi = hi, hi*2
		if hi > 1e300 {
			return math.Inf(1)
		}
	}
	for i := 0; i < 200; i++ {
		mid := (lo + hi) / 2
		if mid == lo || mid == hi {
			break
		}
		if tTwoSidedP(mid, df) > target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// fieller returns the confidence interval of (mo/mb - 1) in percent by
// Fieller's theorem: the set of ratios r for which mo - r*mb is not
// significantly different from 0, i.e.
//
//	(mo - r mb)^2 <= t^2 (vo + r^2 vb)
//
// with t the Student quantile at the Welch–Satterthwaite degrees of
// freedom of mo - r̂ mb (r̂ = mo/mb). The interval is bounded only when the
// baseline mean is itself significant (mb^2 > t^2 vb).
func fieller(mb, mo, vb, vo float64, nb, no int, conf float64) (lo, hi float64, bounded bool) {
	r := mo / mb
	df := welchDF(r*r*vb, vo, nb, no)
	t := TQuantile(1-(1-conf)/2, df)
	t2 := t * t
	a := mb*mb - t2*vb
	if a <= 0 {
		return 0, 0, false
	}
	bq := mo * mb
	cq := mo*mo - t2*vo
	disc := bq*bq - a*cq
	if disc < 0 {
		return 0, 0, false
	}
	sq := math.Sqrt(disc)
	r1, r2 := (bq-sq)/a, (bq+sq)/a
	if r1 > r2 {
		r1, r2 = r2, r1
	}
	return 100 * (r1 - 1), 100 * (r2 - 1), true
}
