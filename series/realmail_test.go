package series

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/mbox"
)

// The classes of real mail of issue 16, each in several shapes. The
// mailboxes are generated here (tmail) so that every shape says what it
// varies; where Debian's b4 handles a class, the same file goes through
// `b4 am -m FILE MSGID` and the results are compared.

// tmail is one generated mail.
type tmail struct {
	id      string   // Message-ID without brackets; "" writes none
	irt     string   // In-Reply-To
	refs    []string // References, in this order
	from    string   // default Alice Author <alice@example.org>
	subject string   // written as is; noSubject leaves the header out
	body    string
	at      int // minutes after the base date
	// noSubject leaves the Subject: header out.
	noSubject bool
}

var tmailBase = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

func (m tmail) raw() string {
	var b strings.Builder
	from := m.from
	if from == "" {
		from = "Alice Author <alice@example.org>"
	}
	fmt.Fprintf(&b, "From: %s\nTo: shapes@example.org\n", from)
	if !m.noSubject {
		fmt.Fprintf(&b, "Subject: %s\n", m.subject)
	}
	fmt.Fprintf(&b, "Date: %s\n", tmailBase.Add(time.Duration(m.at)*time.Minute).Format(time.RFC1123Z))
	if m.id != "" {
		fmt.Fprintf(&b, "Message-ID: <%s>\n", m.id)
	}
	if m.irt != "" {
		fmt.Fprintf(&b, "In-Reply-To: <%s>\n", m.irt)
	}
	if len(m.refs) > 0 {
		b.WriteString("References: <" + strings.Join(m.refs, ">\n <") + ">\n")
	}
	b.WriteString("MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n\n")
	b.WriteString(m.body)
	return b.String()
}

