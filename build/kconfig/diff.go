package kconfig

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// SymbolChange is one symbol whose value differs between two final
// configurations.
type SymbolChange struct {
	Symbol string
	A, B   string // values in each config ("n" when absent; strings unquoted)
	// Requested: the symbol is one the variants asked for; otherwise the
	// change is derived, a consequence Kconfig drew by itself.
	Requested bool
	Prompt    bool // the symbol has a prompt (a user can set it)
	Defined   bool // the tree's Kconfig defines the symbol
	Type      Type
	// Rules are the Kconfig lines whose outcome changed from A to B and so
	// explain the change: a default whose condition changed, a select or
	// imply from a symbol that changed, a depends on that became
	// (un)met, the choice's member.
	Rules []Rule
	// Causes are the changed symbols the rules name.
	Causes []string
	// Depth is 0 for requested symbols (and, in DiffTrees, symbols whose
	// own Kconfig lines changed), else 1 + the smallest depth of a cause
	// (-1 when no chain leads back to one).
	Depth int
	// Via is the chain of changed symbols from a requested (or
	// tree-changed) symbol to this one, e.g. PREEMPT_DYNAMIC,
	// PREEMPT_BUILD, PREEMPTION for PREEMPT_RCU.
	Via []string
}

// Mechanical reports a derived change that no user could set and no rule
// in the tree explains from another changed symbol: toolchain probes
// ($(cc-option,...)), values from the environment.
func (c SymbolChange) Mechanical() bool {
	return !c.Requested && !c.Prompt && len(c.Causes) == 0 && !c.treeChanged()
}

// Diff lists every symbol whose value differs between the final configs a
// and b, requested changes first, then derived ones in causal order
// (a select's target after the selecting symbol), each derived change with
// the Kconfig rules that explain it, evaluated from a to b. requested
// names the variants' own symbols (CONFIG_ prefix allowed, values unused).
func Diff(kc *Kconfig, a, b Config, requested map[string]string) []SymbolChange {
	req := map[string]bool{}
	for n := range requested {
		n, _ = normRequest(n, "")
		req[n] = true
	}
	names := map[string]bool{}
	for n := range a {
		names[n] = true
	}
	for n := range b {
		names[n] = true
	}
	changed := map[string]bool{}
	for n := range names {
		if norm(a, n) != norm(b, n) {
			changed[n] = true
		}
	}
	var out []SymbolChange
	for n := range changed {
		c := SymbolChange{Symbol: n, A: norm(a, n), B: norm(b, n), Requested: req[n], Depth: -1}
		if s := kc.Symbols[n]; s != nil {
			c.Defined, c.Prompt, c.Type = s.Defined(), s.HasPrompt(), s.Type
		}
		if c.Requested {
			// A requested choice member: name the member it replaced.
			c.Depth = 0
			rules, _ := kc.explainChange(n, a, b, changed)
			for _, r := range rules {
				if r.Kind == "choice" {
					c.Rules = append(c.Rules, r)
				}
			}
		} else {
			c.Rules, c.Causes = kc.explainChange(n, a, b, changed)
		}
		out = append(out, c)
	}
	order(out)
	return out
}

// order computes Depth and Via (breadth first from the requested symbols
// and from symbols whose own Kconfig lines changed between the trees) and
// sorts: requested, then derived by depth and name, mechanical last.
func order(out []SymbolChange) {
	depth := map[string]int{}
	via := map[string][]string{}
	for i := range out {
		c := &out[i]
		c.Depth, c.Via = -1, nil
		if c.Requested || c.treeChanged() {
			c.Depth = 0
			depth[c.Symbol] = 0
		}
	}
	for progress := true; progress; {
		progress = false
		for i := range out {
			c := &out[i]
			for _, cause := range c.Causes {
				if d, ok := depth[cause]; ok {
					if cur, ok := depth[c.Symbol]; !ok || d+1 < cur {
						depth[c.Symbol] = d + 1
						c.Depth = d + 1
						via[c.Symbol] = append(append([]string{}, via[cause]...), cause)
						progress = true
					}
				}
			}
		}
	}
	for i := range out {
		out[i].Via = via[out[i].Symbol]
	}
	sort.SliceStable(out, func(i, j int) bool {
		x, y := out[i], out[j]
		if x.Requested != y.Requested {
			return x.Requested
		}
		if x.Mechanical() != y.Mechanical() {
			return !x.Mechanical()
		}
		dx, dy := x.Depth, y.Depth
		if dx < 0 {
			dx = 1 << 20
		}
		if dy < 0 {
			dy = 1 << 20
		}
		if dx != dy {
			return dx < dy
		}
		return x.Symbol < y.Symbol
	})
}

