package series

import (
	"strings"
	"testing"

	"github.com/patcheval/patcheval/mbox"
)

func TestParseTrailers(t *testing.T) {
	cases := []struct {
		name string
		body string
		want []string // "Name: value|email"
	}{
		{"plain review", "Looks good.\n\nReviewed-by: Jane Doe <jane@example.org>\n\nThanks\n",
			[]string{"Reviewed-by: Jane Doe <jane@example.org>|jane@example.org"}},
		{"quoted ignored", "> Reviewed-by: Old Guy <old@example.org>\n>> Acked-by: A <a@example.org>\nAcked-by: New <new@example.org>\n",
			[]string{"Acked-by: New <new@example.org>|new@example.org"}},
		{"signature cut", "Tested-by: T <t@example.org>\n-- \nReviewed-by: Sig <sig@example.org>\n",
			[]string{"Tested-by: T <t@example.org>|t@example.org"}},
		{"wrapped address", "Signed-off-by: A Very Long Name Indeed\n<long@example.org>\n",
			[]string{"Signed-off-by: A Very Long Name Indeed <long@example.org>|long@example.org"}},
		{"indented continuation", "Reported-by: Someone\n  <someone@example.org>\n",
			[]string{"Reported-by: Someone <someone@example.org>|someone@example.org"}},
		{"fixes wrapped", "Fixes: 0123456789ab (\"powerpc: do a thing that is long\nand wraps\")\n",
			[]string{"Fixes: 0123456789ab (\"powerpc: do a thing that is long and wraps\")|"}},
		{"not trailers", "Test: stress-ng --kill 1\nMachine: POWER10\nNote: x@y.z\nFrom: A <a@b.org>\nSubject: hi\n", nil},
		{"person without email dropped", "Reviewed-by: nobody\nAcked-by: Fine <fine@example.org>\n",
			[]string{"Acked-by: Fine <fine@example.org>|fine@example.org"}},
		{"all kinds", strings.Join([]string{
			"Fixes: abcdef012345 (\"x: y\")",
			"Closes: https://lore.kernel.org/r/123@x",
			"Link: https://lore.kernel.org/r/456@x",
			"Cc: stable@vger.kernel.org # 6.1+",
			"Co-developed-by: C D <cd@example.org>",
			"Reviewed-and-tested-by: R T <rt@example.org>",
			"Suggested-by: S <s@example.org>",
			"Nacked-by: N <n@example.org>",
		}, "\n"), []string{
			"Fixes: abcdef012345 (\"x: y\")|",
			"Closes: https://lore.kernel.org/r/123@x|",
			"Link: https://lore.kernel.org/r/456@x|",
			"Cc: stable@vger.kernel.org # 6.1+|stable@vger.kernel.org",
			"Co-developed-by: C D <cd@example.org>|cd@example.org",
			"Reviewed-and-tested-by: R T <rt@example.org>|rt@example.org",
			"Suggested-by: S <s@example.org>|s@example.org",
			"Nacked-by: N <n@example.org>|n@example.org",
		}},
		{"crlf and indent", "  Reviewed-by: X <x@example.org>\r\n", []string{"Reviewed-by: X <x@example.org>|x@example.org"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ParseTrailers(c.body)
			var gs []string
			for _, tr := range got {
				e := ""
				if tr.Person != nil {
					e = tr.Person.Email
				}
				gs = append(gs, tr.String()+"|"+e)
			}
			if strings.Join(gs, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("ParseTrailers(%q)\n got %q\nwant %q", c.body, gs, c.want)
			}
		})
	}
}

func TestSplitTrailerBlock(t *testing.T) {
	text, block := splitTrailerBlock("Body line.\n\nMore body.\n\nSigned-off-by: A <a@b.org>\n[ fixed: foo ]\nReviewed-by: B\n  <b@c.org>\n")
	if text != "Body line.\n\nMore body." || !strings.HasPrefix(block, "Signed-off-by") {
		t.Fatalf("split: %q / %q", text, block)
	}
	text, block = splitTrailerBlock("Body only.\n\nLast paragraph: with a colon but\nmore text.\n")
	if block != "" || !strings.HasSuffix(text, "more text.") {
		t.Fatalf("no block: %q / %q", text, block)
	}
}

