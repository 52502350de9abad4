package runner

import (
	"fmt"
	"sort"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/pipelines"
)

// adaptiveState is adaptive sampling between min and max boots per variant.
type adaptiveState struct {
	min, max int
	// why says, per comparison and metric, why sampling stops or goes on
	// (the last look's words).
	why []string
}

// next is one look at the samples so far: the round (boot index) to boot
// next and the variants that need it; no variants when every comparison
// is clear or every variant had max boots.
func (a *adaptiveState) next(p *pipelines.Pipeline, samples []evaluate.Sample) (round int, need map[string]bool) {
	round = a.min
	for _, s := range samples {
		round = max(round, s.Boot+1)
	}
	need = a.look(p, samples)
	if round >= a.max {
		return round, nil
	}
	return round, need
}

// alpha is the per-look significance level (Bonferroni over the looks).
func (a *adaptiveState) alpha() float64 {
	return stats.AdaptiveAlpha(stats.AdaptiveOptions{MinN: a.min, MaxN: a.max})
}

// look decides which variants need another boot: both variants of every
// comparison whose verdict is not clear for some benchmark metric.
func (a *adaptiveState) look(p *pipelines.Pipeline, samples []evaluate.Sample) map[string]bool {
	type key struct{ bench, metric, variant string }
	values := map[key][]float64{}
	boots := map[key]map[int]bool{}
	higher := map[key]bool{}
	for _, s := range samples {
		k := key{s.Benchmark, s.Metric, s.Variant}
		values[k] = append(values[k], s.Value)
		if boots[k] == nil {
			boots[k] = map[int]bool{}
		}
		boots[k][s.Boot] = true
		higher[k] = higher[k] || s.HigherIsBetter
	}
	var keys []key
	for k := range values {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].bench != keys[j].bench {
			return keys[i].bench < keys[j].bench
		}
		return keys[i].metric < keys[j].metric
	})
	need := map[string]bool{}
	a.why = nil
	for _, c := range p.Comparisons {
		for _, bk := range keys {
			if bk.variant != c.Base {
				continue
			}
			ok := key{bk.bench, bk.metric, c.Other}
			if values[ok] == nil {
				continue
			}
			// Samples per boot: the step of every look.
			step := max(1, len(values[bk])/max(1, len(boots[bk])))
			h := higher[bk] || higher[ok]
			if !h {
				if dir, known := stats.HigherIsBetter(bk.metric); known {
					h = dir
				}
			}
			more, why := stats.NeedMore(values[bk], values[ok], stats.AdaptiveOptions{HigherIsBetter: h,
				MinN: a.min * step, MaxN: a.max * step, Step: step, Threshold: p.Threshold()})
			a.why = append(a.why, fmt.Sprintf("%s %s %s -> %s: %s", bk.bench, bk.metric, c.Base, c.Other, why))
			if more {
				need[c.Base], need[c.Other] = true, true
			}
		}
	}
	return need
}

func trueKeys(m map[string]bool) []string {
	var k []string
	for x, ok := range m {
		if ok {
			k = append(k, x)
		}
	}
	sort.Strings(k)
	return k
}
