package series

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
)

// threadPath finds a thread fixture: series' own shapes are in testdata,
// the real threads the whole project tests with in testenv.ThreadsDir (one
// copy).
func threadPath(f string) string {
	if p := filepath.Join("testdata", f); fileExists(p) {
		return p
	}
	return filepath.Join(testenv.ThreadsDir(), f)
}

// threadFiles lists every thread fixture: series' own and the shared ones.
func threadFiles() []string {
	own, _ := filepath.Glob("testdata/*.mbox")
	shared, _ := filepath.Glob(filepath.Join(testenv.ThreadsDir(), "*.mbox"))
	return append(own, shared...)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// loadThread parses testdata files into one thread, like a t.mbox.gz.
func loadThread(t testing.TB, files ...string) *mbox.Thread {
	t.Helper()
	var all []*mbox.Message
	for _, f := range files {
		data, err := os.ReadFile(threadPath(f))
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := mbox.ParseBytes(data, f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		all = append(all, msgs...)
	}
	return mbox.NewThread(all, strings.Join(files, "+"))
}

func resolve(t *testing.T, opt Options, files ...string) *Series {
	t.Helper()
	s, err := Resolve(loadThread(t, files...), opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// shape renders the patches and their added trailers compactly.
func shape(s *Series) string {
	var b strings.Builder
	for _, p := range s.Patches {
		b.WriteString(p.Subject.AMSubject())
		if p.FromVersion != 0 {
			b.WriteString(" (from v")
			b.WriteString(string(rune('0' + p.FromVersion)))
			b.WriteString(")")
		}
		b.WriteString("\n")
		for _, tr := range p.AddedTrailers(AMOptions{}) {
			b.WriteString("  " + tr.String() + " <- " + provenance(tr) + "\n")
		}
	}
	return b.String()
}

func hasNote(s *Series, sub string) bool {
	for _, n := range s.Notes {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

func TestResolvePartialReroll(t *testing.T) {
	s := resolve(t, Options{}, "shape-partial-reroll.mbox")
	want := `[PATCH v2 1/3] shapes: change 1 (from v1)
  Reviewed-by: Bob Reviewer <bob@example.com> <- from <partial-reroll-5@example.org>, v1
[PATCH v2 2/3] shapes: change 2
[PATCH v2 3/3] shapes: change 3 (from v1)
`
	if got := shape(s); got != want {
		t.Errorf("partial re-roll:\n%s\nwant:\n%s", got, want)
	}
	if s.Version != 2 || len(s.Missing) != 0 || !hasNote(s, "partial re-roll: v2 re-sent only 2/3") {
		t.Errorf("version %d missing %v notes %q", s.Version, s.Missing, s.Notes)
	}
	if s.CoverMessageID != "partial-reroll-1@example.org" || s.Title != "shapes: a series" || s.Base.Commit != "0123456789abcdef0123456789abcdef01234567" {
		t.Errorf("v2 has no cover of its own and takes v1's (like b4): cover %q title %q base %q", s.CoverMessageID, s.Title, s.Base.Commit)
	}
	// -v 1 picks the original series with its cover and base.
	s1 := resolve(t, Options{Version: 1}, "shape-partial-reroll.mbox")
	if len(s1.Patches) != 3 || s1.Reason != "v1 requested" || s1.Base.Commit != "0123456789abcdef0123456789abcdef01234567" || s1.Base.ChangeID != "20260101-shape-0123456789ab" {
		t.Errorf("v1: %d patches, reason %q, base %+v", len(s1.Patches), s1.Reason, s1.Base)
	}
	if _, err := Resolve(loadThread(t, "shape-partial-reroll.mbox"), Options{Version: 7}); fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "found v1, v2") {
		t.Errorf("-v 7: %v", err)
	}
}

func TestResolveMissing(t *testing.T) {
	s := resolve(t, Options{}, "shape-missing.mbox")
	if len(s.Patches) != 2 || len(s.Missing) != 1 || s.Missing[0] != 2 || !hasNote(s, "2/3 missing") {
		t.Fatalf("patches %d missing %v notes %q", len(s.Patches), s.Missing, s.Notes)
	}
	var b bytes.Buffer
	s.WriteSummary(&b, AMOptions{})
	if !strings.Contains(b.String(), "[2/3] MISSING") {
		t.Errorf("summary does not show the hole:\n%s", b.String())
	}
}

func TestResolveNoCover(t *testing.T) {
	s := resolve(t, Options{}, "shape-no-cover.mbox")
	want := `[PATCH 1/2] shapes: first
  Tested-by: Carol Tester <carol@example.net> <- from <no-cover-4@example.org>, v1
[PATCH 2/2] shapes: second
  Acked-by: Bob Reviewer <bob@example.com> <- from <no-cover-5@example.org>, v1
`
	if got := shape(s); got != want {
		t.Errorf("no cover:\n%s\nwant:\n%s", got, want)
	}
	if s.Cover != nil || s.Title != "shapes: first" {
		t.Errorf("cover %v title %q", s.Cover, s.Title)
	}
}

func TestResolveRFCCoverTrailersAndRefused(t *testing.T) {
	s := resolve(t, Options{}, "shape-rfc.mbox")
	// Bob's review of the cover letter applies to both patches; the quoted
	// Reviewed-by is not taken; Mallory's Reviewed-by naming Carol is
	// refused; Jane acks from her home address with her work address in
	// the trailer: accepted because the names match.
	want := `[PATCH RFC v2 1/2] shapes: idea one
  Acked-by: Jane Doe <jane@work.example> <- from <rfc-6@example.org>, v2
  Reviewed-by: Bob Reviewer <bob@example.com> <- from <rfc-4@example.org>, v2, cover letter
[PATCH RFC v2 2/2] shapes: idea two
  Reviewed-by: Bob Reviewer <bob@example.com> <- from <rfc-4@example.org>, v2, cover letter
`
	if got := shape(s); got != want {
		t.Errorf("rfc:\n%s\nwant:\n%s", got, want)
	}
	if len(s.Refused) != 1 || s.Refused[0].Person.Email != "carol@example.net" || s.Refused[0].From.Email != "mallory@example.biz" || !hasNote(s, "refused") {
		t.Errorf("refused: %+v notes %q", s.Refused, s.Notes)
	}
	if !s.Patches[0].Subject.RFC || s.Title != "shapes: an idea" {
		t.Errorf("subject %+v title %q", s.Patches[0].Subject, s.Title)
	}
	// --any-sender takes Mallory's trailer.
	s = resolve(t, Options{AnySender: true}, "shape-rfc.mbox")
	if got := shape(s); !strings.Contains(got, "Reviewed-by: Carol Tester <carol@example.net> <- from <rfc-5@example.org>, v2") || len(s.Refused) != 0 {
		t.Errorf("any-sender:\n%s", got)
	}
}

func TestResolveNetNext(t *testing.T) {
	s := resolve(t, Options{}, "shape-net-next.mbox")
	want := `[PATCH v3 1/2] net: shape one
[PATCH v3 2/2] net: shape two
  Tested-by: Carol Tester <carol@example.net> <- from <net-next-4@example.org>, v3
`
	if got := shape(s); got != want {
		t.Errorf("net-next:\n%s\nwant:\n%s", got, want)
	}
	if p := s.Patches[0].Subject.Prefixes; len(p) != 1 || p[0] != "net-next" {
		t.Errorf("prefixes %q", p)
	}
}

func TestResolveVersions(t *testing.T) {
	s := resolve(t, Options{}, "shape-versions.mbox")
	want := `[PATCH v2 1/2] shapes: keep
  Reviewed-by: Bob Reviewer <bob@example.com> <- from <versions-3@example.org>, v1
[PATCH v2 2/2] shapes: change
`
	if got := shape(s); got != want {
		t.Errorf("versions:\n%s\nwant:\n%s", got, want)
	}
	if len(s.Versions) != 2 || !strings.Contains(s.Reason, "v2 is the newest version") {
		t.Errorf("versions %+v reason %q", s.Versions, s.Reason)
	}
}

func TestResolveFixtures(t *testing.T) {
	s := resolve(t, Options{}, "ppc-dynamic-preempt-v4.mbox", "ppc-dynamic-preempt-arm64-followup.mbox")
	if s.Version != 4 || len(s.Patches) != 1 || s.CoverMessageID != "20250210194500.37c940e5-0-sshegde@linux.ibm.com" || s.Title != "powerpc: Enable dynamic preemption" {
		t.Errorf("v4: %+v", s)
	}
	if len(s.Orphans) != 1 || s.Orphans[0] != "20260731102000.ab50c836-0-jhladky@redhat.com" {
		t.Errorf("orphans %q", s.Orphans)
	}
	if got := len(s.Patches[0].AddedTrailers(AMOptions{})); got != 0 {
		t.Errorf("the v4 thread has no review trailers, got %d", got)
	}

	s = resolve(t, Options{}, "ppc-dynamic-preempt-v6.1-backport.mbox")
	p := s.Patches[0]
	if p.Author.Email != "sshegde@linux.ibm.com" || s.Author.Email != "tester@example.org" {
		t.Errorf("in-body From: not used: patch author %v, series author %v", p.Author, s.Author)
	}
	if s.Base.Commit != "b3bb56f2e4c9f033ed84c82906c3c2755787ffea" || p.Subject.Prefixes[0] != "6.1" {
		t.Errorf("base %+v subject %+v", s.Base, p.Subject)
	}
	if !strings.HasPrefix(p.Diff, "diff --git a/arch/powerpc/Kconfig") || strings.Contains(p.Diff, "2.39.5") {
		t.Errorf("diff: %.80q ... %q", p.Diff, p.Diff[len(p.Diff)-40:])
	}
	if !strings.HasPrefix(p.Message, "Once the lazy") || !strings.HasSuffix(p.Message, "Signed-off-by: Shrikanth Hegde <sshegde@linux.ibm.com>") {
		t.Errorf("message: %q", p.Message)
	}
	if len(p.Trailers) != 1 || !p.Trailers[0].InPatch {
		t.Errorf("own trailers: %+v", p.Trailers)
	}

	s = resolve(t, Options{}, "rcu-gp-qs-v2.mbox")
	if s.Version != 2 || len(s.Patches) != 1 || s.Cover != nil || s.Patches[0].Subject.HasCounter {
		t.Errorf("rcu: %+v", s)
	}

	_, err := Resolve(loadThread(t, "generic-entry-v5-report.mbox"), Options{})
	if fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "generic-entry-v5-report.mbox") {
		t.Errorf("no patches: want fail.Input naming the thread, got %v", err)
	}
}

func TestSeriesJSON(t *testing.T) {
	s := resolve(t, Options{}, "shape-rfc.mbox")
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"title", "version", "reason", "patches", "refused_trailers", "base", "versions", "cover_message_id"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, data)
		}
	}
	if !strings.Contains(string(data), `"from_cover":true`) || !strings.Contains(string(data), `"message_id":"rfc-4@example.org"`) {
		t.Errorf("JSON lacks trailer provenance: %s", data)
	}
}

func TestWriteAMRoundTrip(t *testing.T) {
	s := resolve(t, Options{}, "shape-rfc.mbox")
	var b bytes.Buffer
	if err := s.WriteAM(&b, DefaultAMOptions()); err != nil {
		t.Fatal(err)
	}
	msgs, err := mbox.ParseBytes(b.Bytes(), "am")
	if err != nil || len(msgs) != 2 {
		t.Fatalf("am mbox: %d messages, %v", len(msgs), err)
	}
	body := msgs[0].Body
	for _, want := range []string{"Idea one.\n\nSigned-off-by: Alice Author <alice@example.org>\nAcked-by: Jane Doe <jane@work.example>\nReviewed-by: Bob Reviewer <bob@example.com>\nLink: https://patch.msgid.link/rfc-2@example.org\n---\n", "diff --git a/i.c b/i.c"} {
		if !strings.Contains(body, want) {
			t.Errorf("am message lacks %q:\n%s", want, body)
		}
	}
	if msgs[0].Subject != "[PATCH RFC v2 1/2] shapes: idea one" || msgs[0].From.Email != "alice@example.org" {
		t.Errorf("headers: %q %v", msgs[0].Subject, msgs[0].From)
	}
	if got := s.Slug(); got != "v2_20260105_alice_shapes_an_idea" {
		t.Errorf("slug %q", got)
	}
}

// msg hand-builds a thread message.
func msg(id, parent, from, subject, body string, minute int) *mbox.Message {
	m := &mbox.Message{MessageID: id, InReplyTo: parent, Subject: subject, Body: body,
		Date: time.Date(2026, 1, 5, 10, minute, 0, 0, time.UTC)}
	if parent != "" {
		m.References = []string{parent}
	}
	a, _ := parsePerson(from)
	m.From = a
	return m
}

func TestResolveHandBuilt(t *testing.T) {
	d := func(i int) string {
		return fmt.Sprintf("Change %d.\n\nSigned-off-by: Jiří Novák <jn@example.cz>\n---\ndiff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a%d\n+b%d\n", i, i, i)
	}
	var ms []*mbox.Message
	ms = append(ms, msg("c@x", "", "Jiří Novák <jn@example.cz>", "[PATCH 0 of 5] big", "Cover\n\n 5 files changed, 5 insertions(+)\n", 0))
	for i := 1; i <= 5; i++ {
		ms = append(ms, msg(fmt.Sprintf("p%d@x", i), "c@x", "Jiří Novák <jn@example.cz>", fmt.Sprintf("[PATCH %d of 5] change %d", i, i), d(i), i))
	}
	// An afterthought: 6/5.
	ms = append(ms, msg("p6@x", "c@x", "Jiří Novák <jn@example.cz>", "[PATCH 6/5] change 6", d(6), 30))
	// A reply whose only trailer is quoted, and a suggestion with a diff.
	ms = append(ms, msg("r1@x", "p2@x", "Bob <bob@example.com>", "Re: [PATCH 2 of 5] change 2",
		"> Reviewed-by: Fake <fake@example.com>\n\nTry this:\n\ndiff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n", 40))
	s, err := Resolve(mbox.NewThread(ms, "hand"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Patches) != 6 || len(s.Missing) != 0 || s.Patches[5].Subject.Total != 6 || s.CoverMessageID != "c@x" {
		t.Fatalf("6/5: %d patches, missing %v, last %+v", len(s.Patches), s.Missing, s.Patches[5].Subject)
	}
	for _, p := range s.Patches {
		if len(p.AddedTrailers(AMOptions{})) != 0 {
			t.Errorf("%s got trailers %+v", p.MessageID, p.AddedTrailers(AMOptions{}))
		}
	}
	// Non-ASCII author survives the am mbox.
	var b bytes.Buffer
	if err := s.WriteAM(&b, DefaultAMOptions()); err != nil {
		t.Fatal(err)
	}
	back, err := mbox.ParseBytes(b.Bytes(), "am")
	if err != nil || len(back) != 6 || back[0].From.Name != "Jiří Novák" || !strings.Contains(back[0].Body, "Signed-off-by: Jiří Novák <jn@example.cz>") {
		t.Fatalf("am: %v %d %+v", err, len(back), back[0].From)
	}
}

// FuzzResolve feeds arbitrary mbox text through the parser and Resolve:
// no panics, and a nil error means at least one patch.
func FuzzResolve(f *testing.F) {
	// Small seeds: minimizing large inputs makes the fuzzer crawl.
	f.Add([]byte("From mboxrd@z Thu Jan  1 00:00:00 1970\nFrom: A <a@b.c>\nSubject: [PATCH v2 0/2] s\nMessage-ID: <c@x>\n\n 1 file changed, 1 insertion(+)\n\n" +
		"From mboxrd@z Thu Jan  1 00:00:00 1970\nFrom: A <a@b.c>\nSubject: [PATCH v2 1/2] p\nMessage-ID: <p@x>\nIn-Reply-To: <c@x>\n\nM.\n\nSigned-off-by: A <a@b.c>\n---\ndiff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-a\n+b\n\n" +
		"From mboxrd@z Thu Jan  1 00:00:00 1970\nFrom: B <b@b.c>\nSubject: Re: [PATCH v2 0/2] s\nMessage-ID: <r@x>\nIn-Reply-To: <c@x>\n\n> q\nAcked-by: B <b@b.c>\n"))
	f.Add([]byte("From: a@b.c\nSubject: [PATCH 0/1] x\nMessage-ID: <1@x>\n\ndiff --git a/a b/a\n--- a/a\n+++ b/a\n"))
	// Real threads (their first 8 KiB) and the generated shapes of the
	// real-mail classes (realmail_test.go).
	for _, b := range realMailSeeds(f, 8<<10) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, err := mbox.ParseBytes(data, "fuzz")
		if err != nil {
			return
		}
		s, err := Resolve(mbox.NewThread(msgs, "fuzz"), Options{})
		if err != nil {
			if fail.KindOf(err) != fail.KindInput {
				t.Fatalf("non-input error %v", err)
			}
			return
		}
		if len(s.Patches) == 0 {
			t.Fatal("nil error without patches")
		}
		var b bytes.Buffer
		if err := s.WriteAM(&b, DefaultAMOptions()); err != nil {
			t.Fatal(err)
		}
		s.WriteSummary(&b, AMOptions{})
	})
}

