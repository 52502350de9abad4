package follow

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// gen writes generated mail: series (cover letter and patches with
// diffs) and replies, as raw RFC 5322 messages.
type gen struct {
	t0  time.Time
	seq int
}

func (g *gen) date() string {
	g.seq++
	return g.t0.Add(time.Duration(g.seq) * time.Second).Format(time.RFC1123Z)
}

// series returns the cover letter and n patches of version v, touching
// files (one per patch, cycling). in-reply-to is "" or the message the
// cover answers (a v2 sent as a reply to v1).
func (g *gen) series(id, author, title string, v, n int, files []string, inReplyTo string) [][]byte {
	ver := ""
	if v > 1 {
		ver = fmt.Sprintf(" v%d", v)
	}
	cover := fmt.Sprintf("%s-v%d-0@example.org", id, v)
	var out [][]byte
	hdr := func(i int, subj, msgid, irt string, refs string) string {
		h := fmt.Sprintf("From: %s\nTo: test@example.org\nSubject: %s\nDate: %s\nMessage-ID: <%s>\n", author, subj, g.date(), msgid)
		if irt != "" {
			h += fmt.Sprintf("In-Reply-To: <%s>\nReferences: %s\n", irt, refs)
		}
		return h + "MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n\n"
	}
	refs := ""
	if inReplyTo != "" {
		refs = "<" + inReplyTo + ">"
	}
	out = append(out, []byte(hdr(0, fmt.Sprintf("[PATCH%s 0/%d] %s", ver, n, title), cover, inReplyTo, refs)+
		fmt.Sprintf("This series changes %d files.\n\n %s | 1 +\n 1 file changed, 1 insertion(+)\n\n-- \n2.39.2\n", n, files[0])))
	prefs := refs
	if prefs != "" {
		prefs += " "
	}
	prefs += "<" + cover + ">"
	for i := 1; i <= n; i++ {
		f := files[(i-1)%len(files)]
		body := fmt.Sprintf("%s: part %d of %s.\n\nSigned-off-by: %s\n---\n %s | 1 +\n 1 file changed, 1 insertion(+)\n\n"+
			"diff --git a/%s b/%s\nindex 1111111..2222222 100644\n--- a/%s\n+++ b/%s\n@@ -1,1 +1,2 @@\n line\n+%s v%d %d\n-- \n2.39.2\n",
			title, i, id, author, f, f, f, f, f, id, v, i)
		out = append(out, []byte(hdr(i, fmt.Sprintf("[PATCH%s %d/%d] %s: part %d", ver, i, n, title, i),
			fmt.Sprintf("%s-v%d-%d@example.org", id, v, i), cover, prefs)+body))
	}
	return out
}

// reply returns a reply to msgid (in the thread under root).
func (g *gen) reply(id, author, subject, msgid, root string) []byte {
	return []byte(fmt.Sprintf("From: %s\nTo: test@example.org\nSubject: Re: %s\nDate: %s\nMessage-ID: <%s@example.org>\n"+
		"In-Reply-To: <%s>\nReferences: <%s> <%s>\n\nLooks fine.\n\nReviewed-by: %s\n", author, subject, g.date(), id, msgid, root, msgid, author))
}

// writeMbox writes messages as an mboxrd file in dir.
func writeMbox(t testing.TB, dir, name string, msgs ...[]byte) string {
	var b bytes.Buffer
	for _, m := range msgs {
		b.WriteString("From mboxrd@z Thu Jan  1 00:00:00 1970\n")
		for _, l := range bytes.SplitAfter(m, []byte("\n")) {
			if bytes.HasPrefix(bytes.TrimLeft(l, ">"), []byte("From ")) {
				b.WriteByte('>')
			}
			b.Write(l)
		}
		if !bytes.HasSuffix(m, []byte("\n")) {
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
