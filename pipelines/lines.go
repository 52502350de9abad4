package pipelines

import (
	"strconv"
	"strings"
)

// lineIndex maps key paths of a TOML document to the line that defines
// them. Paths use dots between keys and [i] for the i-th table of an array
// of tables: "variant[2].sched_preempt", "build.symbols". It is built from
// a document BurntSushi/toml already accepted, so it only needs to track
// what decides where keys are: table headers, key/value lines, and the
// brackets and strings that can span lines.
type lineIndex struct {
	lines map[string]int
	order []string // paths in document order
}

func (ix *lineIndex) add(path string, line int) {
	if _, ok := ix.lines[path]; !ok {
		ix.lines[path] = line
		ix.order = append(ix.order, path)
	}
}

// line returns the line of path, or of its nearest enclosing key or table
// that has one (inline tables report the line of their key), or 0.
func (ix *lineIndex) line(path string) int {
	for path != "" {
		if l, ok := ix.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// matching returns the lines of every indexed path that equals key once
// array indexes are removed ("variant.foo" matches "variant[1].foo").
func (ix *lineIndex) matching(key string) []int {
	var out []int
	for _, p := range ix.order {
		if stripIndexes(p) == key {
			out = append(out, ix.lines[p])
		}
	}
	return out
}

func stripIndexes(p string) string {
	var b strings.Builder
	skip := false
	for _, r := range p {
		switch {
		case r == '[':
			skip = true
		case r == ']':
			skip = false
		case !skip:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// scanState carries what spans lines: open brackets and multi-line strings.
type scanState struct {
	depth int    // open [ and { of a value
	multi string // `"""` or `'''` while inside a multi-line string
}

// scan consumes s (a line, or the rest of one) and updates the state.
func (st *scanState) scan(s string) {
	for i := 0; i < len(s); i++ {
		if st.multi != "" {
			if strings.HasPrefix(s[i:], st.multi) {
				i += 2
				st.multi = ""
			} else if st.multi == `"""` && s[i] == '\\' {
				i++
			}
			continue
		}
		switch c := s[i]; c {
		case '#':
			return
		case '"', '\'':
			q := string(c)
			if strings.HasPrefix(s[i:], q+q+q) {
				st.multi = q + q + q
				i += 2
				continue
			}
			for i++; i < len(s) && s[i] != c; i++ {
				if c == '"' && s[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			st.depth++
		case ']', '}':
			st.depth--
		}
	}
}

// splitKey splits a dotted TOML key ("a.\"b.c\".d") into its parts and
// returns the rest of the line after the key and the '=' (or after the
// closing bracket of a header).
func splitKey(s string, end byte) (parts []string, rest string, ok bool) {
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(s) && s[j] != c {
				if c == '"' && s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, "", false
			}
			lit := s[i : j+1]
			if c == '"' {
				if u, err := strconv.Unquote(lit); err == nil {
					cur.WriteString(u)
				} else {
					cur.WriteString(lit[1 : len(lit)-1])
				}
			} else {
				cur.WriteString(lit[1 : len(lit)-1])
			}
			i = j
		case c == '.':
			parts = append(parts, strings.TrimSpace(cur.String()))
			cur.Reset()
		case c == end:
			parts = append(parts, strings.TrimSpace(cur.String()))
			return parts, s[i+1:], true
		default:
			cur.WriteByte(c)
		}
	}
	return nil, "", false
}

// indexLines builds the key -> line index of a TOML document.
func indexLines(src string) *lineIndex {
	ix := &lineIndex{lines: map[string]int{}}
	arrays := map[string]int{} // array-of-tables path -> tables seen
	context := ""
	var st scanState
	for n, raw := range strings.Split(src, "\n") {
		line := n + 1
		if st.depth > 0 || st.multi != "" {
			st.scan(raw)
			continue
		}
		t := strings.TrimSpace(raw)
		if t == "" || t[0] == '#' {
			continue
		}
		if strings.HasPrefix(t, "[[") {
			parts, _, ok := splitKey(t[2:], ']')
			if !ok {
				continue
			}
			base := resolve(ix, arrays, parts[:len(parts)-1])
			p := join(base, parts[len(parts)-1])
			i := arrays[p]
			arrays[p] = i + 1
			context = p + "[" + strconv.Itoa(i) + "]"
			ix.add(p, line)
			ix.add(context, line)
			continue
		}
		if t[0] == '[' {
			parts, _, ok := splitKey(t[1:], ']')
			if !ok {
				continue
			}
			base := resolve(ix, arrays, parts[:len(parts)-1])
			context = join(base, parts[len(parts)-1])
			ix.add(context, line)
			continue
		}
		parts, rest, ok := splitKey(t, '=')
		if !ok {
			continue
		}
		p := context
		for _, k := range parts {
			p = join(p, k)
			ix.add(p, line)
		}
		st.scan(rest)
	}
	return ix
}

// resolve maps header parts to a path, descending into the latest table
// of any array of tables on the way ([[variant]] then [variant.knobs]).
func resolve(ix *lineIndex, arrays map[string]int, parts []string) string {
	p := ""
	for _, k := range parts {
		p = join(p, k)
		if n, ok := arrays[p]; ok && n > 0 {
			p += "[" + strconv.Itoa(n-1) + "]"
		}
	}
	return p
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}
