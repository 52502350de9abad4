package stats

import (
	"fmt"
	"strings"
)

// NsPerOp converts a rate in operations per second to nanoseconds per
// operation (1e9 / rate).
func NsPerOp(opsPerSec float64) float64 { return 1e9 / opsPerSec }

// OpsPerSec converts nanoseconds per operation to operations per second
// (1e9 / ns).
func OpsPerSec(nsPerOp float64) float64 { return 1e9 / nsPerOp }

// unit scale: rates to ops/s, times per op to ns/op.
var rateUnits = map[string]float64{
	"ops/s": 1, "op/s": 1, "ops/sec": 1, "bogo-ops/s": 1, "bogo-ops/sec": 1,
	"kops/s": 1e3, "mops/s": 1e6,
}

var timeUnits = map[string]float64{
	"ns/op": 1, "us/op": 1e3, "µs/op": 1e3, "ms/op": 1e6, "s/op": 1e9,
}

// Convert converts values (one per sample) between rate units (ops/s,
// kops/s, Mops/s) and time-per-operation units (ns/op, us/op, ms/op,
// s/op). Convert each sample, then summarise: the mean of 1e9/x is not
// 1e9/mean(x).
func Convert(values []float64, from, to string) ([]float64, error) {
	f, t := strings.ToLower(from), strings.ToLower(to)
	out := make([]float64, len(values))
	fr, fRate := rateUnits[f]
	ft, fTime := timeUnits[f]
	tr, tRate := rateUnits[t]
	tt, tTime := timeUnits[t]
	if !(fRate || fTime) {
		return nil, fmt.Errorf("convert: unknown unit %q (want ops/s, kops/s, Mops/s, ns/op, us/op, ms/op or s/op)", from)
	}
	if !(tRate || tTime) {
		return nil, fmt.Errorf("convert: unknown unit %q (want ops/s, kops/s, Mops/s, ns/op, us/op, ms/op or s/op)", to)
	}
	for i, v := range values {
		switch {
		case fRate && tRate:
			out[i] = v * fr / tr
		case fTime && tTime:
			out[i] = v * ft / tt
		case fRate && tTime: // ops/s -> ns/op
			out[i] = NsPerOp(v*fr) / tt
		default: // ns/op -> ops/s
			out[i] = OpsPerSec(v*ft) / tr
		}
	}
	return out, nil
}

// HigherIsBetter guesses a metric's direction from its name or unit:
// rates (ops/s, bogo-ops, throughput, bandwidth) are higher-is-better;
// times per operation, latencies and durations are lower-is-better. known
// is false when the name says neither.
func HigherIsBetter(metric string) (higher, known bool) {
	m := strings.ToLower(strings.TrimSpace(metric))
	switch m {
	case "ns", "us", "µs", "ms", "s", "cycles", "seconds":
		return false, true
	}
	for _, s := range []string{"/op", "latency", "duration", "time", "cycles"} {
		if strings.Contains(m, s) {
			return false, true
		}
	}
	for _, s := range []string{"_ns", "_us", "_ms", "_s"} {
		if strings.HasSuffix(m, s) {
			return false, true
		}
	}
	if strings.HasSuffix(m, "/s") || strings.HasSuffix(m, "/sec") {
		return true, true
	}
	for _, s := range []string{"ops", "throughput", "bandwidth", "iops", "score"} {
		if strings.Contains(m, s) {
			return true, true
		}
	}
	return false, false
}
