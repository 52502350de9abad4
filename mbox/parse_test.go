package mbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

func parseFile(t *testing.T, path string) []*Message {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := Parse(f, filepath.Base(path))
	if err != nil {
		t.Fatalf("Parse(%s): %v", path, err)
	}
	return ms
}

func TestParseFixtures(t *testing.T) {
	for _, tc := range []struct {
		file     string
		messages int
		roots    int
		orphans  int
		subject0 string
	}{
		{"ppc-dynamic-preempt-v4.mbox", 18, 1, 0, "[PATCH v4 0/1] powerpc: Enable dynamic preemption"},
		{"ppc-dynamic-preempt-arm64-followup.mbox", 1, 1, 1, "Re: [PATCH v4 1/1] powerpc: enable dynamic preemption"},
		{"generic-entry-v5-report.mbox", 1, 1, 1, "Re: [PATCH v5 0/8] Generic IRQ entry/exit support for powerpc"},
		{"rcu-gp-qs-v2.mbox", 15, 1, 0, ""},
		{"ppc-dynamic-preempt-v6.1-backport.mbox", 2, 1, 0, "[PATCH 6.1 v4 0/1] powerpc: Enable dynamic preemption (v6.1 backport)"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			ms := parseFile(t, filepath.Join("testdata/threads", tc.file))
			if len(ms) != tc.messages {
				t.Fatalf("%d messages, want %d", len(ms), tc.messages)
			}
			th := NewThread(ms, tc.file)
			if len(th.Roots) != tc.roots || len(th.Orphans) != tc.orphans {
				t.Errorf("roots %d orphans %d, want %d %d; notes %q", len(th.Roots), len(th.Orphans), tc.roots, tc.orphans, th.Notes)
			}
			if tc.subject0 != "" && th.Messages[0].Subject != tc.subject0 {
				t.Errorf("first subject %q, want %q", th.Messages[0].Subject, tc.subject0)
			}
			for _, m := range ms {
				if m.MessageID == "" || m.From.Email == "" || m.Date.IsZero() || m.Body == "" {
					t.Errorf("%s: incomplete message: id %q from %q date %v body %d bytes", m.Source, m.MessageID, m.From.Email, m.Date, len(m.Body))
				}
				if len(m.Notes) > 0 {
					t.Errorf("%s: unexpected notes %q", m.Source, m.Notes)
				}
				if strings.Contains(m.Body, "\r") {
					t.Errorf("%s: CR left in body", m.Source)
				}
			}
		})
	}
}

func TestParseV4Tree(t *testing.T) {
	ms := parseFile(t, "testdata/threads/ppc-dynamic-preempt-v4.mbox")
	th := NewThread(ms, "v4")
	cover := th.ByID("<20250210194500.37c940e5-0-sshegde@linux.ibm.com>")
	patch := th.ByID("20250210194600.322cfa9d-1-sshegde@linux.ibm.com")
	if cover == nil || patch == nil {
		t.Fatal("cover or patch missing")
	}
	if th.Roots[0] != cover || th.Parent(patch) != cover {
		t.Fatalf("patch parent %v, roots %v", th.Parent(patch), th.Roots)
	}
	// References holds only the cover; In-Reply-To names the patch: the
	// In-Reply-To (last of the chain) wins, as in public-inbox.
	jirka := th.ByID("20260727000300.40b5a8af-2-jhladky@redhat.com")
	if th.Parent(jirka) != patch {
		t.Errorf("parent of Jirka's first reply = %v, want the patch", th.Parent(jirka))
	}
	anc := th.Ancestors(th.ByID("20260727131332.aab0024a-7-paulmck@kernel.org"))
	if len(anc) < 3 || anc[len(anc)-1] != cover {
		t.Errorf("ancestors of Paul's reply do not end at the cover: %d", len(anc))
	}
	if c := th.Children(cover); len(c) != 1 || c[0] != patch {
		t.Errorf("children of cover: %v", c)
	}
	// Gmail attribution keeps U+202F before AM/PM.
	if !strings.Contains(jirka.Body, "7:46\u202fPM Shrikanth Hegde") {
		t.Errorf("U+202F attribution not kept: %q", firstLine(jirka.Body, "On Mon"))
	}
	if patch.From.Name != "Shrikanth Hegde" || patch.From.Email != "sshegde@linux.ibm.com" {
		t.Errorf("From = %+v", patch.From)
	}
	if !strings.Contains(patch.Body, "diff --git") {
		t.Error("patch body has no diff")
	}
}

func firstLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func TestParseCRLF(t *testing.T) {
	ms := parseFile(t, "testdata/mail/crlf.mbox")
	if len(ms) != 2 {
		t.Fatalf("%d messages", len(ms))
	}
	if ms[0].Subject != "[PATCH 0/1] crlf: a cover letter" || ms[1].InReplyTo != "crlf-0@example.org" {
		t.Errorf("headers: %q %q", ms[0].Subject, ms[1].InReplyTo)
	}
	want := "Cover letter body.\nFrom here on the line was escaped (mboxrd).\n>From this one was escaped twice.\n"
	if ms[0].Body != want {
		t.Errorf("body %q, want %q", ms[0].Body, want)
	}
	if bytes.Contains(ms[0].Raw, []byte("\r")) || !bytes.HasSuffix(ms[1].Raw, []byte("+x\n")) {
		t.Errorf("raw not normalised: %q", ms[1].Raw[len(ms[1].Raw)-10:])
	}
}

func TestParseMboxo(t *testing.T) {
	ms := parseFile(t, "testdata/mail/mboxo.mbox")
	if len(ms) != 2 {
		t.Fatalf("%d messages, want 2", len(ms))
	}
	if !strings.HasPrefix(ms[0].Body, "From the description:") {
		t.Errorf(">From not unescaped: %q", ms[0].Body[:40])
	}
	if !strings.Contains(ms[1].Body, "\nFrom 12 to 14 is not") {
		t.Errorf("body line starting with From split the message: %q", ms[1].Body)
	}
	// The first patch has no Message-ID: synthetic, stable, noted.
	id := ms[0].MessageID
	if !strings.HasSuffix(id, "@synthetic.invalid") || len(ms[0].Notes) == 0 {
		t.Errorf("synthetic id %q notes %q", id, ms[0].Notes)
	}
	again := parseFile(t, "testdata/mail/mboxo.mbox")
	if again[0].MessageID != id {
		t.Errorf("synthetic id not stable: %q vs %q", again[0].MessageID, id)
	}
	if ms[1].MessageID != "mboxo-2@example.org" {
		t.Errorf("Message-Id = %q", ms[1].MessageID)
	}
}

func TestParseLatin1Base64(t *testing.T) {
	ms := parseFile(t, "testdata/mail/latin1-base64.eml")
	if len(ms) != 1 {
		t.Fatalf("%d messages", len(ms))
	}
	m := ms[0]
	if m.Subject != "Re: [PATCH] für Test" {
		t.Errorf("subject %q", m.Subject)
	}
	if m.From.Name != "Jörg Müller" || m.From.Email != "joerg@example.de" {
		t.Errorf("from %+v", m.From)
	}
	if !strings.HasPrefix(m.Body, "Grüße aus Köln,\n") || !strings.Contains(m.Body, "ça marche") {
		t.Errorf("body %q", m.Body)
	}
	if m.Date.IsZero() || !m.Date.Equal(time.Date(2026, 3, 5, 11, 0, 0, 0, time.UTC)) {
		t.Errorf("date %v", m.Date)
	}
	if m.Header["Subject"][0] != "Re: [PATCH] für Test" {
		t.Errorf("decoded header map: %q", m.Header["Subject"])
	}
}

func TestParseMultipartPatch(t *testing.T) {
	ms := parseFile(t, "testdata/mail/multipart-patch.mbox")
	m := ms[0]
	if !strings.HasPrefix(m.Body, "On Fri, Mar 6, 2026 at 8:15\u202fAM Dave") {
		t.Errorf("qp text part: %q", m.Body)
	}
	if !strings.Contains(m.Body, "\nSigned-off-by: Carol Example <carol@example.org>\n---\ndiff --git a/c b/c\n") {
		t.Errorf("patch attachment not appended to body:\n%s", m.Body)
	}
	if strings.Contains(m.Body, "html alternative") || strings.Contains(m.Body, "multi-part message") {
		t.Errorf("html or preamble leaked into body:\n%s", m.Body)
	}
	if len(m.Attachments) != 2 || m.Attachments[0].Filename != "0001-attach.patch" || m.Attachments[0].ContentType != "text/x-patch" {
		t.Errorf("attachments %+v", m.Attachments)
	}
}

