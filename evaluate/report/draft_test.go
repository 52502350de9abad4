package report

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/mbox"
)

var me = mbox.Address{Name: "Jane Tester", Email: "jane@example.com"}

func seedDraft(t *testing.T, testedBy bool) (*Draft, []byte) {
	t.Helper()
	r := seedReport(t)
	d, err := NewDraft(r, patchMsg(t), DraftOptions{From: me, TestedBy: testedBy, Now: gen.Add(time.Hour),
		Rand: bytes.NewReader([]byte{1, 2, 3, 4, 5, 6, 7, 8})})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteDraft(&b, *d); err != nil {
		t.Fatal(err)
	}
	return d, b.Bytes()
}

func TestDraftGolden(t *testing.T) {
	_, eml := seedDraft(t, true)
	golden(t, "ppc.eml", eml)
}

// parseDraft reads eml back with go-message.
func parseDraft(t *testing.T, eml []byte) (*mail.Reader, string) {
	t.Helper()
	mr, err := mail.CreateReader(bytes.NewReader(eml))
	if err != nil {
		t.Fatalf("go-message cannot read the draft: %v\n%s", err, eml)
	}
	p, err := mr.NextPart()
	if err != nil {
		t.Fatalf("no body part: %v", err)
	}
	body, err := io.ReadAll(p.Body)
	if err != nil {
		t.Fatal(err)
	}
	return mr, string(body)
}

func TestDraftParsesWithGoMessage(t *testing.T) {
	d, eml := seedDraft(t, false)
	mr, body := parseDraft(t, eml)
	h := mr.Header
	if s, _ := h.Subject(); s != "Re: [PATCH 6.1 v4 1/1] powerpc: enable dynamic preemption" {
		t.Errorf("Subject %q", s)
	}
	from, _ := h.AddressList("From")
	to, _ := h.AddressList("To")
	cc, _ := h.AddressList("Cc")
	if len(from) != 1 || from[0].Address != "jane@example.com" || from[0].Name != "Jane Tester" {
		t.Errorf("From %v", from)
	}
	if len(to) != 1 || to[0].Address != "tester@example.org" {
		t.Errorf("To %v", to)
	}
	if len(cc) != 2 || cc[0].Address != "linuxppc-dev@lists.ozlabs.org" || cc[1].Address != "sshegde@linux.ibm.com" {
		t.Errorf("Cc %v", cc)
	}
	if id, _ := h.MessageID(); id != d.MessageID || !strings.HasSuffix(id, "@example.com") {
		t.Errorf("Message-ID %q", id)
	}
	irt, _ := h.MsgIDList("In-Reply-To")
	refs, _ := h.MsgIDList("References")
	if len(irt) != 1 || irt[0] != "20261102093000.4121-1-tester@example.org" {
		t.Errorf("In-Reply-To %v", irt)
	}
	if len(refs) != 2 || refs[0] != "20261102093000.4121-0-tester@example.org" || refs[1] != irt[0] {
		t.Errorf("References %v", refs)
	}
	if date, err := h.Date(); err != nil || !date.Equal(gen.Add(time.Hour)) {
		t.Errorf("Date %v %v", date, err)
	}
	if cte := h.Get("Content-Transfer-Encoding"); cte != "8bit" {
		t.Errorf("Content-Transfer-Encoding %q", cte)
	}
	if ct := h.Get("Content-Type"); ct != "text/plain; charset=UTF-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if body != d.Body {
		t.Errorf("body changed in transit")
	}
	if bytes.Contains(eml, []byte("\r")) {
		t.Errorf("draft has CR characters")
	}
	for i, l := range strings.Split(body, "\n") {
		if Width(l) > 72 {
			t.Errorf("body line %d is %d columns: %q", i+1, Width(l), l)
		}
	}
	flat := strings.Join(strings.Fields(body), " ")
	for _, want := range []string{
		"On Mon, 02 Nov 2026 09:30:01 +0000, Kernel Tester <tester@example.org>",
		"> Once the lazy preemption is supported",
		"voluntary -> voluntary-dyn +24.6%",
		"also differ in: PREEMPT_RCU n->y (derived: kernel/rcu/Kconfig:21",
		"deterministic QEMU", "n=3 samples per variant",
		"-icount shift=0,sleep=off",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("body lacks %q", want)
		}
	}
	// Never the diff.
	for _, bad := range []string{"diff --git", "Signed-off-by", "+#if defined(CONFIG_PREEMPT_DYNAMIC)"} {
		if strings.Contains(body, bad) {
			t.Errorf("body quotes %q", bad)
		}
	}
	if strings.Contains(body, "Tested-by") {
		t.Errorf("Tested-by without being asked")
	}
}

