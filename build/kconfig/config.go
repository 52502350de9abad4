package kconfig

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
)

// Config is a .config or a fragment: symbol name (without CONFIG_) to
// value. Bool and tristate symbols hold "y", "m" or "n" ("# CONFIG_X is
// not set"); int and hex symbols their number as written; string symbols
// their text unquoted and unescaped. A symbol absent from the map was not
// written at all (invisible or with unmet dependencies) and counts as n.
type Config map[string]string

// Value is the symbol's value, "n" when absent; name may carry CONFIG_.
func (c Config) Value(name string) string {
	if v, ok := c[strings.TrimPrefix(name, "CONFIG_")]; ok {
		return v
	}
	return "n"
}

// Tristate is the symbol's truth value: y, m, or n for anything else.
func (c Config) Tristate(name string) Tristate { return symTri(strings.TrimPrefix(name, "CONFIG_"), c) }

// ReadConfig reads a .config file or fragment.
func ReadConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fail.Input(fmt.Errorf("kconfig: %w", err))
	}
	defer f.Close()
	c, err := parseConfig(f, path)
	return c, err
}

// ParseConfig reads .config text: `CONFIG_X=y|m|"str"|123` and
// `# CONFIG_X is not set`. Other comments and blank lines are skipped; any
// other line is an error naming its line number.
func ParseConfig(r io.Reader) (Config, error) { return parseConfig(r, "config") }

func parseConfig(r io.Reader, name string) (Config, error) {
	c := Config{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if line[0] == '#' {
			rest := strings.TrimSpace(line[1:])
			if sym, ok := strings.CutSuffix(rest, " is not set"); ok && strings.HasPrefix(sym, "CONFIG_") && validName(sym[7:]) {
				c[sym[7:]] = "n"
			}
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(key, "CONFIG_") || !validName(key[7:]) {
			return nil, fail.Inputf("kconfig: %s:%d: not a CONFIG_NAME=value line: %q", name, n, line)
		}
		if strings.HasPrefix(val, `"`) {
			s, err := unquote(val)
			if err != nil {
				return nil, fail.Inputf("kconfig: %s:%d: bad string value for %s: %v", name, n, key, err)
			}
			val = s
		}
		c[key[7:]] = val
	}
	if err := sc.Err(); err != nil {
		return nil, fail.Inputf("kconfig: reading %s: %v", name, err)
	}
	return c, nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isWordByte(s[i]) || s[i] == '/' || s[i] == '.' || s[i] == '-' {
			return false
		}
	}
	return true
}

// unquote undoes .config string quoting: "..." with \" and \\.
func unquote(s string) (string, error) {
	if len(s) < 2 || s[len(s)-1] != '"' {
		return "", fmt.Errorf("unterminated string %s", s)
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		if s[i] == '\\' && i+1 < len(s)-1 {
			i++
		} else if s[i] == '"' {
			return "", fmt.Errorf("unescaped quote in %s", s)
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}

// Format writes c as .config lines, sorted by name. kc (may be nil) gives
// symbol types so that strings are quoted; without it a value other than
// y/m/n or a number is quoted.
func (c Config) Format(w io.Writer, kc *Kconfig) error {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	sort.Strings(names)
	bw := bufio.NewWriter(w)
	for _, n := range names {
		v := c[n]
		str := false
		if kc != nil && kc.Symbols[n] != nil && kc.Symbols[n].Type != TypeUnknown {
			str = kc.Symbols[n].Type == TypeString
		} else if _, num := parseNumber(v); !num && v != "y" && v != "m" && v != "n" {
			str = true
		}
		switch {
		case v == "n" && !str:
			fmt.Fprintf(bw, "# CONFIG_%s is not set\n", n)
		case str:
			fmt.Fprintf(bw, "CONFIG_%s=%s\n", n, quoteConfig(v))
		default:
			fmt.Fprintf(bw, "CONFIG_%s=%s\n", n, v)
		}
	}
	return bw.Flush()
}

func quoteConfig(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}