func TestThreadDuplicatesOrphansSubject(t *testing.T) {
	ms := parseFile(t, "testdata/mail/duplicate.mbox")
	if len(ms) != 6 {
		t.Fatalf("%d messages", len(ms))
	}
	th := NewThread(ms, "duplicate.mbox")
	if th.Duplicates != 1 || len(th.Messages) != 5 {
		t.Fatalf("duplicates %d messages %d", th.Duplicates, len(th.Messages))
	}
	root := th.ByID("dup-root@example.org")
	if !strings.HasPrefix(root.Body, "root\n") {
		t.Errorf("kept the wrong duplicate: %q", root.Body)
	}
	// The reply without Message-ID / References is linked by subject.
	var noID *Message
	for _, m := range th.Messages {
		if strings.HasSuffix(m.MessageID, "@synthetic.invalid") {
			noID = m
		}
	}
	if noID == nil || th.Parent(noID) != root {
		t.Errorf("subject fallback: parent of %v = %v", noID, th.Parent(noID))
	}
	// The orphan is kept, reported and a root.
	orphan := th.ByID("orphan-1@example.org")
	if len(th.Orphans) != 1 || th.Orphans[0] != orphan || th.Parent(orphan) != nil {
		t.Errorf("orphans %v", th.Orphans)
	}
	if len(th.Roots) != 2 || th.Roots[0] != root || th.Roots[1] != orphan {
		t.Errorf("roots %v", th.Roots)
	}
	// Direct parent missing, grandparent present: hang under it.
	if p := th.Parent(th.ByID("deep-1@example.org")); p != root {
		t.Errorf("deep-1 parent %v", p)
	}
	if len(th.Children(root)) != 3 {
		t.Errorf("children of root: %d", len(th.Children(root)))
	}
	if len(th.Notes) == 0 {
		t.Error("no notes")
	}
}

func TestThreadSubjectFallbackOrphan(t *testing.T) {
	// The arm64 follow-up replies to a message missing from every file;
	// together with the v4 thread, the subject rule attaches it to the only
	// message titled "[PATCH v4 1/1] powerpc: enable dynamic preemption".
	a := parseFile(t, "testdata/threads/ppc-dynamic-preempt-v4.mbox")
	b := parseFile(t, "testdata/threads/ppc-dynamic-preempt-arm64-followup.mbox")
	th := NewThread(append(a, b...), "both")
	f := th.ByID("20260731102000.ab50c836-0-jhladky@redhat.com")
	if p := th.Parent(f); p == nil || p.MessageID != "20250210194600.322cfa9d-1-sshegde@linux.ibm.com" {
		t.Errorf("follow-up parent %v", p)
	}
	if len(th.Orphans) != 1 || len(th.Roots) != 1 {
		t.Errorf("orphans %d roots %d", len(th.Orphans), len(th.Roots))
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, input, want string
	}{
		{"x.txt", "Hello,\nthis is just a text file.\n", `x.txt: not an mbox: first line is "Hello,"`},
		{"page.html", "<html><body>oops</body></html>", `page.html: not an mbox: first line is "<html><body>oops</body></html>"`},
		{"empty.mbox", "\n\n", "empty.mbox: not an mbox: it is empty"},
		{"bare.mbox", "From mboxrd@z Thu Jan  1 00:00:00 1970\n\n", `bare.mbox: not an mbox: "From " lines but no messages`},
		{"junk.mbox", "From mboxrd@z Thu Jan  1 00:00:00 1970\nnot a header\n", `junk.mbox:1: not a mail message: first line is "not a header"`},
	} {
		_, err := Parse(strings.NewReader(tc.input), tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
			continue
		}
		var fe *fail.Error
		if !errors.As(err, &fe) || fe.Kind != fail.KindInput {
			t.Errorf("%s: not a fail.Input error: %#v", tc.name, err)
		}
	}
}