func TestTestedBy(t *testing.T) {
	// Asked, but the series regressed: no trailer, and a note says why.
	d, _ := seedDraft(t, true)
	if d.TestedBy || strings.Contains(d.Body, "Tested-by:") || len(d.Notes) == 0 || !strings.Contains(d.Notes[0], "regression") && !strings.Contains(d.Notes[0], "left out") {
		t.Fatalf("Tested-by despite a regression: %v %q", d.TestedBy, d.Notes)
	}
	// No regression (only getppid, voluntary-dyn -> voluntary is an
	// improvement): the trailer is the last paragraph.
	r := seedReport(t)
	r.Benchmarks, r.Decompositions = nil, nil
	if err := r.AddResults(seedSamples(), Spec{Comparisons: []Pair{{"full", "voluntary"}}}); err != nil {
		t.Fatal(err)
	}
	d, err := NewDraft(r, patchMsg(t), DraftOptions{From: me, TestedBy: true, Now: gen})
	if err != nil {
		t.Fatal(err)
	}
	if !d.TestedBy || !strings.HasSuffix(d.Body, "\n\nTested-by: Jane Tester <jane@example.com>\n") {
		t.Fatalf("no Tested-by at the end:\n%s", d.Body)
	}
	d, _ = NewDraft(r, patchMsg(t), DraftOptions{From: me, TestedBy: false, Now: gen})
	if strings.Contains(d.Body, "Tested-by") {
		t.Fatal("Tested-by without being asked")
	}
}

// TestGitMailinfo feeds the draft to the real git mailinfo.
func TestGitMailinfo(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required (installed by .ci/install-deps)")
	}
	r := seedReport(t)
	r.Benchmarks, r.Decompositions = nil, nil
	if err := r.AddResults(seedSamples(), Spec{Comparisons: []Pair{{"full", "voluntary"}}}); err != nil {
		t.Fatal(err)
	}
	from := mbox.Address{Name: "Jiří Tester", Email: "jiri@example.com"}
	d, err := NewDraft(r, patchMsg(t), DraftOptions{From: from, TestedBy: true, Now: gen})
	if err != nil {
		t.Fatal(err)
	}
	var eml bytes.Buffer
	if err := WriteDraft(&eml, *d); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("git", "mailinfo", "-k", filepath.Join(dir, "msg"), filepath.Join(dir, "patch"))
	cmd.Stdin = bytes.NewReader(eml.Bytes())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git mailinfo: %v", err)
	}
	info := string(out)
	for _, want := range []string{"Author: Jiří Tester\n", "Email: jiri@example.com\n",
		"Subject: Re: [PATCH 6.1 v4 1/1] powerpc: enable dynamic preemption\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("mailinfo lacks %q:\n%s", want, info)
		}
	}
	msg, _ := os.ReadFile(filepath.Join(dir, "msg"))
	if !strings.Contains(string(msg), "Tested-by: Jiří Tester <jiri@example.com>") ||
		!strings.Contains(string(msg), "full -> voluntary") {
		t.Errorf("mailinfo body:\n%s", msg)
	}
	// Without -k git strips Re: and the [PATCH ...] prefix as git am does.
	cmd = exec.Command("git", "mailinfo", filepath.Join(dir, "msg"), filepath.Join(dir, "patch"))
	cmd.Stdin = bytes.NewReader(eml.Bytes())
	out, _ = cmd.Output()
	if !strings.Contains(string(out), "Subject: powerpc: enable dynamic preemption\n") {
		t.Errorf("mailinfo subject:\n%s", out)
	}
}

