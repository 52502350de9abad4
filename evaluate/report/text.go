package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// TextOptions steer WriteTextWith.
type TextOptions struct {
	// Verbose lists every config difference (mechanical consequences
	// such as INLINE_* and *_BUILD, toolchain values) with its full rule,
	// instead of counting the folded ones.
	Verbose bool
}

// WriteText renders r for a terminal: the verdicts first, then
// fixed-width tables with all statistics (median, coefficient of
// variation, difference, both p-values) and the config differences as a
// table.
func WriteText(w io.Writer, r *Report) error { return WriteTextWith(w, r, TextOptions{}) }

// WriteTextWith is WriteText with options.
func WriteTextWith(w io.Writer, r *Report, o TextOptions) error {
	t := &textWriter{r: r, bw: bufio.NewWriter(w)}
	t.header()
	t.coverage()
	t.headline()
	t.variants()
	t.confounds(o.Verbose)
	t.tables()
	for _, b := range r.Benchmarks {
		t.benchmark(b)
	}
	t.closing()
	return t.bw.Flush()
}

// textWidth is the textWidth of a text report's wrapped lines.
const textWidth = 100

// textWriter writes one report as text, a section at a time.
type textWriter struct {
	r  *Report
	bw *bufio.Writer
}

// p writes lines.
func (t *textWriter) p(lines ...string) {
	for _, l := range lines {
		t.bw.WriteString(l)
		t.bw.WriteByte('\n')
	}
}

// field writes a header field: the name (10 wide, "" for a
// continuation) and the value wrapped below it; nothing without a value.
func (t *textWriter) field(name, val string) {
	if name != "" {
		name += ":"
	}
	if val != "" {
		t.p(Wrap(val, textWidth, padRight(name, 10), strings.Repeat(" ", 10))...)
	}
}

// header writes the title and what was measured (series, tree, commits,
// arch, target, samples).
func (t *textWriter) header() {
	r, p, field := t.r, t.p, t.field
	title := oneLine(r.Title)
	if title == "" {
		title = "patcheval report"
	}
	p(title, strings.Repeat("=", Width(title)), "")
	s := r.Series
	if s.Title != "" || s.Subject != "" {
		subj := s.Subject
		if subj == "" {
			subj = s.Title
		}
		field("Series", fmt.Sprintf("%s (v%d, %d patch(es)) from %s", oneLine(subj), s.Version, s.Patches, oneLine(s.Author.String())))
		if s.MessageID != "" {
			field("", "<"+oneLine(s.MessageID)+">")
		}
		if s.Link != "" {
			field("", oneLine(s.Link))
		}
	}
	field("Tree", treeText(r.Tree))
	for i, c := range r.Tree.Commits {
		name := ""
		if i == 0 {
			name = "Commits"
		}
		field(name, short(c.Hash, 12)+" "+oneLine(c.Subject))
	}
	field("Arch", oneLine(r.Arch))
	field("Target", targetText(r.Target))
	field("Samples", nText(r))
	p("")
}

// coverage writes the coverage warning and the series' build coverage.
func (t *textWriter) coverage() {
	r, p := t.r, t.p
	if w := r.CoverageWarning(); w != "" {
		p(Wrap(w, textWidth, "", "  ")...)
		p("")
	}
	if cl := r.CoverageLines(); len(cl) > 0 {
		p("Build coverage of the series:")
		for _, l := range cl {
			p(Wrap(l, textWidth, "  ", "    ")...)
		}
		p("")
	}
}

// headline writes the verdicts' headline.
func (t *textWriter) headline() {
	r, p := t.r, t.p
	if h := headlineLines(r, textWidth, ""); len(h) > 0 {
		p(h...)
		p("")
	}
}

// variants lists the variants.
func (t *textWriter) variants() {
	r, p := t.r, t.p
	if len(r.Variants) > 0 {
		p("Variants:")
		for _, v := range r.Variants {
			p(variantLines(v, textWidth, "  ")...)
		}
		p("")
	}
}

// confounds writes the config differences between compared variants (all
// of them, verbose).
func (t *textWriter) confounds(verbose bool) {
	r, p := t.r, t.p
	if len(r.Confounds) > 0 {
		p("Config differences between compared variants:")
		p(confoundTextLines(r.Confounds, textWidth, verbose)...)
		p("")
	}
}

// tables writes the report's own tables.
func (t *textWriter) tables() {
	r, p := t.r, t.p
	for _, tb := range r.Tables {
		p(tb.Name, strings.Repeat("=", Width(tb.Name)))
		p(Wrap(tb.caption(), textWidth, "", "")...)
		p(tb.grid().lines("  ", 0)...)
		p("")
	}
}

// benchmark writes one benchmark's statistics, runs (PerRun), comparisons
// and threads.
func (t *textWriter) benchmark(b Benchmark) {
	r, p := t.r, t.p
	h := b.heading()
	p(h, strings.Repeat("-", Width(h)))
	if b.Description != "" {
		p(Wrap(b.Description, textWidth, "", "")...)
	}
	p(statsTable(b, true).lines("  ", 0)...)
	if r.PerRun {
		for _, row := range b.Rows {
			p("", "  "+row.Variant+":")
			p(runTable(b, row.Variant).lines("    ", 0)...)
		}
	}
	if len(b.Comparisons) > 0 {
		p("")
		p(compTable(b, true).lines("  ", 0)...)
		for _, c := range b.Comparisons {
			p(Wrap(c.Base+" -> "+c.Other+": "+c.Label()+": "+c.Reason, textWidth, "  ", "    ")...)
			if c.LayoutNote != "" {
				p(Wrap("layout control: "+c.LayoutNote, textWidth, "    ", "      ")...)
			}
			if c.Hint != "" {
				p(Wrap("what would settle it: "+c.Hint, textWidth, "    ", "      ")...)
			}
			for _, n := range c.Notes {
				p(Wrap("note: "+n, textWidth, "    ", "      ")...)
			}
		}
		if tl := threadLines(r, b, textWidth, "  ", 0); len(tl) > 0 {
			p("")
			p(tl...)
		}
	}
	p("")
}

// closing writes the decompositions, the per-patch section, the verdict
// rule, the wall time and the notes.
func (t *textWriter) closing() {
	r, p := t.r, t.p
	if len(r.Decompositions) > 0 {
		p("Decomposition:")
		for _, d := range r.Decompositions {
			p(decompLines(d, textWidth, "  ")...)
		}
		p("")
	}
	if r.PerPatch != nil {
		p(perPatchLines(r.PerPatch, textWidth, true)...)
	}
	if r.Rule != "" {
		p(Wrap("Verdict rule: "+r.Rule, textWidth, "", "  ")...)
		p("")
	}
	if len(r.Timings) > 0 {
		p(Wrap("Wall time: "+timingText(r), textWidth, "", "  ")...)
	}
	for _, n := range r.Notes {
		p(Wrap("Note: "+n, textWidth, "", "  ")...)
	}
}

// WriteJSON writes r as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadJSON reads a Report written by WriteJSON.
func ReadJSON(rd io.Reader) (*Report, error) {
	var r Report
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("report: reading JSON: %w", err)
	}
	return &r, nil
}
