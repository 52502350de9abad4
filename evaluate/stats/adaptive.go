package stats

import "fmt"

// AdaptiveOptions steer NeedMore.
type AdaptiveOptions struct {
	HigherIsBetter bool
	// Alpha is the overall significance level; 0 means 0.05.
	Alpha float64
	// MinN is the minimum number of samples per variant before any
	// decision; 0 means 3.
	MinN int
	// MaxN is the budget: the most samples per variant. Must be >= MinN.
	MaxN int
	// Step is how many samples each look adds per variant (a boot that
	// runs the benchmark 5 times adds 5); 0 means 1. It sets the number of
	// possible looks, K = (MaxN-MinN)/Step + 1.
	Step int
	// Threshold is T in percent (Options.Threshold; 0 means
	// DefaultThreshold). Sampling aims at resolving ±T: it stops once the
	// verdict is no longer inconclusive, i.e. the change is significant or
	// the whole confidence interval lies inside ±T (equivalent).
	Threshold float64
}

// NeedMore says whether another interleaved run of both variants is
// needed, and why (or why not). It stops when the verdict resolves ±T
// (regression, improvement or equivalent, not inconclusive) or the budget
// is spent; a run that is merely not significant goes on.
//
// Sequential looks inflate false positives, so every interim look (n <
// MaxN) tests at Alpha/K, K = MaxN-MinN+1 the number of possible looks
// (Bonferroni); the final verdict should be computed by CompareWith at
// Alpha once sampling stopped.
func NeedMore(base, other []float64, o AdaptiveOptions) (bool, string) {
	minN := o.MinN
	if minN <= 0 {
		minN = 3
	}
	maxN := o.MaxN
	if maxN < minN {
		maxN = minN
	}
	alpha := Options{Alpha: o.Alpha}.alpha()
	sb, so := Summarize(base), Summarize(other)
	n := sb.N
	if so.N < n {
		n = so.N
	}
	if n < minN {
		return true, fmt.Sprintf("n=%d < minimum %d per variant", n, minN)
	}
	looks := o.looks(minN, maxN)
	a := alpha / float64(looks)
	step := max(o.Step, 1)
	c := CompareWith(base, other, Options{HigherIsBetter: o.HigherIsBetter, Alpha: a, Threshold: o.Threshold, SamplesPerBoot: step})
	switch {
	case c.Exact:
		return false, fmt.Sprintf("clear at n=%d: %s (%s)", n, c.Label(), c.Reason)
	case c.Verdict.Significant():
		return false, fmt.Sprintf("clear at n=%d: %s, %s (interim alpha %.3g = %g/%d looks)", n, c.Label(), c.Reason, a, alpha, looks)
	case c.Verdict == Equivalent:
		return false, fmt.Sprintf("clear at n=%d: equivalent, the CI [%+.2f%%, %+.2f%%] lies within ±%s (interim alpha %.3g)",
			n, c.CILow, c.CIHigh, FormatPct(c.Threshold), a)
	case n >= maxN:
		why := fmt.Sprintf("budget spent: n=%d of %d per variant and still inconclusive (%s)", n, maxN, c.Reason)
		if c.Hint != "" {
			why += "; " + c.Hint
		}
		return false, why
	}
	return true, fmt.Sprintf("unclear at n=%d of %d: %s", n, maxN, c.Reason)
}

// AdaptiveAlpha is the per-look significance level NeedMore uses
// (Alpha/K over the K possible looks); compute the final verdict of an
// adaptive run with it to keep the overall false-positive rate at Alpha.
func AdaptiveAlpha(o AdaptiveOptions) float64 {
	minN := o.MinN
	if minN <= 0 {
		minN = 3
	}
	maxN := o.MaxN
	if maxN < minN {
		maxN = minN
	}
	return Options{Alpha: o.Alpha}.alpha() / float64(o.looks(minN, maxN))
}

// looks is the number of possible looks between minN and maxN samples.
func (o AdaptiveOptions) looks(minN, maxN int) int {
	step := o.Step
	if step <= 0 {
		step = 1
	}
	return (maxN-minN)/step + 1
}
