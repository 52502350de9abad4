package kconfig

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Tristate is the value of a Kconfig expression: n, m or y.
type Tristate int8

// The three Kconfig truth values, ordered n < m < y.
const (
	No Tristate = iota
	Mod
	Yes
)

func (t Tristate) String() string {
	switch t {
	case Yes:
		return "y"
	case Mod:
		return "m"
	default:
		return "n"
	}
}

func minT(a, b Tristate) Tristate {
	if a < b {
		return a
	}
	return b
}

func maxT(a, b Tristate) Tristate {
	if a > b {
		return a
	}
	return b
}

// Op is the kind of an Expr node.
type Op int8

// Expression node kinds.
const (
	OpSym   Op = iota // a symbol or constant word: Name
	OpConst           // a quoted string constant: Name holds the unquoted text
	OpMacro           // a macro Kconfig could not expand here ($(cc-option,...)): unknown value
	OpNot             // !L
	OpAnd             // L && R
	OpOr              // L || R
	OpEq              // L = R
	OpNe              // L != R
	OpLt              // L < R
	OpLe              // L <= R
	OpGt              // L > R
	OpGe              // L >= R
)

var opText = map[Op]string{OpAnd: "&&", OpOr: "||", OpEq: "=", OpNe: "!=", OpLt: "<", OpLe: "<=", OpGt: ">", OpGe: ">="}

// Expr is a Kconfig expression as written in `depends on`, `default ... if`,
// `select ... if` and friends. A nil *Expr means "no condition" (always y).
type Expr struct {
	Op   Op
	Name string // OpSym: symbol name or unquoted constant; OpConst: string; OpMacro: macro text
	L, R *Expr
}

// Sym returns an expression naming one symbol.
func Sym(name string) *Expr { return &Expr{Op: OpSym, Name: name} }

// And joins two conditions; nil operands are dropped.
func And(a, b *Expr) *Expr {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return &Expr{Op: OpAnd, L: a, R: b}
}

// compareNo is the kernel's expr_trans_compare(e, E_EQUAL or
// E_UNEQUAL, &symbol_no) (scripts/kconfig/expr.c): the expression "e = n"
// (eq) or "e != n" with the comparison pushed down to the symbols, so
// that a tristate m compares as not n rather than as !m = m.
func compareNo(e *Expr, eq bool) *Expr {
	neg := func(x *Expr) *Expr {
		if eq {
			return x
		}
		return &Expr{Op: OpNot, L: x}
	}
	switch e.Op {
	case OpAnd:
		return neg(&Expr{Op: OpOr, L: compareNo(e.L, true), R: compareNo(e.R, true)})
	case OpOr:
		return neg(&Expr{Op: OpAnd, L: compareNo(e.L, true), R: compareNo(e.R, true)})
	case OpNot:
		return compareNo(e.L, !eq)
	case OpEq, OpNe, OpLt, OpLe, OpGt, OpGe:
		if eq {
			return &Expr{Op: OpNot, L: e}
		}
		return e
	}
	op := OpEq
	if !eq {
		op = OpNe
	}
	return &Expr{Op: op, L: e, R: Sym("n")}
}

func prec(op Op) int {
	switch op {
	case OpOr:
		return 1
	case OpAnd:
		return 2
	case OpNot:
		return 3
	case OpEq, OpNe, OpLt, OpLe, OpGt, OpGe:
		return 4
	default:
		return 5
	}
}

// String renders e in Kconfig syntax with the fewest parentheses.
func (e *Expr) String() string {
	if e == nil {
		return "y"
	}
	var b strings.Builder
	e.write(&b)
	return b.String()
}

func (e *Expr) write(b *strings.Builder) {
	sub := func(x *Expr, min int) {
		if prec(x.Op) < min {
			b.WriteByte('(')
			x.write(b)
			b.WriteByte(')')
		} else {
			x.write(b)
		}
	}
	switch e.Op {
	case OpSym, OpMacro:
		b.WriteString(e.Name)
	case OpConst:
		b.WriteString(strconv.Quote(e.Name))
	case OpNot:
		b.WriteByte('!')
		sub(e.L, prec(OpNot))
	case OpAnd, OpOr:
		sub(e.L, prec(e.Op))
		b.WriteString(" " + opText[e.Op] + " ")
		sub(e.R, prec(e.Op))
	default:
		sub(e.L, 5)
		b.WriteString(" " + opText[e.Op] + " ")
		sub(e.R, 5)
	}
}