// tmbox renders mails as an mboxrd.
func tmbox(ms ...tmail) []byte {
	var raws [][]byte
	for _, m := range ms {
		raws = append(raws, []byte(m.raw()))
	}
	var b bytes.Buffer
	if err := mbox.WriteMboxrd(&b, raws...); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func tthread(t testing.TB, ms ...tmail) *mbox.Thread {
	t.Helper()
	msgs, err := mbox.ParseBytes(tmbox(ms...), "gen.mbox")
	if err != nil {
		t.Fatal(err)
	}
	return mbox.NewThread(msgs, "gen.mbox")
}

func tresolve(t testing.TB, ms ...tmail) *Series {
	t.Helper()
	s, err := Resolve(tthread(t, ms...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tpatch is a patch body changing line 2 of file (see tfiles) to val.
func tpatch(file, msg, val string) string {
	return msg + "\n\nSigned-off-by: Alice Author <alice@example.org>\n---\n" +
		" " + file + " | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n\n" +
		"diff --git a/" + file + " b/" + file + "\n--- a/" + file + "\n+++ b/" + file + "\n" +
		"@@ -1,3 +1,3 @@\n int a;\n-int " + strings.TrimSuffix(file, ".c") + "1 = 0;\n+int " + strings.TrimSuffix(file, ".c") + "1 = " + val + ";\n int b;\n-- \n2.43.0\n"
}

// tfiles is the tree the tpatch diffs apply to.
var tfiles = map[string]string{
	"a.c": "int a;\nint a1 = 0;\nint b;\n",
	"b.c": "int a;\nint b1 = 0;\nint b;\n",
	"c.c": "int a;\nint c1 = 0;\nint b;\n",
}

// cover is a cover letter with a diffstat.
func tcover(id, subject string, at int) tmail {
	return tmail{id: id, subject: subject, at: at, body: "A series.\n\nAlice Author (2):\n  one\n  two\n\n a.c | 2 +-\n b.c | 2 +-\n 2 files changed, 2 insertions(+), 2 deletions(-)\n\n" +
		"base-commit: 0123456789abcdef0123456789abcdef01234567\n-- \n2.43.0\n"}
}

// twoPatchSeries is a v1 series: cover c-0, patches c-1 (a.c) and c-2
// (b.c), threaded like git send-email.
func twoPatchSeries(p string) []tmail {
	return []tmail{
		tcover(p+"-0@example.org", "[PATCH 0/2] shapes: a series", 0),
		{id: p + "-1@example.org", irt: p + "-0@example.org", refs: []string{p + "-0@example.org"}, subject: "[PATCH 1/2] shapes: one", at: 1, body: tpatch("a.c", "One.", "1")},
		{id: p + "-2@example.org", irt: p + "-0@example.org", refs: []string{p + "-0@example.org"}, subject: "[PATCH 2/2] shapes: two", at: 2, body: tpatch("b.c", "Two.", "2")},
	}
}

func writeTemp(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// b4AMFile runs Debian's `b4 am -t -l -m FILE MSGID` (no network) and
// returns the am mbox and b4's output; nil when b4 wrote none.
func b4AMFile(t *testing.T, path, msgid string) ([]byte, string) {
	t.Helper()
	if _, err := exec.LookPath("b4"); err != nil {
		t.Fatal("b4 is required (apt-get install b4): ", err)
	}
	dir := t.TempDir()
	cmd := exec.Command("b4", "am", "-t", "-l", "-m", path, "-o", dir, "-n", "am", msgid)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "XDG_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"GIT_CONFIG_COUNT=3", "GIT_CONFIG_KEY_0=b4.linkmask", "GIT_CONFIG_VALUE_0=" + DefaultLinkMask,
		"GIT_CONFIG_KEY_1=user.name", "GIT_CONFIG_VALUE_1=Patcheval Test", "GIT_CONFIG_KEY_2=user.email", "GIT_CONFIG_VALUE_2=test@patcheval.invalid"}
	out, err := cmd.CombinedOutput()
	data, rerr := os.ReadFile(filepath.Join(dir, "am.mbx"))
	if err != nil || rerr != nil {
		return nil, fmt.Sprintf("%v\n%s", err, out)
	}
	return data, string(out)
}

// compareB4 checks patcheval's am mbox against b4's, patch by patch
// (numbers, titles, commit messages, diffs).
func compareB4(t *testing.T, s *Series, b4raw []byte) {
	t.Helper()
	var ours bytes.Buffer
	if err := s.WriteAM(&ours, DefaultAMOptions()); err != nil {
		t.Fatal(err)
	}
	got, want := readAM(t, ours.Bytes(), "patcheval"), readAM(t, b4raw, "b4")
	if len(got) != len(want) {
		t.Fatalf("patcheval %d patches, b4 %d\nours:\n%s\nb4:\n%s", len(got), len(want), ours.Bytes(), b4raw)
	}
	for i := range want {
		if got[i].Title != want[i].Title || got[i].Commit != want[i].Commit || got[i].Diff != want[i].Diff {
			t.Errorf("patch %d differs from b4\npatcheval:\n%s\n%s\nb4:\n%s\n%s", i, got[i].Commit, got[i].Diff, want[i].Commit, want[i].Diff)
		}
	}
}

// gitAM applies the am mbox with the real git am onto a repository holding
// tfiles and returns the commit messages made (oldest first), or git's
// error output.
func gitAM(t *testing.T, am []byte) ([]string, error) {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	for n, c := range tfiles {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "base")
	p := filepath.Join(dir, "..", "am.mbx")
	if err := os.WriteFile(p, am, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "am", "-q", "--patch-format=mboxrd", p)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.org")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("git am: %v: %s", err, out)
	}
	log := git(t, dir, "log", "--reverse", "--format=%B%x00", "main~..")
	if n := strings.Count(git(t, dir, "rev-list", "main"), "\n"); n > 1 {
		log = git(t, dir, "log", "--reverse", "--format=%B%x00", fmt.Sprintf("main~%d..", n-1))
	}
	var msgs []string
	for _, m := range strings.Split(log, "\x00") {
		if m = strings.TrimSpace(m); m != "" {
			msgs = append(msgs, m+"\n")
		}
	}
	return msgs, nil
}

func amBytes(t testing.TB, s *Series) []byte {
	var b bytes.Buffer
	if err := s.WriteAM(&b, DefaultAMOptions()); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func summary(s *Series) string {
	var b strings.Builder
	s.WriteSummary(&b, DefaultAMOptions())
	return b.String()
}

// Class 1: In-Reply-To names the parent, whatever order References has.
func TestRealMailInReplyToParent(t *testing.T) {
	review := func(id, irt string, refs ...string) tmail {
		return tmail{id: id, irt: irt, refs: refs, from: "Bob Reviewer <bob@example.com>", subject: "Re: [PATCH 2/2] shapes: two", at: 10,
			body: "> looks right\n\nReviewed-by: Bob Reviewer <bob@example.com>\n"}
	}
	onlyTwo := `[PATCH 1/2] shapes: one
[PATCH 2/2] shapes: two
  Reviewed-by: Bob Reviewer <bob@example.com> <- from <r@example.org>, v1
`
	for _, c := range []struct {
		name  string
		reply tmail
		want  string
		// b4drops: Debian's b4 0.12 follows In-Reply-To only and drops
		// the trailer when it is absent or unknown; patcheval hangs the
		// reply under its nearest ancestor from References, like
		// public-inbox threads it.
		b4drops bool
	}{
		{"References reversed: parent first, cover last", review("r@example.org", "c-2@example.org", "c-2@example.org", "c-0@example.org"), onlyTwo, false},
		{"References only the cover", review("r@example.org", "c-2@example.org", "c-0@example.org"), onlyTwo, false},
		{"References in order", review("r@example.org", "c-2@example.org", "c-0@example.org", "c-2@example.org"), onlyTwo, false},
		{"no In-Reply-To: last of References", review("r@example.org", "", "c-0@example.org", "c-2@example.org"), onlyTwo, true},
		{"In-Reply-To unknown: nearest known of References", review("r@example.org", "gone@example.org", "c-0@example.org", "c-2@example.org", "gone@example.org"), onlyTwo, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mails := append(twoPatchSeries("c"), c.reply)
			s := tresolve(t, mails...)
			if got := shape(s); got != c.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, c.want)
			}
			b4raw, out := b4AMFile(t, writeTemp(t, "x.mbox", tmbox(mails...)), "c-0@example.org")
			if b4raw == nil {
				t.Fatalf("b4 wrote nothing: %s", out)
			}
			if c.b4drops {
				if bytes.Contains(b4raw, []byte("Reviewed-by: Bob")) {
					t.Fatal("b4 now takes this review; compare directly")
				}
				b4raw = bytes.Replace(b4raw, []byte("Link: https://patch.msgid.link/c-2@"), []byte("Reviewed-by: Bob Reviewer <bob@example.com>\nLink: https://patch.msgid.link/c-2@"), 1)
			}
			compareB4(t, s, b4raw)
		})
	}
	// A partial re-roll: v2 re-sends 2/2 as a reply to v1 2/2; the review
	// of v2 2/2 lists the v1 cover last in References. It belongs to v2
	// 2/2, not to the (borrowed) v1 cover and so to every patch.
	mails := append(twoPatchSeries("c"),
		tmail{id: "c2-2@example.org", irt: "c-2@example.org", refs: []string{"c-0@example.org", "c-2@example.org"}, subject: "[PATCH v2 2/2] shapes: two", at: 20, body: tpatch("b.c", "Two, better.", "3")},
		tmail{id: "r2@example.org", irt: "c2-2@example.org", refs: []string{"c2-2@example.org", "c-2@example.org", "c-0@example.org"}, from: "Bob Reviewer <bob@example.com>",
			subject: "Re: [PATCH v2 2/2] shapes: two", at: 30, body: "Reviewed-by: Bob Reviewer <bob@example.com>\n"})
	s := tresolve(t, mails...)
	want := `[PATCH v2 1/2] shapes: one (from v1)
[PATCH v2 2/2] shapes: two
  Reviewed-by: Bob Reviewer <bob@example.com> <- from <r2@example.org>, v2
`
	if got := shape(s); got != want {
		t.Errorf("partial re-roll:\n%s\nwant:\n%s", got, want)
	}
}

// Class 2: person trailers with addresses polluted by HTML mail.
func TestRealMailPollutedAddress(t *testing.T) {
	for _, c := range []struct {
		value, want, problem string
	}{
		{"Bob Reviewer <bob@example.com<mailto:bob@example.com>>", "Bob Reviewer <bob@example.com>", ""},
		{"Bob Reviewer <bob@example.com <mailto:bob@example.com>>", "Bob Reviewer <bob@example.com>", ""},
		{"Bob Reviewer <mailto:bob@example.com>", "Bob Reviewer <bob@example.com>", ""},
		{"Bob Reviewer bob@example.com<mailto:bob@example.com>", "Bob Reviewer <bob@example.com>", ""},
		{"Bob Reviewer <[bob@example.com](mailto:bob@example.com)>", "Bob Reviewer <bob@example.com>", ""},
		{"Bob Reviewer <bob@example.com>>", "Bob Reviewer <bob@example.com>", ""},
		{"Bob Reviewer <BOB@example.com<mailto:bob@example.com>> # v2 only", "Bob Reviewer <BOB@example.com> # v2 only", ""},
		{"Bob R. <bob@example.com<mailto:bob@example.com>>", `"Bob R." <bob@example.com>`, ""},
		{"Bøb Révïewer <bob@example.com<mailto:bob@example.com>>", "Bøb Révïewer <bob@example.com>", ""},
		{"Révïewer, Bøb <bob@example.com<mailto:bob@example.com>>", `"Révïewer, Bøb" <bob@example.com>`, ""},
		// Left as they are: nothing polluted.
		{"Bob Reviewer <bob@example.com>", "Bob Reviewer <bob@example.com>", ""},
		{"bob@example.com", "bob@example.com", ""},
		// Refused: no single valid address.
		{"Bob Reviewer <bob@example.com<mailto:eve@example.net>>", "", "two different addresses"},
		{"Bob Reviewer <bob@@example.com>", "", "not a valid address"},
		{"Bob Reviewer <bob@example..com<mailto:bob@example..com>>", "", "not a valid address"},
	} {
		trs := ParseTrailers("Reviewed-by: " + c.value + "\n")
		if len(trs) != 1 {
			t.Errorf("%q: %d trailers", c.value, len(trs))
			continue
		}
		tr := trs[0]
		if c.problem != "" {
			if !strings.Contains(tr.Problem, c.problem) || tr.Person != nil {
				t.Errorf("%q: problem %q person %v, want %q", c.value, tr.Problem, tr.Person, c.problem)
			}
			continue
		}
		if tr.Value != c.want || tr.Problem != "" || tr.Person == nil || !strings.EqualFold(tr.Person.Email, "bob@example.com") {
			t.Errorf("%q: value %q person %+v problem %q, want %q", c.value, tr.Value, tr.Person, tr.Problem, c.want)
		}
	}

	// Through Resolve: cleaned with a note, refused with a note.
	mails := append(twoPatchSeries("h"),
		tmail{id: "h-r1@example.org", irt: "h-1@example.org", refs: []string{"h-0@example.org", "h-1@example.org"}, from: "Bob Reviewer <bob@example.com>", subject: "RE: [PATCH 1/2] shapes: one", at: 10,
			body: "Looks good.\n\nReviewed-by: Bob Reviewer <bob@example.com<mailto:bob@example.com>>\n\n________________________________\nFrom: Alice Author <alice@example.org<mailto:alice@example.org>>\n"},
		tmail{id: "h-r2@example.org", irt: "h-2@example.org", refs: []string{"h-0@example.org", "h-2@example.org"}, from: "Bob Reviewer <bob@example.com>", subject: "RE: [PATCH 2/2] shapes: two", at: 11,
			body: "Acked-by: Bob Reviewer <bob@example.com<mailto:eve@example.net>>\n"})
	s := tresolve(t, mails...)
	want := `[PATCH 1/2] shapes: one
  Reviewed-by: Bob Reviewer <bob@example.com> <- from <h-r1@example.org>, v1
[PATCH 2/2] shapes: two
`
	if got := shape(s); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if !hasNote(s, `written as "Reviewed-by: Bob Reviewer <bob@example.com>"`) || !hasNote(s, "two different addresses bob@example.com and eve@example.net") || len(s.Refused) != 1 {
		t.Errorf("notes %q refused %v", s.Notes, s.Refused)
	}
	// Debian's b4 0.12 loses the polluted Reviewed-by altogether (its
	// address parse does not match the sender; current b4 writes "Name
	// <a@b.c>" like patcheval) and refuses the two-address Acked-by too.
	b4raw, out := b4AMFile(t, writeTemp(t, "x.mbox", tmbox(mails...)), "h-0@example.org")
	if b4raw == nil {
		t.Fatalf("b4: %s", out)
	}
	if bytes.Contains(b4raw, []byte("Reviewed-by: Bob")) || bytes.Contains(b4raw, []byte("Acked-by")) {
		t.Errorf("Debian b4 now takes these trailers; compare directly:\n%s", b4raw)
	}
	b4raw = bytes.Replace(b4raw, []byte("Link: https://patch.msgid.link/h-1@"), []byte("Reviewed-by: Bob Reviewer <bob@example.com>\nLink: https://patch.msgid.link/h-1@"), 1)
	compareB4(t, s, b4raw)
}

// Class 3: a patch mail without a Subject header.
func TestRealMailNoSubject(t *testing.T) {
	body := "shapes: the title line\n\nThe explanation,\nover two lines.\n\n" + tpatch("a.c", "", "7")[2:]
	for _, c := range []struct {
		name  string
		mail  tmail
		title string
	}{
		{"no Subject header", tmail{id: "ns-1@example.org", noSubject: true, body: body}, "shapes: the title line"},
		{"empty Subject header", tmail{id: "ns-1@example.org", subject: "", body: body}, "shapes: the title line"},
		{"bare [PATCH] Subject", tmail{id: "ns-1@example.org", subject: "[PATCH]", body: body}, "shapes: the title line"},
		{"title wrapped over two lines", tmail{id: "ns-1@example.org", noSubject: true, body: "shapes: a title\nthat wraps\n\nThe explanation,\nover two lines.\n\n" + tpatch("a.c", "", "7")[2:]}, "shapes: a title that wraps"},
		{"in-body Subject: wins", tmail{id: "ns-1@example.org", noSubject: true, body: "Subject: [PATCH] shapes: in-body\n\nThe explanation,\nover two lines.\n\n" + tpatch("a.c", "", "7")[2:]}, "shapes: in-body"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := tresolve(t, c.mail)
			if len(s.Patches) != 1 || s.Patches[0].Subject.Title != c.title {
				t.Fatalf("patches %d title %q", len(s.Patches), s.Patches[0].Subject.Title)
			}
			msgs, err := gitAM(t, amBytes(t, s))
			if err != nil {
				t.Fatal(err)
			}
			want := c.title + "\n\nThe explanation,\nover two lines.\n\nSigned-off-by: Alice Author <alice@example.org>\nLink: https://patch.msgid.link/ns-1@example.org\n"
			if len(msgs) != 1 || msgs[0] != want {
				t.Errorf("git am made %q, want %q", msgs, want)
			}
			if c.name != "in-body Subject: wins" && !hasNote(s, "no subject") {
				t.Errorf("no note: %q", s.Notes)
			}
			if c.name != "in-body Subject: wins" {
				// b4 writes "Subject: [PATCH] " and keeps the first line
				// in the body; git am then makes the same commit.
				b4raw, out := b4AMFile(t, writeTemp(t, "x.mbox", tmbox(c.mail)), "ns-1@example.org")
				if b4raw == nil {
					t.Fatalf("b4: %s", out)
				}
				b4msgs, err := gitAM(t, b4raw)
				if err == nil && len(b4msgs) == 1 && c.name == "title wrapped over two lines" {
					// On purpose: patcheval makes the wrapped title one
					// line (what git log %s shows either way); git am
					// of b4's mbox keeps the line break in the message.
					b4msgs[0] = strings.Replace(b4msgs[0], "title\nthat", "title that", 1)
				}
				if err != nil || len(b4msgs) != 1 || b4msgs[0] != msgs[0] {
					t.Errorf("git am of b4's mbox: %v\n%q\nours: %q", err, b4msgs, msgs)
				}
			}
		})
	}
}

