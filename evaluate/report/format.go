package report

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// runeWidth is the terminal column width of r: 0 for combining marks and
// controls, 2 for East Asian wide and fullwidth characters and emoji, 1
// otherwise.
func runeWidth(r rune) int {
	switch {
	case r == 0 || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || unicode.IsControl(r):
		return 0
	case r >= 0x1100 && r <= 0x115F, r >= 0x2E80 && r <= 0xA4CF && r != 0x303F,
		r >= 0xAC00 && r <= 0xD7A3, r >= 0xF900 && r <= 0xFAFF, r >= 0xFE30 && r <= 0xFE4F,
		r >= 0xFF00 && r <= 0xFF60, r >= 0xFFE0 && r <= 0xFFE6,
		r >= 0x1F300 && r <= 0x1F64F, r >= 0x1F900 && r <= 0x1F9FF, r >= 0x20000 && r <= 0x3FFFD:
		return 2
	}
	return 1
}

// Width is the column width of s (tabs must be expanded before).
func Width(s string) int {
	w := 0
	for _, r := range s {
		w += runeWidth(r)
	}
	return w
}

// expandTabs replaces tabs by spaces up to the next multiple of 8.
func expandTabs(s string) string {
	if !strings.Contains(s, "\t") {
		return s
	}
	var b strings.Builder
	col := 0
	for _, r := range s {
		if r == '\t' {
			n := 8 - col%8
			b.WriteString(strings.Repeat(" ", n))
			col += n
			continue
		}
		b.WriteRune(r)
		col += runeWidth(r)
	}
	return b.String()
}

// cleanText makes untrusted text safe for a body line: tabs expanded,
// CR and other control characters (and Unicode line/paragraph separators,
// bidi overrides) removed.
func cleanText(s string) string {
	s = expandTabs(s)
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n':
			return r
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return -1
		case r == 0x2028 || r == 0x2029 || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			return -1
		}
		return r
	}, s)
}

// oneLine flattens s to a single clean line.
func oneLine(s string) string {
	s = cleanText(strings.ReplaceAll(s, "\n", " "))
	return strings.Join(strings.Fields(s), " ")
}

// padRight pads s with spaces to width w.
func padRight(s string, w int) string {
	if d := w - Width(s); d > 0 {
		return s + strings.Repeat(" ", d)
	}
	return s
}

func padLeft(s string, w int) string {
	if d := w - Width(s); d > 0 {
		return strings.Repeat(" ", d) + s
	}
	return s
}

// Wrap fills text into lines of at most width columns. The first line
// starts with indent, the following ones with hang. Words longer than a
// line are split hard. Existing newlines start new lines.
func Wrap(text string, width int, indent, hang string) []string {
	if width <= 0 {
		width = math.MaxInt32
	}
	var out []string
	for pi, para := range strings.Split(cleanText(text), "\n") {
		prefix := indent
		if pi > 0 {
			prefix = hang
		}
		line := prefix
		empty := true
		flush := func() {
			out = append(out, strings.TrimRight(line, " "))
			line, empty = hang, true
		}
		for _, w := range strings.Fields(para) {
			for Width(w) > width-Width(hang) && width-Width(hang) > 0 {
				// Hard split an unbreakable word.
				if !empty {
					flush()
				}
				room := width - Width(line)
				head, tail := splitWidth(w, room)
				line += head
				empty = false
				flush()
				w = tail
			}
			if w == "" {
				continue
			}
			sep := " "
			if empty {
				sep = ""
			}
			if !empty && Width(line)+1+Width(w) > width {
				flush()
				sep = ""
			}
			line += sep + w
			empty = false
		}
		if !empty || len(out) == 0 || pi > 0 {
			out = append(out, strings.TrimRight(line, " "))
		}
	}
	return out
}

// splitWidth splits s after at most w columns (at least one rune).
func splitWidth(s string, w int) (string, string) {
	col := 0
	for i, r := range s {
		rw := runeWidth(r)
		if col+rw > w && i > 0 {
			return s[:i], s[i:]
		}
		col += rw
	}
	return s, ""
}