// realMailSeeds are fuzz seeds from real mail: the testdata threads cut to
// max bytes, and mailboxes of the real-mail classes.
func realMailSeeds(f *testing.F, max int) [][]byte {
	var out [][]byte
	files := threadFiles()
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) > max {
			b = b[:max]
		}
		out = append(out, b)
	}
	a := twoPatchSeries("s")
	a[2].id, a[1].noSubject = "", true
	out = append(out,
		tmbox(append(twoPatchSeries("r"), tmail{id: "x@y", irt: "r-2@example.org", refs: []string{"r-2@example.org", "r-0@example.org"}, subject: "Re: x",
			body: "Reviewed-by: B <b@example.com<mailto:b@example.com>>\nLink: https://x.example/y\nCc: c@example.org\n"})...),
		tmbox(a...),
		tmbox(tmail{id: "bl@x", subject: "[PATCH] t", body: "t\n---\ndiff --git a/d b/d\n--- a/d\n+++ b/d\n@@ -1,4 +1,4 @@\n d\n-x\n+y\n"},
			tmail{id: "u@x", subject: "[PATCH 1/1] u", body: tpatch("a.c", "U.", "1")}, tmail{id: "v@x", subject: "[PATCH] v", body: tpatch("b.c", "V.", "1")}))
	return out
}