// Class 4: a message without a Message-ID never leaks its synthetic id.
func TestRealMailNoMessageID(t *testing.T) {
	mails := twoPatchSeries("n")
	mails[0].id = ""                      // the cover
	mails[2].id = ""                      // patch 2/2
	mails[1].irt, mails[1].refs = "", nil // nothing to thread by
	mails[2].irt, mails[2].refs = "", nil
	mails = append(mails, tmail{from: "Bob Reviewer <bob@example.com>", subject: "Re: [PATCH 2/2] shapes: two", at: 9, body: "Tested-by: Bob Reviewer <bob@example.com>\n"})
	th := tthread(t, mails...)
	s, err := Resolve(th, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	json.NewEncoder(&js).Encode(s)
	outputs := map[string]string{"am mbox": string(amBytes(t, s)), "summary": summary(s), "JSON": js.String()}
	for name, out := range outputs {
		if strings.Contains(out, "synthetic") {
			t.Errorf("%s carries a synthetic Message-ID:\n%s", name, out)
		}
	}
	am := outputs["am mbox"]
	if strings.Count(am, "Link: ") != 1 || !strings.Contains(am, "Link: https://patch.msgid.link/n-1@example.org") || strings.Count(am, "Message-ID:") != 1 {
		t.Errorf("want exactly one Link: and Message-ID (patch 1/2's):\n%s", am)
	}
	if !hasNote(s, `patch 2/2 "shapes: two" (gen.mbox:`) || !hasNote(s, "has no Message-ID header: no Link: trailer") || !hasNote(s, "the cover letter") {
		t.Errorf("notes do not say so: %q", s.Notes)
	}
	if !strings.Contains(outputs["summary"], "no Message-ID (gen.mbox:") || !strings.Contains(outputs["summary"], "Cover:    gen.mbox:") {
		t.Errorf("summary:\n%s", outputs["summary"])
	}
	// The reply without Message-ID, linked by subject, still gives its
	// trailer; its provenance says it had no Message-ID.
	if got := shape(s); !strings.Contains(got, "Tested-by: Bob Reviewer <bob@example.com> <- from a message without Message-ID sent by Bob Reviewer <bob@example.com>, v1") {
		t.Errorf("shape:\n%s", got)
	}
	msgs, err := gitAM(t, []byte(am))
	if err != nil || len(msgs) != 2 {
		t.Fatalf("git am: %v %q", err, msgs)
	}
}

// Class 5: Link: and Closes: in a reply's trailer block.
func TestRealMailReplyLinkCloses(t *testing.T) {
	reply := func(id, irt, body string) tmail {
		return tmail{id: id, irt: irt, refs: []string{"l-0@example.org", irt}, from: "Carol Tester <carol@example.net>", subject: "Re: x", at: 10, body: body}
	}
	mails := append(twoPatchSeries("l"),
		reply("l-r1@example.org", "l-1@example.org", "> +int a1 = 1;\n\nThis fixes the crash I reported.\n\nTested-by: Carol Tester <carol@example.net>\nCloses: https://bugzilla.example.org/show_bug.cgi?id=42\nLink: https://lore.example.org/r/crash@example.net/\nCc: stable@vger.kernel.org\n"),
		reply("l-r2@example.org", "l-2@example.org", "See the discussion at\nLink: https://example.org/prose\nfor why.\n\nTested-by: Carol Tester <carol@example.net>\n"),
		reply("l-r0@example.org", "l-0@example.org", "Closes: https://bugzilla.example.org/show_bug.cgi?id=7\nReported-by: Carol Tester <carol@example.net>\n"),
		reply("l-r3@example.org", "l-2@example.org", "Acked-by: Carol Tester <carol@example.net> https://example.org/me\n"),
	)
	s := tresolve(t, mails...)
	want := `[PATCH 1/2] shapes: one
  Tested-by: Carol Tester <carol@example.net> <- from <l-r1@example.org>, v1
  Closes: https://bugzilla.example.org/show_bug.cgi?id=42 <- from <l-r1@example.org>, v1
  Link: https://lore.example.org/r/crash@example.net/ <- from <l-r1@example.org>, v1
  Closes: https://bugzilla.example.org/show_bug.cgi?id=7 <- from <l-r0@example.org>, v1, cover letter
  Reported-by: Carol Tester <carol@example.net> <- from <l-r0@example.org>, v1, cover letter
[PATCH 2/2] shapes: two
  Tested-by: Carol Tester <carol@example.net> <- from <l-r2@example.org>, v1
  Closes: https://bugzilla.example.org/show_bug.cgi?id=7 <- from <l-r0@example.org>, v1, cover letter
  Reported-by: Carol Tester <carol@example.net> <- from <l-r0@example.org>, v1, cover letter
`
	if got := shape(s); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	for _, n := range []string{
		`not taken from <l-r1@example.org>: "Cc: stable@vger.kernel.org" (a Cc: line in a reply is addressing`,
		`not taken from <l-r2@example.org>: "Link: https://example.org/prose" (in the text, not in a trailer block)`,
		`not taken from <l-r3@example.org>: "Acked-by: Carol Tester <carol@example.net> https://example.org/me" (a URL in a Acked-by: trailer)`,
	} {
		if !hasNote(s, n) {
			t.Errorf("no note %q in %q", n, s.Notes)
		}
	}
	msgs, err := gitAM(t, amBytes(t, s))
	if err != nil || len(msgs) != 2 || !strings.Contains(msgs[0], "Closes: https://bugzilla.example.org/show_bug.cgi?id=42\nLink: https://lore.example.org/r/crash@example.net/\nCloses: https://bugzilla.example.org/show_bug.cgi?id=7\nReported-by: Carol Tester <carol@example.net>\nLink: https://patch.msgid.link/l-1@example.org\n") {
		t.Errorf("git am: %v\n%q", err, msgs)
	}
	// Debian's b4 0.12 drops every follow-up trailer with a URL (current
	// b4 keeps Link:/Closes:); the rest is the same.
	b4raw, out := b4AMFile(t, writeTemp(t, "x.mbox", tmbox(mails...)), "l-0@example.org")
	if b4raw == nil {
		t.Fatalf("b4: %s", out)
	}
	if bytes.Contains(b4raw, []byte("Closes: https://bugzilla.example.org/show_bug.cgi?id=42")) {
		t.Errorf("Debian b4 keeps Closes: from replies now; compare directly")
	}
	b4raw = bytes.Replace(b4raw, []byte("Tested-by: Carol Tester <carol@example.net>\nReported-by"),
		[]byte("Tested-by: Carol Tester <carol@example.net>\nCloses: https://bugzilla.example.org/show_bug.cgi?id=42\nLink: https://lore.example.org/r/crash@example.net/\nCloses: https://bugzilla.example.org/show_bug.cgi?id=7\nReported-by"), 1)
	b4raw = bytes.Replace(b4raw, []byte("Tested-by: Carol Tester <carol@example.net>\nReported-by"),
		[]byte("Tested-by: Carol Tester <carol@example.net>\nCloses: https://bugzilla.example.org/show_bug.cgi?id=7\nReported-by"), 1)
	compareB4(t, s, b4raw)
}

// Class 6: blank context lines whose leading space a mail client stripped.
func TestRealMailStrippedBlankContext(t *testing.T) {
	files := map[string]string{"d.c": "int d;\nint d1 = 0;\n\n\n"}
	diff := "diff --git a/d.c b/d.c\n--- a/d.c\n+++ b/d.c\n@@ -1,4 +1,4 @@\n int d;\n-int d1 = 0;\n+int d1 = 1;\n"
	head := "shapes: blank tail\n\nSigned-off-by: Alice Author <alice@example.org>\n---\n"
	for _, c := range []struct {
		name, body string
		repaired   bool
	}{
		{"stripped, then a signature", head + diff + "\n\n-- \n2.43.0\n", true},
		{"stripped and trimmed at the end of the mail", head + diff, true},
		{"one kept, one stripped", head + diff + " \n", true},
		{"intact", head + diff + " \n \n-- \n2.43.0\n", false},
		{"short by a + line too: ambiguous, left alone", head + strings.Replace(diff, "+int d1 = 1;\n", "", 1), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := tresolve(t, tmail{id: "bl-1@example.org", subject: "[PATCH] shapes: blank tail", body: c.body})
			if hasNote(s, "restored blank context lines") != c.repaired {
				t.Errorf("repaired note %v, want %v: %q", !c.repaired, c.repaired, s.Notes)
			}
			saved := tfiles
			tfiles = files
			defer func() { tfiles = saved }()
			_, err := gitAM(t, amBytes(t, s))
			if strings.Contains(c.name, "ambiguous") {
				if err == nil {
					t.Error("git am took a hunk that is short by an added line")
				}
				return
			}
			if err != nil {
				t.Errorf("%v\n%s", err, s.Patches[0].Diff)
			}
		})
	}
	// Two files: the first hunk's tail stripped away before the next file.
	d2 := "diff --git a/d.c b/d.c\n--- a/d.c\n+++ b/d.c\n@@ -1,4 +1,4 @@\n int d;\n-int d1 = 0;\n+int d1 = 1;\n" +
		"diff --git a/a.c b/a.c\n--- a/a.c\n+++ b/a.c\n@@ -1,3 +1,3 @@\n int a;\n-int a1 = 0;\n+int a1 = 1;\n int b;\n"
	fixed, notes := repairBlankContext(d2)
	if len(notes) != 1 || notes[0] != "hunk #1 of d.c: 2 line(s)" || !strings.Contains(fixed, "+int d1 = 1;\n \n \ndiff --git a/a.c") {
		t.Errorf("two files: %q\n%s", notes, fixed)
	}
}

