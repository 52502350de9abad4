package kconfig

import (
	"errors"
	"strconv"
	"strings"
)

// unknownMark stands for text whose value only the real Kconfig could
// compute (a $(shell,...) call, an environment variable we do not know).
const unknownMark = "\x00"

const (
	maxMacroDepth = 64
	maxMacroCalls = 100000
	maxMacroLen   = 1 << 20
)

type variable struct {
	value     string
	recursive bool
}

// macros is Kconfig's preprocessor state: variables assigned with :=, =
// and +=, and the environment ($(SRCARCH), $(ARCH), $(srctree)).
type macros struct {
	vars  map[string]*variable
	env   map[string]string
	file  string
	line  int
	calls int
}

func (m *macros) assign(name, op, value string) error {
	m.calls = 0
	switch op {
	case ":=":
		v, err := m.expand(value, nil, 0)
		if err != nil {
			return err
		}
		m.vars[name] = &variable{value: v}
	case "=":
		m.vars[name] = &variable{value: value, recursive: true}
	case "+=":
		old := m.vars[name]
		if old == nil {
			m.vars[name] = &variable{value: value, recursive: true}
			return nil
		}
		if !old.recursive {
			v, err := m.expand(value, nil, 0)
			if err != nil {
				return err
			}
			value = v
		}
		if old.value != "" {
			value = old.value + " " + value
		}
		old.value = value
	}
	return nil
}

// expandName expands the name of an assignment ($(X)$(Y) := ...).
func (m *macros) expandName(s string) (string, error) {
	if !strings.Contains(s, "$(") {
		return s, nil
	}
	m.calls = 0
	v, err := m.expand(s, nil, 0)
	if err != nil {
		return "", err
	}
	if v == "" || strings.Contains(v, unknownMark) || strings.ContainsAny(v, " \t") {
		return "", errors.New("assignment to " + strconv.Quote(s) + ": the name expands to " + strconv.Quote(strings.ReplaceAll(v, unknownMark, "?")))
	}
	return v, nil
}

// expandLine expands every $(...) in one line. A top-level macro whose
// value is unknown here is kept verbatim, so the lexer turns it into an
// unknown-valued token instead of failing.
func (m *macros) expandLine(s string) (string, error) {
	if !strings.Contains(s, "$(") {
		return s, nil
	}
	m.calls = 0
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '$' && i+1 < len(s) && s[i+1] == '(' {
			end, ok := macroEnd(s, i)
			if !ok {
				return "", errors.New("unterminated macro " + strconv.Quote(s[i:]))
			}
			v, err := m.call(s[i+2:end-1], nil, 0)
			if err != nil {
				return "", err
			}
			if strings.Contains(v, unknownMark) {
				v = s[i:end]
			}
			b.WriteString(v)
			i = end
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String(), nil
}

// expand expands all macros in s with the given function arguments.
func (m *macros) expand(s string, args []string, depth int) (string, error) {
	if !strings.Contains(s, "$(") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '$' && i+1 < len(s) && s[i+1] == '(' {
			end, ok := macroEnd(s, i)
			if !ok {
				return "", errors.New("unterminated macro " + strconv.Quote(s[i:]))
			}
			v, err := m.call(s[i+2:end-1], args, depth+1)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			if b.Len() > maxMacroLen {
				return "", errors.New("macro expansion too long")
			}
			i = end
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String(), nil
}

// splitArgs splits a macro body at top-level commas.
func splitArgs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// call evaluates the body of one $(...).
func (m *macros) call(body string, args []string, depth int) (string, error) {
	m.calls++
	if depth > maxMacroDepth {
		return "", errors.New("macro recursion too deep (recursive variable?)")
	}
	if m.calls > maxMacroCalls {
		return "", errors.New("too many macro expansions")
	}
	parts := splitArgs(body)
	name, err := m.expand(parts[0], args, depth)
	if err != nil {
		return "", err
	}
	var fargs []string
	for _, a := range parts[1:] {
		v, err := m.expand(a, args, depth)
		if err != nil {
			return "", err
		}
		fargs = append(fargs, v)
	}
	if n, err := strconv.Atoi(name); err == nil && len(parts) == 1 {
		if n >= 1 && n <= len(args) {
			return args[n-1], nil
		}
		return "", nil
	}
	switch name {
	case "shell":
		return unknownMark, nil
	case "info", "warning-if", "error-if":
		return "", nil
	case "filename":
		return m.file, nil
	case "lineno":
		return strconv.Itoa(m.line), nil
	}
	if v := m.vars[name]; v != nil {
		if !v.recursive {
			return v.value, nil
		}
		return m.expand(v.value, fargs, depth)
	}
	if len(fargs) == 0 {
		if v, ok := m.env[name]; ok {
			return v, nil
		}
	}
	return unknownMark, nil
}