func TestCommitMessage(t *testing.T) {
	p := &Patch{
		Msg:     &mbox.Message{MessageID: "20250210194600.322cfa9d-1-sshegde@linux.ibm.com"},
		Subject: Subject{Title: "powerpc: enable dynamic preemption"},
		Message: "Once the lazy preemption is supported.  \n\n\n\nSecond paragraph.\n\nSigned-off-by: Shrikanth Hegde <sshegde@linux.ibm.com>\n",
		Trailers: []Trailer{
			{Name: "Signed-off-by", Value: "Shrikanth Hegde <sshegde@linux.ibm.com>", InPatch: true},
			{Name: "Acked-by", Value: "Cover Acker <c@example.org>", FromCover: true},
			{Name: "Reviewed-by", Value: "Jane <jane@example.org>"},
			{Name: "reviewed-by", Value: "jane <JANE@example.org>"}, // duplicate (b4 compares case-insensitively)
			{Name: "Signed-off-by", Value: "Shrikanth Hegde <sshegde@linux.ibm.com>"},
		},
	}
	got := p.CommitMessage(DefaultAMOptions())
	want := `powerpc: enable dynamic preemption

Once the lazy preemption is supported.

Second paragraph.

Signed-off-by: Shrikanth Hegde <sshegde@linux.ibm.com>
Reviewed-by: Jane <jane@example.org>
Acked-by: Cover Acker <c@example.org>
Link: https://patch.msgid.link/20250210194600.322cfa9d-1-sshegde@linux.ibm.com
`
	if got != want {
		t.Errorf("CommitMessage:\n%s\nwant:\n%s", got, want)
	}
	// No trailer block in the message: a blank line before the added ones.
	p2 := &Patch{Msg: &mbox.Message{MessageID: "m@x"}, Subject: Subject{Title: "t"}, Message: "just text\n",
		Trailers: []Trailer{{Name: "Tested-by", Value: "T <t@x.org>"}}}
	if got := p2.CommitMessage(AMOptions{}); got != "t\n\njust text\n\nTested-by: T <t@x.org>\n" {
		t.Errorf("no block: %q", got)
	}
	p3 := &Patch{Msg: &mbox.Message{MessageID: "m@x"}, Subject: Subject{Title: "t"}}
	if got := p3.CommitMessage(AMOptions{LinkMask: "https://lore.kernel.org/r/%s"}); got != "t\n\nLink: https://lore.kernel.org/r/m@x\n" {
		t.Errorf("empty body: %q", got)
	}
	if got := p3.CommitMessage(AMOptions{}); got != "t\n" {
		t.Errorf("title only: %q", got)
	}
}

func FuzzParseTrailers(f *testing.F) {
	for _, s := range []string{
		"Reviewed-by: A <a@b.org>\n",
		"> Acked-by: Q <q@x.org>\nTested-by: T\n <t@x.org>\n",
		"Fixes: 0123 (\"a\nb\")\n-- \nsig\n",
		"Signed-off-by: X\n<x@y.z>\n[ note ]\nCc: stable@vger.kernel.org # 6.1\n",
		"Link: https://x/y\r\nCloses: z\n",
		"Reviewed-by: B <b@example.com<mailto:b@example.com>>\nAcked-by: C <mailto:c@example.org>\nTested-by: D <d@example..org>\n",
	} {
		f.Add(s)
	}
	bodies, _ := realMailBodies(f)
	for _, b := range bodies {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		trs := ParseTrailers(body)
		for _, tr := range trs {
			if tr.Name == "" || strings.ContainsAny(tr.Name, ": \n") {
				t.Fatalf("bad name %q from %q", tr.Name, body)
			}
			if strings.Contains(tr.Value, "\n") {
				t.Fatalf("value with newline %q", tr.Value)
			}
			if IsPersonTrailer(tr.Name) && (tr.Person == nil) == (tr.Problem == "") {
				t.Fatalf("person trailer must have a person or a problem, not both or neither: %+v from %q", tr, body)
			}
			if tr.Normalized != "" && (tr.Person == nil || !strings.Contains(tr.Value, "<"+tr.Person.Email+">")) {
				t.Fatalf("normalised value %q does not carry the address %+v", tr.Value, tr.Person)
			}
		}
		// Quoting the whole body removes every trailer.
		quoted := "> " + strings.ReplaceAll(body, "\n", "\n> ")
		if q := ParseTrailers(quoted); len(q) != 0 {
			t.Fatalf("trailers from quoted text: %+v", q)
		}
		_, _ = splitTrailerBlock(body)
	})
}