func (c SymbolChange) treeChanged() bool {
	for _, r := range c.Rules {
		if r.Changed != "" {
			return true
		}
	}
	return false
}

// DiffTrees is Diff for two final configs made from different trees (a
// base and a patched tree): ka and kb are their Kconfigs. Besides Diff's
// rules (read from kb), it names the Kconfig lines that the patch added or
// removed and that act on a changed symbol (Rule.Changed "added" or
// "removed"), such as a new `select HAVE_PREEMPT_DYNAMIC_KEY` in config
// PPC.
func DiffTrees(ka, kb *Kconfig, a, b Config, requested map[string]string) []SymbolChange {
	out := Diff(kb, a, b, requested)
	for i := range out {
		c := &out[i]
		if c.Requested {
			continue
		}
		c.Rules = append(c.Rules, treeRules(ka, kb, c.Symbol, a, b)...)
	}
	order(out)
	return out
}

// propKey identifies a Kconfig line across two trees (line numbers shift).
func propKey(p *Property) string { return p.Kind.String() + "\x00" + p.Owner + "\x00" + p.Text }

// allProps lists every line that acts on s: its definitions' lines and
// dependencies, and the selects and implies aimed at it.
func allProps(s *Symbol) []*Property {
	if s == nil {
		return nil
	}
	var out []*Property
	for _, d := range s.Defs {
		out = append(out, d.Deps...)
		out = append(out, d.Props...)
	}
	out = append(out, s.SelectedBy...)
	return append(out, s.ImpliedBy...)
}

// choiceDefaults are the `default` lines of the choice s is a member of:
// a release that changes which member a choice defaults to changes the
// members' values with no line of their own changed (6.12's `default
// PROC_MEM_ALWAYS_FORCE` became 7.2's `default PROC_MEM_FORCE_PTRACE`).
func choiceDefaults(s *Symbol) []*Property {
	if s == nil || s.Choice == nil {
		return nil
	}
	return s.Choice.Defaults()
}

// treeRules finds the lines acting on name that only one tree has.
func treeRules(ka, kb *Kconfig, name string, a, b Config) []Rule {
	sa, sb := ka.Symbols[name], kb.Symbols[name]
	switch {
	case !sa.Defined() && sb.Defined():
		return []Rule{{Kind: "config", Pos: sb.Defs[0].Pos, Text: "config " + name, Changed: "added", Note: "symbol added in B's tree"}}
	case sa.Defined() && !sb.Defined():
		return []Rule{{Kind: "config", Pos: sa.Defs[0].Pos, Text: "config " + name, Changed: "removed", Note: "symbol removed in B's tree"}}
	}
	keys := func(ps []*Property) map[string]bool {
		m := map[string]bool{}
		for _, p := range ps {
			m[propKey(p)] = true
		}
		return m
	}
	pa, pb := append(allProps(sa), choiceDefaults(sa)...), append(allProps(sb), choiceDefaults(sb)...)
	ka2, kb2 := keys(pa), keys(pb)
	active := func(kc *Kconfig, p *Property, cfg Config) bool {
		switch p.Kind {
		case PropSelect, PropImply:
			return kc.Eval(And(Sym(p.Owner), p.Cond), cfg) > No
		case PropDefault, PropRange, PropPrompt:
			return kc.Eval(p.Cond, cfg) > No
		}
		return true
	}
	var out []Rule
	for _, p := range pb {
		if !ka2[propKey(p)] && active(kb, p, b) {
			r := ruleOf(p, "line added in B's tree")
			r.Changed = "added"
			out = append(out, r)
		}
	}
	for _, p := range pa {
		if !kb2[propKey(p)] && active(ka, p, a) {
			r := ruleOf(p, "line removed in B's tree")
			r.Changed = "removed"
			out = append(out, r)
		}
	}
	return out
}

