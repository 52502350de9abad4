package series

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/patcheval/patcheval/mbox"
)

// genThread builds an mboxrd of n messages: a v1 and a v2 of a 24-patch
// series with cover letters, the rest review replies (quoted text, some
// with trailers), spread over both versions.
func genThread(n int) []byte {
	var b bytes.Buffer
	id := 0
	add := func(from, subject, parent, body string) string {
		id++
		mid := fmt.Sprintf("gen-%d@example.org", id)
		fmt.Fprintf(&b, "From mboxrd@z Thu Jan  1 00:00:00 1970\nFrom: %s\nTo: list@example.org\nSubject: %s\nDate: Mon, 5 Jan 2026 %02d:%02d:%02d +0000\nMessage-ID: <%s>\n",
			from, subject, (id/3600)%24, (id/60)%60, id%60, mid)
		if parent != "" {
			fmt.Fprintf(&b, "In-Reply-To: <%s>\nReferences: <%s>\n", parent, parent)
		}
		b.WriteString("MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n\n")
		b.WriteString(body)
		b.WriteString("\n")
		return mid
	}
	const total = 24
	var patches []string
	var subjects []string
	for v := 1; v <= 2; v++ {
		c := add("A <a@example.org>", fmt.Sprintf("[PATCH v%d 0/%d] gen: series", v, total), "", "Cover.\n\n x | 1 +\n 1 file changed, 1 insertion(+)\n\nbase-commit: 0123456789abcdef0123456789abcdef01234567\n")
		patches = append(patches, c)
		subjects = append(subjects, fmt.Sprintf("[PATCH v%d 0/%d] gen: series", v, total))
		for i := 1; i <= total; i++ {
			s := fmt.Sprintf("[PATCH v%d %d/%d] gen: change %d", v, i, total, i)
			body := fmt.Sprintf("Change %d.\n\nSigned-off-by: A <a@example.org>\n---\n f%d.c | 2 +-\n\ndiff --git a/f%d.c b/f%d.c\nindex 1111111..2222222 100644\n--- a/f%d.c\n+++ b/f%d.c\n@@ -1,3 +1,3 @@\n a\n-b%d\n+c%d\n d\n-- \n2.43.0\n", i, i, i, i, i, i, v, i)
			patches = append(patches, add("A <a@example.org>", s, c, body))
			subjects = append(subjects, s)
		}
	}
	for k := 0; id < n; k++ {
		j := k % len(patches)
		body := "On Mon, A wrote:\n> Change.\n> Signed-off-by: A <a@example.org>\n\nLooks fine.\n"
		if k%3 == 0 {
			body += fmt.Sprintf("\nReviewed-by: R%d <r%d@example.org>\n", k%40, k%40)
		}
		add(fmt.Sprintf("R%d <r%d@example.org>", k%40, k%40), "Re: "+subjects[j], patches[j], body)
	}
	return b.Bytes()
}

// BenchmarkResolve1000 parses a generated 1,000-message thread (mbox
// parse, threading) and resolves its series. Target: under 200 ms.
func BenchmarkResolve1000(b *testing.B) {
	data := genThread(1000)
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		msgs, err := mbox.ParseBytes(data, "gen")
		if err != nil {
			b.Fatal(err)
		}
		s, err := Resolve(mbox.NewThread(msgs, "gen"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		if len(msgs) != 1000 || s.Version != 2 || len(s.Patches) != 24 {
			b.Fatalf("%d messages, v%d, %d patches", len(msgs), s.Version, len(s.Patches))
		}
	}
}

// TestResolve1000 resolves the benchmark's 1,000-message thread once and
// checks what it found; the 200 ms target is BenchmarkResolve1000's (a
// timed assertion here failed on a loaded machine and measured nothing).
func TestResolve1000(t *testing.T) {
	data := genThread(1000)
	msgs, err := mbox.ParseBytes(data, "gen")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Resolve(mbox.NewThread(msgs, "gen"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1000 || s.Version != 2 || len(s.Patches) != 24 {
		t.Errorf("%d messages, v%d, %d patches; want 1000, v2, 24", len(msgs), s.Version, len(s.Patches))
	}
}
