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
	bw := bufio.NewWriter(w)
	p := func(lines ...string) {
		for _, l := range lines {
			bw.WriteString(l)
			bw.WriteByte('\n')
		}
	}
	const width = 100
	title := oneLine(r.Title)
	if title == "" {
		title = "patcheval report"
	}
	p(title, strings.Repeat("=", Width(title)), "")
	field := func(name, val string) {
		if name != "" {
			name += ":"
		}
		if val != "" {
			p(Wrap(val, width, padRight(name, 10), strings.Repeat(" ", 10))...)
		}
	}
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
	if w := r.CoverageWarning(); w != "" {
		p(Wrap(w, width, "", "  ")...)
		p("")
	}
	if cl := r.CoverageLines(); len(cl) > 0 {
		p("Build coverage of the series:")
		for _, l := range cl {
			p(Wrap(l, width, "  ", "    ")...)
		}
		p("")
	}
	if h := headlineLines(r, width, ""); len(h) > 0 {
		p(h...)
		p("")
	}
	if len(r.Variants) > 0 {
		p("Variants:")
		for _, v := range r.Variants {
			p(variantLines(v, width, "  ")...)
		}
		p("")
	}
	if len(r.Confounds) > 0 {
		p("Config differences between compared variants:")
		p(confoundTextLines(r.Confounds, width, o.Verbose)...)
		p("")
	}
	for _, t := range r.Tables {
		p(t.Name, strings.Repeat("=", Width(t.Name)))
		p(Wrap(t.caption(), width, "", "")...)
		p(t.grid().lines("  ", 0)...)
		p("")
	}
	for _, b := range r.Benchmarks {
		h := b.heading()
		p(h, strings.Repeat("-", Width(h)))
		if b.Description != "" {
			p(Wrap(b.Description, width, "", "")...)
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
				p(Wrap(c.Base+" -> "+c.Other+": "+c.Label()+": "+c.Reason, width, "  ", "    ")...)
				if c.LayoutNote != "" {
					p(Wrap("layout control: "+c.LayoutNote, width, "    ", "      ")...)
				}
				if c.Hint != "" {
					p(Wrap("what would settle it: "+c.Hint, width, "    ", "      ")...)
				}
				for _, n := range c.Notes {
					p(Wrap("note: "+n, width, "    ", "      ")...)
				}
			}
			if tl := threadLines(r, b, width, "  ", 0); len(tl) > 0 {
				p("")
				p(tl...)
			}
		}
		p("")
	}
	if len(r.Decompositions) > 0 {
		p("Decomposition:")
		for _, d := range r.Decompositions {
			p(decompLines(d, width, "  ")...)
		}
		p("")
	}
	if r.PerPatch != nil {
		p(perPatchLines(r.PerPatch, width, true)...)
	}
	if r.Rule != "" {
		p(Wrap("Verdict rule: "+r.Rule, width, "", "  ")...)
		p("")
	}
	if len(r.Timings) > 0 {
		p(Wrap("Wall time: "+timingText(r), width, "", "  ")...)
	}
	for _, n := range r.Notes {
		p(Wrap("Note: "+n, width, "", "  ")...)
	}
	return bw.Flush()
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
