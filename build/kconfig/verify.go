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

func (x *explainer) verify(s *Symbol, name, want, got string, req map[string]string) string {
	if !s.Defined() {
		msg := fmt.Sprintf("CONFIG_%s does not exist in this tree: no Kconfig file for SRCARCH=%s defines it", name, x.kc.SrcArch)
		if s != nil && len(s.SelectedBy)+len(s.ImpliedBy) > 0 {
			p := append(append([]*Property{}, s.SelectedBy...), s.ImpliedBy...)[0]
			x.add(ruleOf(p, ""))
			msg += fmt.Sprintf(" (it is only named by `%s` in config %s [%s])", p.Text, p.Owner, p.Pos)
		}
		x.kind = "missing"
		return msg
	}
	switch s.Type {
	case TypeBool:
		if want == "m" {
			x.kind = "type"
			return fmt.Sprintf("%s is bool: it cannot be m", name)
		}
		fallthrough
	case TypeTristate:
		if want != "y" && want != "m" && want != "n" {
			x.kind = "type"
			return fmt.Sprintf("%s is %s: %q is not y, m or n", name, s.Type, want)
		}
	case TypeInt, TypeHex:
		if _, ok := parseNumber(want); !ok && !(s.Type == TypeHex && isHexDigits(want)) {
			x.kind = "type"
			return fmt.Sprintf("%s is %s: %q is not a number", name, s.Type, want)
		}
	}
	wantT := symTri(name, Config{name: want, "MODULES": norm(x.cfg, "MODULES")})
	if s.Type == TypeString || s.Type == TypeInt || s.Type == TypeHex {
		wantT = Yes // any value needs the symbol visible
	}
	if want == "m" && norm(x.cfg, "MODULES") != "y" {
		x.add(Rule{Kind: "config", Pos: s.Defs[0].Pos, Text: "tristate", Note: "MODULES=" + norm(x.cfg, "MODULES")})
		if got == "y" {
			x.kind = "modules"
			return fmt.Sprintf("MODULES is %s, so tristate %s can only be y or n", norm(x.cfg, "MODULES"), name)
		}
		wantT = Yes
	}
	// Dependencies not met: the symbol cannot reach the value.
	if want != "n" && x.kc.depValue(s, x.cfg) < wantT {
		x.kind = "depends"
		return x.unmetDeps(s, wantT, 2)
	}
	// Another member of the choice won.
	if s.Choice != nil && want == "y" && got != "y" {
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
		return msg
	}
	// Forced higher than requested: a select, a default of a hidden
	// prompt, or the choice's current member.
	if symTri(name, x.cfg) > wantT && (s.Type == TypeBool || s.Type == TypeTristate) {
		if sel := x.activeSelects(s); len(sel) > 0 {
			x.kind = "select"
			return fmt.Sprintf("%s is forced to %s by select from %s", name, got, strings.Join(sel, ", "))
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
			return fmt.Sprintf("%s is the chosen member of %s [%s]: a choice that is not optional keeps one member y; request another member =y instead", name, choiceText(c), c.Pos)
		}
	}
	// No visible prompt: the value comes from the defaults.
	if p, ok := x.kc.promptVisible(s, x.cfg); !ok {
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
			return msg
		}
		x.add(ruleOf(p, valuesNote(p.Cond, x.cfg)))
		x.kind = "hidden-prompt"
		return fmt.Sprintf("the prompt of %s is hidden (`%s` [%s], %s), so %s", name, p.Text, p.Pos, valuesNote(p.Cond, x.cfg), dflt)
	}
	// Out of range.
	if s.Type == TypeInt || s.Type == TypeHex {
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
					return fmt.Sprintf("%s=%s is out of range [%s]: `%s`, so Kconfig used %s", name, want, p.Pos, p.Text, got)
				}
				break
			}
		}
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
