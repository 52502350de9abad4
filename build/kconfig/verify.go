package kconfig

import (
	"fmt"
	"strings"
)

// Problem is a requested symbol that does not hold its requested value in
// the final configuration, with the reason from the Kconfig sources.
type Problem struct {
	Symbol    string // without CONFIG_
	Requested string
	Got       string // "n" when the symbol is absent from the final config
	// Kind classifies the reason: "missing" (no such symbol in the
	// tree), "depends" (unmet depends on / if / menu), "choice" (another
	// member won, or a choice needs this one), "select" (forced by a
	// select), "no-prompt" (not user-settable), "hidden-prompt" (prompt
	// condition false), "range", "type" (value invalid for the type),
	// "modules" (m without MODULES) or "other".
	Kind   string
	Reason string // one line
	Rules  []Rule // the Kconfig lines behind the reason
}

func (p Problem) String() string {
	return fmt.Sprintf("CONFIG_%s=%s requested, got %s: %s", p.Symbol, p.Requested, p.Got, p.Reason)
}

// normRequest strips CONFIG_ from a name and quotes from a value.
func normRequest(name, val string) (string, string) {
	name = strings.TrimPrefix(strings.TrimSpace(name), "CONFIG_")
	val = strings.TrimSpace(val)
	if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
		if s, err := unquote(val); err == nil {
			val = s
		}
	}
	return name, val
}

// sameValue compares a requested and a final value of s.
func sameValue(s *Symbol, want, got string) bool {
	if want == got {
		return true
	}
	if s != nil && (s.Type == TypeString) {
		return false
	}
	a, aok := parseNumber(want)
	b, bok := parseNumber(got)
	if aok && bok {
		return a == b
	}
	if s != nil && s.Type == TypeHex {
		a, aok = parseNumber("0x" + strings.TrimPrefix(strings.ToLower(want), "0x"))
		b, bok = parseNumber("0x" + strings.TrimPrefix(strings.ToLower(got), "0x"))
		return aok && bok && a == b
	}
	return false
}

// Verify checks that every requested symbol (name with or without CONFIG_,
// value as in a .config) holds its requested value in final, the config
// after `make olddefconfig`, and explains each one that does not from the
// Kconfig sources. Problems come sorted by symbol name; none means the
// configuration is as asked.
func Verify(kc *Kconfig, final Config, requested map[string]string) []Problem {
	req := map[string]string{}
	for n, v := range requested {
		n, v = normRequest(n, v)
		req[n] = v
	}
	var out []Problem
	for _, name := range sortedKeys(req) {
		want := req[name]
		got := norm(final, name)
		s := kc.Symbols[name]
		if sameValue(s, want, got) || (want == "" && got == "n" && s != nil && s.Type == TypeString) {
			continue
		}
		x := &explainer{kc: kc, cfg: final, seen: map[string]bool{name: true}}
		reason := x.verify(s, name, want, got, req)
		out = append(out, Problem{Symbol: name, Requested: want, Got: got, Kind: x.kind, Reason: reason, Rules: x.rules})
	}
	return out
}

// verify explains why name (symbol s) is got and not want in x.cfg: the
// first of the checks below that applies, from the symbol's existence
// and type to its dependencies, choice, selects, prompt and range.
func (x *explainer) verify(s *Symbol, name, want, got string, req map[string]string) string {
	if !s.Defined() {
		return x.missing(s, name)
	}
	if msg, ok := x.badValue(s, name, want); ok {
		return msg
	}
	wantT := x.wantTristate(s, name, want)
	if msg, ok := x.modulesOff(s, name, want, got); ok {
		return msg
	}
	// Dependencies not met: the symbol cannot reach the value.
	if want != "n" && x.kc.depValue(s, x.cfg) < wantT {
		x.kind = "depends"
		return x.unmetDeps(s, wantT, 2)
	}
	if msg, ok := x.choiceLost(s, name, want, got, req); ok {
		return msg
	}
	if msg, ok := x.forcedHigher(s, name, got, wantT); ok {
		return msg
	}
	if msg, ok := x.noVisiblePrompt(s, name, want); ok {
		return msg
	}
	if msg, ok := x.outOfRange(s, name, want, got); ok {
		return msg
	}
	if want == "m" && got == "y" {
		if sel := x.activeSelects(s); len(sel) > 0 {
			x.kind = "select"
			return fmt.Sprintf("%s is forced to y by select from %s", name, strings.Join(sel, ", "))
		}
	}
	if want == "y" && got == "m" {
		x.kind = "depends"
		return x.unmetDeps(s, Yes, 1) + " (dependencies allow only m)"
	}
	x.kind = "other"
	return fmt.Sprintf("%s is %s in the final config; no Kconfig rule explains why (was the request overridden by a later fragment line?)", name, got)
}

