package series

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/mbox"
)

// One real public-inbox-httpd serves every testdata thread to the tests
// that need it (importing is slow), closed in TestMain.
var (
	inboxOnce sync.Once
	inbox     *testinbox.Server
	inboxErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if inbox != nil {
		inbox.Close()
	}
	os.Exit(code)
}

func slowSkip(t testing.TB) {
	t.Helper()
	testenv.SkipIfSlow(t, "public-inbox or the kernel tree")
}

func testServer(t testing.TB) *testinbox.Server {
	t.Helper()
	slowSkip(t)
	inboxOnce.Do(func() {
		files := threadFiles()
		if len(files) == 0 {
			inboxErr = errors.New("no thread fixtures found")
			return
		}
		inbox, inboxErr = testinbox.New(testinbox.Options{}, files...)
	})
	if inboxErr != nil {
		t.Fatalf("public-inbox test server: %v", inboxErr)
	}
	return inbox
}

// amPatch is one message of an am mbox, reduced to what git am uses.
type amPatch struct {
	Number int
	Title  string
	Commit string // the commit message git am would make (stripspace)
	Diff   string
	Author string // what git am records: the in-body From: or the From: header
}

func readAM(t *testing.T, data []byte, what string) []amPatch {
	t.Helper()
	msgs, err := mbox.ParseBytes(data, what)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var out []amPatch
	for _, m := range msgs {
		sub := ParseSubject(m.Subject)
		p := splitBody(m.Body)
		author := m.From.Email
		if f := p.Header["from"]; f != "" {
			if a, ok := parsePerson(f); ok {
				author = a.Email
			}
		}
		out = append(out, amPatch{
			Number: sub.Number(),
			Title:  sub.Title,
			Commit: stripspace(sub.Title + "\n\n" + p.Message),
			Diff:   p.Diff,
			Author: author,
		})
	}
	return out
}

