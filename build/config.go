package build

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
)

// configLine matches "CONFIG_FOO=value" and "# CONFIG_FOO is not set".
var (
	setRe   = lazyre.New(`^CONFIG_([A-Za-z0-9_]+)=(.*)$`)
	unsetRe = lazyre.New(`^# CONFIG_([A-Za-z0-9_]+) is not set$`)
)

// symbolLines reads the symbol assignments of a .config or fragment, in
// order: SYM (without CONFIG_) -> value, "n" for "is not set". Quotes are
// kept on string values.
func symbolLines(data []byte) (order []string, vals map[string]string) {
	vals = map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		var sym, val string
		if m := setRe.FindStringSubmatch(line); m != nil {
			sym, val = m[1], m[2]
		} else if m := unsetRe.FindStringSubmatch(line); m != nil {
			sym, val = m[1], "n"
		} else {
			continue
		}
		if _, seen := vals[sym]; !seen {
			order = append(order, sym)
		}
		vals[sym] = val
	}
	return order, vals
}

// ReadConfigFile reads a .config or fragment: SYM (without CONFIG_) ->
// value ("n" for "is not set").
func ReadConfigFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fail.Inputf("config %s: %w", path, err)
	}
	_, v := symbolLines(data)
	return v, nil
}

// configLineFor renders one assignment as .config does.
func configLineFor(sym, val string) string {
	if val == "n" {
		return "# CONFIG_" + sym + " is not set"
	}
	return "CONFIG_" + sym + "=" + val
}

// normalizeValue quotes string values the way .config spells them: y, n, m,
// numbers and hex stay bare, anything else gets quotes.
func normalizeValue(v string) string {
	v = strings.TrimSpace(v)
	switch v {
	case "y", "n", "m", "":
		return v
	}
	if strings.HasPrefix(v, `"`) {
		return v
	}
	if regexp.MustCompile(`^-?[0-9]+$|^0[xX][0-9a-fA-F]+$`).MatchString(v) {
		return v
	}
	return strconv_quote(v)
}

func strconv_quote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	return `"` + s + `"`
}

// mergeFragment applies a fragment over a .config the way
// scripts/kconfig/merge_config.sh does: every symbol the fragment mentions
// replaces the base's line (or is appended). It returns the merged text and
// one note per redefined value.
func mergeFragment(base []byte, fragName string, frag []byte) ([]byte, []string) {
	order, vals := symbolLines(frag)
	if len(order) == 0 {
		return base, nil
	}
	_, baseVals := symbolLines(base)
	var notes []string
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(base))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		t := strings.TrimSpace(line)
		if m := setRe.FindStringSubmatch(t); m != nil {
			if _, ok := vals[m[1]]; ok {
				continue
			}
		} else if m := unsetRe.FindStringSubmatch(t); m != nil {
			if _, ok := vals[m[1]]; ok {
				continue
			}
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	for _, sym := range order {
		if old, ok := baseVals[sym]; ok && old != vals[sym] {
			notes = append(notes, fmt.Sprintf("%s: value of CONFIG_%s is redefined: %s -> %s", fragName, sym, old, vals[sym]))
		}
		out.WriteString(configLineFor(sym, vals[sym]))
		out.WriteByte('\n')
	}
	return out.Bytes(), notes
}

// symbolsFragment renders a variant's symbols as a fragment, sorted.
func symbolsFragment(syms map[string]string) []byte {
	keys := make([]string, 0, len(syms))
	for k := range syms {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		b.WriteString(configLineFor(k, syms[k]))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ParseSymbols parses "SYM=val,SYM=val" (CONFIG_ prefixes allowed) into a
// symbol map with normalized values.
func ParseSymbols(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimPrefix(strings.TrimSpace(k), "CONFIG_")
		if !ok || k == "" || !regexp.MustCompile(`^[A-Za-z0-9_]+$`).MatchString(k) {
			return nil, fail.Inputf("bad symbol assignment %q: want SYM=value (y, n, m, a number or a string)", part)
		}
		m[k] = normalizeValue(v)
	}
	return m, nil
}

// normalizeSymbols strips CONFIG_ prefixes and normalizes values.
func normalizeSymbols(in map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(in))
	for k, v := range in {
		k = strings.TrimPrefix(strings.TrimSpace(k), "CONFIG_")
		if k == "" || !regexp.MustCompile(`^[A-Za-z0-9_]+$`).MatchString(k) {
			return nil, fail.Inputf("bad Kconfig symbol name %q", k)
		}
		out[k] = normalizeValue(v)
	}
	return out, nil
}

func sha256hex(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ConfigHash is the content hash of a final .config (sha256, hex).
func ConfigHash(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}