func appendUnique(list []string, add ...string) []string {
	for _, a := range add {
		found := false
		for _, l := range list {
			if l == a {
				found = true
				break
			}
		}
		if !found {
			list = append(list, a)
		}
	}
	return list
}

// explainChange finds the rules whose outcome differs between a and b.
func (kc *Kconfig) explainChange(name string, a, b Config, changed map[string]bool) ([]Rule, []string) {
	s := kc.Symbols[name]
	if !s.Defined() {
		return []Rule{{Kind: "config", Text: "CONFIG_" + name, Note: "not defined in this tree's Kconfig"}}, nil
	}
	var rules []Rule
	var causes []string
	cond := func(p *Property, e *Expr) {
		ta, tb := kc.Eval(e, a), kc.Eval(e, b)
		if ta == tb {
			return
		}
		note, syms := changedNote(e, a, b)
		word := "now true"
		switch {
		case tb == No:
			word = "now false"
		case tb == Mod:
			word = "now m"
		}
		if note != "" {
			note = word + ": " + note
		} else {
			note = word
		}
		rules = append(rules, ruleOf(p, note))
		causes = appendUnique(causes, syms...)
	}
	seenDep := map[*Property]bool{}
	for _, d := range s.Defs {
		for _, p := range d.Deps {
			if !seenDep[p] {
				seenDep[p] = true
				cond(p, p.Expr)
			}
		}
		for _, v := range d.Visible {
			if !seenDep[v] {
				seenDep[v] = true
				cond(v, v.Expr)
			}
		}
		for _, p := range d.Props {
			if p.Kind == PropPrompt {
				cond(p, p.Cond)
			}
		}
		// Defaults and ranges: Kconfig takes the first one whose
		// condition holds. Explain a change of which one applies, or of
		// the value of the one that applies in both.
		for _, k := range []PropKind{PropDefault, PropRange} {
			pa, pb := kc.firstActive(d, k, a), kc.firstActive(d, k, b)
			if pa != pb {
				for _, p := range []*Property{pb, pa} {
					if p == nil {
						continue
					}
					before := len(rules)
					cond(p, p.Cond)
					if len(rules) == before && p == pb {
						// Its condition held before too, but an earlier
						// line applied then.
						rules = append(rules, ruleOf(p, "now the first "+k.String()+" that applies"))
					}
				}
				continue
			}
			if pb == nil {
				continue
			}
			// Same line, different value: `default PREEMPTION`,
			// `def_bool X && Y`, `range 1 NR_CPUS`.
			if k == PropDefault && (s.Type == TypeBool || s.Type == TypeTristate) {
				cond(pb, pb.Expr)
			} else if note, syms := changedNote(And(pb.Expr, pb.Expr2), a, b); note != "" {
				rules = append(rules, ruleOf(pb, "value changed: "+note))
				causes = appendUnique(causes, syms...)
			}
		}
	}
	for _, p := range s.SelectedBy {
		kc.reverse(p, a, b, &rules, &causes)
	}
	for _, p := range s.ImpliedBy {
		kc.reverse(p, a, b, &rules, &causes)
	}
	if c := s.Choice; c != nil {
		ca, cb := chosen(c, a), chosen(c, b)
		if ca != cb {
			rules = append(rules, Rule{Kind: "choice", Pos: c.Pos, Text: choiceText(c),
				Note: fmt.Sprintf("member %s -> %s", orNone(ca), orNone(cb))})
			for _, m := range []string{ca, cb} {
				if m != "" && m != name {
					causes = appendUnique(causes, m)
				}
			}
		}
	}
	// Only changed symbols are causes.
	var real []string
	for _, c := range causes {
		if changed[c] && c != name {
			real = append(real, c)
		}
	}
	return rules, real
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// firstActive is d's first property of kind k whose condition holds.
func (kc *Kconfig) firstActive(d *Definition, k PropKind, cfg Config) *Property {
	for _, p := range d.Props {
		if p.Kind == k && kc.Eval(p.Cond, cfg) > No {
			return p
		}
	}
	return nil
}

// reverse adds a select/imply line whose effect changed.
func (kc *Kconfig) reverse(p *Property, a, b Config, rules *[]Rule, causes *[]string) {
	e := And(Sym(p.Owner), p.Cond)
	ta, tb := kc.Eval(e, a), kc.Eval(e, b)
	if ta == tb {
		return
	}
	var parts []string
	var syms []string
	for _, s := range e.Symbols() {
		if norm(a, s) != norm(b, s) {
			parts = append(parts, fmt.Sprintf("%s %s -> %s", s, norm(a, s), norm(b, s)))
			syms = append(syms, s)
		}
	}
	word := "now active"
	if tb == No {
		word = "no longer active"
	}
	note := word
	if len(parts) > 0 {
		note += ": " + strings.Join(parts, ", ")
	}
	*rules = append(*rules, ruleOf(p, note))
	*causes = appendUnique(*causes, syms...)
}

func showValue(v string, t Type) string {
	if t == TypeString {
		return strconv.Quote(v)
	}
	return v
}

// FormatDiff writes the confound report, one symbol a line (further rules
// on continuation lines):
//
//	requested  PREEMPT_DYNAMIC  n -> y
//	derived    PREEMPT_RCU      n -> y  kernel/rcu/Kconfig:21 default y if PREEMPTION (now true: PREEMPTION=y)
//
// Mechanical changes (no prompt, no rule naming another changed symbol:
// toolchain probes, environment) are grouped at the end.
func FormatDiff(w io.Writer, changes []SymbolChange) error {
	var buf bytes.Buffer
	if err := formatDiff(&buf, changes); err != nil {
		return err
	}
	var out strings.Builder
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		if strings.HasSuffix(l, "\n") {
			out.WriteString(strings.TrimRight(strings.TrimSuffix(l, "\n"), " ") + "\n")
		} else {
			out.WriteString(l)
		}
	}
	_, err := io.WriteString(w, out.String())
	return err
}