// missing explains a symbol no Kconfig file of the tree defines (naming
// a select or imply of it, if any).
func (x *explainer) missing(s *Symbol, name string) string {
	msg := fmt.Sprintf("CONFIG_%s does not exist in this tree: no Kconfig file for SRCARCH=%s defines it", name, x.kc.SrcArch)
	if s != nil && len(s.SelectedBy)+len(s.ImpliedBy) > 0 {
		p := append(append([]*Property{}, s.SelectedBy...), s.ImpliedBy...)[0]
		x.add(ruleOf(p, ""))
		msg += fmt.Sprintf(" (it is only named by `%s` in config %s [%s])", p.Text, p.Owner, p.Pos)
	}
	x.kind = "missing"
	return msg
}

// badValue explains a value the symbol's type cannot hold (m for a bool,
// a word for a tristate, a non-number for an int or hex).
func (x *explainer) badValue(s *Symbol, name, want string) (string, bool) {
	switch s.Type {
	case TypeBool:
		if want == "m" {
			x.kind = "type"
			return fmt.Sprintf("%s is bool: it cannot be m", name), true
		}
		fallthrough
	case TypeTristate:
		if want != "y" && want != "m" && want != "n" {
			x.kind = "type"
			return fmt.Sprintf("%s is %s: %q is not y, m or n", name, s.Type, want), true
		}
	case TypeInt, TypeHex:
		if _, ok := parseNumber(want); !ok && !(s.Type == TypeHex && isHexDigits(want)) {
			x.kind = "type"
			return fmt.Sprintf("%s is %s: %q is not a number", name, s.Type, want), true
		}
	}
	return "", false
}

// wantTristate is the tristate the requested value needs the symbol to
// reach: Yes for any string or number (it needs the symbol visible), and
// for m without MODULES=y.
func (x *explainer) wantTristate(s *Symbol, name, want string) Tristate {
	wantT := symTri(name, Config{name: want, "MODULES": norm(x.cfg, "MODULES")})
	if s.Type == TypeString || s.Type == TypeInt || s.Type == TypeHex {
		wantT = Yes // any value needs the symbol visible
	}
	if want == "m" && norm(x.cfg, "MODULES") != "y" {
		wantT = Yes
	}
	return wantT
}

// modulesOff notes that m was requested without MODULES=y, and explains
// a y got for it.
func (x *explainer) modulesOff(s *Symbol, name, want, got string) (string, bool) {
	if want == "m" && norm(x.cfg, "MODULES") != "y" {
		x.add(Rule{Kind: "config", Pos: s.Defs[0].Pos, Text: "tristate", Note: "MODULES=" + norm(x.cfg, "MODULES")})
		if got == "y" {
			x.kind = "modules"
			return fmt.Sprintf("MODULES is %s, so tristate %s can only be y or n", norm(x.cfg, "MODULES"), name), true
		}
	}
	return "", false
}

// choiceLost explains a choice member requested y when another member
// won (requested too, or selected).
func (x *explainer) choiceLost(s *Symbol, name, want, got string, req map[string]string) (string, bool) {
	if s.Choice == nil || want != "y" || got == "y" {
		return "", false
	}
	c := s.Choice
	winner := chosen(c, x.cfg)
	x.add(Rule{Kind: "choice", Pos: c.Pos, Text: choiceText(c), Note: winner + " chosen"})
	msg := fmt.Sprintf("%s is a member of %s [%s] and %s was chosen instead", name, choiceText(c), c.Pos, winner)
	if winner == "" {
		msg = fmt.Sprintf("%s is a member of %s [%s] and no member is y", name, choiceText(c), c.Pos)
	} else if rv, ok := req[winner]; ok && rv == "y" {
		msg += fmt.Sprintf(" (CONFIG_%s=y was requested too; a choice holds one member)", winner)
	} else if w := x.kc.Symbols[winner]; w != nil {
		for _, sel := range x.activeSelects(w) {
			msg += "; " + winner + " is selected by " + sel
		}
	}
	x.kind = "choice"
	return msg, true
}

