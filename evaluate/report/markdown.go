package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// mdCell escapes a table cell.
func mdCell(s string) string {
	s = oneLine(s)
	s = strings.ReplaceAll(s, `\`, `\\`)
	return strings.ReplaceAll(s, "|", `\|`)
}

// mdText escapes inline text that may contain Markdown syntax.
func mdText(s string) string {
	s = oneLine(s)
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "`", "\\`", "<", "&lt;", ">", "&gt;", "[", `\[`, "]", `\]`, "|", `\|`)
	return r.Replace(s)
}

func mdTable(bw *bufio.Writer, t *table) {
	row := func(cells []string) {
		bw.WriteString("|")
		for _, c := range cells {
			bw.WriteString(" " + mdCell(c) + " |")
		}
		bw.WriteString("\n")
	}
	row(t.head)
	bw.WriteString("|")
	for i := range t.head {
		if i < len(t.right) && t.right[i] {
			bw.WriteString("---:|")
		} else {
			bw.WriteString("---|")
		}
	}
	bw.WriteString("\n")
	for _, r := range t.rows {
		row(r)
	}
}

// WriteMarkdown renders r as Markdown (GitHub flavoured tables).
func WriteMarkdown(w io.Writer, r *Report) error {
	m := &mdWriter{r: r, bw: bufio.NewWriter(w)}
	m.header()
	m.coverage()
	m.headline()
	m.variants()
	m.confounds()
	m.tables()
	for _, b := range r.Benchmarks {
		m.benchmark(b)
	}
	m.decompositions()
	m.perPatch()
	m.ruleAndTimings()
	for _, n := range r.Notes {
		m.f("- Note: %s\n", mdText(n))
	}
	return m.bw.Flush()
}

// mdWriter writes one report as Markdown, a section at a time.
type mdWriter struct {
	r  *Report
	bw *bufio.Writer
}

func (m *mdWriter) f(format string, a ...any) { fmt.Fprintf(m.bw, format, a...) }

// header writes the title, what was measured (series, tree, commits,
// arch, target, samples) and the coverage warning.
func (m *mdWriter) header() {
	r, f := m.r, m.f
	title := r.Title
	if title == "" {
		title = "patcheval report"
	}
	f("# %s\n\n", mdText(title))
	s := r.Series
	if s.Title != "" || s.Subject != "" {
		subj := s.Subject
		if subj == "" {
			subj = s.Title
		}
		f("- **Series:** %s (v%d, %d patch(es)) from %s", mdText(subj), s.Version, s.Patches, mdText(s.Author.String()))
		if s.Link != "" {
			f(" — <%s>", oneLine(s.Link))
		} else if s.MessageID != "" {
			f(" — `<%s>`", strings.ReplaceAll(oneLine(s.MessageID), "`", ""))
		}
		f("\n")
	}
	if t := treeText(r.Tree); t != "" {
		f("- **Tree:** %s\n", mdText(t))
	}
	for _, c := range r.Tree.Commits {
		f("- **Commit:** `%s` %s\n", short(c.Hash, 12), mdText(c.Subject))
	}
	if r.Arch != "" {
		f("- **Arch:** %s\n", mdText(r.Arch))
	}
	f("- **Target:** %s\n", mdText(targetText(r.Target)))
	f("- **Samples:** %s\n\n", mdText(nText(r)))
	if w := r.CoverageWarning(); w != "" {
		f("> **%s**\n\n", mdText(w))
	}
}

// coverage writes the series' build coverage.
func (m *mdWriter) coverage() {
	r, f := m.r, m.f
	if cl := r.CoverageLines(); len(cl) > 0 {
		f("## Build coverage of the series\n\n")
		for _, l := range cl {
			f("- %s\n", mdText(l))
		}
		f("\n")
	}
}

// headline writes the headline's groups of lines.
func (m *mdWriter) headline() {
	r, f := m.r, m.f
	if groups := r.Headline(); len(groups) > 0 {
		f("## %s\n\n", mdText(headlineTitle(r)))
		for _, g := range groups {
			f("**%s:**\n\n", mdText(g.Title))
			for _, l := range g.Lines {
				f("- %s\n", mdText(l))
			}
			f("\n")
		}
	}
}

// variants writes the variants' table.
func (m *mdWriter) variants() {
	r, bw, f := m.r, m.bw, m.f
	if len(r.Variants) > 0 {
		f("## Variants\n\n")
		t := &table{head: []string{"Variant", "Config", "Series", "Cmdline", "Runtime"}}
		for _, v := range r.Variants {
			applied := "not applied"
			if v.Patched {
				applied = "applied"
			}
			if v.Tree != "" {
				applied += "; tree " + v.Tree
			}
			cmd := v.Cmdline
			if cmd == "" {
				cmd = v.Env.Cmdline
			}
			t.rows = append(t.rows, []string{v.Name, strings.Join(v.Config, " "), applied, cmd, strings.Join(v.Runtime, "; ")})
		}
		mdTable(bw, t)
		f("\n")
	}
}

