package kconfig

import (
	"fmt"
	"strconv"
	"strings"
)

type tokKind int8

const (
	tokEOL tokKind = iota
	tokWord
	tokString
	tokMacro
	tokAnd
	tokOr
	tokNot
	tokEq
	tokNe
	tokLt
	tokLe
	tokGt
	tokGe
	tokLParen
	tokRParen
)

type token struct {
	kind tokKind
	text string
}

func (t token) describe() string {
	switch t.kind {
	case tokEOL:
		return "end of line"
	case tokWord:
		return strconv.Quote(t.text)
	case tokString:
		return "string " + strconv.Quote(t.text)
	case tokMacro:
		return "macro " + t.text
	}
	return "'" + t.text + "'"
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '/' || c == '.'
}

// macroEnd returns the index just past the ')' matching the '$(' at s[i:].
func macroEnd(s string, i int) (int, bool) {
	depth := 0
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return j + 1, true
			}
		}
	}
	return 0, false
}

var singleOps = map[byte]tokKind{'!': tokNot, '=': tokEq, '<': tokLt, '>': tokGt, '(': tokLParen, ')': tokRParen}

// lex splits one logical Kconfig line (macros already expanded) into
// tokens; a '#' outside strings starts a comment.
func lex(s string) ([]token, error) {
	var out []token
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v':
			i++
		case c == '#':
			return out, nil
		case c == '"' || c == '\'':
			var b strings.Builder
			j := i + 1
			closed := false
			for j < len(s) {
				if s[j] == '\\' && j+1 < len(s) {
					b.WriteByte(s[j+1])
					j += 2
					continue
				}
				if s[j] == c {
					closed = true
					j++
					break
				}
				b.WriteByte(s[j])
				j++
			}
			if !closed {
				return nil, fmt.Errorf("unterminated string %s", strconv.Quote(s[i:]))
			}
			out = append(out, token{tokString, b.String()})
			i = j
		case isWordByte(c) || c == '$' && i+1 < len(s) && s[i+1] == '(':
			j := i
			macro := false
			for j < len(s) {
				if isWordByte(s[j]) {
					j++
					continue
				}
				if s[j] == '$' && j+1 < len(s) && s[j+1] == '(' {
					end, ok := macroEnd(s, j)
					if !ok {
						return nil, fmt.Errorf("unterminated macro %s", strconv.Quote(s[j:]))
					}
					macro = true
					j = end
					continue
				}
				break
			}
			k := tokWord
			if macro {
				k = tokMacro
			}
			out = append(out, token{k, s[i:j]})
			i = j
		default:
			two := ""
			if i+1 < len(s) {
				two = s[i : i+2]
			}
			switch two {
			case "&&":
				out = append(out, token{tokAnd, two})
				i += 2
				continue
			case "||":
				out = append(out, token{tokOr, two})
				i += 2
				continue
			case "!=":
				out = append(out, token{tokNe, two})
				i += 2
				continue
			case "<=":
				out = append(out, token{tokLe, two})
				i += 2
				continue
			case ">=":
				out = append(out, token{tokGe, two})
				i += 2
				continue
			}
			k, ok := singleOps[c]
			if !ok {
				return nil, fmt.Errorf("invalid character %q", c)
			}
			out = append(out, token{k, string(c)})
			i++
		}
	}
	return out, nil
}
