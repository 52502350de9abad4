package report

import (
	"fmt"
	"strings"

	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/mbox/numbers"
)

// ThreadChanges returns the % changes the thread reports for what b
// runs and in the same kind of quantity (mbox/numbers read them into
// r.Thread), in the thread's order: the candidates. Which of them are set
// beside b's comparisons is ThreadBeside's decision. The benchmark matches
// by what runs: stress-ng's stressor ("stress-ng --kill 1 -t 23" is the
// thread's "kill"), perf bench's collection and test ("perf bench syscall
// basic"), and for the agent's loops the syscall they approximate (the
// "kill" loop, kill(self, 0), is near stress-ng --kill's; the getppid loop
// is what perf bench syscall basic times). The metric matches by
// quantity: a rate (ops/s, bogo-ops/s) or a time per operation (ns/op,
// us/op; a duration only when the thread calls it a mean or latency);
// another statistic than the mean (Max latency) never matches.
func (r *Report) ThreadChanges(b Benchmark) []numbers.Number {
	key, class := benchKey(b), unitClass(b.Unit)
	if key == "" || class == "" {
		return nil
	}
	// stress-ng reports bogo-ops/s in real time and in usr+sys time: a
	// thread's bogo-ops/sec is the first unless it says otherwise.
	usrSys := func(s string) bool { return strings.Contains(strings.ToLower(s), "usr+sys") }
	var out []numbers.Number
	for _, n := range r.Thread {
		if n.Change == nil || strings.ToLower(n.Benchmark) != key || !sameQuantity(n, class) ||
			usrSys(b.Metric) != usrSys(n.Metric+" "+n.Column+" "+n.Label) {
			continue
		}
		out = append(out, n)
	}
	return out
}

var (
	// otherStatRE names a statistic other than the mean patcheval
	// compares ("Max latency", "p99").
	otherStatRE = lazyre.New(`(?i)\b(max|maximum|min|minimum|median|p\d\d|stddev|worst|best)\b`)
	latencyRE   = lazyre.New(`(?i)\b(latency|mean|avg|average|per (op|call|loop))\b`)
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

// threadLines sets the thread's changes beside b's comparisons where they
// are like for like (ThreadBeside): for each kind of change, one line per
// change the thread reports ("thread (POWER10, stress-ng) voluntary ->
// full+PREEMPT_RCU: -30.2% bogo-ops/s (Jirka Hladky, <id> line 24)"), then
// patcheval's comparisons of that kind ("patcheval (deterministic QEMU,
// stress-ng) voluntary -> voluntary+dyn: -20.1% bogo-ops/s (95% CI ...)";
// a time per op beside a rate of the same benchmark is converted, and
// says so). The thread's other numbers for the benchmark follow under
// their own heading, each with why it is not set beside ours, and with no
// figure of patcheval's. At most limit thread lines per section (0: all);
// nil when the thread reports nothing for b.
func threadLines(r *Report, b Benchmark, width int, indent string, limit int) []string {
	bs := r.ThreadBeside(b)
	if len(bs.Groups) == 0 && len(bs.Other) == 0 {
		return nil
	}
	var out []string
	add := func(s string) { out = append(out, Wrap(s, width, indent+"- ", indent+"  ")...) }
	for _, g := range bs.Groups {
		tool := b.Source
		if tool == "" {
			tool = b.Name
		}
		head := fmt.Sprintf("Reported in the thread, like for like (%s, %s, varying %s; other machines and kernels: compare directions and sizes, not values):",
			oneLine(tool), oneLine(benchKey(b)), g.Dim)
		out = append(out, Wrap(head, width, indent, indent)...)
		shown := g.Thread
		if limit > 0 && len(shown) > limit {
			shown = shown[:limit]
		}
		for _, n := range shown {
			add(threadNumberLine(r, n))
		}
		if len(g.Thread) > len(shown) {
			add(fmt.Sprintf("... and %d more in the full report", len(g.Thread)-len(shown)))
		}
		var cs []Comparison
		for _, i := range g.Comparisons {
			cs = append(cs, b.Comparisons[i])
		}
		for _, s := range patchevalLines(r, b, cs, g.Thread) {
			add(s)
		}
	}
	// The others, grouped by why they are not like for like.
	var whys []string
	byWhy := map[string][]numbers.Number{}
	for _, o := range bs.Other {
		if _, ok := byWhy[o.Why]; !ok {
			whys = append(whys, o.Why)
		}
		byWhy[o.Why] = append(byWhy[o.Why], o.Number)
	}
	for _, why := range whys {
		if len(out) > 0 {
			out = append(out, "")
		}
		out = append(out, Wrap(fmt.Sprintf("The thread's other numbers for %s, not set beside patcheval's (%s):", oneLine(benchKey(b)), why), width, indent, indent)...)
		ns := byWhy[why]
		shown := ns
		if limit > 0 && len(shown) > limit {
			shown = shown[:limit]
		}
		for _, n := range shown {
			add(threadNumberLine(r, n))
		}
		if len(ns) > len(shown) {
			add(fmt.Sprintf("... and %d more in the full report", len(ns)-len(shown)))
		}
	}
	return out
}

// threadNumberLine is one thread number: where it was measured, its row,
// its change, who reported it and where.
func threadNumberLine(r *Report, n numbers.Number) string {
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
	return s + " (" + where + ")"
}

// patchevalLines are patcheval's comparisons cs of b, set beside the
// thread's like-for-like numbers ns: a change of a time per op is also
// given as a rate (and back) when some of ns are the other kind; they
// measure the same benchmark with the same tool, so the conversion is
// the benchmark's own.
func patchevalLines(r *Report, b Benchmark, cs []Comparison, ns []numbers.Number) []string {
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
	var out []string
	for _, c := range cs {
		s := fmt.Sprintf("patcheval (%s, %s) %s -> %s: %s %s", target, oneLine(src), oneLine(c.Base), oneLine(c.Other), Pct(c.Change), oneLine(b.Unit))
		conf := stats.FormatConf(c.Confidence) + " CI"
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
		out = append(out, s)
	}
	return out
}

var deltaLabelRE = lazyre.New(`(?i)^(delta|diff|change|difference)\b`)

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