func TestWriteMboxrdRoundTrip(t *testing.T) {
	raws := [][]byte{
		[]byte("From: a@b\r\nSubject: one\r\nMessage-ID: <rt-1@x>\r\n\r\nFrom the start\r\n>From quoted\r\n>>From twice\r\nno newline at end"),
		[]byte("From: a@b\nSubject: two\nMessage-ID: <rt-2@x>\n\nbody\n\n"),
	}
	var buf bytes.Buffer
	if err := WriteMboxrd(&buf, raws...); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), MboxrdFromLine+"\n") || !strings.Contains(buf.String(), "\n>From the start\n>>From quoted\n>>>From twice\n") {
		t.Fatalf("escaping wrong:\n%s", buf.String())
	}
	ms, err := Parse(&buf, "roundtrip")
	if err != nil || len(ms) != 2 {
		t.Fatalf("%v %d", err, len(ms))
	}
	if ms[0].Body != "From the start\n>From quoted\n>>From twice\nno newline at end\n" {
		t.Errorf("body 1 %q", ms[0].Body)
	}
	if ms[1].Body != "body\n\n" {
		t.Errorf("body 2 %q", ms[1].Body)
	}
}

func TestReadMaildir(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"cur", "new", "tmp"} {
		os.MkdirAll(filepath.Join(dir, sub), 0o755)
	}
	ms := parseFile(t, "testdata/threads/ppc-dynamic-preempt-v6.1-backport.mbox")
	os.WriteFile(filepath.Join(dir, "cur", "1.host:2,S"), ms[0].Raw, 0o644)
	os.WriteFile(filepath.Join(dir, "new", "2.host"), ms[1].Raw, 0o644)
	os.WriteFile(filepath.Join(dir, "tmp", "3.host"), []byte("garbage"), 0o644)
	got, err := ReadMaildir(dir)
	if err != nil || len(got) != 2 {
		t.Fatalf("%v %d", err, len(got))
	}
	if got[0].MessageID != ms[0].MessageID || got[1].Body != ms[1].Body {
		t.Error("maildir messages differ from the mbox ones")
	}
	if _, err := ReadMaildir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a maildir") {
		t.Errorf("empty dir: %v", err)
	}
}

func TestParseBrokenMIME(t *testing.T) {
	for _, tc := range []struct {
		name, raw, body, note string
	}{
		{"unknown charset", "From: a@b\nSubject: s\nMessage-ID: <c@x>\nContent-Type: text/plain; charset=x-klingon\n\nK\xf6ln\n", "Köln\n", "unknown charset"},
		{"bad base64", "From: a@b\nSubject: s\nMessage-ID: <c@x>\nContent-Transfer-Encoding: base64\n\naGVsbG8K\n!!!!\n", "hello\n", ""},
		{"unterminated multipart", "From: a@b\nSubject: s\nMessage-ID: <c@x>\nContent-Type: multipart/mixed; boundary=zz\n\n--zz\nContent-Type: text/plain\n\nfirst part\n--zz\nContent-Type: text/x-diff\n\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n", "first part\ndiff --git a/x b/x\n", ""},
		{"no header end", "From: a@b\nSubject: only headers\nMessage-ID: <c@x>", "", ""},
		{"junk line in header", "From: a@b\nSubject: s\nMessage-ID: <c@x>\nthis is not a header\nbody\n", "this is not a header\nbody\n", "header block ends"},
		{"bad date", "From: a@b\nSubject: s\nMessage-ID: <c@x>\nDate: yesterday-ish\n\nb\n", "b\n", "unparsable Date"},
	} {
		m, err := ParseMessage([]byte(tc.raw), tc.name)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !strings.HasPrefix(m.Body, tc.body) {
			t.Errorf("%s: body %q, want prefix %q", tc.name, m.Body, tc.body)
		}
		if tc.note != "" && !strings.Contains(strings.Join(m.Notes, "\n"), tc.note) {
			t.Errorf("%s: notes %q lack %q", tc.name, m.Notes, tc.note)
		}
	}
}

