package report

import (
	"fmt"
	"strings"
)

// PerPatch is a series measured patch by patch (pipelines/experiments/perpatch): the
// applied series is a commit range base..tip, and the kernel of each
// variant that has the series was measured at every prefix, so each
// patch is compared with the one before it. Bisection is the search
// inside the series for the first patch of a whole-series regression.
type PerPatch struct {
	// Steps are the base and then every patch, in order.
	Steps []PatchStep `json:"steps,omitempty"`
	// Tables are one per series variant, benchmark and metric: Rows and
	// Comparisons are named by the steps' labels (base -> 1/4 -> 2/4 ...),
	// Chain decomposes the whole change between the patches.
	Tables    []PatchTable     `json:"tables,omitempty"`
	Bisection *SeriesBisection `json:"bisection,omitempty"`
	Notes     []string         `json:"notes,omitempty"`
}

// PatchStep is one prefix of the series.
type PatchStep struct {
	// Label is "base" or "k/n".
	Label   string `json:"label"`
	Commit  string `json:"commit"`
	Subject string `json:"subject,omitempty"`
	// EvaluationID is the stored evaluation that measured this prefix
	// (the whole series' own evaluation for the base and the last patch).
	EvaluationID int64 `json:"evaluation_id,omitempty"`
}

// PatchTable is one series variant's benchmark and metric after every
// patch.
type PatchTable struct {
	// Variant is the variant with the series, Base the one without it
	// (whose samples are the "base" step).
	Variant string `json:"variant"`
	Base    string `json:"base_variant"`
	Benchmark
	Chain *Decomposition `json:"chain,omitempty"`
}

// Movers are the steps of t whose change against the previous step is
// significant and at least the threshold, as "k/n (+x.x%)".
func (t PatchTable) Movers() []string {
	var out []string
	for _, c := range t.Comparisons {
		if c.Verdict.Significant() && !c.BelowThreshold {
			out = append(out, fmt.Sprintf("%s (%s, %s)", c.Other, Pct(c.Change), c.Verdict))
		}
	}
	return out
}

// SeriesBisection is the bisection inside a series of a regression the
// whole series shows (pipelines/experiments/bisect over the applied commits).
type SeriesBisection struct {
	// Status is "found" or "ambiguous" (bisect.Found, bisect.Ambiguous).
	Status    string `json:"status"`
	Variant   string `json:"variant"`
	Benchmark string `json:"benchmark"`
	Metric    string `json:"metric"`
	// Patch is the culprit's position (1-based) of Patches.
	Patch   int    `json:"patch,omitempty"`
	Patches int    `json:"patches"`
	Commit  string `json:"commit,omitempty"`
	Subject string `json:"subject,omitempty"`
	// Change is the culprit against its parent, in percent, with its CI.
	Change    float64 `json:"change_pct"`
	CILow     float64 `json:"ci_low_pct"`
	CIHigh    float64 `json:"ci_high_pct"`
	Confirmed bool    `json:"confirmed"`
	// Builds are the kernels compiled by the bisection (the ends were
	// built by the evaluation), Bound ceil(log2(n)) + 2.
	Builds int `json:"builds"`
	Bound  int `json:"bound"`
	// Candidates are the patches left when skipped steps leave more than
	// one ("k/n subject").
	Candidates []string `json:"candidates,omitempty"`
	// Report is the bisection's own report (report.txt) when written.
	Report string `json:"report,omitempty"`
}

// Sentence says in one sentence which patch the bisection named.
func (b *SeriesBisection) Sentence() string {
	if b.Status != "found" {
		return fmt.Sprintf("Bisecting the %s %s regression inside the series (variant %s) left %d candidate patches: %s.",
			b.Benchmark, b.Metric, b.Variant, len(b.Candidates), strings.Join(b.Candidates, "; "))
	}
	conf := "confirmed: its parent measured good and it measured bad again"
	if !b.Confirmed {
		conf = "NOT confirmed by a second measurement"
	}
	return fmt.Sprintf("Bisected inside the series: patch %d/%d (%s \"%s\") is the first with the %s %s regression (%s against the patch before it, %s; %d kernel build(s) besides the evaluation's own, bound ceil(log2(%d)) + 2 = %d).",
		b.Patch, b.Patches, short(b.Commit, 12), oneLine(b.Subject), b.Benchmark, b.Metric, Pct(b.Change), conf, b.Builds, b.Patches, b.Bound)
}

// perPatchLines renders pp for text (wide tables) or a mail body.
func perPatchLines(pp *PerPatch, width int, wide bool) []string {
	var out []string
	p := func(lines ...string) { out = append(out, lines...) }
	if pp.Bisection != nil {
		p(Wrap(pp.Bisection.Sentence(), width, "", "")...)
		if pp.Bisection.Report != "" && wide {
			p(Wrap("bisection report: "+pp.Bisection.Report, width, "  ", "    ")...)
		}
		p("")
	}
	if len(pp.Tables) == 0 {
		for _, n := range pp.Notes {
			p(Wrap("note: "+n, width, "", "  ")...)
		}
		return out
	}
	p("Per patch (each step against the one before it):")
	for _, s := range pp.Steps {
		p(Wrap(fmt.Sprintf("%-5s %s %s", s.Label, short(s.Commit, 12), oneLine(s.Subject)), width, "  ", "        ")...)
	}
	p("")
	for _, t := range pp.Tables {
		p(Wrap(fmt.Sprintf("%s, %s -> %s:", t.heading(), t.Base, t.Variant), width, "", "  ")...)
		p(statsTable(t.Benchmark, wide).lines("  ", width)...)
		p("")
		p(compTable(t.Benchmark, wide).lines("  ", width)...)
		if m := t.Movers(); len(m) > 0 {
			p(Wrap("moved by: "+strings.Join(m, "; "), width, "  ", "    ")...)
		} else {
			p(Wrap("no single patch moves it by a significant change of at least the threshold", width, "  ", "    ")...)
		}
		if t.Chain != nil {
			p(decompLines(*t.Chain, width, "  ")...)
		}
		p("")
	}
	for _, n := range pp.Notes {
		p(Wrap("note: "+n, width, "", "  ")...)
	}
	return out
}
