package termsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain text, ünïcödé ✓", "plain text, ünïcödé ✓"},
		{"two\nlines\twith tab", "two\nlines\twith tab"},
		{"\x1b]0;pwned\x07title", `\x1b]0;pwned\x07title`},
		{"\x1b[2J\x1b[Hclear", `\x1b[2J\x1b[Hclear`},
		{"ok\rforged", `ok\rforged`},
		{"del\x7f nul\x00", `del\x7f nul\x00`},
		{"c1 csi \u009b31m", `c1 csi \u009b31m`},
		{"nel \u0085 ls \u2028 ps \u2029", `nel \u0085 ls \u2028 ps \u2029`},
		{"bad \xff\x9b utf8", `bad \xff\x9b utf8`},
		{"back\\slash", "back\\slash"},
	}
	for _, c := range cases {
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := Bytes([]byte(c.in)); got != c.want {
			t.Errorf("Bytes(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestLine(t *testing.T) {
	if got, want := Line("a\nevent: forged\r\ndata: x\tend"), `a\nevent: forged\r\ndata: x`+"\tend"; got != want {
		t.Fatalf("Line = %q, want %q", got, want)
	}
}

// FuzzLine checks the two promises on any input: the result holds no
// control character but \t (and \n for Text), and clean input is unchanged.
func FuzzLine(f *testing.F) {
	for _, s := range []string{"", "a\x1b[31mb", "\r\n", "\xc2\x9b", "\xe2\x80\xa8", "ok"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, keep := range []bool{true, false} {
			out := escape(s, keep)
			if !utf8.ValidString(out) {
				t.Fatalf("escape(%q) = %q: not UTF-8", s, out)
			}
			for _, r := range out {
				if r == '\t' || (r == '\n' && keep) {
					continue
				}
				if r < 0x20 || r == 0x7f || escapedRune(r) {
					t.Fatalf("escape(%q, %v) = %q keeps control %U", s, keep, out, r)
				}
			}
			if clean(s, keep) && out != s {
				t.Fatalf("clean %q changed to %q", s, out)
			}
			if !keep && strings.ContainsAny(out, "\r\n") {
				t.Fatalf("Line(%q) = %q has a line break", s, out)
			}
		}
	})
}