// git itself reads what WriteMboxrd writes: git mailsplit --mboxrd gives
// back the messages, ">From " escaping undone.
func TestWriteMboxrdGitMailsplit(t *testing.T) {
	ms := parseFile(t, "testdata/threads/ppc-dynamic-preempt-v6.1-backport.mbox")
	tricky := []byte("From: a@example.org\nSubject: [PATCH] x\nMessage-ID: <t@x>\n\nFrom the commit message.\n>From a quote.\n---\n")
	var buf bytes.Buffer
	if err := WriteMboxrd(&buf, ms[0].Raw, ms[1].Raw, tricky); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "am.mbox")
	os.WriteFile(in, buf.Bytes(), 0o644)
	out, err := exec.Command("git", "mailsplit", "--mboxrd", "-o"+dir, in).CombinedOutput()
	if err != nil {
		t.Fatalf("git mailsplit: %v: %s", err, out)
	}
	if strings.TrimSpace(string(out)) != "3" {
		t.Fatalf("git mailsplit found %q messages, want 3", out)
	}
	// git keeps the From_ line and the blank separator line in its files.
	read := func(name string) []byte {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		if !bytes.HasPrefix(b, []byte(MboxrdFromLine+"\n")) {
			t.Errorf("%s: no From_ line: %q", name, b[:20])
		}
		return bytes.TrimSuffix(bytes.TrimPrefix(b, []byte(MboxrdFromLine+"\n")), []byte("\n"))
	}
	if got := read("0003"); !bytes.Equal(got, tricky) {
		t.Errorf("git read back %q, want %q", got, tricky)
	}
	if got := read("0002"); !bytes.Equal(got, ms[1].Raw) {
		t.Errorf("patch changed on the way through git mailsplit")
	}
}

// In-Reply-To names the parent when it is in the thread, whatever order
// References has; otherwise the nearest present message of References.
func TestThreadInReplyToWins(t *testing.T) {
	msg := func(id, irt string, refs ...string) *Message {
		return &Message{MessageID: id, InReplyTo: irt, References: refs, Subject: "s " + id}
	}
	base := func() []*Message {
		return []*Message{msg("c0", ""), msg("c1", "c0", "c0"), msg("c2", "c0", "c0")}
	}
	for _, c := range []struct {
		name   string
		m      *Message
		parent string
		note   string
	}{
		{"References reversed", msg("r", "c2", "c2", "c0"), "c2", ""},
		{"References only the root", msg("r", "c2", "c0"), "c2", ""},
		{"References in order", msg("r", "c2", "c0", "c2"), "c2", ""},
		{"no In-Reply-To", msg("r", "", "c0", "c2"), "c2", ""},
		{"In-Reply-To missing, inside References", msg("r", "gone", "c0", "gone", "c2"), "c2", "parent <gone> is missing; linked to ancestor <c2>"},
		{"In-Reply-To missing, References reversed", msg("r", "gone", "gone", "c1", "c0"), "c0", "parent <gone> is missing; linked to ancestor <c0>"},
		{"In-Reply-To is itself", msg("r", "r", "c1"), "c1", ""},
	} {
		th := NewThread(append(base(), c.m), "t")
		if p := th.Parent(th.ByID("r")); p == nil || p.MessageID != c.parent {
			t.Errorf("%s: parent %v, want %s", c.name, p, c.parent)
		}
		if c.note != "" && !strings.Contains(strings.Join(th.Notes, "\n"), c.note) {
			t.Errorf("%s: notes %q, want %q", c.name, th.Notes, c.note)
		}
	}
	// A cycle through In-Reply-To is not made.
	th := NewThread([]*Message{msg("a", "b"), msg("b", "a")}, "t")
	if len(th.Roots) != 1 {
		t.Errorf("cycle: roots %d", len(th.Roots))
	}
}