// decimalsFor picks the number of decimals for a column from its smallest
// non-zero magnitude: at least 4 significant digits, at most 3 decimals
// (values >= 1000 get none).
func decimalsFor(vals ...float64) int {
	m := math.Inf(1)
	for _, v := range vals {
		if a := math.Abs(v); a > 0 && a < m && !math.IsInf(a, 0) && !math.IsNaN(a) {
			m = a
		}
	}
	switch {
	case math.IsInf(m, 1) || m >= 1000:
		return 0
	case m >= 100:
		return 1
	case m >= 10:
		return 2
	default:
		return 3
	}
}

// Num formats v with dec decimals and thousands separators (105,014).
func Num(v float64, dec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	s := strconv.FormatFloat(math.Abs(v), 'f', dec, 64)
	intPart, frac := s, ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i:]
	}
	var b strings.Builder
	if v < 0 && strings.Trim(s, "0.") != "" {
		b.WriteByte('-')
	}
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	b.WriteString(frac)
	return b.String()
}

// Pct formats a percentage with a sign: +24.8%.
func Pct(v float64) string {
	d := 1
	if math.Abs(v) < 9.995 {
		d = 2
	}
	s := strconv.FormatFloat(v, 'f', d, 64)
	if !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	if s == "-0.0" || s == "-0.00" {
		s = "+" + s[1:]
	}
	return s + "%"
}

// Dur formats a duration for people: 4m32s, 1.2s, 250ms.
func Dur(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute).String()
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	default:
		return d.Round(time.Millisecond).String()
	}
}

// direction is the metric's direction in words.
func direction(higher bool) string {
	if higher {
		return "higher is better"
	}
	return "lower is better"
}

// table is a fixed-width text table.
type table struct {
	head  []string
	right []bool // right-align column
	rows  [][]string
	// gap between columns.
	gap int
}

// lines renders the table; when it does not fit maxWidth (0: no limit) it
// first narrows the gaps to one space, then falls back to one block per
// row ("head: value" lines) which always fits.
func (t *table) lines(indent string, maxWidth int) []string {
	gap := t.gap
	if gap == 0 {
		gap = 2
	}
	for ; gap >= 1; gap-- {
		out := t.render(indent, gap)
		if maxWidth <= 0 || fits(out, maxWidth) {
			return out
		}
	}
	return t.blocks(indent, maxWidth)
}

func fits(lines []string, w int) bool {
	for _, l := range lines {
		if Width(l) > w {
			return false
		}
	}
	return true
}

func (t *table) widths() []int {
	w := make([]int, len(t.head))
	for i, h := range t.head {
		w[i] = Width(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			if i < len(w) && Width(c) > w[i] {
				w[i] = Width(c)
			}
		}
	}
	return w
}

func (t *table) render(indent string, gap int) []string {
	w := t.widths()
	sp := strings.Repeat(" ", gap)
	row := func(cells []string) string {
		var b strings.Builder
		b.WriteString(indent)
		for i := range w {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			if i > 0 {
				b.WriteString(sp)
			}
			if i < len(t.right) && t.right[i] {
				b.WriteString(padLeft(c, w[i]))
			} else {
				b.WriteString(padRight(c, w[i]))
			}
		}
		return strings.TrimRight(b.String(), " ")
	}
	out := []string{row(t.head)}
	dash := make([]string, len(w))
	for i := range w {
		dash[i] = strings.Repeat("-", w[i])
	}
	out = append(out, row(dash))
	for _, r := range t.rows {
		out = append(out, row(r))
	}
	return out
}

func (t *table) blocks(indent string, maxWidth int) []string {
	hw := 0
	for _, h := range t.head[1:] {
		if Width(h) > hw {
			hw = Width(h)
		}
	}
	var out []string
	for ri, r := range t.rows {
		if ri > 0 {
			out = append(out, "")
		}
		out = append(out, Wrap(t.head[0]+": "+r[0], maxWidth, indent, indent+"  ")...)
		for i := 1; i < len(r) && i < len(t.head); i++ {
			if r[i] == "" {
				continue
			}
			lead := indent + "  " + padRight(t.head[i]+":", hw+1) + " "
			out = append(out, Wrap(r[i], maxWidth, lead, strings.Repeat(" ", Width(lead)))...)
		}
	}
	return out
}
