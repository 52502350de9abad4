package mbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func addSeeds(f *testing.F) {
	for _, g := range []string{"testdata/mail/*", "testdata/threads/*.mbox"} {
		files, _ := filepath.Glob(g)
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			if len(b) > 16<<10 {
				b = b[:16<<10]
			}
			f.Add(b)
		}
	}
}

// FuzzParse feeds arbitrary bytes to the mbox splitter and message parser:
// no panic, and a parsed mailbox always gives a consistent Thread.
func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := ParseBytes(data, "fuzz")
		if err != nil {
			if len(ms) != 0 {
				t.Fatal("messages returned with an error")
			}
			return
		}
		if len(ms) == 0 {
			t.Fatal("no messages and no error")
		}
		for _, m := range ms {
			if m.MessageID == "" {
				t.Fatalf("%s: empty Message-ID", m.Source)
			}
			if bytes.Contains(m.Raw, []byte("\r\n")) {
				t.Fatalf("%s: CRLF left in Raw", m.Source)
			}
		}
		th := NewThread(ms, "fuzz")
		if len(th.Messages)+th.Duplicates != len(ms) {
			t.Fatalf("%d kept + %d duplicates != %d parsed", len(th.Messages), th.Duplicates, len(ms))
		}
		n := 0
		var walk func(m *Message, depth int)
		walk = func(m *Message, depth int) {
			if depth > len(th.Messages) {
				t.Fatal("cycle in the reply tree")
			}
			n++
			for _, c := range th.Children(m) {
				if th.Parent(c) != m {
					t.Fatal("Parent and Children disagree")
				}
				walk(c, depth+1)
			}
		}
		for _, r := range th.Roots {
			walk(r, 0)
		}
		if n != len(th.Messages) {
			t.Fatalf("tree reaches %d of %d messages", n, len(th.Messages))
		}
	})
}

// FuzzMboxrdRoundTrip checks that any body survives WriteMboxrd + Parse
// unchanged (mboxrd escaping is reversible), CRLF aside.
func FuzzMboxrdRoundTrip(f *testing.F) {
	f.Add([]byte("From here\n>From there\n>>From everywhere\n"))
	f.Add([]byte("\nFrom mboxrd@z Thu Jan  1 00:00:00 1970\n\nx"))
	f.Add([]byte("From 1234 Mon Sep 17 00:00:00 2001\nFrom: a@b\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		if bytes.IndexByte(body, '\r') >= 0 || !isText(body) {
			return
		}
		raw := append([]byte("From: a@example.org\nSubject: s\nMessage-ID: <rt@x>\n\n"), body...)
		var buf bytes.Buffer
		if err := WriteMboxrd(&buf, raw, raw); err != nil {
			t.Fatal(err)
		}
		ms, err := Parse(&buf, "rt")
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 2 {
			t.Fatalf("%d messages, want 2:\n%s", len(ms), buf.String())
		}
		want := string(body)
		if want != "" && !strings.HasSuffix(want, "\n") {
			want += "\n"
		}
		for _, m := range ms {
			if m.Body != want {
				t.Fatalf("body %q, want %q", m.Body, want)
			}
		}
	})
}

func isText(b []byte) bool {
	for _, c := range b {
		if c < 0x20 && c != '\n' && c != '\t' || c >= 0x7f {
			return false
		}
	}
	return true
}
