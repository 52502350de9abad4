package kconfig

import (
	"fmt"
	"sort"
	"strings"
)

// Rule is one line of the Kconfig sources that explains a value, evaluated
// against the configuration(s) at hand.
type Rule struct {
	Kind string // "depends on", "if", "visible if", "select", "imply", "default", "prompt", "range", "choice", "config"
	Pos  Pos
	Text string // the source line as written, e.g. "default y if PREEMPTION"
	// Owner is the symbol whose entry holds the line when it is not the
	// symbol being explained (the selecting symbol of a select).
	Owner string
	Note  string // the evaluation, e.g. "now true: PREEMPTION=y"
	// Changed is "added" or "removed" when the line itself exists in only
	// one of two trees (DiffTrees); empty otherwise.
	Changed string
}

func (r Rule) String() string {
	s := r.Text
	if r.Pos.File != "" {
		s = r.Pos.String() + " " + s
	}
	if r.Owner != "" {
		s += " (in config " + r.Owner + ")"
	}
	if r.Note != "" {
		s += " (" + r.Note + ")"
	}
	return s
}

func ruleOf(p *Property, note string) Rule {
	r := Rule{Kind: p.Kind.String(), Pos: p.Pos, Text: p.Text, Note: note}
	if p.Kind == PropSelect || p.Kind == PropImply {
		r.Owner = p.Owner
	}
	return r
}

// norm is a symbol's comparable value: "n" when absent.
func norm(cfg Config, name string) string {
	if v, ok := cfg[name]; ok {
		return v
	}
	return "n"
}

// depsExpr is the AND of all of a definition's dependencies.
func depsExpr(d *Definition) *Expr {
	var e *Expr
	for _, p := range d.Deps {
		e = And(e, p.Expr)
	}
	return e
}

// depValue is the symbol's dependency value: the OR over its definitions.
func (kc *Kconfig) depValue(s *Symbol, cfg Config) Tristate {
	v := No
	for _, d := range s.Defs {
		v = maxT(v, kc.Eval(depsExpr(d), cfg))
	}
	return v
}

// promptVisible reports whether some prompt of s is visible in cfg.
func (kc *Kconfig) promptVisible(s *Symbol, cfg Config) (*Property, bool) {
	var hidden *Property
	for _, d := range s.Defs {
		if kc.Eval(depsExpr(d), cfg) == No {
			continue
		}
		vis := Yes
		for _, v := range d.Visible {
			vis = minT(vis, kc.Eval(v.Expr, cfg))
		}
		for _, p := range d.Props {
			if p.Kind != PropPrompt {
				continue
			}
			if vis > No && kc.Eval(p.Cond, cfg) > No {
				return p, true
			}
			hidden = p
		}
	}
	return hidden, false
}

// chosen is the member of c that is y in cfg, "" when none.
func chosen(c *Choice, cfg Config) string {
	for _, m := range c.Members {
		if cfg[m.Name] == "y" {
			return m.Name
		}
	}
	return ""
}

// valuesNote lists "SYM=value" for the symbols of e.
func valuesNote(e *Expr, cfg Config) string {
	var parts []string
	for _, s := range e.Symbols() {
		parts = append(parts, s+"="+norm(cfg, s))
	}
	return strings.Join(parts, ", ")
}

// changedNote lists the symbols of e whose values differ from a to b, with
// their value in b.
func changedNote(e *Expr, a, b Config) (string, []string) {
	var parts, syms []string
	for _, s := range e.Symbols() {
		if norm(a, s) != norm(b, s) {
			parts = append(parts, s+"="+norm(b, s))
			syms = append(syms, s)
		}
	}
	return strings.Join(parts, ", "), syms
}

// failingAtoms returns the smallest sub-expressions that keep e below want.
func (kc *Kconfig) failingAtoms(e *Expr, cfg Config, want Tristate) []*Expr {
	if e == nil || kc.Eval(e, cfg) >= want {
		return nil
	}
	switch e.Op {
	case OpAnd, OpOr:
		return append(kc.failingAtoms(e.L, cfg, want), kc.failingAtoms(e.R, cfg, want)...)
	}
	return []*Expr{e}
}