// ThreadOf picks one thread out of a mailbox holding several.
func TestThreadOf(t *testing.T) {
	msg := func(id, irt string, refs ...string) *Message {
		return &Message{MessageID: id, InReplyTo: irt, References: refs, Subject: "s " + id, Source: "f:" + id}
	}
	all := []*Message{
		msg("a0", ""), msg("a1", "a0", "a0"), msg("a2", "a1", "a0", "a1"),
		msg("b0", ""), msg("b1", "b0", "b0"),
		// Two replies to a message missing from the box: one thread.
		msg("x1", "gone", "gone"), msg("x2", "x1", "gone", "x1"), msg("y1", "gone", "gone"),
		msg("lone", ""),
	}
	th := NewThread(all, "box")
	for _, c := range []struct {
		id   string
		want []string
	}{
		{"a0", []string{"a0", "a1", "a2"}},
		{"<a2>", []string{"a0", "a1", "a2"}},
		{"b1", []string{"b0", "b1"}},
		{"y1", []string{"x1", "x2", "y1"}},
		{"lone", []string{"lone"}},
	} {
		sub, err := th.ThreadOf(c.id)
		if err != nil {
			t.Fatalf("%s: %v", c.id, err)
		}
		var got []string
		for _, m := range sub.Messages {
			got = append(got, m.MessageID)
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s: %v, want %v", c.id, got, c.want)
		}
		if !strings.Contains(strings.Join(sub.Notes, "\n"), fmt.Sprintf("box holds 9 messages; took the %d", len(c.want))) {
			t.Errorf("%s: notes %q", c.id, sub.Notes)
		}
	}
	if _, err := th.ThreadOf("nope"); fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "box: no message <nope> in it (9 messages)") {
		t.Errorf("unknown id: %v", err)
	}
}

// A message without Message-ID gets a synthetic one that no note names.
func TestNoMessageIDNotes(t *testing.T) {
	raw := "From: a@example.org\nSubject: Re: hello\n\nbody\n"
	ms, err := ParseBytes([]byte("From x@y Mon Jan  1 00:00:00 2024\n"+raw+"\nFrom x@y Mon Jan  1 00:00:00 2024\n"+raw+"\nFrom x@y Mon Jan  1 00:00:00 2024\nFrom: b@example.org\nSubject: hello\nMessage-ID: <h@x>\n\nhi\n"), "f")
	if err != nil {
		t.Fatal(err)
	}
	th := NewThread(ms, "f")
	if !ms[0].NoMessageID || ms[0].PublicID() != "" || th.Duplicates != 1 {
		t.Fatalf("NoMessageID %v PublicID %q duplicates %d", ms[0].NoMessageID, ms[0].PublicID(), th.Duplicates)
	}
	notes := strings.Join(append(th.Notes, ms[0].Notes...), "\n")
	if strings.Contains(notes, "synthetic") || !strings.Contains(notes, "the message without Message-ID at f:1 has no References; linked by subject") || !strings.Contains(notes, "duplicate message without Message-ID") {
		t.Errorf("notes:\n%s", notes)
	}
}

// Two different mails under one Message-ID: the first is kept and the note
// says the dropped one differs (not just "received twice").
func TestThreadDuplicateDifferentBody(t *testing.T) {
	box := "From x@y Mon Jan  1 00:00:00 2024\nFrom: a@example.org\nSubject: [PATCH] one\nMessage-ID: <d@x>\n\nfirst body\n\n" +
		"From x@y Mon Jan  1 00:00:00 2024\nFrom: a@example.org\nSubject: [PATCH] one\nMessage-ID: <d@x>\nList-Id: other\n\nfirst body\n\n" +
		"From x@y Mon Jan  1 00:00:00 2024\nFrom: a@example.org\nSubject: [PATCH] one (fixed)\nMessage-ID: <d@x>\n\nsecond body\n"
	ms, err := ParseBytes([]byte(box), "dup")
	if err != nil {
		t.Fatal(err)
	}
	th := NewThread(ms, "dup")
	notes := strings.Join(th.Notes, "\n")
	if th.Duplicates != 2 || len(th.Messages) != 1 || th.Messages[0].Body != "first body\n" ||
		!strings.Contains(notes, "duplicate Message-ID <d@x>: kept the copy from dup:1, dropped the one from dup:8") ||
		!strings.Contains(notes, `duplicate Message-ID <d@x> with a DIFFERENT subject or body: kept the first copy (dup:1, "[PATCH] one"), dropped dup:16 ("[PATCH] one (fixed)")`) {
		t.Errorf("duplicates %d, notes:\n%s", th.Duplicates, notes)
	}
}
