package follow

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// Commands are believed only as far as the list's trust policy vouches
// for From: real DKIM-signed replies (keys made here, published through
// the follower's TXT lookup, no DNS) are carried out; a tampered body, a
// signature of another domain, no signature, an unknown key and a second
// From: are refused, each with its reason recorded; "arc" takes the
// list's own ARC-Authentication-Results (its authserv-id, highest
// instance) and nobody else's; "any" believes From: as written.
func TestTriageTrustPolicy(t *testing.T) {
	root := t.TempDir()
	st, l, _, report := triageFixture(t, root)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	_, evilKey, _ := ed25519.GenerateKey(rand.Reader)
	txt := map[string]string{
		"ed._domainkey.example.org":  "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(edKey.Public().(ed25519.PublicKey)),
		"rsa._domainkey.example.org": "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(rsaPub),
		"ed._domainkey.evil.example": "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(evilKey.Public().(ed25519.PublicKey)),
	}
	var lookups []string
	lookup := func(domain string) ([]string, error) {
		lookups = append(lookups, domain)
		if v, ok := txt[domain]; ok {
			return []string{v}, nil
		}
		return nil, fmt.Errorf("lookup %s: no such host", domain)
	}
	n := 0
	msg := func(from, body, extra string) []byte {
		n++
		return []byte(fmt.Sprintf("From: %s\r\nTo: test@example.org\r\nSubject: Re: [PATCH] mm/slab: faster\r\n"+
			"Date: Mon, 07 Dec 2026 04:00:%02d +0000\r\nMessage-ID: <c%d@example.org>\r\nIn-Reply-To: <%s>\r\nReferences: <%s>\r\n%s\r\n%s",
			from, n, n, report, report, extra, body))
	}
	sign := func(raw []byte, domain, selector string, key any) []byte {
		var b bytes.Buffer
		o := &dkim.SignOptions{Domain: domain, Selector: selector, HeaderCanonicalization: dkim.CanonicalizationRelaxed,
			BodyCanonicalization: dkim.CanonicalizationRelaxed, HeaderKeys: []string{"From", "To", "Subject", "Date", "Message-ID", "In-Reply-To", "References"}}
		switch k := key.(type) {
		case ed25519.PrivateKey:
			o.Signer = k
		case *rsa.PrivateKey:
			o.Signer = k
		}
		if err := dkim.Sign(&b, bytes.NewReader(raw), o); err != nil {
			t.Fatal(err)
		}
		// As the archive keeps it: LF line ends.
		return bytes.ReplaceAll(b.Bytes(), []byte("\r\n"), []byte("\n"))
	}
	sam := "Sam Dev <sam@example.org>"
	good := sign(msg(sam, "#patcheval retest\n", ""), "example.org", "ed", edKey)
	goodRSA := sign(msg(sam, "#patcheval bisect\n", ""), "example.org", "rsa", rsaKey)
	tampered := bytes.Replace(sign(msg(sam, "#patcheval retest\n", ""), "example.org", "ed", edKey), []byte("retest"), []byte("invalid"), 1)
	otherDomain := sign(msg(sam, "#patcheval retest\n", ""), "evil.example", "ed", evilKey)
	unsigned := msg(sam, "#patcheval retest\n", "")
	unknownKey := sign(msg(sam, "#patcheval retest\n", ""), "example.org", "gone", edKey)
	// A second From: above a signed message: the signature covers the
	// bottom one, the reader would take the top one.
	twoFroms := append([]byte("From: Mallory <boss@example.org>\n"), sign(msg("Mal <mal@evil.example>", "#patcheval retest\n", ""), "evil.example", "ed", evilKey)...)

	run := func(l List, raws ...[]byte) []store.TriageCommand {
		t.Helper()
		tr := &triager{}
		f := &Follower{Store: st, Lists: []List{l}, Triage: tr, LookupTXT: lookup}
		var fms []store.FollowMessage
		for i, r := range raws {
			fms = append(fms, store.FollowMessage{MsgID: fmt.Sprint(i), Root: report, Raw: r})
		}
		before, _ := st.TriageCommands(l.Name)
		if err := f.triage(context.Background(), l, fms); err != nil {
			t.Fatal(err)
		}
		after, _ := st.TriageCommands(l.Name)
		return after[len(before):]
	}
	got := run(l, good, goodRSA, tampered, otherDomain, unsigned, unknownKey, twoFroms)
	want := []struct{ status, note string }{
		{"done", "ok: retest"},
		{"done", "ok: bisect"},
		{"ignored", `sam@example.org is not authenticated (trust = "dkim"): no DKIM signature passes for From:'s domain (d=example.org: dkim: `},
		{"ignored", `no DKIM signature passes for From:'s domain (d=evil.example passes but is not From:'s domain example.org)`},
		{"ignored", `sam@example.org is not authenticated (trust = "dkim"): no DKIM signature`},
		{"ignored", `d=example.org: dkim: `},
		{"ignored", `is not authenticated (trust = "dkim"): the message has 2 From: fields`},
	}
	check := func(what string, got []store.TriageCommand, want []struct{ status, note string }) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d commands recorded, want %d: %+v", what, len(got), len(want), got)
		}
		for i, w := range want {
			if got[i].Status != w.status || !strings.Contains(got[i].Note, w.note) {
				t.Errorf("%s: message %d: %s %q\n  want %s %q", what, i+1, got[i].Status, got[i].Note, w.status, w.note)
			}
		}
	}
	check("trust dkim", got, want)
	if !strings.Contains(got[2].Note, "body hash") {
		t.Errorf("the tampered body's reason: %q", got[2].Note)
	}
	if !strings.Contains(strings.Join(lookups, " "), "gone._domainkey.example.org") {
		t.Errorf("the unknown selector was not looked up: %v", lookups)
	}

	// trust = "arc": the list's verdict in the last ARC set counts; an
	// earlier set, another authserv-id or a failing verdict does not.
	la := l
	la.Name, la.Trust, la.ARCAuthServID = "arc", TrustARC, "lists.example.org"
	arc := func(sets ...string) []byte {
		var extra strings.Builder
		for _, s := range sets {
			extra.WriteString("ARC-Authentication-Results: " + s + "\r\n")
		}
		return msg(sam, "#patcheval retest\n", extra.String())
	}
	got = run(la,
		arc("i=1; lists.example.org; dkim=pass header.d=example.org; dmarc=pass header.from=example.org"),
		arc("i=1; lists.example.org; dkim=pass header.d=example.org", "i=2; mx.evil.example; dkim=pass header.d=example.org"),
		arc("i=1; lists.example.org; dkim=fail header.d=example.org"),
		arc("i=1; lists.example.org; dkim=pass header.d=evil.example"),
		good,
	)
	check("trust arc", got, []struct{ status, note string }{
		{"done", "ok: retest"},
		{"ignored", "the last ARC-Authentication-Results (i=2) is mx.evil.example's, not the list's lists.example.org"},
		{"ignored", "has no dkim or dmarc pass for example.org"},
		{"ignored", "has no dkim or dmarc pass for example.org"},
		{"done", "ok: retest"},
	})
	// The same ARC verdict under trust = "dkim" is not enough.
	got = run(l, arc("i=1; lists.example.org; dkim=pass header.d=example.org"))
	check("trust dkim, ARC only", got, []struct{ status, note string }{{"ignored", "no DKIM signature"}})

	// trust = "any": From: as written.
	ly := l
	ly.Name, ly.Trust = "any", TrustAny
	check("trust any", run(ly, unsigned), []struct{ status, note string }{{"done", "ok: retest"}})
}

