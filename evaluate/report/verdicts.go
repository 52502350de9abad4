package report

import (
	"fmt"
	"strings"

	"github.com/patcheval/patcheval/evaluate/stats"
)

// VerdictGroup is one group of the headline: the comparisons that are
// significant and above the threshold T, significant but below it,
// equivalent within ±T, or inconclusive.
type VerdictGroup struct {
	// Key is "significant", "below_threshold", "equivalent" or
	// "inconclusive".
	Key   string `json:"key"`
	Title string `json:"title"`
	// Lines are the comparisons in words (Verdicts' sentences).
	Lines []string `json:"lines"`
}

// Headline groups the comparisons by what they say, in the order a reader
// needs them: significant changes of at least T first, then significant
// ones smaller than T, equivalent ones, and inconclusive ones with what
// would settle them. Empty groups are left out.
func (r *Report) Headline() []VerdictGroup {
	t := stats.FormatPct(r.threshold())
	groups := []VerdictGroup{
		{Key: "significant", Title: "Significant and above ±" + t},
		{Key: "below_threshold", Title: "Significant but below ±" + t},
		{Key: "equivalent", Title: "Equivalent (the CI lies inside ±" + t + ")"},
		{Key: "inconclusive", Title: "Inconclusive (not significant, and the CI reaches past ±" + t + ")"},
	}
	for _, b := range r.Benchmarks {
		for _, c := range b.Comparisons {
			i := 3
			switch {
			case c.Verdict.Significant() && !c.BelowThreshold:
				i = 0
			case c.Verdict.Significant():
				i = 1
			case c.Verdict == stats.Equivalent:
				i = 2
			}
			groups[i].Lines = append(groups[i].Lines, verdictSentence(b, c))
		}
	}
	out := groups[:0]
	for _, g := range groups {
		if len(g.Lines) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// threshold is the comparisons' threshold T (the first one's; a pipeline
// has one), or the default.
func (r *Report) threshold() float64 {
	for _, b := range r.Benchmarks {
		for _, c := range b.Comparisons {
			if c.Threshold > 0 {
				return c.Threshold
			}
		}
	}
	return stats.DefaultThreshold
}

func headlineTitle(r *Report) string {
	return "Verdicts (threshold ±" + stats.FormatPct(r.threshold()) + ")"
}

// Verdicts is one line per comparison ("kill ns/op: voluntary ->
// voluntary-dyn +24.8% (95% CI +24.7% .. +25.0%): regression"), for a
// command's closing summary; Headline groups the same lines.
func Verdicts(r *Report) []string {
	var out []string
	for _, b := range r.Benchmarks {
		for _, c := range b.Comparisons {
			out = append(out, verdictSentence(b, c))
		}
	}
	return out
}

// verdictSentence is one comparison in words. An inconclusive one says
// what the run could not see and what would settle it.
func verdictSentence(b Benchmark, c Comparison) string {
	s := fmt.Sprintf("%s %s: %s -> %s %s", b.Name, b.Metric, c.Base, c.Other, Pct(c.Change))
	switch {
	case c.Exact:
		s += " (exact, constant samples)"
	case c.CIBounded:
		s += fmt.Sprintf(" (%s CI %s)", stats.FormatConf(c.Confidence), ciText(c.Comparison))
	}
	s += ": " + c.Label()
	if c.Verdict == stats.Inconclusive {
		var why []string
		if c.Resolution > 0 {
			why = append(why, fmt.Sprintf("this run could not tell a change smaller than about ±%.3g%% from none", c.Resolution))
		} else {
			why = append(why, c.Reason)
		}
		if c.Hint != "" {
			why = append(why, c.Hint)
		}
		s += ": " + strings.Join(why, "; ")
	}
	return s
}

// headlineLines renders the headline for the terminal.
func headlineLines(r *Report, width int, indent string) []string {
	groups := r.Headline()
	if len(groups) == 0 {
		return nil
	}
	out := []string{indent + headlineTitle(r) + ":"}
	for _, g := range groups {
		out = append(out, Wrap(g.Title+":", width, indent+"  ", indent+"    ")...)
		for _, l := range g.Lines {
			out = append(out, Wrap(l, width, indent+"    ", indent+"      ")...)
		}
	}
	return out
}