func TestReplySubject(t *testing.T) {
	for in, want := range map[string]string{
		"[PATCH v4 1/1] powerpc: enable dynamic preemption":     "Re: [PATCH v4 1/1] powerpc: enable dynamic preemption",
		"Re: [PATCH v4 1/1] powerpc: enable dynamic preemption": "Re: [PATCH v4 1/1] powerpc: enable dynamic preemption",
		"RE: re:Re[2]: AW: x":                   "Re: x",
		"Re: [PATCH]\r\n Bcc: evil@example.com": "Re: [PATCH] Bcc: evil@example.com",
		"  spaced\tout  ":                       "Re: spaced out",
	} {
		if got := ReplySubject(in); got != want {
			t.Errorf("ReplySubject(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHeaderInjection feeds hostile text from the answered message
// through NewDraft and WriteDraft: no header may appear that we did not
// write, and the decoded values are the cleaned text.
func TestHeaderInjection(t *testing.T) {
	parent := &mbox.Message{
		MessageID:  "evil@x>\r\nBcc: victim@example.com\r\nX-A: <b",
		References: []string{"ok-1@example.org", "bad id@x\r\nX-Injected: 1", "ok-2@example.org"},
		Subject:    "[PATCH] x\r\nBcc: victim@example.com\nX-Injected: yes =?utf-8?q?=0D=0ABcc:_a@b?=",
		From:       mbox.Address{Name: "Evil\r\nBcc: victim@example.com", Email: "author@example.org"},
		To: []mbox.Address{
			{Name: "List", Email: "list@example.org"},
			{Name: "x", Email: "a@b>\r\nX-Injected: 1"},
			{Name: "=?utf-8?q?=0D=0ABcc:_v@x?=", Email: "enc@example.org"},
			{Name: "Quote \"me\" \\ (c), <x>", Email: "quote@example.org"},
		},
		Cc:   []mbox.Address{{Email: "LIST@example.org"}, {Name: "Me Again", Email: "JANE@example.com"}, {Name: "Zoë Ünicode", Email: "zoe@example.org"}},
		Date: gen,
		Body: "Hello\r\nBcc: x@y\r\n\r\nmore",
	}
	// The Message-ID is unusable: refused with a clear error.
	if _, err := NewDraft(seedReport(t), parent, DraftOptions{From: me, Now: gen}); err == nil || !strings.Contains(err.Error(), "Message-ID") {
		t.Fatalf("hostile Message-ID accepted: %v", err)
	}
	parent.MessageID = "good@example.org"
	d, err := NewDraft(seedReport(t), parent, DraftOptions{From: me, Now: gen})
	if err != nil {
		t.Fatal(err)
	}
	// Even a hand-made hostile Draft stays safe.
	d.Subject += "\r\nX-Injected: 2"
	d.From.Name += "\nX-Injected: 3"
	var eml bytes.Buffer
	if err := WriteDraft(&eml, *d); err != nil {
		t.Fatal(err)
	}
	hdr := eml.String()[:strings.Index(eml.String(), "\n\n")]
	for _, l := range strings.Split(hdr, "\n") {
		if l == "" || l[0] == ' ' || l[0] == '\t' {
			continue
		}
		name := l[:strings.IndexByte(l, ':')]
		switch strings.ToLower(name) {
		case "from", "to", "cc", "subject", "date", "message-id", "in-reply-to", "references",
			"mime-version", "content-type", "content-transfer-encoding", "user-agent":
		default:
			t.Errorf("unexpected header %q in\n%s", name, hdr)
		}
	}
	mr, body := parseDraft(t, eml.Bytes())
	h := mr.Header
	if h.Has("Bcc") || h.Has("X-Injected") || h.Has("X-A") {
		t.Fatalf("injected header:\n%s", hdr)
	}
	subj, err := h.Subject()
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(subj, "\r\n") || !strings.HasPrefix(subj, "Re: [PATCH] x Bcc: victim@example.com X-Injected: yes =?utf-8?q?=0D=0ABcc:_a@b?=") {
		t.Errorf("subject decoded to %q", subj)
	}
	to, _ := h.AddressList("To")
	cc, err := h.AddressList("Cc")
	if err != nil {
		t.Fatalf("Cc does not parse: %v\n%s", err, hdr)
	}
	if len(to) != 1 || to[0].Address != "author@example.org" || strings.ContainsAny(to[0].Name, "\r\n") {
		t.Errorf("To %+v", to)
	}
	var got []string
	for _, a := range cc {
		got = append(got, a.Address)
		if strings.ContainsAny(a.Name, "\r\n") {
			t.Errorf("name with newline %q", a.Name)
		}
		if a.Address == "enc@example.org" && a.Name != "=?utf-8?q?=0D=0ABcc:_v@x?=" {
			t.Errorf("encoded-word name decoded to %q", a.Name)
		}
		if a.Address == "quote@example.org" && a.Name != `Quote "me" \ (c), <x>` {
			t.Errorf("quoted name %q", a.Name)
		}
		if a.Address == "zoe@example.org" && a.Name != "Zoë Ünicode" {
			t.Errorf("unicode name %q", a.Name)
		}
	}
	// Deduplicated case-insensitively, the sender left out, the
	// malformed address dropped.
	if strings.Join(got, ",") != "list@example.org,enc@example.org,quote@example.org,zoe@example.org" {
		t.Errorf("Cc %v", got)
	}
	refs, _ := h.MsgIDList("References")
	if strings.Join(refs, ",") != "ok-1@example.org,ok-2@example.org,good@example.org" {
		t.Errorf("References %v", refs)
	}
	if len(d.Notes) == 0 {
		t.Errorf("no note about the dropped address")
	}
	if strings.Contains(body, "\r") {
		t.Errorf("CR in body")
	}
	if err := CheckBody(body); err != nil {
		t.Error(err)
	}
	// The same through git mailinfo: author intact, no injected header.
	cmd := exec.Command("git", "mailinfo", "-k", filepath.Join(t.TempDir(), "m"), filepath.Join(t.TempDir(), "p"))
	cmd.Stdin = bytes.NewReader(eml.Bytes())
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "Email: jane@example.com\n") || strings.Contains(string(out), "\nBcc") {
		t.Errorf("mailinfo:\n%s", out)
	}
}

func TestDraftErrors(t *testing.T) {
	r := seedReport(t)
	p := patchMsg(t)
	if _, err := NewDraft(r, nil, DraftOptions{From: me}); err == nil {
		t.Error("nil parent accepted")
	}
	if _, err := NewDraft(r, p, DraftOptions{From: mbox.Address{Email: "not an address"}}); err == nil ||
		!strings.Contains(err.Error(), "user.email") {
		t.Errorf("bad From: %v", err)
	}
	// Answering our own message with nobody else: error; with a list: To the list.
	own := *p
	own.From = me
	own.To, own.Cc = nil, nil
	if _, err := NewDraft(r, &own, DraftOptions{From: me}); err == nil {
		t.Error("reply to nobody accepted")
	}
	own.To = []mbox.Address{{Email: "list@example.org"}}
	d, err := NewDraft(r, &own, DraftOptions{From: me})
	if err != nil || len(d.To) != 1 || d.To[0].Email != "list@example.org" {
		t.Errorf("own message: %v %+v", err, d)
	}
	if CheckBody(strings.Repeat("x", 73)) == nil {
		t.Error("CheckBody accepted 73 columns")
	}
}

// TestDraftNarrow: long variant names, a long intro and a long quote
// still give lines of at most 72 columns.
func TestDraftNarrow(t *testing.T) {
	r := seedReport(t)
	long := "voluntary+PREEMPT_DYNAMIC+with-an-extremely-long-descriptive-variant-name"
	for i := range r.Variants {
		if r.Variants[i].Name == "voluntary-dyn" {
			r.Variants[i].Name = long
		}
	}
	var ss = seedSamples()
	for i := range ss {
		if ss[i].Variant == "voluntary-dyn" {
			ss[i].Variant = long
		}
	}
	r.Benchmarks, r.Decompositions = nil, nil
	if err := r.AddResults(ss, Spec{Comparisons: []Pair{{"voluntary", long}}, Chains: [][]string{{"voluntary", long, "full"}}}); err != nil {
		t.Fatal(err)
	}
	p := patchMsg(t)
	q := *p
	q.Body = strings.Repeat("averyveryverylongwordwithoutanyspaces", 4) + " and " + strings.Repeat("word ", 60) + "\n"
	q.From.Name = strings.Repeat("Longname ", 10)
	d, err := NewDraft(r, &q, DraftOptions{From: me, Intro: strings.Repeat("intro ", 40) + "https://lore.kernel.org/all/20250210184605.2055-1-sshegde@linux.ibm.com/"})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckBody(d.Body); err != nil {
		t.Fatal(err)
	}
}

func TestAttributionAndQuote(t *testing.T) {
	ist := time.FixedZone("", 5*3600+1800)
	m := &mbox.Message{From: mbox.Address{Name: "Shrikanth Hegde", Email: "sshegde@linux.ibm.com"},
		Date: time.Date(2025, 2, 10, 19, 46, 0, 0, ist)}
	if got := strings.Join(Attribution(m), "\n"); got != "On Mon, 10 Feb 2025 19:46:00 +0530, Shrikanth Hegde <sshegde@linux.ibm.com>\nwrote:" &&
		got != "On Mon, 10 Feb 2025 19:46:00 +0530, Shrikanth Hegde\n<sshegde@linux.ibm.com> wrote:" {
		t.Errorf("attribution %q", got)
	}
	m.Date = time.Time{}
	if got := strings.Join(Attribution(m), "\n"); got != "Shrikanth Hegde <sshegde@linux.ibm.com> wrote:" {
		t.Errorf("no date: %q", got)
	}

	// The cover letter: its first paragraph, then [...].
	var cover *mbox.Message
	for _, msg := range loadThread(t) {
		if strings.Contains(msg.Subject, "0/1") {
			cover = msg
		}
	}
	q := strings.Join(Quote(cover, 0), "\n")
	want := "> This is the v4 \"powerpc: enable dynamic preemption\" patch carried to\n" +
		"> v6.1 so that its effect can be measured on a v6.1 tree: with it,\n" +
		"> CONFIG_PREEMPT_DYNAMIC=y takes effect on powerpc, which in turn turns\n" +
		"> on CONFIG_PREEMPT_RCU (kernel/rcu/Kconfig: default y if PREEMPT ||\n" +
		"> PREEMPT_RT || PREEMPT_DYNAMIC).\n> [...]"
	if q != want {
		t.Errorf("cover quote:\n%s", q)
	}

	// A reply: its own words, not what it quoted, capped.
	reply := &mbox.Message{Body: "On Mon, Jul 27, 2026 at 12:29 PM Someone <some@one.org>\nwrote:\n> quoted text\n> more\n\n" +
		"Tested on 7.1 by switching the runtime mode via\n/sys/kernel/debug/sched/preempt:\n\nMode  kill\nfull  57,476\n\n-- \nJirka\n"}
	q = strings.Join(Quote(reply, 0), "\n")
	if q != "> Tested on 7.1 by switching the runtime mode via\n> /sys/kernel/debug/sched/preempt:\n> [...]" {
		t.Errorf("reply quote:\n%s", q)
	}
	if strings.Contains(q, "quoted text") || strings.Contains(q, "Jirka") {
		t.Errorf("reply quote has quoted text or the signature:\n%s", q)
	}
	long := &mbox.Message{Body: strings.Repeat("line\n", 30)}
	if ql := Quote(long, 4); len(ql) != 5 || ql[4] != "> [...]" {
		t.Errorf("cap: %q", ql)
	}
}

func TestUnicodeSubjectFolding(t *testing.T) {
	p := patchMsg(t)
	q := *p
	q.Subject = "[PATCH v2] rcu: Reduce synchronize_rcu() latency — naïve café résumé test with a rather long subject line"
	d, err := NewDraft(seedReport(t), &q, DraftOptions{From: me, Now: gen})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteDraft(&b, *d); err != nil {
		t.Fatal(err)
	}
	hdr := b.String()[:strings.Index(b.String(), "\n\n")]
	for _, l := range strings.Split(hdr, "\n") {
		if len(l) > 78 {
			t.Errorf("header line %d long: %q", len(l), l)
		}
	}
	if !strings.Contains(hdr, "Subject: Re: [PATCH v2] rcu: Reduce") {
		t.Errorf("plain words were encoded:\n%s", hdr)
	}
	mr, _ := parseDraft(t, b.Bytes())
	if s, _ := mr.Header.Subject(); s != "Re: "+q.Subject {
		t.Errorf("subject round trip %q", s)
	}
	cmd := exec.Command("git", "mailinfo", "-k", filepath.Join(t.TempDir(), "m"), filepath.Join(t.TempDir(), "p"))
	cmd.Stdin = bytes.NewReader(b.Bytes())
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "Subject: Re: "+q.Subject+"\n") {
		t.Errorf("mailinfo %v:\n%s", err, out)
	}
}

// testedByDraft is a reply with Tested-by (nothing regressed), as .eml.
func testedByDraft(t *testing.T) []byte {
	t.Helper()
	r := seedReport(t)
	r.Benchmarks, r.Decompositions = nil, nil
	if err := r.AddResults(seedSamples(), Spec{Comparisons: []Pair{{"full", "voluntary"}}}); err != nil {
		t.Fatal(err)
	}
	d, err := NewDraft(r, patchMsg(t), DraftOptions{From: me, TestedBy: true, Now: gen})
	if err != nil {
		t.Fatal(err)
	}
	var eml bytes.Buffer
	if err := WriteDraft(&eml, *d); err != nil {
		t.Fatal(err)
	}
	if !d.TestedBy {
		t.Fatalf("the draft has no Tested-by: %v", d.Notes)
	}
	return eml.Bytes()
}

// TestB4PicksUpTestedBy appends the draft to the bundled thread and runs
// the real b4 am on it: the Tested-by must land on the patch.
func TestB4PicksUpTestedBy(t *testing.T) {
	if _, err := exec.LookPath("b4"); err != nil {
		t.Fatal("b4 is required (installed by .ci/install-deps)")
	}
	eml := testedByDraft(t)
	thread, err := os.ReadFile(testenv.BackportMbox())
	if err != nil {
		t.Fatal(err)
	}
	var box bytes.Buffer
	box.Write(thread)
	if !bytes.HasSuffix(thread, []byte("\n\n")) {
		box.WriteString("\n")
	}
	if err := mbox.WriteMboxrd(&box, eml); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "thread.mbox")
	if err := os.WriteFile(in, box.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	// A private HOME with just the git identity b4 insists on.
	if err := os.WriteFile(filepath.Join(dir, ".gitconfig"), []byte("[user]\n\tname = Jane Tester\n\temail = jane@example.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("b4", "--offline-mode", "am", "-m", in, "-o", out, "20261102093000.4121-0-tester@example.org")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CACHE_HOME="+filepath.Join(dir, "cache"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("b4 am: %v\n%s", err, log)
	}
	if !strings.Contains(string(log), "+ Tested-by: Jane Tester <jane@example.com>") {
		t.Errorf("b4 did not report the Tested-by:\n%s", log)
	}
	mbx, _ := filepath.Glob(filepath.Join(out, "*.mbx"))
	if len(mbx) != 1 {
		t.Fatalf("b4 wrote %v:\n%s", mbx, log)
	}
	am, _ := os.ReadFile(mbx[0])
	if !strings.Contains(string(am), "\nTested-by: Jane Tester <jane@example.com>\n") {
		t.Errorf("Tested-by not in the am-ready mbox:\n%s", am)
	}
}

// TestConfoundCap: with many derived symbols the reply lists a few, but
// never drops a highlighted one (the CI looks for PREEMPT_RCU).
func TestConfoundCap(t *testing.T) {
	r := seedReport(t)
	c := &r.Confounds[0]
	for i := 0; i < 30; i++ {
		c.Deltas = append(c.Deltas, ConfigDelta{Symbol: "SYM_" + string(rune('A'+i%26)) + string(rune('A'+i/26)), From: "n", To: "y", Rule: "select X"})
	}
	d, err := NewDraft(r, patchMsg(t), DraftOptions{From: me, Now: gen, MaxListedDeltas: 5})
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(d.Body), " ")
	if !strings.Contains(flat, "also differ in: PREEMPT_RCU n->y (derived: kernel/rcu/Kconfig:21 default y if PREEMPTION)") {
		t.Errorf("PREEMPT_RCU not listed first:\n%s", d.Body)
	}
	if !strings.Contains(flat, "and 27 more; 1 toolchain/environment value(s)") {
		t.Errorf("cap:\n%s", d.Body)
	}
}

func TestDraftNoQuote(t *testing.T) {
	p := *patchMsg(t)
	p.Body = "diff --git a/x b/x\n--- a/x\n+++ b/x\n"
	d, err := NewDraft(seedReport(t), &p, DraftOptions{From: me, Now: gen})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(d.Body, "wrote:") || strings.Contains(d.Body, "diff --git") || !strings.HasPrefix(d.Body, "I measured") {
		t.Errorf("body:\n%s", d.Body[:200])
	}
	d, _ = NewDraft(seedReport(t), &p, DraftOptions{From: me, Now: gen, Quote: "my own quote", Greeting: "Hi Shrikanth,"})
	if !strings.HasPrefix(d.Body, "Hi Shrikanth,\n\nOn Mon, 02 Nov 2026") || !strings.Contains(d.Body, "\n> my own quote\n") {
		t.Errorf("body:\n%s", d.Body[:300])
	}
}

// TestB4PicksUpTestedByFromInbox imports the draft into a real public-inbox
// next to the thread it answers and runs the real b4 am against that
// server, as a maintainer would after the reply went to the list.
func TestB4PicksUpTestedByFromInbox(t *testing.T) {
	eml := testedByDraft(t)
	srv := testinbox.StartWith(t, testinbox.Options{Bulk: true}, testenv.BackportMbox())
	if err := srv.AddMessage(eml); err != nil {
		t.Fatalf("importing the draft into public-inbox: %v", err)
	}
	out := t.TempDir()
	log, err := srv.B4Command("am", "-o", out, "20261102093000.4121-0-tester@example.org").CombinedOutput()
	if err != nil {
		t.Fatalf("b4 am: %v\n%s", err, log)
	}
	mbx, _ := filepath.Glob(filepath.Join(out, "*.mbx"))
	if len(mbx) != 1 {
		t.Fatalf("b4 wrote %v:\n%s", mbx, log)
	}
	am, _ := os.ReadFile(mbx[0])
	want := "\nTested-by: " + me.String() + "\n"
	if !strings.Contains(string(am), want) {
		t.Errorf("b4 am from public-inbox did not pick up %q:\n%s\n%s", strings.TrimSpace(want), log, am)
	}
}

// TestCoverageWarningIsLoud: a series whose code the measured kernels did
// not compile gets the warning in the draft before any number, and in the
// text and Markdown reports with the symbol that would build it.
func TestCoverageWarningIsLoud(t *testing.T) {
	r := seedReport(t)
	r.Coverage = []FileCoverage{
		{Path: "drivers/net/bonding/bond_main.c", Status: "not-built", Symbols: []string{"CONFIG_BONDING"},
			Why: []string{"drivers/net/bonding/Makefile: obj-$(CONFIG_BONDING) += bonding.o"}},
		{Path: "Documentation/networking/bonding.rst", Status: "no-code", Note: "not part of the kernel image"},
	}
	w := r.CoverageWarning()
	if !strings.HasPrefix(w, "WARNING: none of the code") || !strings.Contains(w, "CONFIG_BONDING") {
		t.Fatalf("warning %q", w)
	}
	d, err := NewDraft(r, patchMsg(t), DraftOptions{From: me, Now: gen.Add(time.Hour), Rand: bytes.NewReader([]byte{1, 2, 3, 4, 5, 6, 7, 8})})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteDraft(&b, *d); err != nil {
		t.Fatal(err)
	}
	body := b.String()
	iw, in := strings.Index(body, "WARNING: none of the code"), strings.Index(body, "ns/op")
	if iw < 0 || (in >= 0 && iw > in) {
		t.Errorf("draft: warning at %d, first number at %d:\n%s", iw, in, body)
	}
	var txt, md bytes.Buffer
	WriteText(&txt, r)
	WriteMarkdown(&md, r)
	for name, s := range map[string]string{"text": txt.String(), "markdown": strings.ReplaceAll(md.String(), `\_`, "_")} {
		if !strings.Contains(s, "NOT BUILT in any measured kernel; CONFIG_BONDING would build it") || !strings.Contains(s, "WARNING") {
			t.Errorf("%s report lacks the coverage lines:\n%s", name, s)
		}
	}
	r.Coverage[0].Status, r.Coverage[0].Kernels = "compiled", []string{"patched"}
	if w := r.CoverageWarning(); w != "" {
		t.Errorf("compiled series warned: %q", w)
	}
}

// A message without Message-ID (its id is synthetic) is answered without
// In-Reply-To, and its id appears nowhere in the draft; the report has no
// lore link for it.
func TestDraftParentWithoutMessageID(t *testing.T) {
	r := seedReport(t)
	p := *patchMsg(t)
	p.MessageID, p.NoMessageID = "patcheval-0123@synthetic.invalid", true
	d, err := NewDraft(r, &p, DraftOptions{From: me, Now: gen.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteDraft(&b, *d); err != nil {
		t.Fatal(err)
	}
	if d.InReplyTo != "" || strings.Contains(b.String(), "synthetic") || strings.Contains(b.String(), "In-Reply-To:") {
		t.Errorf("in-reply-to %q, references %q:\n%s", d.InReplyTo, d.References, b.String())
	}
}