// triageFixture is a store with one evaluation of a series by
// sam@example.org and patcheval's sent report on it, and the list whose
// triage people are *@example.org.
func triageFixture(t *testing.T, root string) (*store.Store, List, int64, string) {
	tree := filepath.Join(root, "tree")
	env := []string{"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.org", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.org"}
	testgit.Git(t, nil, nil, "init", "-q", "-b", "master", tree)
	os.MkdirAll(filepath.Join(tree, "mm"), 0o755)
	os.WriteFile(filepath.Join(tree, "mm/slab.c"), []byte("line\n"), 0o644)
	testgit.Git(t, env, nil, "-C", tree, "add", ".")
	testgit.Git(t, env, nil, "-C", tree, "commit", "-q", "-m", "base")
	st, err := store.Open(filepath.Join(root, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l := List{Name: "test", URL: "http://127.0.0.1:9/test", Pipeline: "ppc-preempt-dynamic", Tree: tree, Base: "tree",
		Triage: []string{"*@example.org"}}
	g := &gen{t0: time.Now().Add(-time.Hour)}
	raw, err := os.ReadFile(writeMbox(t, root, "series.mbox", g.series("sss", "Sam <sam@example.org>", "mm/slab: faster", 1, 1, []string{"mm/slab.c"}, "")...))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := mbox.ParseBytes(raw, "test")
	if err != nil {
		t.Fatal(err)
	}
	th := mbox.NewThread(msgs, "test")
	s, err := series.Resolve(th, series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := ServiceSubmitter{Service: runnerService{st}}.Submit(context.Background(), l, s, th)
	if err != nil {
		t.Fatal(err)
	}
	report := fmt.Sprintf("report-%d@patcheval.example", ev)
	p, err := st.EnqueuePost(store.Post{Reporter: "mail", Target: "sss ppc-preempt-dynamic", EvaluationID: ev,
		Digest: "d", Payload: `{"from":{"name":"patcheval","email":"bot@patcheval.example"}}`}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkPostSending(p.ID, report); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkPostSent(p.ID, report); err != nil {
		t.Fatal(err)
	}
	return st, l, ev, report
}

// FuzzAuthenticate feeds hostile replies (any headers, ARC results,
// DKIM-Signature fields) to the trust check under "arc", with a key of
// the test's own behind every selector: it must never panic, and a
// message it vouches for must name a domain aligned with its From:.
func FuzzAuthenticate(f *testing.F) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	rec := "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
	base := "From: Sam <sam@example.org>\r\nTo: l@example.org\r\nSubject: Re: x\r\nMessage-ID: <a@example.org>\r\n"
	var b bytes.Buffer
	if err := dkim.Sign(&b, strings.NewReader(base+"\r\n#patcheval retest\r\n"), &dkim.SignOptions{Domain: "example.org", Selector: "s", Signer: key}); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte(base + "ARC-Authentication-Results: i=1; lists.example.org; dkim=pass header.d=example.org\r\n\r\nbody\r\n"))
	f.Add([]byte(base + "ARC-Authentication-Results: i=2; lists.example.org; dmarc=pass header.from=example.org\r\n" +
		"ARC-Authentication-Results: i=1; x; dkim=fail\r\nDKIM-Signature: v=1; a=rsa-sha256; d=example.org; s=s; h=from; bh=; b=\r\n\r\n"))
	fol := &Follower{LookupTXT: func(string) ([]string, error) { return []string{rec}, nil }}
	l := List{Name: "fuzz", Trust: TrustARC, ARCAuthServID: "lists.example.org"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := mbox.ParseMessage(raw, "fuzz")
		if err != nil {
			return
		}
		how, refused := fol.authenticate(l, m)
		if (how == "") == (refused == "") {
			t.Fatalf("authenticate: how %q, refused %q: want exactly one", how, refused)
		}
		if how != "" {
			_, dom, _ := strings.Cut(strings.ToLower(m.From.Email), "@")
			d := how[strings.LastIndexAny(how, "= ")+1:]
			if !aligned(dom, d) {
				t.Fatalf("vouched (%s) for From: %s", how, m.From.Email)
			}
		}
	})
}
