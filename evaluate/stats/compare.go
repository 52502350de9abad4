package stats

import (
	"errors"
	"fmt"
	"math"

	"github.com/aclements/go-moremath/mathx"
	ms "github.com/aclements/go-moremath/stats"
)

// Verdict is the outcome of a Comparison.
type Verdict string

const (
	Improvement  Verdict = "improvement"
	Regression   Verdict = "regression"
	NoChange     Verdict = "no significant change"
	Inconclusive Verdict = "inconclusive"
)

// Short is a one-word form for narrow tables.
func (v Verdict) Short() string {
	if v == NoChange {
		return "no change"
	}
	return string(v)
}

// Options steer CompareWith.
type Options struct {
	// HigherIsBetter is the metric's direction (ops/s: true, ns/op and
	// latencies: false).
	HigherIsBetter bool
	// Alpha is the significance level; 0 means 0.05. The confidence
	// interval is at 1-Alpha (95% for the default).
	Alpha float64
	// MinChange is a practical threshold in percent: a significant change
	// smaller than this is reported as no significant change. 0 (the
	// default) reports any significant change.
	MinChange float64
}

func (o Options) alpha() float64 {
	if o.Alpha <= 0 || o.Alpha >= 1 {
		return 0.05
	}
	return o.Alpha
}

// Comparison is one variant set against its baseline.
type Comparison struct {
	Base  Summary `json:"base"`
	Other Summary `json:"other"`

	HigherIsBetter bool    `json:"higher_is_better"`
	Alpha          float64 `json:"alpha"`
	Confidence     float64 `json:"confidence"` // 1 - Alpha
	MinChange      float64 `json:"min_change,omitempty"`

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
	// Reason explains this verdict with the numbers that decided it.
	Reason string `json:"reason"`
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

// Rule returns the printed decision rule for these options.
func Rule(o Options) string {
	a := o.alpha()
	conf := fmt.Sprintf("%g%%", 100*(1-a))
	r := fmt.Sprintf("regression (improvement): Welch's t-test p < %g and the %s "+
		"confidence interval of the change of the mean (Fieller) excludes 0 "+
		"in the worse (better) direction", a, conf)
	if o.MinChange > 0 {
		r += fmt.Sprintf(", and the change is at least %g%%", o.MinChange)
	}
	r += "; otherwise no significant change. Both variants constant " +
		"(zero variance, e.g. deterministic QEMU): identical values are no " +
		"change, different values a change in that direction, taken as exact. " +
		"Fewer than 2 samples in a variant: inconclusive. " +
		"The Mann-Whitney U p-value is reported as a check, not used: with " +
		"3 samples per variant it cannot go below 0.1."
	return r
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
		MinChange: o.MinChange, Rule: Rule(o),
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

	switch {
	case sb.N < 2 || so.N < 2:
		c.Verdict = Inconclusive
		c.Reason = fmt.Sprintf("n=%d and n=%d: at least 2 samples per variant are needed", sb.N, so.N)
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
			c.Verdict = NoChange
			c.Reason = fmt.Sprintf("both variants gave the same constant value in every sample (n=%d, n=%d)", sb.N, so.N)
			return c
		}
		c.Tested, c.WelchP, c.WelchDF = true, 0, float64(sb.N+so.N-2)
		c.WelchT = math.Copysign(math.MaxFloat64, so.Mean-sb.Mean)
		c.Verdict = c.direction()
		c.Reason = fmt.Sprintf("both variants constant (zero variance, n=%d and n=%d) with different values: "+
			"the %+.2f%% change is exact, no test needed", sb.N, so.N, c.Change)
		c.applyThreshold()
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

	excludes := c.CIBounded && (c.CILow > 0 || c.CIHigh < 0)
	confPct := fmt.Sprintf("%g%%", 100*(1-a))
	ci := "unbounded"
	if c.CIBounded {
		ci = fmt.Sprintf("[%+.2f%%, %+.2f%%]", c.CILow, c.CIHigh)
	}
	if c.WelchP < a && excludes {
		c.Verdict = c.direction()
		c.Reason = fmt.Sprintf("Welch %s and the %s CI %s excludes 0", pVsAlpha(c.WelchP, a, "<"), confPct, ci)
		c.applyThreshold()
		return c
	}
	c.Verdict = NoChange
	if c.WelchP >= a {
		c.Reason = fmt.Sprintf("Welch %s (%s CI %s)", pVsAlpha(c.WelchP, a, ">="), confPct, ci)
	} else {
		c.Reason = fmt.Sprintf("Welch %s but the %s CI %s does not exclude 0", pVsAlpha(c.WelchP, a, "<"), confPct, ci)
	}
	return c
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
	return fmt.Sprintf("p %s %s %g", pStr(p), rel, a)
}

func (c *Comparison) direction() Verdict {
	if c.Worse() {
		return Regression
	}
	return Improvement
}

func (c *Comparison) applyThreshold() {
	if c.MinChange > 0 && math.Abs(c.Change) < c.MinChange {
		c.Reason += fmt.Sprintf(", but |%.2f%%| is below the %g%% threshold", c.Change, c.MinChange)
		c.Verdict = NoChange
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
