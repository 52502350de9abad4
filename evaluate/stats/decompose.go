package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// DecomposeMethod describes how shares are computed.
const DecomposeMethod = "share of the total change in log scale: ln(mean_i/mean_i-1) / " +
	"ln(mean_last/mean_first); scale-free, so ops/s and ns/op give the same " +
	"shares, and the steps add up to 100%. LinearShare is the share of the " +
	"absolute difference of the means in the metric's own unit. CIs (when " +
	"samples are given): percentile bootstrap, 2000 resamples per variant, " +
	"fixed seed."

// Step is one link A -> B of an isolation chain.
type Step struct {
	From     string  `json:"from"`
	To       string  `json:"to"`
	FromMean float64 `json:"from_mean"`
	ToMean   float64 `json:"to_mean"`
	// Change of this step in percent (ToMean/FromMean - 1).
	Change float64 `json:"change_pct"`
	// Share of the total change owed to this step, percent (log scale).
	Share float64 `json:"share_pct"`
	// LinearShare is the share of the absolute difference, percent.
	LinearShare float64 `json:"linear_share_pct"`
	// ShareLow/ShareHigh bound Share (bootstrap) when ShareCI is set.
	ShareLow  float64 `json:"share_low_pct,omitempty"`
	ShareHigh float64 `json:"share_high_pct,omitempty"`
	ShareCI   bool    `json:"share_ci,omitempty"`
}

// Decomposition splits the change first -> last of an ordered isolation
// chain (e.g. voluntary -> lazy -> full) into its steps.
type Decomposition struct {
	Chain []string `json:"chain"`
	// Total change first -> last in percent.
	Total float64 `json:"total_pct"`
	Steps []Step  `json:"steps"`
	// Defined is false when the total change is zero (shares undefined);
	// Reason says why.
	Defined    bool    `json:"defined"`
	Reason     string  `json:"reason,omitempty"`
	Method     string  `json:"method"`
	Confidence float64 `json:"confidence,omitempty"`
}

// Decompose computes each step's share of the total change along chain
// from the variants' means. Means must be positive.
func Decompose(chain []string, means map[string]float64) (Decomposition, error) {
	if len(chain) < 2 {
		return Decomposition{}, fmt.Errorf("decompose: the chain %q needs at least 2 variants", chain)
	}
	m := make([]float64, len(chain))
	for i, v := range chain {
		x, ok := means[v]
		if !ok {
			return Decomposition{}, fmt.Errorf("decompose: no mean for variant %q of chain %q", v, chain)
		}
		if !(x > 0) || math.IsInf(x, 0) {
			return Decomposition{}, fmt.Errorf("decompose: mean of variant %q is %g; shares need positive means", v, x)
		}
		m[i] = x
	}
	d := Decomposition{Chain: append([]string(nil), chain...), Method: DecomposeMethod}
	first, last := m[0], m[len(m)-1]
	d.Total = 100 * (last/first - 1)
	logTotal := math.Log(last / first)
	absTotal := last - first
	d.Defined = last != first
	if !d.Defined {
		d.Reason = fmt.Sprintf("%s and %s have the same mean: there is no total change to share", chain[0], chain[len(chain)-1])
	}
	for i := 1; i < len(chain); i++ {
		s := Step{From: chain[i-1], To: chain[i], FromMean: m[i-1], ToMean: m[i],
			Change: 100 * (m[i]/m[i-1] - 1)}
		if d.Defined {
			s.Share = 100 * math.Log(m[i]/m[i-1]) / logTotal
			s.LinearShare = 100 * (m[i] - m[i-1]) / absTotal
		}
		d.Steps = append(d.Steps, s)
	}
	return d, nil
}

// DecomposeSamples is Decompose on the samples' means, with bootstrap
// confidence intervals (at confidence, 0 means 0.95) for each step's share.
func DecomposeSamples(chain []string, samples map[string][]float64, confidence float64) (Decomposition, error) {
	if confidence <= 0 || confidence >= 1 {
		confidence = 0.95
	}
	means := map[string]float64{}
	vals := map[string][]float64{}
	for _, v := range chain {
		xs, dropped := finite(samples[v])
		_ = dropped
		if len(xs) == 0 {
			return Decomposition{}, fmt.Errorf("decompose: no samples for variant %q of chain %q", v, chain)
		}
		vals[v] = xs
		means[v] = Summarize(xs).Mean
	}
	d, err := Decompose(chain, means)
	if err != nil || !d.Defined {
		return d, err
	}
	const B = 2000
	rng := rand.New(rand.NewPCG(0x9e3779b97f4a7c15, 0x2545f4914f6cdd1d))
	shares := make([][]float64, len(d.Steps))
	bm := make([]float64, len(chain))
	for it := 0; it < B; it++ {
		for i, v := range chain {
			xs := vals[v]
			var s float64
			for range xs {
				s += xs[rng.IntN(len(xs))]
			}
			bm[i] = s / float64(len(xs))
		}
		lt := math.Log(bm[len(bm)-1] / bm[0])
		if lt == 0 || math.IsNaN(lt) {
			continue
		}
		for i := 1; i < len(bm); i++ {
			shares[i-1] = append(shares[i-1], 100*math.Log(bm[i]/bm[i-1])/lt)
		}
	}
	d.Confidence = confidence
	for i := range d.Steps {
		s := shares[i]
		if len(s) < B/2 {
			continue
		}
		sort.Float64s(s)
		lo := s[int(math.Floor((1-confidence)/2*float64(len(s)-1)))]
		hi := s[int(math.Ceil((1+confidence)/2*float64(len(s)-1)))]
		d.Steps[i].ShareLow, d.Steps[i].ShareHigh, d.Steps[i].ShareCI = lo, hi, true
	}
	return d, nil
}
