package mbox

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// genThread builds an mboxrd thread of n messages shaped like a busy lore
// thread: a cover letter, a 20-patch series with diffs, and replies nested
// up to 8 deep with quoted text, References chains, Gmail attributions,
// some quoted-printable and a few multipart messages with a patch attached.
func genThread(n int) []byte {
	var buf bytes.Buffer
	base := time.Date(2026, 7, 27, 9, 0, 0, 0, time.UTC)
	type node struct {
		id   string
		refs []string
		subj string
	}
	var nodes []node
	diff := strings.Repeat("diff --git a/kernel/sched/core.c b/kernel/sched/core.c\n--- a/kernel/sched/core.c\n+++ b/kernel/sched/core.c\n@@ -100,7 +100,8 @@ void foo(void)\n \tint x;\n-\tx = 1;\n+\tx = 2;\n+\tbar(x);\n \treturn;\n", 8)
	quote := strings.Repeat("> On powerpc the preempt count lives in the thread_info and is\n> checked on every interrupt exit; with dynamic preemption the\n", 10)
	for i := 0; i < n; i++ {
		var nd node
		nd.id = fmt.Sprintf("20260727%06d.%08x-%d-dev@example.org", i, i*2654435761, i)
		var body, extraHdr string
		switch {
		case i == 0:
			nd.subj = "[PATCH v3 0/20] sched: a large series"
			body = "This series does things.\n\n" + strings.Repeat(" kernel/sched/core.c | 10 +++++-----\n", 20)
		case i <= 20:
			nd.subj = fmt.Sprintf("[PATCH v3 %d/20] sched: part %d", i, i)
			nd.refs = []string{nodes[0].id}
			body = "Commit message explaining the change.\n\nSigned-off-by: Dev <dev@example.org>\n---\n" + diff
		default:
			p := nodes[(i*7919)%i]
			if len(p.refs) >= 8 {
				p = nodes[1+i%20]
			}
			nd.refs = append(append([]string{}, p.refs...), p.id)
			nd.subj = "Re: " + strings.TrimPrefix(p.subj, "Re: ")
			body = fmt.Sprintf("On Mon, Jul 27, 2026 at 10:%02d\u202fAM Someone <s@example.org> wrote:\n%s\nReviewed-by: Reviewer %d <r%d@example.org>\n", i%60, quote, i, i)
		}
		d := base.Add(time.Duration(i) * time.Minute)
		fmt.Fprintf(&buf, "From mboxrd@z Thu Jan  1 00:00:00 1970\nFrom: Dev %d <dev%d@example.org>\nTo: linux-kernel@vger.kernel.org\nCc: =?UTF-8?Q?J=C3=B6rg?= <j@example.org>, a@example.org, b@example.org\nSubject: %s\nDate: %s\nMessage-ID: <%s>\n", i, i%50, nd.subj, d.Format(time.RFC1123Z), nd.id)
		if len(nd.refs) > 0 {
			fmt.Fprintf(&buf, "In-Reply-To: <%s>\nReferences: <%s>\n", nd.refs[len(nd.refs)-1], strings.Join(nd.refs, ">\n <"))
		}
		switch {
		case i > 20 && i%10 == 0:
			extraHdr = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b\"\n"
			body = "--b\nContent-Type: text/plain; charset=utf-8\n\n" + body + "--b\nContent-Type: text/x-patch; name=\"fix.patch\"\nContent-Disposition: attachment; filename=\"fix.patch\"\n\n" + diff + "--b--\n"
		case i > 20 && i%3 == 0:
			extraHdr = "MIME-Version: 1.0\nContent-Type: text/plain; charset=\"utf-8\"\nContent-Transfer-Encoding: quoted-printable\n"
			body = strings.ReplaceAll(body, "\u202f", "=E2=80=AF")
		default:
			extraHdr = "Content-Type: text/plain; charset=\"utf-8\"\nContent-Transfer-Encoding: 8bit\n"
		}
		buf.WriteString(extraHdr)
		buf.WriteString("\n")
		buf.Write(EscapeMboxrd([]byte(body)))
		buf.WriteString("\n")
		nodes = append(nodes, nd)
	}
	return buf.Bytes()
}

func TestGenThread(t *testing.T) {
	data := genThread(1000)
	ms, err := ParseBytes(data, "gen")
	if err != nil {
		t.Fatal(err)
	}
	th := NewThread(ms, "gen")
	if len(th.Messages) != 1000 || len(th.Roots) != 1 || len(th.Orphans) != 0 {
		t.Fatalf("%d messages, %d roots, %d orphans", len(th.Messages), len(th.Roots), len(th.Orphans))
	}
	for _, m := range th.Messages {
		if len(m.Notes) > 0 {
			t.Fatalf("%s: %v", m.Source, m.Notes)
		}
	}
	if !strings.Contains(th.Messages[30].Body, "diff --git") || !strings.Contains(th.Messages[33].Body, "\u202fAM") {
		t.Errorf("generated MIME not decoded")
	}
	t.Logf("generated thread: %d KiB", len(data)/1024)
}

// BenchmarkParseThread1000 parses a generated 1,000-message thread and links
// it (Parse + NewThread). Target: under 200 ms per op.
func BenchmarkParseThread1000(b *testing.B) {
	data := genThread(1000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		ms, err := ParseBytes(data, "gen")
		if err != nil {
			b.Fatal(err)
		}
		if th := NewThread(ms, "gen"); len(th.Messages) != 1000 {
			b.Fatal(len(th.Messages))
		}
	}
}