// confounds writes the config differences between variants.
func (m *mdWriter) confounds() {
	r, bw, f := m.r, m.bw, m.f
	if len(r.Confounds) > 0 {
		f("## Config differences\n\n")
		for _, c := range r.Confounds {
			f("%s → %s: %s\n\n", mdText(c.Base), mdText(c.Other), mdText(confoundSummary(c)))
			if len(c.Deltas) == 0 {
				continue
			}
			t, _ := confoundTable(c, false)
			if len(t.rows) > 0 {
				mdTable(bw, t)
				f("\n")
			}
			// A file has room for the folded names, not for their rows.
			for _, kind := range []string{KindConsequence, KindToolchain} {
				what := map[string]string{KindConsequence: "mechanical consequence(s)", KindToolchain: "toolchain/environment value(s)"}[kind]
				var names []string
				for _, d := range c.Deltas {
					if d.Folded() && d.Kind() == kind {
						names = append(names, d.Symbol)
					}
				}
				if len(names) > 0 {
					f("Also %d %s: %s\n\n", len(names), what, mdText(strings.Join(names, ", ")))
				}
			}
		}
	}
}

// tables writes the report's own tables.
func (m *mdWriter) tables() {
	r, bw, f := m.r, m.bw, m.f
	for _, t := range r.Tables {
		f("## %s\n\n%s\n\n", mdText(t.Name), mdText(t.caption()))
		mdTable(bw, t.grid())
		f("\n")
	}
}

// benchmark writes one benchmark's statistics, runs (PerRun),
// comparisons and threads.
func (m *mdWriter) benchmark(b Benchmark) {
	r, bw, f := m.r, m.bw, m.f
	f("## %s\n\n", mdText(b.heading()))
	if b.Description != "" {
		f("%s\n\n", mdText(b.Description))
	}
	mdTable(bw, statsTable(b, true))
	f("\n")
	if r.PerRun {
		for _, row := range b.Rows {
			f("%s:\n\n", mdText(row.Variant))
			mdTable(bw, runTable(b, row.Variant))
			f("\n")
		}
	}
	if len(b.Comparisons) > 0 {
		mdTable(bw, compTable(b, true))
		f("\n")
		for _, c := range b.Comparisons {
			f("- %s → %s: **%s** — %s\n", mdText(c.Base), mdText(c.Other), mdText(c.Label()), mdText(c.Reason))
			if c.LayoutNote != "" {
				f("  Layout control: %s\n", mdText(c.LayoutNote))
			}
			if c.Hint != "" {
				f("  What would settle it: %s\n", mdText(c.Hint))
			}
		}
		f("\n")
		if tl := threadLines(r, b, 1<<20, "", 0); len(tl) > 0 {
			for _, l := range tl {
				f("%s\n", mdText(l))
			}
			f("\n")
		}
	}
}

// decompositions writes the decompositions of a change along a chain
// of variants.
func (m *mdWriter) decompositions() {
	r, bw, f := m.r, m.bw, m.f
	if len(r.Decompositions) > 0 {
		f("## Decomposition\n\n")
		for _, d := range r.Decompositions {
			f("%s %s, %s: %s in total\n\n", mdText(d.Benchmark), mdText(d.Metric), mdText(strings.Join(d.Chain, " -> ")), Pct(d.Total))
			if !d.Defined {
				f("%s\n\n", mdText(d.Reason))
				continue
			}
			t := &table{head: []string{"Step", "change", "share (log)", "share CI", "share (linear)"}, right: []bool{false, true, true, false, true}}
			for _, s := range d.Steps {
				ci := ""
				if s.ShareCI {
					ci = fmt.Sprintf("%.1f%% .. %.1f%%", s.ShareLow, s.ShareHigh)
				}
				t.rows = append(t.rows, []string{s.From + " -> " + s.To, Pct(s.Change), fmt.Sprintf("%.1f%%", s.Share), ci, fmt.Sprintf("%.1f%%", s.LinearShare)})
			}
			mdTable(bw, t)
			f("\n")
		}
	}
}

// perPatch writes the per-patch section.
func (m *mdWriter) perPatch() {
	r, bw, f := m.r, m.bw, m.f
	if pp := r.PerPatch; pp != nil {
		f("## Per patch\n\n")
		if pp.Bisection != nil {
			f("%s\n\n", mdText(pp.Bisection.Sentence()))
		}
		for _, s := range pp.Steps {
			f("- %s `%s` %s\n", mdText(s.Label), short(s.Commit, 12), mdText(s.Subject))
		}
		f("\n")
		for _, t := range pp.Tables {
			f("### %s, %s -> %s\n\n", mdText(t.heading()), mdText(t.Base), mdText(t.Variant))
			mdTable(bw, statsTable(t.Benchmark, true))
			f("\n")
			mdTable(bw, compTable(t.Benchmark, true))
			f("\n")
			if m := t.Movers(); len(m) > 0 {
				f("moved by: %s\n\n", mdText(strings.Join(m, "; ")))
			}
		}
		for _, n := range pp.Notes {
			f("- Note: %s\n", mdText(n))
		}
	}
}

// ruleAndTimings writes the verdict rule and the stages' wall times.
func (m *mdWriter) ruleAndTimings() {
	r, bw, f := m.r, m.bw, m.f
	if r.Rule != "" {
		f("**Verdict rule:** %s\n\n", mdText(r.Rule))
	}
	if len(r.Timings) > 0 {
		t := &table{head: []string{"Stage", "Wall time", "Note"}, right: []bool{false, true, false}}
		for _, s := range r.Timings {
			t.rows = append(t.rows, []string{s.Stage, Dur(s.Duration), s.Note})
		}
		t.rows = append(t.rows, []string{"total", Dur(r.TotalTime()), ""})
		mdTable(bw, t)
		f("\n")
	}
}