// atomSymbol is the one symbol whose value makes a failing atom fail:
// SYM, !SYM, or SYM compared with a constant (the rewritten conditional
// dependency `SYM != n`); "" for anything else.
func atomSymbol(a *Expr) string {
	switch a.Op {
	case OpSym:
		return a.Name
	case OpNot:
		if a.L.Op == OpSym {
			return a.L.Name
		}
	case OpEq, OpNe:
		if a.L.Op == OpSym && a.R.Op == OpSym && isConstWord(a.R.Name) {
			return a.L.Name
		}
	}
	return ""
}

// atomText renders an atom with the values that make it fail:
// "HAVE_PREEMPT_DYNAMIC (= n)", "!PREEMPT_RT (PREEMPT_RT = y)".
func atomText(e *Expr, cfg Config) string {
	if e.Op == OpSym {
		if isConstWord(e.Name) {
			return e.Name
		}
		return fmt.Sprintf("%s (= %s)", e.Name, norm(cfg, e.Name))
	}
	if e.Op == OpMacro {
		return e.Name + " (a toolchain or shell test: its result is not known here, counted as n)"
	}
	var vals []string
	for _, s := range e.Symbols() {
		vals = append(vals, s+" = "+norm(cfg, s))
	}
	if len(vals) == 0 {
		return e.String()
	}
	return e.String() + " (" + strings.Join(vals, ", ") + ")"
}

// explainer accumulates the reason text and the rules behind it.
type explainer struct {
	kc    *Kconfig
	cfg   Config
	rules []Rule
	seen  map[string]bool
	kind  string // Problem.Kind
}

func (x *explainer) add(r Rule) {
	for _, o := range x.rules {
		if o.Pos == r.Pos && o.Text == r.Text {
			return
		}
	}
	x.rules = append(x.rules, r)
}

// unmetDeps explains why s's dependencies stay below want, descending
// `depth` more levels into the symbols named.
func (x *explainer) unmetDeps(s *Symbol, want Tristate, depth int) string {
	var parts []string
	var next []*Symbol
	shown := 0
	for _, d := range s.Defs {
		if x.kc.Eval(depsExpr(d), x.cfg) >= want {
			continue
		}
		if shown == 2 {
			parts = append(parts, fmt.Sprintf("(and %d more definitions)", len(s.Defs)-2))
			break
		}
		shown++
		for _, p := range d.Deps {
			if x.kc.Eval(p.Expr, x.cfg) >= want {
				continue
			}
			var atoms []string
			for _, a := range x.kc.failingAtoms(p.Expr, x.cfg, want) {
				atoms = append(atoms, atomText(a, x.cfg))
				if t := x.kc.Symbols[atomSymbol(a)]; t != nil {
					next = append(next, t)
				}
			}
			x.add(ruleOf(p, valuesNote(p.Expr, x.cfg)))
			what := "depends on"
			switch p.Kind {
			case PropIf:
				what = "is inside `" + p.Text + "`:"
			case PropDepends:
				if p.Def == nil || p.Def.Symbol != s {
					what = "is inside a block that depends on"
				}
			}
			parts = append(parts, fmt.Sprintf("%s %s %s [%s]", s.Name, what, strings.Join(atoms, " and "), p.Pos))
		}
	}
	out := strings.Join(parts, "; ")
	if depth > 0 {
		for _, t := range next {
			if w := x.why(t, depth-1); w != "" {
				out += "; " + w
			}
		}
	}
	return out
}