// Symbols lists the symbol names e refers to (not constants), sorted, once each.
func (e *Expr) Symbols() []string {
	set := map[string]bool{}
	var walk func(x *Expr)
	walk = func(x *Expr) {
		if x == nil {
			return
		}
		if x.Op == OpSym && !isConstWord(x.Name) {
			set[x.Name] = true
		}
		walk(x.L)
		walk(x.R)
	}
	walk(e)
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// isConstWord reports words that Kconfig treats as constants, not symbols:
// y, m, n and numbers.
func isConstWord(s string) bool {
	switch s {
	case "y", "m", "n":
		return true
	}
	_, ok := parseNumber(s)
	return ok
}

func parseNumber(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		v, err := strconv.ParseUint(s[2:], 16, 64)
		return int64(v), err == nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// Eval evaluates e against a final configuration: symbols absent from cfg
// are n, y/m/n words are constants, `m` counts as m only when MODULES=y
// (as Kconfig rewrites it to `m && MODULES`). Macros that could not be
// expanded evaluate to n. A nil e is y.
func Eval(e *Expr, cfg Config) Tristate { return evalExpr(nil, e, cfg) }

// Eval is like the package Eval, but knows symbol types: an absent string,
// int or hex symbol compares as "" (as in Kconfig) rather than as n.
func (kc *Kconfig) Eval(e *Expr, cfg Config) Tristate { return evalExpr(kc, e, cfg) }

func evalExpr(kc *Kconfig, e *Expr, cfg Config) Tristate {
	if e == nil {
		return Yes
	}
	switch e.Op {
	case OpSym:
		return symTri(e.Name, cfg)
	case OpConst:
		return constTri(e.Name, cfg)
	case OpMacro:
		return No
	case OpNot:
		return Yes - evalExpr(kc, e.L, cfg)
	case OpAnd:
		return minT(evalExpr(kc, e.L, cfg), evalExpr(kc, e.R, cfg))
	case OpOr:
		return maxT(evalExpr(kc, e.L, cfg), evalExpr(kc, e.R, cfg))
	}
	l, lok := strValue(kc, e.L, cfg)
	r, rok := strValue(kc, e.R, cfg)
	if !lok || !rok {
		return No
	}
	ln, lnum := parseNumber(l)
	rn, rnum := parseNumber(r)
	var cmp int
	switch {
	case lnum && rnum:
		cmp = compareInt(ln, rn)
	case e.Op == OpEq || e.Op == OpNe:
		cmp = strings.Compare(l, r)
	default:
		return No // Kconfig: cannot order non-numbers
	}
	var ok bool
	switch e.Op {
	case OpEq:
		ok = cmp == 0
	case OpNe:
		ok = cmp != 0
	case OpLt:
		ok = cmp < 0
	case OpLe:
		ok = cmp <= 0
	case OpGt:
		ok = cmp > 0
	case OpGe:
		ok = cmp >= 0
	}
	if ok {
		return Yes
	}
	return No
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func constTri(s string, cfg Config) Tristate {
	switch s {
	case "y":
		return Yes
	case "m":
		if cfg["MODULES"] == "y" {
			return Mod
		}
		return No
	}
	return No
}

func symTri(name string, cfg Config) Tristate {
	switch name {
	case "y", "m", "n":
		return constTri(name, cfg)
	}
	switch cfg[name] {
	case "y":
		return Yes
	case "m":
		return Mod
	}
	return No
}

// strValue is a symbol's string value for comparisons.
func strValue(kc *Kconfig, e *Expr, cfg Config) (string, bool) {
	switch e.Op {
	case OpConst:
		return e.Name, true
	case OpMacro:
		return "", false
	case OpSym:
	default:
		return evalExpr(kc, e, cfg).String(), true
	}
	switch e.Name {
	case "y", "m", "n":
		return e.Name, true
	}
	if v, ok := cfg[e.Name]; ok {
		return v, true
	}
	if kc != nil {
		s := kc.Symbols[e.Name]
		if s == nil || !s.Defined() {
			return e.Name, true // undefined words are constants named by themselves
		}
		switch s.Type {
		case TypeString, TypeInt, TypeHex:
			return "", true
		}
		return "n", true
	}
	if _, num := parseNumber(e.Name); num {
		return e.Name, true
	}
	return "n", true
}

// exprError is a syntax error inside one expression.
type exprError struct{ msg string }

func (e *exprError) Error() string { return e.msg }

// exprParser parses a token list as one expression.
type exprParser struct {
	toks []token
	i    int
}

func (p *exprParser) peek() token {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return token{kind: tokEOL}
}

func (p *exprParser) next() token {
	t := p.peek()
	if p.i < len(p.toks) {
		p.i++
	}
	return t
}

func (p *exprParser) fail(format string, a ...any) {
	panic(&exprError{fmt.Sprintf(format, a...)})
}

// parseExprTokens parses toks fully as one expression.
func parseExprTokens(toks []token) (e *Expr, err error) {
	defer func() {
		if r := recover(); r != nil {
			xe, ok := r.(*exprError)
			if !ok {
				panic(r)
			}
			e, err = nil, xe
		}
	}()
	if len(toks) == 0 {
		return nil, &exprError{"empty expression"}
	}
	p := &exprParser{toks: toks}
	e = p.or(0)
	if t := p.peek(); t.kind != tokEOL {
		p.fail("unexpected %s after expression", t.describe())
	}
	return e, nil
}

const maxExprDepth = 200

func (p *exprParser) or(d int) *Expr {
	if d > maxExprDepth {
		p.fail("expression nested too deeply")
	}
	l := p.and(d + 1)
	for p.peek().kind == tokOr {
		p.next()
		l = &Expr{Op: OpOr, L: l, R: p.and(d + 1)}
	}
	return l
}

func (p *exprParser) and(d int) *Expr {
	l := p.not(d + 1)
	for p.peek().kind == tokAnd {
		p.next()
		l = &Expr{Op: OpAnd, L: l, R: p.not(d + 1)}
	}
	return l
}

func (p *exprParser) not(d int) *Expr {
	if d > maxExprDepth {
		p.fail("expression nested too deeply")
	}
	if p.peek().kind == tokNot {
		p.next()
		return &Expr{Op: OpNot, L: p.not(d + 1)}
	}
	return p.primary(d + 1)
}

func (p *exprParser) primary(d int) *Expr {
	t := p.next()
	switch t.kind {
	case tokLParen:
		e := p.or(d + 1)
		if c := p.next(); c.kind != tokRParen {
			p.fail("missing ')': found %s", c.describe())
		}
		return e
	case tokWord, tokString, tokMacro:
		l := leaf(t)
		if op, ok := cmpOps[p.peek().kind]; ok {
			p.next()
			r := p.next()
			if r.kind != tokWord && r.kind != tokString && r.kind != tokMacro {
				p.fail("expected a symbol after %s, found %s", opText[op], r.describe())
			}
			return &Expr{Op: op, L: l, R: leaf(r)}
		}
		return l
	}
	p.fail("expected a symbol, '!' or '(', found %s", t.describe())
	return nil
}

var cmpOps = map[tokKind]Op{tokEq: OpEq, tokNe: OpNe, tokLt: OpLt, tokLe: OpLe, tokGt: OpGt, tokGe: OpGe}

func leaf(t token) *Expr {
	switch t.kind {
	case tokString:
		// Quoted y/m/n are the constants themselves.
		switch t.text {
		case "y", "m", "n":
			return &Expr{Op: OpSym, Name: t.text}
		}
		return &Expr{Op: OpConst, Name: t.text}
	case tokMacro:
		return &Expr{Op: OpMacro, Name: t.text}
	}
	return &Expr{Op: OpSym, Name: t.text}
}

// ParseExpr parses one Kconfig expression, e.g. "PREEMPT || PREEMPT_RT".
// Macros are not expanded.
func ParseExpr(s string) (*Expr, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	return parseExprTokens(toks)
}
