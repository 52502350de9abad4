package report

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The kinds of a ConfigDelta (its JSON "kind").
const (
	KindRequested = "requested" // a Variant asked for it
	KindDerived   = "derived"   // Kconfig changed it (select, default, depends)
	// KindConsequence is a derived change that follows mechanically from
	// another one and says nothing of its own (INLINE_*, *_BUILD): counted,
	// listed only on request.
	KindConsequence = "consequence"
	// KindToolchain is a derived value no rule explains (toolchain
	// probes, environment): ConfigDelta.Mechanical.
	KindToolchain = "toolchain"
	// KindRelease is a change a release made by changing a Kconfig rule
	// (ConfigDelta.Release): neither requested nor derived from the
	// variants' request on one tree.
	KindRelease = "release rule"
)

// Kind is the delta's kind: requested, derived, consequence or toolchain.
// A watched (Highlight) or requested symbol is never a consequence.
func (d ConfigDelta) Kind() string {
	switch {
	case d.Requested:
		return KindRequested
	case d.Release:
		return KindRelease
	case d.Highlight:
		return KindDerived
	case d.Mechanical:
		return KindToolchain
	case strings.Contains(d.Symbol, "INLINE_") || strings.HasSuffix(d.Symbol, "_BUILD"):
		return KindConsequence
	}
	return KindDerived
}

// Folded reports a delta the terminal report only counts unless asked
// for all (consequences and toolchain values).
func (d ConfigDelta) Folded() bool {
	k := d.Kind()
	return k == KindConsequence || k == KindToolchain
}

// MarshalJSON adds the delta's kind and whether the terminal folds it,
// so JSON readers see the same classification as the table.
func (d ConfigDelta) MarshalJSON() ([]byte, error) {
	type plain ConfigDelta
	return json.Marshal(struct {
		plain
		Kind   string `json:"kind"`
		Folded bool   `json:"folded,omitempty"`
	}{plain(d), d.Kind(), d.Folded()})
}

// ordered returns the deltas in reading order: watched symbols first, then
// requested ones, then the other derived ones (in the given, causal,
// order), then consequences and toolchain values.
func (c Confound) ordered() []ConfigDelta {
	var out []ConfigDelta
	rank := func(d ConfigDelta) int {
		switch {
		case d.Highlight && !d.Requested:
			return 0
		case d.Requested, d.Kind() == KindRelease:
			return 1
		case d.Kind() == KindDerived:
			return 2
		case d.Kind() == KindConsequence:
			return 3
		}
		return 4
	}
	for r := 0; r <= 4; r++ {
		for _, d := range c.Deltas {
			if rank(d) == r {
				out = append(out, d)
			}
		}
	}
	return out
}

func valueText(v string) string {
	if v == "" {
		return "unset"
	}
	return v
}

// confoundTable renders one Confound as a table: symbol, a -> b,
// requested or derived, the rule's file:line and text, and the chain of
// changed symbols that led to it. Folded deltas are counted in the
// returned footer lines unless all is set; long rule texts are cut
// unless all is set.
func confoundTable(c Confound, all bool) (*table, []string) {
	t := &table{head: []string{"Symbol", "change", "kind", "rule at", "rule", "via"}}
	folded := map[string][]string{}
	const ruleMax = 48
	for _, d := range c.ordered() {
		if d.Folded() && !all {
			folded[d.Kind()] = append(folded[d.Kind()], d.Symbol)
			continue
		}
		kind := d.Kind()
		if d.Highlight && !d.Requested {
			kind += ", watched"
		}
		rule := oneLine(d.Rule)
		if len(d.ReleaseRules) > 0 {
			rule = oneLine(strings.Join(d.ReleaseRules, "; "))
		} else if !all && Width(rule) > ruleMax {
			head, _ := splitWidth(rule, ruleMax-3)
			rule = head + "..."
		}
		t.rows = append(t.rows, []string{d.Symbol, valueText(d.From) + " -> " + valueText(d.To), kind,
			oneLine(d.Where), rule, strings.Join(d.Via, " > ")})
	}
	var foot []string
	if n := len(folded[KindConsequence]); n > 0 {
		foot = append(foot, fmt.Sprintf("+ %d mechanical consequence(s) (INLINE_*, *_BUILD) not listed", n))
	}
	if n := len(folded[KindToolchain]); n > 0 {
		foot = append(foot, fmt.Sprintf("+ %d toolchain/environment value(s) not listed", n))
	}
	return t, foot
}

// confoundSummary is "1 requested, 3 derived (PREEMPT_RCU watched), 1
// consequence, 1 toolchain value".
func confoundSummary(c Confound) string {
	count := map[string]int{}
	var watched []string
	for _, d := range c.Deltas {
		count[d.Kind()]++
		if d.Highlight && !d.Requested {
			watched = append(watched, d.Symbol)
		}
	}
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(count[KindRequested], "requested")
	add(count[KindRelease], "changed by the release's Kconfig rules")
	der := fmt.Sprintf("%d derived", count[KindDerived])
	if len(watched) > 0 {
		der += " (watched: " + strings.Join(watched, ", ") + ")"
	}
	if count[KindDerived] > 0 {
		parts = append(parts, der)
	}
	add(count[KindConsequence], "consequence(s)")
	add(count[KindToolchain], "toolchain/environment value(s)")
	if len(parts) == 0 {
		return "same configuration"
	}
	return strings.Join(parts, ", ")
}

// confoundTextLines is the terminal form of the confound section.
func confoundTextLines(cs []Confound, width int, all bool) []string {
	var out []string
	anyFolded := false
	for _, c := range cs {
		out = append(out, Wrap(c.Base+" -> "+c.Other+": "+confoundSummary(c), width, "  ", "    ")...)
		if len(c.Deltas) == 0 {
			continue
		}
		t, foot := confoundTable(c, all)
		if len(t.rows) > 0 {
			out = append(out, t.lines("    ", 0)...)
		}
		for _, f := range foot {
			out = append(out, Wrap(f, width, "    ", "      ")...)
			anyFolded = true
		}
	}
	if anyFolded {
		out = append(out, "  (--verbose lists every symbol)")
	}
	return out
}