// Class 7: an unnumbered patch beside 1/1 is not "sent twice".
func TestRealMailSamePositionNotes(t *testing.T) {
	one := tmail{id: "u-1@example.org", subject: "[PATCH 1/1] shapes: one", at: 1, body: tpatch("a.c", "One.", "1")}
	for _, c := range []struct {
		name  string
		other tmail
		keep  string
		note  string
	}{
		{"unnumbered orphan, different patch", tmail{id: "u-2@example.org", irt: "gone@example.org", subject: "[PATCH] shapes: other", at: 2, body: tpatch("c.c", "Other.", "5")},
			"u-1@example.org", `ignored the unnumbered patch <u-2@example.org> "shapes: other": a different patch from v1 1/1 <u-1@example.org> "shapes: one"`},
		{"unnumbered sent first", tmail{id: "u-2@example.org", subject: "[PATCH] shapes: other", at: 0, body: tpatch("c.c", "Other.", "5")},
			"u-1@example.org", `ignored the unnumbered patch <u-2@example.org> "shapes: other"`},
		{"same patch sent twice", tmail{id: "u-2@example.org", subject: "[PATCH 1/1] shapes: one", at: 2, body: tpatch("a.c", "One.", "1")},
			"u-1@example.org", "v1 patch 1/1 sent twice: kept <u-1@example.org>, ignored <u-2@example.org> (same diff)"},
		{"two different 1/1", tmail{id: "u-2@example.org", subject: "[PATCH 1/1] shapes: one again", at: 2, body: tpatch("a.c", "One.", "9")},
			"u-1@example.org", `v1 has two different patches numbered 1/1: kept 1/1 <u-1@example.org> "shapes: one", ignored 1/1 <u-2@example.org> "shapes: one again"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := tresolve(t, one, c.other)
			if len(s.Patches) != 1 || s.Patches[0].MessageID != c.keep || !hasNote(s, c.note) {
				t.Errorf("kept %s, notes %q; want %s and %q", s.Patches[0].MessageID, s.Notes, c.keep, c.note)
			}
			if hasNote(s, "sent twice") && !strings.Contains(c.note, "sent twice") {
				t.Errorf("misleading note: %q", s.Notes)
			}
		})
	}
}

// Class 8: -m FILE MSGID picks that message's thread out of a mixed mbox.
func TestRealMailThreadOutOfMixedMbox(t *testing.T) {
	a := twoPatchSeries("ma")
	b := twoPatchSeries("mb")
	for i := range b {
		b[i].subject = strings.Replace(b[i].subject, "shapes:", "other:", 1)
		b[i].at += 100
	}
	lone := tmail{id: "mc-1@example.org", subject: "[PATCH] shapes: lone", at: 50, body: tpatch("c.c", "Lone.", "3")}
	// A review of series a whose direct parent is missing from the file:
	// it still belongs to a's thread through References.
	revA := tmail{id: "ma-r@example.org", irt: "ma-missing@example.org", refs: []string{"ma-0@example.org", "ma-missing@example.org"}, from: "Bob Reviewer <bob@example.com>", subject: "Re: [PATCH 0/2] shapes: a series", at: 60, body: "Acked-by: Bob Reviewer <bob@example.com>\n"}
	// A reply to b whose References name only a message missing from the
	// file, shared with b's patches? No: b's patches do not reference it;
	// it is an orphan of its own thread.
	stray := tmail{id: "mx@example.org", irt: "elsewhere@example.org", refs: []string{"elsewhere@example.org"}, subject: "Re: something else", at: 70, body: "Reviewed-by: Bob Reviewer <bob@example.com>\n"}
	all := append(append(append([]tmail{}, a...), b...), lone, revA, stray)
	path := writeTemp(t, "mixed.mbox", tmbox(all...))
	fetch := func(id string) (*mbox.Thread, error) {
		return mbox.Fetch(t.Context(), mbox.Source{Kind: mbox.SourceFile, Path: path, MsgID: id}, mbox.FetchOptions{})
	}
	for _, c := range []struct {
		id, title string
		n         int
	}{
		{"ma-0@example.org", "shapes: a series", 4},
		{"<ma-2@example.org>", "shapes: a series", 4},
		{"ma-r@example.org", "shapes: a series", 4},
		{"mb-1@example.org", "other: a series", 3},
		{"mc-1@example.org", "shapes: lone", 1},
	} {
		th, err := fetch(c.id)
		if err != nil {
			t.Fatalf("%s: %v", c.id, err)
		}
		s, err := Resolve(th, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.id, err)
		}
		if len(th.Messages) != c.n || s.Title != c.title || !hasNote(s, fmt.Sprintf("holds %d messages; took the %d", len(all), c.n)) {
			t.Errorf("%s: %d messages, title %q, notes %q", c.id, len(th.Messages), s.Title, s.Notes)
		}
		if c.id == "ma-0@example.org" && !strings.Contains(shape(s), "Acked-by: Bob Reviewer <bob@example.com> <- from <ma-r@example.org>, v1, cover letter") {
			t.Errorf("the review of a's cover (its parent missing) is lost:\n%s", shape(s))
		}
		b4raw, out := b4AMFile(t, path, strings.Trim(c.id, "<>"))
		if c.id == "ma-r@example.org" {
			// Debian's b4 0.12 finds no series from a reply whose
			// In-Reply-To is missing.
			if b4raw != nil {
				t.Errorf("b4 now resolves %s; compare directly", c.id)
			}
			continue
		}
		if b4raw == nil {
			t.Fatalf("b4 am -m %s: %s", c.id, out)
		}
		if strings.HasPrefix(strings.Trim(c.id, "<>"), "ma-") {
			// b4 0.12 follows In-Reply-To only and drops the review whose
			// direct parent is missing (see TestRealMailInReplyToParent).
			if bytes.Contains(b4raw, []byte("Acked-by")) {
				t.Errorf("b4 now takes the Acked-by; compare directly")
			}
			b4raw = bytes.ReplaceAll(b4raw, []byte("Link: https://patch.msgid.link/ma-"), []byte("Acked-by: Bob Reviewer <bob@example.com>\nLink: https://patch.msgid.link/ma-"))
		}
		compareB4(t, s, b4raw)
	}
	if _, err := fetch("nobody@example.org"); err == nil || !strings.Contains(err.Error(), "no message <nobody@example.org> in it (9 messages)") {
		t.Errorf("unknown id: %v", err)
	}
}

// Class 4, header shapes: a Message-ID header that is empty, "<>", or
// holds no message id at all is no Message-ID either; a single patch
// without one still applies with git am, with no Link:.
func TestRealMailNoMessageIDShapes(t *testing.T) {
	for _, c := range []struct{ name, header string }{
		{"no header", ""},
		{"empty header", "Message-ID:\n"},
		{"empty brackets", "Message-ID: <>\n"},
		{"no @, no brackets", "Message-ID: 12345\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := tmail{subject: "[PATCH] shapes: lone", body: tpatch("a.c", "Lone.", "4")}
			raw := m.raw()
			raw = strings.Replace(raw, "MIME-Version:", c.header+"MIME-Version:", 1)
			var b bytes.Buffer
			if err := mbox.WriteMboxrd(&b, []byte(raw)); err != nil {
				t.Fatal(err)
			}
			msgs, err := mbox.ParseBytes(b.Bytes(), "gen.mbox")
			if err != nil {
				t.Fatal(err)
			}
			s, err := Resolve(mbox.NewThread(msgs, "gen.mbox"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			am := string(amBytes(t, s))
			var js bytes.Buffer
			json.NewEncoder(&js).Encode(s)
			for name, out := range map[string]string{"am mbox": am, "summary": summary(s), "JSON": js.String()} {
				if strings.Contains(out, "synthetic") || strings.Contains(out, "Link: http") || strings.Contains(out, "msgid.link") {
					t.Errorf("%s names a link or a synthetic id:\n%s", name, out)
				}
			}
			if !hasNote(s, "has no Message-ID header: no Link: trailer") {
				t.Errorf("no note: %q", s.Notes)
			}
			msgs2, err := gitAM(t, []byte(am))
			if err != nil || len(msgs2) != 1 || !strings.HasPrefix(msgs2[0], "shapes: lone\n\nLone.\n\nSigned-off-by: Alice Author <alice@example.org>\n") {
				t.Errorf("git am: %v %q", err, msgs2)
			}
		})
	}
}

// Class 5, more kinds: Fixes: in a reply's trailer block is kept (it has
// no URL); a Link: quoted from the patch ("> Link: ...") is the patch's,
// not the reply's, and is not taken twice; Link: as the only trailer of a
// reply is kept.
func TestRealMailReplyTrailerKinds(t *testing.T) {
	reply := func(id, irt, body string) tmail {
		return tmail{id: id, irt: irt, refs: []string{"k-0@example.org", irt}, from: "Carol Tester <carol@example.net>", subject: "Re: x", at: 10, body: body}
	}
	mails := append(twoPatchSeries("k"),
		reply("k-r1@example.org", "k-1@example.org", "> Link: https://quoted.example.org/\n> +int a1 = 1;\n\nTested-by: Carol Tester <carol@example.net>\nFixes: 0123456789ab (\"shapes: zero\")\n"),
		reply("k-r2@example.org", "k-2@example.org", "Seen in the wild:\n\nLink: https://bugs.example.org/9\n"),
	)
	s := tresolve(t, mails...)
	want := `[PATCH 1/2] shapes: one
  Tested-by: Carol Tester <carol@example.net> <- from <k-r1@example.org>, v1
  Fixes: 0123456789ab ("shapes: zero") <- from <k-r1@example.org>, v1
[PATCH 2/2] shapes: two
  Link: https://bugs.example.org/9 <- from <k-r2@example.org>, v1
`
	if got := shape(s); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	for _, n := range s.Notes {
		if strings.Contains(n, "quoted.example.org") {
			t.Errorf("a quoted line was treated as the reply's trailer: %q", n)
		}
	}
	msgs, err := gitAM(t, amBytes(t, s))
	if err != nil || len(msgs) != 2 || !strings.Contains(msgs[0], "Tested-by: Carol Tester <carol@example.net>\nFixes: 0123456789ab (\"shapes: zero\")\n") ||
		!strings.Contains(msgs[1], "Link: https://bugs.example.org/9\n") {
		t.Errorf("git am: %v\n%q", err, msgs)
	}
}
