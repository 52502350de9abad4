// Package stats compares benchmark Samples between kernel Variants.
//
// For every (benchmark, metric, variant) it summarises the samples
// (Summarize: n, mean, median, stddev, min, max). Compare sets a Variant
// against the baseline: the relative change of the mean with a confidence
// interval (Fieller's theorem for a ratio of two independent means, with
// Welch–Satterthwaite degrees of freedom), Welch's t-test and the
// Mann–Whitney U test, and a Verdict together with the rule that produced
// it (Rule). Verdicts are judged against a threshold T (the smallest change
// that matters, Options.Threshold): regression or improvement when the
// change is significant (marked BelowThreshold when smaller than T),
// equivalent when it is not and the confidence interval lies inside ±T,
// inconclusive when it is not and the interval reaches past ±T — then the
// Comparison estimates how many more boots would resolve ±T at the
// observed noise, so an underpowered run is never read as "no change".
// Decompose splits the change along an ordered isolation chain (A -> B ->
// C) into the share owed to each step; NeedMore decides whether an
// adaptive run should add interleaved samples, until the verdict resolves
// ±T or the budget is spent.
//
// Values that are NaN or infinite are dropped (and counted). No result
// field ever holds NaN or Inf, so every type here marshals to JSON; flags
// (Tested, CIBounded, Defined) say when a number is meaningless.
package stats

import (
	"fmt"
	"math"
	"sort"

	"github.com/patcheval/patcheval/evaluate"
)

// Summary describes one set of values.
type Summary struct {
	N      int     `json:"n"`
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	// StdDev is the sample standard deviation (n-1); 0 when n < 2.
	StdDev float64 `json:"stddev"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// Dropped counts NaN and infinite values that were ignored.
	Dropped int `json:"dropped,omitempty"`
}

// CV is the coefficient of variation in percent (0 when undefined).
func (s Summary) CV() float64 {
	if s.N < 2 || s.Mean == 0 {
		return 0
	}
	return 100 * s.StdDev / math.Abs(s.Mean)
}

// Constant reports whether all (at least two) values were identical.
func (s Summary) Constant() bool { return s.N >= 2 && s.Min == s.Max }

// finite returns xs without NaN and Inf values and how many were dropped.
func finite(xs []float64) ([]float64, int) {
	out := make([]float64, 0, len(xs))
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		out = append(out, x)
	}
	return out, len(xs) - len(out)
}

// Summarize computes n, mean, median, stddev, min and max of xs, ignoring
// NaN and infinite values (counted in Dropped). An empty set gives N == 0
// and zeros.
func Summarize(xs []float64) Summary {
	v, dropped := finite(xs)
	s := Summary{N: len(v), Dropped: dropped}
	if len(v) == 0 {
		return s
	}
	sorted := append([]float64(nil), v...)
	sort.Float64s(sorted)
	s.Min, s.Max = sorted[0], sorted[len(sorted)-1]
	if n := len(sorted); n%2 == 1 {
		s.Median = sorted[n/2]
	} else {
		s.Median = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	s.Mean = mean(v)
	if len(v) >= 2 {
		s.StdDev = math.Sqrt(variance(v, s.Mean))
	}
	if s.Min == s.Max {
		// Avoid rounding noise: identical values have exactly this mean.
		s.Mean, s.StdDev = s.Min, 0
	}
	return s
}

func mean(v []float64) float64 {
	// Kahan summation keeps constant-ish samples (deterministic QEMU)
	// exact to the last digit.
	var sum, c float64
	for _, x := range v {
		y := x - c
		t := sum + y
		c = (t - sum) - y
		sum = t
	}
	return sum / float64(len(v))
}

func variance(v []float64, m float64) float64 {
	var ss float64
	for _, x := range v {
		d := x - m
		ss += d * d
	}
	return ss / float64(len(v)-1)
}

// SampleSet is the values of one (benchmark, metric, variant).
type SampleSet struct {
	Benchmark      string    `json:"benchmark"`
	Metric         string    `json:"metric"`
	Unit           string    `json:"unit,omitempty"`
	Variant        string    `json:"variant"`
	HigherIsBetter bool      `json:"higher_is_better"`
	Values         []float64 `json:"values"`
	Summary        Summary   `json:"summary"`
}

// Sets groups samples by (benchmark, metric, variant), in the order each
// group first appears, and summarises each group. Values keep sample order
// (boot, then iteration, as the runner recorded them).
func Sets(samples []evaluate.Sample) []SampleSet {
	type key struct{ b, m, v string }
	idx := map[key]int{}
	var out []SampleSet
	for _, s := range samples {
		k := key{s.Benchmark, s.Metric, s.Variant}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, SampleSet{Benchmark: s.Benchmark, Metric: s.Metric, Unit: s.Unit,
				Variant: s.Variant, HigherIsBetter: s.HigherIsBetter})
		}
		out[i].Values = append(out[i].Values, s.Value)
	}
	for i := range out {
		out[i].Summary = Summarize(out[i].Values)
	}
	return out
}

// Find returns the set for (benchmark, metric, variant) or nil.
func Find(sets []SampleSet, benchmark, metric, variant string) *SampleSet {
	for i := range sets {
		s := &sets[i]
		if s.Benchmark == benchmark && s.Metric == metric && s.Variant == variant {
			return s
		}
	}
	return nil
}

// fmtP renders a p-value compactly.
func fmtP(p float64) string {
	switch {
	case p < 0.001:
		return "< 0.001"
	case p < 0.01:
		return fmt.Sprintf("%.4f", p)
	default:
		return fmt.Sprintf("%.3f", p)
	}
}

// FormatP renders a p-value the way reports print it ("< 0.001", "0.0123",
// "0.412").
func FormatP(p float64) string { return fmtP(p) }