func formatDiff(w io.Writer, changes []SymbolChange) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	var mech []SymbolChange
	for _, c := range changes {
		if c.Mechanical() {
			mech = append(mech, c)
			continue
		}
		kind := "derived"
		if c.Requested {
			kind = "requested"
		}
		first := ""
		if len(c.Rules) > 0 {
			first = c.Rules[0].String()
		} else if !c.Requested {
			first = "(no Kconfig rule found)"
		}
		if len(c.Via) > 1 {
			first += " [via " + strings.Join(c.Via, " > ") + "]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s -> %s\t%s\n", kind, c.Symbol, showValue(c.A, c.Type), showValue(c.B, c.Type), first)
		for _, r := range c.Rules[min(1, len(c.Rules)):] {
			fmt.Fprintf(tw, "\t\t\t%s\n", r.String())
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(mech) > 0 {
		var parts []string
		for _, c := range mech {
			parts = append(parts, fmt.Sprintf("%s %s -> %s", c.Symbol, showValue(c.A, c.Type), showValue(c.B, c.Type)))
		}
		if _, err := fmt.Fprintf(w, "derived, mechanical (no prompt; toolchain probes, environment or rules not tied to a changed symbol): %s\n", strings.Join(parts, "; ")); err != nil {
			return err
		}
	}
	return nil
}