// why explains the value a symbol has in the configuration.
func (x *explainer) why(s *Symbol, depth int) string {
	if x.seen[s.Name] {
		return ""
	}
	x.seen[s.Name] = true
	v := norm(x.cfg, s.Name)
	if !s.Defined() {
		return fmt.Sprintf("%s is not defined in this tree", s.Name)
	}
	if symTri(s.Name, x.cfg) == No {
		if x.kc.depValue(s, x.cfg) == No {
			return x.unmetDeps(s, Yes, depth)
		}
		if !s.HasPrompt() {
			return x.notSelected(s, depth)
		}
		if s.Choice != nil {
			if c := chosen(s.Choice, x.cfg); c != "" {
				x.add(Rule{Kind: "choice", Pos: s.Choice.Pos, Text: choiceText(s.Choice), Note: c + " chosen"})
				return fmt.Sprintf("%s is a member of choice %q [%s] and %s was chosen", s.Name, s.Choice.Prompt, s.Choice.Pos, c)
			}
		}
		if p, ok := x.kc.promptVisible(s, x.cfg); !ok && p != nil {
			x.add(ruleOf(p, valuesNote(p.Cond, x.cfg)))
			return fmt.Sprintf("%s's prompt is hidden [%s: %s] and no default or select makes it y", s.Name, p.Pos, p.Text)
		}
		return fmt.Sprintf("%s is n in the final config (it has a prompt: request CONFIG_%s=y as well)", s.Name, s.Name)
	}
	if sel := x.activeSelects(s); len(sel) > 0 {
		return fmt.Sprintf("%s is %s because it is selected by %s", s.Name, v, strings.Join(sel, ", "))
	}
	if d := x.activeDefault(s); d != nil {
		x.add(ruleOf(d, valuesNote(And(d.Cond, d.Expr), x.cfg)))
		return fmt.Sprintf("%s is %s by `%s` [%s]", s.Name, v, d.Text, d.Pos)
	}
	return fmt.Sprintf("%s is %s in the final config", s.Name, v)
}

// notSelected explains a promptless symbol that stays n.
func (x *explainer) notSelected(s *Symbol, depth int) string {
	var sels []string
	var next []*Symbol
	for _, p := range append(append([]*Property{}, s.SelectedBy...), s.ImpliedBy...) {
		x.add(ruleOf(p, fmt.Sprintf("%s=%s", p.Owner, norm(x.cfg, p.Owner))))
		txt := fmt.Sprintf("%s (= %s) [%s]", p.Owner, norm(x.cfg, p.Owner), p.Pos)
		if p.Cond != nil {
			txt = fmt.Sprintf("%s if %s [%s]", p.Owner, atomText(p.Cond, x.cfg), p.Pos)
		}
		sels = append(sels, txt)
		if t := x.kc.Symbols[p.Owner]; t != nil {
			next = append(next, t)
		}
	}
	var defs []string
	for _, d := range s.Props(PropDefault) {
		x.add(ruleOf(d, valuesNote(And(d.Cond, d.Expr), x.cfg)))
		defs = append(defs, fmt.Sprintf("`%s` [%s]", d.Text, d.Pos))
	}
	var out string
	switch {
	case len(sels) == 0 && len(defs) == 0:
		out = fmt.Sprintf("%s is n because it has no prompt and nothing in this tree (SRCARCH=%s) selects it", s.Name, x.kc.SrcArch)
	case len(sels) == 0:
		out = fmt.Sprintf("%s is n because it has no prompt, nothing selects it, and its defaults are n: %s", s.Name, strings.Join(defs, ", "))
	default:
		out = fmt.Sprintf("%s is n because it has no prompt and is only selected by %s", s.Name, strings.Join(sels, ", "))
		if len(defs) > 0 {
			out += "; its defaults are n: " + strings.Join(defs, ", ")
		}
	}
	if depth > 0 && len(next) <= 4 {
		for _, t := range next {
			if w := x.why(t, depth-1); w != "" {
				out += "; " + w
			}
		}
	}
	return out
}

// activeSelects lists the selects that currently force s on.
func (x *explainer) activeSelects(s *Symbol) []string {
	var out []string
	for _, p := range s.SelectedBy {
		if x.kc.Eval(And(Sym(p.Owner), p.Cond), x.cfg) > No {
			x.add(ruleOf(p, valuesNote(And(Sym(p.Owner), p.Cond), x.cfg)))
			out = append(out, fmt.Sprintf("%s (= %s) [%s: %s]", p.Owner, norm(x.cfg, p.Owner), p.Pos, p.Text))
		}
	}
	return out
}

// activeDefault is the first default of s whose condition holds.
func (x *explainer) activeDefault(s *Symbol) *Property {
	for _, d := range s.Defs {
		if x.kc.Eval(depsExpr(d), x.cfg) == No {
			continue
		}
		for _, p := range d.Props {
			if p.Kind == PropDefault && x.kc.Eval(p.Cond, x.cfg) > No {
				return p
			}
		}
	}
	return nil
}

func choiceText(c *Choice) string {
	if c.Prompt != "" {
		return fmt.Sprintf("choice %q", c.Prompt)
	}
	return "choice " + c.Name
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