// realMailBodies returns the bodies and subjects of the testdata threads'
// messages (seeds for the trailer and subject parsers).
func realMailBodies(f *testing.F) (bodies, subjects []string) {
	files := threadFiles()
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		msgs, err := mbox.ParseBytes(b, p)
		if err != nil {
			f.Fatal(err)
		}
		for _, m := range msgs {
			subjects = append(subjects, m.Subject)
			body := m.Body
			if len(body) > 4<<10 {
				body = body[len(body)-4<<10:]
			}
			bodies = append(bodies, body)
		}
	}
	return bodies, subjects
}

// TestRequested: the newest version resolved and then pinned
// (Series.Requested) is the series Resolve gives when that version is
// asked for, in every field (the runner stores one for the other:
// pipelines/runner.Resolved); the series resolved is left as it was.
func TestRequested(t *testing.T) {
	for _, f := range []string{"shape-versions.mbox", "shape-partial-reroll.mbox", "shape-missing.mbox"} {
		th := loadThread(t, f)
		newest, err := Resolve(th, Options{})
		if err != nil {
			t.Fatal(err)
		}
		reason := newest.Reason
		pinned, err := Resolve(th, Options{Version: newest.Version})
		if err != nil {
			t.Fatal(err)
		}
		got := newest.Requested()
		if !reflect.DeepEqual(got, pinned) {
			t.Errorf("%s: the newest pinned differs from v%d asked for:\n%+v\nvs\n%+v", f, newest.Version, got, pinned)
		}
		if newest.Reason != reason || got.Reason == reason {
			t.Errorf("%s: reason %q, pinned %q (was %q)", f, newest.Reason, got.Reason, reason)
		}
	}
	if (*Series)(nil).Requested() != nil {
		t.Error("nil pinned is not nil")
	}
}