// b4AM runs the real `b4 am -t -l` (cover-letter trailers applied to all
// patches, Link: added with patcheval's default mask) against the server
// and returns the am mbox, or nil when b4 wrote none.
func b4AM(t *testing.T, srv *testinbox.Server, msgid string) []byte {
	t.Helper()
	if _, err := exec.LookPath("b4"); err != nil {
		t.Fatal("b4 is required (apt-get install b4): ", err)
	}
	dir := t.TempDir()
	env := []string{"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}
	for _, kv := range srv.B4Env(filepath.Join(dir, "cache")) {
		if !strings.HasPrefix(kv, "GIT_CONFIG_COUNT=") {
			env = append(env, kv)
		}
	}
	// b4 needs user.name/email even without -s (it builds a Signed-off-by
	// to compare with).
	env = append(env, "GIT_CONFIG_COUNT=4", "GIT_CONFIG_KEY_1=b4.linkmask", "GIT_CONFIG_VALUE_1="+DefaultLinkMask,
		"GIT_CONFIG_KEY_2=user.name", "GIT_CONFIG_VALUE_2=Patcheval Test", "GIT_CONFIG_KEY_3=user.email", "GIT_CONFIG_VALUE_3=test@patcheval.invalid")
	cmd := exec.Command("b4", "am", "-t", "-l", "-o", dir, "-n", "am", msgid)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("b4 am %s: %v\n%s", msgid, err, out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "am.mbx"))
	if os.IsNotExist(err) {
		t.Logf("b4 am %s wrote no mbox:\n%s", msgid, out)
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// oursAM fetches the thread from the server like `patcheval lore` does and
// writes the am mbox.
func oursAM(t *testing.T, srv *testinbox.Server, msgid string, opt Options) (*Series, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	th, err := mbox.Fetch(ctx, mbox.Source{Kind: mbox.SourceLore, MsgID: msgid}, mbox.FetchOptions{Lore: srv.URL, NoCache: true})
	if err != nil {
		t.Fatalf("fetch %s: %v", msgid, err)
	}
	s, err := Resolve(th, opt)
	if err != nil {
		return nil, nil, err
	}
	var b bytes.Buffer
	if err := s.WriteAM(&b, DefaultAMOptions()); err != nil {
		t.Fatal(err)
	}
	return s, b.Bytes(), nil
}

// TestAgainstB4 compares, for every testdata thread, the patches, their
// order, commit messages (with the trailers and Link:) and diffs that
// patcheval chooses with what the real b4 am produces from the same
// public-inbox server.
func TestAgainstB4(t *testing.T) {
	srv := testServer(t)
	cases := []struct {
		name  string
		msgid string
		// fix adjusts b4's result where patcheval differs on purpose.
		fix func(t *testing.T, b4 []amPatch)
		// noPatches: neither tool finds a series.
		noPatches bool
	}{
		{name: "ppc-dynamic-preempt-v4", msgid: "20250210194500.37c940e5-0-sshegde@linux.ibm.com"},
		{name: "ppc-dynamic-preempt-v4 from a reply", msgid: "20260727154300.0c995766-4-jhladky@redhat.com"},
		{name: "ppc-dynamic-preempt-v6.1-backport", msgid: "20261102093000.4121-0-tester@example.org"},
		{name: "rcu-gp-qs-v2", msgid: "20251222224629.856aa18b-0-joelagnelf@nvidia.com"},
		{name: "generic-entry-v5-report", msgid: "20260726210500.a3121822-0-jhladky@redhat.com", noPatches: true},
		{name: "shape-partial-reroll", msgid: "partial-reroll-1@example.org"},
		{name: "shape-missing", msgid: "missing-1@example.org"},
		{name: "shape-no-cover", msgid: "no-cover-1@example.org"},
		{name: "shape-rfc", msgid: "rfc-1@example.org"},
		{name: "shape-versions", msgid: "versions-1@example.org",
			fix: func(t *testing.T, b4 []amPatch) {
				// On purpose: the v2 cover letter was sent in reply to
				// v1 1/2 (git send-email --in-reply-to). b4 then also
				// reads it as a follow-up of v1 1/2 "missing a Re:" and,
				// because v2 1/2 has the same patch-id, carries its
				// base-commit: and change-id: lines into v2 1/2's commit
				// message as trailers. They are series metadata, not
				// trailers; patcheval reports them in Series.Base.
				junk := "base-commit: 0123456789abcdef0123456789abcdef01234567\nchange-id: 20260101-shape-0123456789ab\n"
				if !strings.Contains(b4[0].Commit, junk) {
					t.Errorf("b4 no longer adds base-commit:/change-id: as trailers; drop this exception")
				}
				b4[0].Commit = strings.Replace(b4[0].Commit, junk, "", 1)
			}},
		{name: "shape-net-next", msgid: "net-next-1@example.org",
			fix: func(t *testing.T, b4 []amPatch) {
				// On purpose: Carol's "Tested-by: Carol Tester\n
				// <carol@example.net>" wraps its address onto an indented
				// line. git interpret-trailers treats an indented line as
				// a continuation, so patcheval takes the trailer; b4 only
				// joins an address that starts its own line and drops it.
				if strings.Contains(b4[1].Commit, "Tested-by") {
					t.Errorf("b4 now takes the wrapped Tested-by; drop this exception")
				}
				b4[1].Commit = strings.Replace(b4[1].Commit, "\nLink:", "\nTested-by: Carol Tester <carol@example.net>\nLink:", 1)
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b4raw := b4AM(t, srv, c.msgid)
			s, ours, err := oursAM(t, srv, c.msgid, Options{})
			if c.noPatches {
				if b4raw != nil || err == nil {
					t.Fatalf("want no series from either tool: b4 wrote %d bytes, patcheval error %v", len(b4raw), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("patcheval: %v", err)
			}
			if b4raw == nil {
				t.Fatal("b4 wrote no am mbox")
			}
			want := readAM(t, b4raw, "b4 am")
			got := readAM(t, ours, "patcheval")
			if c.fix != nil {
				c.fix(t, want)
			}
			if len(got) != len(want) {
				t.Fatalf("patcheval has %d patches, b4 %d\nours:\n%s\nb4:\n%s", len(got), len(want), ours, b4raw)
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.Number != w.Number || g.Title != w.Title {
					t.Errorf("patch %d: patcheval %d %q, b4 %d %q", i, g.Number, g.Title, w.Number, w.Title)
				}
				if g.Commit != w.Commit {
					t.Errorf("patch %d commit message differs\npatcheval:\n%s\nb4:\n%s", i, g.Commit, w.Commit)
				}
				if g.Author != w.Author {
					t.Errorf("patch %d author: patcheval %s, b4 %s", i, g.Author, w.Author)
				}
				if g.Diff != w.Diff {
					t.Errorf("patch %d diff differs\npatcheval:\n%s\nb4:\n%s", i, g.Diff, w.Diff)
				}
				// What H3's apply commits is exactly what git am makes
				// from the am mbox.
				if cm := s.Patches[i].CommitMessage(DefaultAMOptions()); cm != g.Commit {
					t.Errorf("patch %d: CommitMessage differs from the am mbox:\n%s\nvs\n%s", i, cm, g.Commit)
				}
			}
		})
	}
}