// forcedHigher explains a bool or tristate forced higher than requested:
// by a select, or as the choice's current member.
func (x *explainer) forcedHigher(s *Symbol, name, got string, wantT Tristate) (string, bool) {
	if symTri(name, x.cfg) <= wantT || (s.Type != TypeBool && s.Type != TypeTristate) {
		return "", false
	}
	if sel := x.activeSelects(s); len(sel) > 0 {
		x.kind = "select"
		return fmt.Sprintf("%s is forced to %s by select from %s", name, got, strings.Join(sel, ", ")), true
	}
	if s.Choice != nil && got == "y" {
		c := s.Choice
		x.add(Rule{Kind: "choice", Pos: c.Pos, Text: choiceText(c), Note: name + " chosen"})
		for _, d := range c.Defaults() {
			if x.kc.Eval(d.Cond, x.cfg) > No {
				x.add(ruleOf(d, ""))
				break
			}
		}
		x.kind = "choice"
		return fmt.Sprintf("%s is the chosen member of %s [%s]: a choice that is not optional keeps one member y; request another member =y instead", name, choiceText(c), c.Pos), true
	}
	return "", false
}

// noVisiblePrompt explains a symbol without a visible prompt: its value
// comes from the defaults (or, off, from no select).
func (x *explainer) noVisiblePrompt(s *Symbol, name, want string) (string, bool) {
	p, ok := x.kc.promptVisible(s, x.cfg)
	if ok {
		return "", false
	}
	d := x.activeDefault(s)
	dflt := "no default applies"
	if d != nil {
		x.add(ruleOf(d, valuesNote(And(d.Cond, d.Expr), x.cfg)))
		dflt = fmt.Sprintf("`%s` [%s] applies", d.Text, d.Pos)
	}
	if p == nil {
		msg := fmt.Sprintf("%s has no prompt, so it cannot be set by a fragment; %s", name, dflt)
		if want != "n" && symTri(name, x.cfg) == No && (s.Type == TypeBool || s.Type == TypeTristate) {
			x.seen[name] = false
			msg = fmt.Sprintf("%s has no prompt, so it cannot be set by a fragment; %s", name, x.notSelected(s, 1))
		}
		x.kind = "no-prompt"
		return msg, true
	}
	x.add(ruleOf(p, valuesNote(p.Cond, x.cfg)))
	x.kind = "hidden-prompt"
	return fmt.Sprintf("the prompt of %s is hidden (`%s` [%s], %s), so %s", name, p.Text, p.Pos, valuesNote(p.Cond, x.cfg), dflt), true
}

// outOfRange explains an int or hex value outside the first active
// range.
func (x *explainer) outOfRange(s *Symbol, name, want, got string) (string, bool) {
	if s.Type != TypeInt && s.Type != TypeHex {
		return "", false
	}
	for _, d := range s.Defs {
		for _, p := range d.Props {
			if p.Kind != PropRange || x.kc.Eval(p.Cond, x.cfg) == No {
				continue
			}
			lo, lok := x.rangeBound(p.Expr)
			hi, hok := x.rangeBound(p.Expr2)
			w, wok := parseNumber(want)
			if s.Type == TypeHex {
				w, wok = parseNumber("0x" + strings.TrimPrefix(strings.ToLower(want), "0x"))
			}
			if lok && hok && wok && (w < lo || w > hi) {
				x.add(ruleOf(p, ""))
				x.kind = "range"
				return fmt.Sprintf("%s=%s is out of range [%s]: `%s`, so Kconfig used %s", name, want, p.Pos, p.Text, got), true
			}
			break
		}
	}
	return "", false
}

func isHexDigits(s string) bool {
	_, ok := parseNumber("0x" + s)
	return ok
}

// rangeBound is the value of a range end: a number or a symbol's value.
func (x *explainer) rangeBound(e *Expr) (int64, bool) {
	if e == nil || e.Op != OpSym {
		return 0, false
	}
	if v, ok := parseNumber(e.Name); ok {
		return v, true
	}
	return parseNumber(norm(x.cfg, e.Name))
}
