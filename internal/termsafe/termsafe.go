// Package termsafe escapes control characters in text that came from
// outside patcheval (mail, workers, build and boot logs) before it reaches
// a terminal, a log line or an event stream, so that such text can neither
// drive the terminal (ESC and OSC sequences retitle it or clear the screen;
// C1 CSI does the same on 8-bit terminals) nor forge a line of its own (a
// bare CR overwrites what was printed; in a server-sent event stream it
// starts a new field).
//
// Text keeps \n and \t (multi-line output such as a console log); Line keeps
// only \t (one log line, one SSE data line). Everything else below U+0020,
// DEL, the C1 controls U+0080..U+009F and bytes that are not UTF-8 are
// written as Go-style escapes (\r, \x1b, \u009b), readable and inert.
// Printable text, including non-ASCII letters, passes unchanged.
package termsafe

import (
	"strings"
	"unicode/utf8"
)

// Text escapes s for a terminal or a multi-line log, keeping \n and \t.
func Text(s string) string { return escape(s, true) }

// Line escapes s for a single line: \n is escaped as well, so the result
// never contains a line break of any kind (\n, \r, U+0085, U+2028, U+2029).
func Line(s string) string { return escape(s, false) }

// Bytes is Text for a byte slice.
func Bytes(b []byte) string { return escape(string(b), true) }

// Safe reports whether s is printed unchanged by Text.
func Safe(s string) bool { return clean(s, true) }

func clean(s string, keepNL bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f {
			if c == '\t' || (c == '\n' && keepNL) {
				continue
			}
			return false
		}
		if c >= 0x80 {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n <= 1 || escapedRune(r) {
				return false
			}
			i += n - 1
		}
	}
	return true
}

// escapedRune is a non-ASCII code point that is escaped: the C1 controls
// and the Unicode line and paragraph separators (which some log viewers
// and JavaScript event parsers treat as line ends).
func escapedRune(r rune) bool {
	return (r >= 0x80 && r <= 0x9f) || r == 0x2028 || r == 0x2029
}

const hexDigits = "0123456789abcdef"

func escape(s string, keepNL bool) string {
	if clean(s, keepNL) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			switch {
			case c == '\t' || (c == '\n' && keepNL):
				b.WriteByte(c)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c < 0x20 || c == 0x7f:
				b.WriteString(`\x`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&0xf])
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		case escapedRune(r):
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hexDigits[(r>>uint(shift))&0xf])
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
