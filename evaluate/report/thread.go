package report

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/mbox/numbers"
)

// ThreadChanges returns the % changes the thread reports for the same
// benchmark and metric as b (mbox/numbers read them into r.Thread), in
// the thread's order. The benchmark matches by what runs: stress-ng's
// stressor ("stress-ng --kill 1 -t 23" and the agent's "kill" and
// "kill-child" loops are the thread's "kill"), perf bench's collection
// and test ("perf bench syscall basic"; the agent's getppid loop is what
// it times), the rcu loop is synchronize_rcu(). The metric matches by
// quantity: a rate (ops/s, bogo-ops/s) or a time per operation (ns/op,
// us/op; a duration only when the thread calls it a mean or latency);
// another statistic than the mean (Max latency) never matches. A rate
// beside a time is shown converted (threadLines says so).
func (r *Report) ThreadChanges(b Benchmark) []numbers.Number {
	key, class := benchKey(b), unitClass(b.Unit)
	if key == "" || class == "" {
		return nil
	}
	var out []numbers.Number
	for _, n := range r.Thread {
		if n.Change == nil || strings.ToLower(n.Benchmark) != key || !sameQuantity(n, class) {
			continue
		}
		out = append(out, n)
	}
	return out
}

var (
	// otherStatRE names a statistic other than the mean patcheval
	// compares ("Max latency", "p99").
	otherStatRE = regexp.MustCompile(`(?i)\b(max|maximum|min|minimum|median|p\d\d|stddev|worst|best)\b`)
	latencyRE   = regexp.MustCompile(`(?i)\b(latency|mean|avg|average|per (op|call|loop))\b`)
)

// sameQuantity says whether the thread's number measures what a
// benchmark of the class does: a rate or a time per operation (a
// duration counts when the thread calls it a mean latency), never another
// statistic than the mean.
func sameQuantity(n numbers.Number, class string) bool {
	c := unitClass(n.Unit)
	where := n.Label + " " + n.Column + " " + n.Metric
	switch {
	case c == "" || otherStatRE.MatchString(where):
		return false
	case c == "time" && !latencyRE.MatchString(where):
		return false
	}
	return class != ""
}

// benchKey names what a benchmark runs, as threads name it: "kill",
// "syscall basic"; "" when unknown.
func benchKey(b Benchmark) string {
	name := strings.TrimSpace(b.Name)
	switch {
	case strings.HasPrefix(name, "stress-ng"):
		for _, f := range strings.Fields(name)[1:] {
			if strings.HasPrefix(f, "--") && len(f) > 2 {
				return strings.TrimPrefix(f, "--")
			}
		}
		return ""
	case strings.HasPrefix(name, "perf bench"):
		return strings.Join(strings.Fields(strings.TrimPrefix(name, "perf bench")), " ")
	}
	switch name {
	case guest.BenchKill, guest.BenchKillChild:
		return "kill"
	case guest.BenchGetppid:
		return "syscall basic"
	case guest.BenchGetpgid:
		return "syscall getpgid"
	case guest.BenchFork:
		return "syscall fork"
	case guest.BenchExecve:
		return "syscall execve"
	case guest.BenchRCU, "synchronize_rcu":
		return "synchronize_rcu"
	}
	return ""
}

// unitClass is "rate" for operations per second, "time/op" for a time
// per operation, "time" for a duration, "" for anything else.
func unitClass(unit string) string {
	u := strings.ToLower(strings.TrimSpace(unit))
	switch {
	case strings.HasSuffix(u, "/op"):
		return "time/op"
	case strings.HasSuffix(u, "ops/s"), strings.HasSuffix(u, "ops/sec"), strings.HasSuffix(u, "op/s"):
		return "rate"
	}
	switch u {
	case "ns", "us", "usec", "µs", "ms", "msec", "s", "sec":
		return "time"
	}
	return ""
}

// isRate says whether a unit class is a rate (the others are times).
func isRate(class string) bool { return class == "rate" }

// reciprocal converts a % change of a rate into the % change of the time
// per operation (and back): 1/(1+c) - 1.
func reciprocal(c float64) float64 { return 100 * (1/(1+c/100) - 1) }

