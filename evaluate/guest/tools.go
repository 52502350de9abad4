package guest

import (
	"fmt"
	"strconv"
	"strings"
)

// Benchmarks that run the users' own tools in the guest (from the
// userland archive, see evaluate/guest/userland) instead of the agent's loops.
// Their Bench.Args are the tool's arguments; results carry Metrics parsed
// from the tool's own output, in the tool's units.
const (
	// BenchStressNG runs `stress-ng ARGS --metrics-brief --yaml FILE`:
	// bogo-ops/s (real time) and bogo-ops/s (usr+sys time) per stressor.
	BenchStressNG = "stress-ng"
	// BenchPerfBench runs `perf bench ARGS`: usec/op and ops/sec.
	BenchPerfBench = "perf-bench"
)

// ToolBenchmarks are the benchmarks that run a tool.
var ToolBenchmarks = []string{BenchStressNG, BenchPerfBench}

// Guest paths of the tools (the userland archive's layout).
const (
	StressNGPath = "/usr/bin/stress-ng"
	PerfPath     = "/usr/bin/perf"
)

// IsTool says whether name is a tool benchmark.
func IsTool(name string) bool { return name == BenchStressNG || name == BenchPerfBench }

// ToolOf is the userland tool a tool benchmark needs ("perf" for
// perf-bench), or "".
func ToolOf(name string) string {
	switch name {
	case BenchStressNG:
		return "stress-ng"
	case BenchPerfBench:
		return "perf"
	}
	return ""
}

// Label names a benchmark in results and reports: the loop's name for the
// agent's loops ("kill"), the command line for tools
// ("stress-ng --kill 1 -t 23", "perf bench syscall basic").
func (b Bench) Label() string {
	switch b.Name {
	case BenchStressNG:
		return strings.Join(append([]string{"stress-ng"}, b.Args...), " ")
	case BenchPerfBench:
		return strings.Join(append([]string{"perf bench"}, b.Args...), " ")
	}
	return b.Name
}

// Source says what measured a benchmark label: "agent loop" for the
// agent's own loops, the tool otherwise. Reports show it beside every
// benchmark, so that an agent loop's ns/op is never read as stress-ng's.
func Source(label string) string {
	for _, b := range Benchmarks {
		if label == b {
			return "agent loop"
		}
	}
	switch {
	case strings.HasPrefix(label, "stress-ng"):
		return "stress-ng"
	case strings.HasPrefix(label, "perf bench"):
		return "perf bench"
	}
	return ""
}

// Metric is one value a tool reported, in the tool's unit.
type Metric struct {
	Name           string  `json:"name"` // "bogo-ops/s (real time)", "usec/op"
	Unit           string  `json:"unit"` // "bogo-ops/s", "usec/op", "ops/sec"
	Value          float64 `json:"value"`
	HigherIsBetter bool    `json:"higher_is_better,omitempty"`
}

// ParseStressNGYAML reads the metrics section of stress-ng's --yaml file:
// for every stressor its bogo-ops/s over real time and over usr+sys time,
// and the stressor's other per-second values as counters ("kill-calls-per-sec").
// With several stressors the metric names carry the stressor.
func ParseStressNGYAML(b []byte) (metrics []Metric, counters map[string]float64, version string, err error) {
	type entry map[string]string
	var entries []entry
	inMetrics := false
	for _, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(line)
		if !strings.HasPrefix(line, " ") && t != "" {
			inMetrics = t == "metrics:"
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(t, "- "), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), "'\"")
		if k == "stress-ng-version" {
			version = v
		}
		if !inMetrics {
			continue
		}
		if strings.HasPrefix(t, "- ") {
			entries = append(entries, entry{})
		}
		if len(entries) > 0 {
			entries[len(entries)-1][k] = v
		}
	}
	if len(entries) == 0 {
		return nil, nil, version, fmt.Errorf("stress-ng --yaml: no metrics section")
	}
	counters = map[string]float64{}
	for _, e := range entries {
		prefix := ""
		if len(entries) > 1 {
			prefix = e["stressor"] + " "
		}
		for _, m := range []struct{ key, name string }{
			{"bogo-ops-per-second-real-time", "bogo-ops/s (real time)"},
			{"bogo-ops-per-second-usr-sys-time", "bogo-ops/s (usr+sys time)"},
		} {
			v, err := strconv.ParseFloat(e[m.key], 64)
			if err != nil {
				return nil, nil, version, fmt.Errorf("stress-ng --yaml: stressor %q: %s %q: %v", e["stressor"], m.key, e[m.key], err)
			}
			metrics = append(metrics, Metric{Name: prefix + m.name, Unit: "bogo-ops/s", Value: v, HigherIsBetter: true})
		}
		for k, s := range e {
			if k == "stressor" || strings.HasPrefix(k, "bogo-ops-per-second") {
				continue
			}
			if v, err := strconv.ParseFloat(s, 64); err == nil {
				counters[prefix+k] = v
			}
		}
	}
	return metrics, counters, version, nil
}

// ParsePerfBench reads `perf bench` output in its default format:
//
//	# Running 'syscall/basic' benchmark:
//	# Executed 10000000 getppid() calls
//	     Total time: 2.797 [sec]
//
//	       2.797448 usecs/op
//	         357468 ops/sec
//
// giving usec/op (lower is better) and ops/sec, with the executed count
// and total time as counters.
func ParsePerfBench(b []byte) (metrics []Metric, counters map[string]float64, err error) {
	counters = map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[1] == "usecs/op":
			v, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return nil, nil, fmt.Errorf("perf bench: %q: %v", line, err)
			}
			metrics = append(metrics, Metric{Name: "usec/op", Unit: "usec/op", Value: v})
		case len(f) == 2 && f[1] == "ops/sec":
			v, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return nil, nil, fmt.Errorf("perf bench: %q: %v", line, err)
			}
			metrics = append(metrics, Metric{Name: "ops/sec", Unit: "ops/sec", Value: v, HigherIsBetter: true})
		case len(f) >= 3 && f[0] == "Total" && f[1] == "time:":
			if v, err := strconv.ParseFloat(f[2], 64); err == nil {
				counters["total_time_s"] = v
			}
		case len(f) >= 3 && f[0] == "#" && f[1] == "Executed":
			if v, err := strconv.ParseFloat(f[2], 64); err == nil {
				counters["executed"] = v
			}
		}
	}
	if len(metrics) == 0 {
		return nil, nil, fmt.Errorf("perf bench: no usecs/op or ops/sec line in its output:\n%s", tail(string(b), 20))
	}
	return metrics, counters, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
