package stats

import "github.com/patcheval/patcheval/evaluate"

// Primary drops ops/s samples of benchmarks that also report ns/op: one
// is the reciprocal of the other, so comparing both says everything
// twice. Reports and histories compare what Primary keeps.
func Primary(samples []evaluate.Sample) []evaluate.Sample {
	hasNs := map[string]bool{}
	for _, s := range samples {
		if s.Metric == "ns/op" {
			hasNs[s.Benchmark] = true
		}
	}
	out := samples[:0:0]
	for _, s := range samples {
		if s.Metric == "ops/s" && hasNs[s.Benchmark] {
			continue
		}
		out = append(out, s)
	}
	return out
}