// threadLines sets the thread's changes beside b's comparisons: one line
// per change the thread reports ("thread (POWER10, stress-ng) 6.16
// (eln150): -32% bogo-ops/s (Jirka Hladky, <id> line 14)"), then
// patcheval's ("patcheval (deterministic QEMU, agent loop) voluntary ->
// voluntary+dyn: +24.8% ns/op (95% CI ...), as a rate -19.9% (95% CI
// ...)"). At most limit thread lines (0: all); nil when the thread
// reports nothing for b.
func threadLines(r *Report, b Benchmark, width int, indent string, limit int) []string {
	ns := r.ThreadChanges(b)
	if len(ns) == 0 || len(b.Comparisons) == 0 {
		return nil
	}
	var out []string
	add := func(s string) { out = append(out, Wrap(s, width, indent+"- ", indent+"  ")...) }
	out = append(out, Wrap("Reported in the thread for the same benchmark and metric (other machines and kernels; compare directions and sizes, not values):", width, indent, indent)...)
	shown := ns
	if limit > 0 && len(shown) > limit {
		shown = shown[:limit]
	}
	for _, n := range shown {
		var ctx []string
		for _, c := range []string{n.Platform, n.Tool} {
			if c != "" {
				ctx = append(ctx, oneLine(c))
			}
		}
		s := "thread"
		if len(ctx) > 0 {
			s += " (" + strings.Join(ctx, ", ") + ")"
		}
		if n.Label != "" {
			s += " " + oneLine(n.Label)
			if between := deltaRows(r.Thread, n); between != "" {
				s += " (" + oneLine(between) + ")"
			}
		}
		if n.Column != "" {
			s += " [" + oneLine(n.Column) + "]"
		}
		ch := numbers.FormatChange(*n.Change)
		if n.Approx {
			ch = "~" + strings.TrimPrefix(ch, "+")
		}
		s += ": " + ch
		if n.Unit != "" && n.Unit != "%" {
			s += " " + n.Unit
		}
		if n.Baseline != "" {
			s += " vs " + oneLine(n.Baseline)
		}
		who := oneLine(n.Author)
		if n.Quoted {
			if who == "" {
				who = "quoted"
			} else {
				who += ", quoted"
			}
		}
		where := fmt.Sprintf("line %d", n.Line)
		if n.MessageID != "" {
			where = "<" + oneLine(n.MessageID) + "> " + where
		}
		if who != "" {
			where = who + ", " + where
		}
		add(s + " (" + where + ")")
	}
	if len(ns) > len(shown) {
		add(fmt.Sprintf("... and %d more in the full report", len(ns)-len(shown)))
	}
	target := "QEMU"
	switch {
	case r.Target.Deterministic:
		target = "deterministic QEMU"
	case r.Target.Kind == "ssh":
		target = "ssh " + r.Target.Host
	case r.Target.Kind != "" && r.Target.Kind != "qemu":
		target = r.Target.Kind
	}
	src := b.Source
	if src == "" {
		src = b.Name
	}
	ours := unitClass(b.Unit)
	convert := false
	for _, n := range ns {
		if isRate(unitClass(n.Unit)) != isRate(ours) {
			convert = true
		}
	}
	for _, c := range b.Comparisons {
		s := fmt.Sprintf("patcheval (%s, %s) %s -> %s: %s %s", target, oneLine(src), oneLine(c.Base), oneLine(c.Other), Pct(c.Change), oneLine(b.Unit))
		conf := fmt.Sprintf("%g%% CI", 100*c.Confidence)
		if c.CIBounded && !c.Exact {
			s += fmt.Sprintf(" (%s %s .. %s)", conf, Pct(c.CILow), Pct(c.CIHigh))
		} else if c.Exact {
			s += " (exact)"
		}
		if convert && c.Change > -100 {
			other := "as a rate"
			if isRate(ours) {
				other = "as time per op"
			}
			s += fmt.Sprintf(", %s %s", other, Pct(reciprocal(c.Change)))
			if c.CIBounded && !c.Exact && c.CILow > -100 && c.CIHigh > -100 {
				s += fmt.Sprintf(" (%s %s .. %s)", conf, Pct(reciprocal(c.CIHigh)), Pct(reciprocal(c.CILow)))
			}
		}
		add(s)
	}
	return out
}

var deltaLabelRE = regexp.MustCompile(`(?i)^(delta|diff|change|difference)\b`)

// deltaRows names the rows a "Delta" row compares: the labels of the
// values in the same table and column, "first -> last".
func deltaRows(all []numbers.Number, d numbers.Number) string {
	if !deltaLabelRE.MatchString(d.Label) || d.Value != nil {
		return ""
	}
	var labels []string
	for _, n := range all {
		if n.MessageID == d.MessageID && n.Table == d.Table && n.Value != nil && n.Column == d.Column && n.Line < d.Line &&
			(len(labels) == 0 || labels[len(labels)-1] != n.Label) {
			labels = append(labels, n.Label)
		}
	}
	if len(labels) < 2 {
		return ""
	}
	return labels[0] + " -> " + labels[len(labels)-1]
}
