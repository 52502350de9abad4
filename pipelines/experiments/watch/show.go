package watch

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
)

// WriteText writes a watch's state, per-tag table (value and 95% CI per
// benchmark and metric) and events.
func WriteText(w io.Writer, h *History) error {
	x := h.Watch
	fmt.Fprintf(w, "watch %s: %s tags %s, pipeline %s, schedule %s", x.Name, x.Remote, x.Tags, x.Pipeline, x.Schedule)
	if x.Branch != "" {
		fmt.Fprintf(w, ", branch %s's head", x.Branch)
	}
	if x.SeriesID != "" {
		fmt.Fprintf(w, ", series %s", x.SeriesID)
	}
	if x.Bisect {
		fmt.Fprint(w, ", bisect")
	}
	fmt.Fprintf(w, "\ntree %s (%s)\n", x.Tree, x.Origin)
	switch {
	case x.LastCheck.IsZero():
		fmt.Fprintln(w, "never checked")
	case x.LastError != "":
		fmt.Fprintf(w, "last check %s FAILED (%s): %s; last good check %s\n", x.LastCheck.UTC().Format("2006-01-02 15:04:05"),
			x.LastErrorKind, x.LastError, orNever(x.LastOK.IsZero(), x.LastOK.UTC().Format("2006-01-02 15:04:05")))
	default:
		fmt.Fprintf(w, "last check %s: %s\n", x.LastCheck.UTC().Format("2006-01-02 15:04:05"), h.CheckSummary())
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{"TAG", "COMMIT", "STATUS", "EVAL"}
	for _, s := range h.Series {
		head = append(head, fmt.Sprintf("%s %s %s [95%% CI]", s.Variant, s.Benchmark, s.Metric))
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for i, t := range h.Tags {
		row := []string{t.Tag, short(t.Commit), t.Status, "-"}
		if t.EvaluationID > 0 {
			row[3] = fmt.Sprint(t.EvaluationID)
		}
		for _, s := range h.Series {
			p := s.Values[i]
			switch {
			case p.N == 0:
				row = append(row, "-")
			case p.CILow == p.CIHigh:
				row = append(row, fmt.Sprintf("%.6g (n=%d)", p.Mean, p.N))
			default:
				row = append(row, fmt.Sprintf("%.6g [%.6g, %.6g] (n=%d)", p.Mean, p.CILow, p.CIHigh, p.N))
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
		if t.ErrorText != "" {
			fmt.Fprintf(tw, "\t%s: %s\n", t.ErrorKind, firstLine(t.ErrorText))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeBuilds(w, h)
	if len(h.Events) > 0 {
		fmt.Fprintln(w, "\nevents:")
	}
	for _, e := range h.Events {
		fmt.Fprintf(w, "  %s %s..%s: %s %s %s %+.1f%% [%+.1f%%, %+.1f%%] (%s)\n", e.Verdict, e.From, e.To, e.Variant, e.Benchmark,
			e.Metric, e.Change, e.CILow, e.CIHigh, e.Reason)
		if len(e.Bisect) > 0 {
			fmt.Fprintf(w, "    bisection: %s\n", bisectLine(e.Bisect))
		}
		var fx Fixed
		if len(e.Fixed) > 0 && json.Unmarshal(e.Fixed, &fx) == nil {
			fmt.Fprintf(w, "    gone on %s (%s against %s): %s\n", fx.Tag, fx.Label, e.From, strings.Join(fx.Lines, "; "))
			if fx.Draft != "" {
				fmt.Fprintf(w, "    reply draft: %s\n", fx.Draft)
			}
		}
	}
	return nil
}

func orNever(never bool, s string) string {
	if never {
		return "never"
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// WriteSVG writes one line plot per series: the mean per tag with its
// 95% CI as a band, tags on the x axis in version order, events marked.
func WriteSVG(w io.Writer, h *History) error {
	const pw, ph, left, right, top, bottom = 720, 240, 80, 20, 30, 60
	n := len(h.Tags)
	height := ph * max(1, len(h.Series))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", pw, height)
	if len(h.Series) == 0 {
		fmt.Fprintf(&b, `<text x="10" y="20">watch %s: no results yet</text>`+"\n", html.EscapeString(h.Watch.Name))
	}
	for si, s := range h.Series {
		y0 := si * ph
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, p := range s.Values {
			if p.N > 0 {
				lo, hi = math.Min(lo, p.CILow), math.Max(hi, p.CIHigh)
			}
		}
		if math.IsInf(lo, 0) {
			continue
		}
		if hi == lo {
			hi, lo = hi+math.Abs(hi)*0.01+1e-9, lo-math.Abs(lo)*0.01-1e-9
		}
		pad := (hi - lo) * 0.1
		lo, hi = lo-pad, hi+pad
		xAt := func(i int) float64 {
			if n <= 1 {
				return float64(left+pw-right) / 2
			}
			return float64(left) + float64(i)*float64(pw-left-right)/float64(n-1)
		}
		yAt := func(v float64) float64 {
			return float64(y0+top) + (hi-v)/(hi-lo)*float64(ph-top-bottom)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s %s %s (%s is better)</text>`+"\n", left, y0+18,
			html.EscapeString(s.Variant), html.EscapeString(s.Benchmark), html.EscapeString(s.Metric),
			map[bool]string{true: "higher", false: "lower"}[s.HigherIsBetter])
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>`+"\n", left, y0+ph-bottom, pw-right, y0+ph-bottom)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.4g</text>`+"\n", left-4, yAt(hi-pad), hi-pad)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.4g</text>`+"\n", left-4, yAt(lo+pad), lo+pad)
		// CI band: upper edge left to right, lower edge back.
		var band, line []string
		for i, p := range s.Values {
			if p.N > 0 {
				band = append(band, fmt.Sprintf("%.1f,%.1f", xAt(i), yAt(p.CIHigh)))
				line = append(line, fmt.Sprintf("%.1f,%.1f", xAt(i), yAt(p.Mean)))
			}
		}
		for i := len(s.Values) - 1; i >= 0; i-- {
			if p := s.Values[i]; p.N > 0 {
				band = append(band, fmt.Sprintf("%.1f,%.1f", xAt(i), yAt(p.CILow)))
			}
		}
		fmt.Fprintf(&b, `<polygon points="%s" fill="#9ecae1" fill-opacity="0.5" stroke="none"/>`+"\n", strings.Join(band, " "))
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#08519c" stroke-width="2"/>`+"\n", strings.Join(line, " "))
		for i, p := range s.Values {
			x := xAt(i)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="end" transform="rotate(-40 %.1f %d)">%s</text>`+"\n", x, y0+ph-bottom+14,
				x, y0+ph-bottom+14, html.EscapeString(h.Tags[i].Tag))
			if p.N > 0 {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="#08519c"><title>%s: %.6g [%.6g, %.6g] n=%d</title></circle>`+"\n",
					x, yAt(p.Mean), html.EscapeString(p.Tag), p.Mean, p.CILow, p.CIHigh, p.N)
			}
		}
		for _, e := range h.Events {
			if e.Variant != s.Variant || e.Benchmark != s.Benchmark || e.Metric != s.Metric {
				continue
			}
			for i, t := range h.Tags {
				if t.Tag == e.To {
					color := "#d62728"
					if e.Verdict != "regression" {
						color = "#2ca02c"
					}
					fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-dasharray="4 3"><title>%s %s..%s %+.1f%%</title></line>`+"\n",
						xAt(i), y0+top, xAt(i), y0+ph-bottom, color, e.Verdict, html.EscapeString(e.From), html.EscapeString(e.To), e.Change)
				}
			}
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeBuilds says per tag what its re-test compiled: the objects the
// compiler compiled of those make built (the rest answered by the
// compiler cache), nothing when the kernels came from the build cache.
func writeBuilds(w io.Writer, h *History) {
	first := true
	for _, t := range h.Tags {
		b := t.Build
		if b == nil {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nbuilds (objects the compiler compiled of those make built; the rest from the compiler cache):")
			first = false
		}
		switch {
		case b.Cached:
			fmt.Fprintf(w, "  %s: from the build cache, nothing compiled\n", t.Tag)
		case b.Objects == 0:
			fmt.Fprintf(w, "  %s: no objects built (%.0f s)\n", t.Tag, b.Seconds)
		default:
			fmt.Fprintf(w, "  %s: %d of %d compiled (%.1f%%), %d from the compiler cache, %.0f s\n", t.Tag, b.Compiled, b.Objects,
				100*float64(b.Compiled)/float64(b.Objects), b.Reused, b.Seconds)
		}
	}
}

// bisectLine says in one line where an event's bisection stands: the
// culprit it found, the candidates left, its error, or how far it is
// (the stored state is JSON with every measurement: --json has it).
func bisectLine(raw []byte) string {
	var b BisectState
	if err := json.Unmarshal(raw, &b); err != nil {
		return "unreadable state: " + err.Error()
	}
	var out string
	switch {
	case b.Status == bisect.Found && b.Culprit != nil:
		conf := "not confirmed"
		if b.Confirmed {
			conf = "confirmed"
		}
		out = fmt.Sprintf("found %.12s %q (%s; %d commit(s), %d build(s), %d measured)", b.Culprit.Hash, b.Culprit.Subject, conf,
			b.Commits, b.Builds, b.Measured)
	case b.Status == bisect.Ambiguous:
		out = fmt.Sprintf("ambiguous: %d candidate(s) left (%d skipped)", len(b.Candidates), b.Skipped)
	case b.Status == BisectFailed:
		out = "failed: " + firstLine(b.Error)
	default:
		out = fmt.Sprintf("%s, %d measurement(s) so far", orQueued(string(b.Status)), len(b.Records))
	}
	if b.Report != "" {
		out += "; report " + b.Report
	}
	return out
}

func orQueued(s string) string {
	if s == "" {
		return BisectQueued
	}
	return s
}
