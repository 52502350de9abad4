package mbox_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/mbox"
)

const (
	v4Cover  = "20250210194500.37c940e5-0-sshegde@linux.ibm.com"
	v4Patch  = "20250210194600.322cfa9d-1-sshegde@linux.ibm.com"
	backport = "20261102093000.4121-1-tester@example.org"
	followup = "20260731102000.ab50c836-0-jhladky@redhat.com"
)

// Two real public-inbox servers shared by the fetch tests: one like lore
// (with the "all" extindex), one without it (the 404 -> redirect path).
var (
	loreAll   *testinbox.Server
	loreNoAll *testinbox.Server
)

var startOnce sync.Once

func TestMain(m *testing.M) {
	code := m.Run()
	if loreAll != nil {
		loreAll.Close()
	}
	if loreNoAll != nil {
		loreNoAll.Close()
	}
	os.Exit(code)
}

// needServer starts the servers on first use (parser tests and fuzzing do
// not pay for them). Without public-inbox the test fails, unless
// PATCHEVAL_SKIP_SLOW=1.
func needServer(t *testing.T) {
	t.Helper()
	startOnce.Do(func() {
		if _, err := exec.LookPath("public-inbox-httpd"); err != nil && testenv.SkipSlow() {
			return
		}
		var err error
		loreAll, err = testinbox.New(testinbox.Options{Bulk: true},
			"testdata/threads/ppc-dynamic-preempt-v4.mbox",
			"testdata/threads/ppc-dynamic-preempt-v6.1-backport.mbox",
			"testdata/threads/ppc-dynamic-preempt-arm64-followup.mbox",
			"testdata/mail/odd-msgid.mbox")
		if err != nil {
			t.Fatalf("testinbox: %v", err)
		}
		loreNoAll, err = testinbox.New(testinbox.Options{NoAll: true, Inbox: "linuxppc-dev", Bulk: true},
			"testdata/threads/ppc-dynamic-preempt-v6.1-backport.mbox")
		if err != nil {
			t.Fatalf("testinbox: %v", err)
		}
	})
	if loreAll == nil || loreNoAll == nil {
		if testenv.SkipSlow() {
			t.Skip("public-inbox not installed and PATCHEVAL_SKIP_SLOW=1")
		}
		t.Fatal("public-inbox test servers did not start (see the first failure)")
	}
}

func opts(t *testing.T, lore string, log *bytes.Buffer) mbox.FetchOptions {
	return mbox.FetchOptions{
		Lore:     lore,
		CacheDir: t.TempDir(),
		Backoff:  10 * time.Millisecond,
		Timeout:  10 * time.Second,
		Progress: progress.New(log),
	}
}

func wantKind(t *testing.T, err error, kind fail.Kind, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", kind)
	}
	var fe *fail.Error
	if !errors.As(err, &fe) || fe.Kind != kind {
		t.Errorf("error %q is not %v", err, kind)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("error %q does not say %q", err, c)
		}
	}
}

func TestFetchAll(t *testing.T) {
	needServer(t)
	var log bytes.Buffer
	src, err := mbox.ParseSource("<" + v4Patch + ">")
	if err != nil {
		t.Fatal(err)
	}
	th, err := mbox.Fetch(context.Background(), src, opts(t, loreAll.URL, &log))
	if err != nil {
		t.Fatal(err)
	}
	// 18 in the thread plus the arm64 follow-up, which public-inbox adds
	// by subject (its parent is missing); NewThread attaches it by subject.
	if len(th.Messages) != 19 || len(th.Roots) != 1 || th.Roots[0].MessageID != v4Cover || len(th.Orphans) != 1 {
		t.Errorf("%d messages, roots %v", len(th.Messages), th.Roots)
	}
	want := loreAll.URL + "/all/" + strings.ReplaceAll(v4Patch, "@", "%40") + "/t.mbox.gz"
	if th.Source != want {
		t.Errorf("source %q, want %q", th.Source, want)
	}
	if !strings.Contains(log.String(), "fetching "+want) {
		t.Errorf("progress: %q", log.String())
	}
	// The real server's copy parses like the fixture.
	p := th.ByID(v4Patch)
	if p == nil || !strings.Contains(p.Body, "diff --git a/arch/powerpc/Kconfig") || th.Parent(p).MessageID != v4Cover {
		t.Errorf("patch from lore: %+v", p)
	}
}

// The follow-up's own thread on public-inbox: the 18 messages sharing its
// subject (not the cover letter); its parent is missing, so it is an orphan
// that the subject rule hangs under the v4 patch.
func TestFetchOrphanFollowup(t *testing.T) {
	needServer(t)
	var log bytes.Buffer
	src, _ := mbox.ParseSource(followup)
	th, err := mbox.Fetch(context.Background(), src, opts(t, loreAll.URL, &log))
	if err != nil {
		t.Fatal(err)
	}
	f := th.ByID(followup)
	if len(th.Messages) != 18 || f == nil || th.ByID(v4Cover) != nil {
		t.Fatalf("%d messages", len(th.Messages))
	}
	// Two orphans: the v4 patch (its parent, the cover letter, is not in
	// this thread) and the follow-up.
	if len(th.Orphans) != 2 || th.Orphans[0].MessageID != v4Patch || th.Orphans[1] != f {
		t.Errorf("%d orphans", len(th.Orphans))
	}
	if p := th.Parent(f); p == nil || p.MessageID != v4Patch {
		t.Errorf("follow-up not linked by subject to the v4 patch")
	}
	if len(th.Roots) != 1 || th.Roots[0].MessageID != v4Patch {
		t.Errorf("%d roots", len(th.Roots))
	}
	if !strings.Contains(strings.Join(th.Notes, "\n"), "linked by subject") {
		t.Errorf("notes %q", th.Notes)
	}
}

// A Gmail-style Message-ID with '=', '+', '/' and '%' survives escaping,
// as a bare msgid and inside a lore URL as public-inbox links it.
func TestFetchOddMsgID(t *testing.T) {
	needServer(t)
	const odd = "CAHk-=wh+ab/cd_ef%20x@mail.gmail.com"
	for _, arg := range []string{"<" + odd + ">", loreAll.URL + "/test/CAHk-=wh+ab%2Fcd_ef%2520x@mail.gmail.com/T/#u"} {
		var log bytes.Buffer
		src, err := mbox.ParseSource(arg)
		if err != nil || src.MsgID != odd {
			t.Fatalf("ParseSource(%q) = %+v, %v", arg, src, err)
		}
		th, err := mbox.Fetch(context.Background(), src, opts(t, loreAll.URL, &log))
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		if len(th.Messages) != 1 || th.Messages[0].MessageID != odd {
			t.Errorf("%s: %d messages", arg, len(th.Messages))
		}
	}
}

func TestFetchLoreURLWithInbox(t *testing.T) {
	needServer(t)
	var log bytes.Buffer
	src, err := mbox.ParseSource(loreAll.URL + "/test/" + backport + "/T/#u")
	if err != nil {
		t.Fatal(err)
	}
	if src.Base != loreAll.URL || src.Inbox != "test" || src.MsgID != backport {
		t.Fatalf("source %+v", src)
	}
	// The URL's own base wins over FetchOptions.Lore.
	th, err := mbox.Fetch(context.Background(), src, opts(t, "http://127.0.0.1:1", &log))
	if err != nil {
		t.Fatal(err)
	}
	if len(th.Messages) != 2 || !strings.Contains(th.Source, "/test/") {
		t.Errorf("%d messages from %s", len(th.Messages), th.Source)
	}
}

func TestFetchRedirectToInbox(t *testing.T) {
	needServer(t)
	var log bytes.Buffer
	src, _ := mbox.ParseSource(backport)
	th, err := mbox.Fetch(context.Background(), src, opts(t, loreNoAll.URL, &log))
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	want := loreNoAll.URL + "/linuxppc-dev/" + backport + "/t.mbox.gz"
	if th.Source != want || len(th.Messages) != 2 {
		t.Errorf("source %q (%d messages), want %q", th.Source, len(th.Messages), want)
	}
	if !strings.Contains(log.String(), "/all/") || !strings.Contains(log.String(), "looking for the list") {
		t.Errorf("progress does not show the /all/ try and the redirect:\n%s", log.String())
	}
}

func TestFetchUnknownMsgID(t *testing.T) {
	needServer(t)
	for _, s := range []*testinbox.Server{loreAll, loreNoAll} {
		var log bytes.Buffer
		src, _ := mbox.ParseSource("no-such-message@example.org")
		_, err := mbox.Fetch(context.Background(), src, opts(t, s.URL, &log))
		wantKind(t, err, fail.KindInput, "no message <no-such-message@example.org> on "+s.URL)
	}
	src, _ := mbox.ParseSource(loreAll.URL + "/test/no-such@x/")
	_, err := mbox.Fetch(context.Background(), src, mbox.FetchOptions{NoCache: true})
	wantKind(t, err, fail.KindInput, "no message <no-such@x> in "+loreAll.URL+"/test")
}

func TestFetchCache(t *testing.T) {
	needServer(t)
	var log bytes.Buffer
	o := opts(t, loreAll.URL, &log)
	src, _ := mbox.ParseSource(backport)
	if _, err := mbox.Fetch(context.Background(), src, o); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(o.CacheDir, "*.mbox"))
	if len(files) != 1 {
		t.Fatalf("cache files %v", files)
	}
	// Second fetch: served from the cache, and says so.
	th, err := mbox.Fetch(context.Background(), src, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(th.Notes) == 0 || !strings.Contains(strings.Join(th.Notes, "\n"), "from the local cache") || len(th.Messages) != 2 {
		t.Errorf("notes %q", th.Notes)
	}
	if !strings.Contains(th.Source, loreAll.URL) {
		t.Errorf("cached thread source %q", th.Source)
	}
	// NoCache and an expired entry both go to the server.
	for _, mod := range []func(*mbox.FetchOptions){
		func(o *mbox.FetchOptions) { o.NoCache = true },
		func(o *mbox.FetchOptions) {
			old := time.Now().Add(-11 * time.Minute)
			os.Chtimes(files[0], old, old)
		},
	} {
		o2 := o
		mod(&o2)
		th, err := mbox.Fetch(context.Background(), src, o2)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.Join(th.Notes, "\n"), "from the local cache") {
			t.Errorf("cache used: %q", th.Notes)
		}
	}
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func fixture(t *testing.T, name string) []byte {
	b, err := os.ReadFile("testdata/threads/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Faults a real public-inbox cannot be made to produce on demand.
func TestFetchFaults(t *testing.T) {
	good := gz(fixture(t, "ppc-dynamic-preempt-v6.1-backport.mbox"))
	src, _ := mbox.ParseSource(backport)

	t.Run("5xx then ok", func(t *testing.T) {
		var n atomic.Int32
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) <= 2 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			w.Write(good)
		}))
		defer ts.Close()
		var log bytes.Buffer
		th, err := mbox.Fetch(context.Background(), src, opts(t, ts.URL, &log))
		if err != nil || len(th.Messages) != 2 || n.Load() != 3 {
			t.Errorf("err %v, %d requests\n%s", err, n.Load(), log.String())
		}
		if !strings.Contains(log.String(), "retrying") {
			t.Errorf("no retry reported: %s", log.String())
		}
	})
	t.Run("5xx always", func(t *testing.T) {
		var n atomic.Int32
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			http.Error(w, "down", http.StatusInternalServerError)
		}))
		defer ts.Close()
		var log bytes.Buffer
		_, err := mbox.Fetch(context.Background(), src, opts(t, ts.URL, &log))
		wantKind(t, err, fail.KindInfra, ts.URL+"/all/", "500", "after 3 attempts")
		if n.Load() != 3 {
			t.Errorf("%d requests, want 3", n.Load())
		}
	})
	t.Run("truncated gzip", func(t *testing.T) {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write(good[:len(good)/2])
		}))
		defer ts.Close()
		var log bytes.Buffer
		_, err := mbox.Fetch(context.Background(), src, opts(t, ts.URL, &log))
		wantKind(t, err, fail.KindInfra, ts.URL, "truncated gzip")
	})
	t.Run("server down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		u := "http://" + ln.Addr().String()
		ln.Close()
		var log bytes.Buffer
		_, err = mbox.Fetch(context.Background(), src, opts(t, u, &log))
		wantKind(t, err, fail.KindInfra, u+"/all/", "cannot reach server", "connection refused")
	})
	t.Run("not an mbox", func(t *testing.T) {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("<html><body>Anubis says: are you a bot?</body></html>\n"))
		}))
		defer ts.Close()
		var log bytes.Buffer
		_, err := mbox.Fetch(context.Background(), src, opts(t, ts.URL, &log))
		wantKind(t, err, fail.KindInput, ts.URL+"/all/", "not an mbox: first line is \"<html>")
	})
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer ts.Close()
		defer close(release)
		var log bytes.Buffer
		o := opts(t, ts.URL, &log)
		o.Timeout = 100 * time.Millisecond
		o.Attempts = 2
		start := time.Now()
		_, err := mbox.Fetch(context.Background(), src, o)
		wantKind(t, err, fail.KindInfra, ts.URL, "after 2 attempts")
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("timeout took %s", d)
		}
	})
}

func TestFetchLocal(t *testing.T) {
	data := fixture(t, "ppc-dynamic-preempt-v6.1-backport.mbox")
	dir := t.TempDir()
	gzPath := filepath.Join(dir, "t.mbox.gz")
	os.WriteFile(gzPath, gz(data), 0o644)
	for _, tc := range []struct {
		src  mbox.Source
		opt  mbox.FetchOptions
		name string
	}{
		{mbox.FileSource("testdata/threads/ppc-dynamic-preempt-v6.1-backport.mbox", false), mbox.FetchOptions{}, "file"},
		{mbox.FileSource(gzPath, false), mbox.FetchOptions{}, "gzip file"},
		{mbox.FileSource("-", false), mbox.FetchOptions{Stdin: bytes.NewReader(data)}, "stdin"},
	} {
		th, err := mbox.Fetch(context.Background(), tc.src, tc.opt)
		if err != nil || len(th.Messages) != 2 {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	_, err := mbox.Fetch(context.Background(), mbox.FileSource(filepath.Join(dir, "nope.mbox"), false), mbox.FetchOptions{})
	wantKind(t, err, fail.KindInput, "nope.mbox: no such file")
	_, err = mbox.Fetch(context.Background(), mbox.FileSource("testdata/mail/not-an-mbox.txt", false), mbox.FetchOptions{})
	wantKind(t, err, fail.KindInput, "testdata/mail/not-an-mbox.txt: not an mbox: first line is \"Hello,\"")
}

func TestParseSource(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want mbox.Source
	}{
		{"20250210194600.322cfa9d-1-sshegde@linux.ibm.com", mbox.Source{Kind: mbox.SourceLore, MsgID: v4Patch}},
		{"<20250210194600.322cfa9d-1-sshegde@linux.ibm.com>", mbox.Source{Kind: mbox.SourceLore, MsgID: v4Patch}},
		{"id:<a.b@c>", mbox.Source{Kind: mbox.SourceLore, MsgID: "a.b@c"}},
		{"-", mbox.Source{Kind: mbox.SourceStdin}},
		{"https://lore.kernel.org/linuxppc-dev/20250210194600.322cfa9d-1-sshegde@linux.ibm.com/", mbox.Source{Kind: mbox.SourceLore, MsgID: v4Patch, Base: "https://lore.kernel.org", Inbox: "linuxppc-dev"}},
		{"https://lore.kernel.org/linuxppc-dev/20250210194600.322cfa9d-1-sshegde@linux.ibm.com/T/#u", mbox.Source{Kind: mbox.SourceLore, MsgID: v4Patch, Base: "https://lore.kernel.org", Inbox: "linuxppc-dev"}},
		{"https://lore.kernel.org/all/20250210194600.322cfa9d-1-sshegde%40linux.ibm.com/t.mbox.gz", mbox.Source{Kind: mbox.SourceLore, MsgID: v4Patch, Base: "https://lore.kernel.org"}},
		{"https://lore.kernel.org/r/20250210194600.322cfa9d-1-sshegde@linux.ibm.com", mbox.Source{Kind: mbox.SourceLore, MsgID: v4Patch, Base: "https://lore.kernel.org"}},
		{"https://patch.msgid.link/20250210194600.322cfa9d-1-sshegde@linux.ibm.com", mbox.Source{Kind: mbox.SourceLore, MsgID: v4Patch}},
		{"http://mirror.example/lists/lkml/x@y/raw", mbox.Source{Kind: mbox.SourceLore, MsgID: "x@y", Base: "http://mirror.example/lists", Inbox: "lkml"}},
		{"testdata/threads/rcu-gp-qs-v2.mbox", mbox.Source{Kind: mbox.SourceFile, Path: "testdata/threads/rcu-gp-qs-v2.mbox"}},
		{"testdata/mail", mbox.Source{Kind: mbox.SourceMaildir, Path: "testdata/mail"}},
	} {
		got, err := mbox.ParseSource(tc.arg)
		if err != nil || got != tc.want {
			t.Errorf("ParseSource(%q) = %+v, %v; want %+v", tc.arg, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "hello", "https://lore.kernel.org/linuxppc-dev/", "two words@x"} {
		_, err := mbox.ParseSource(bad)
		wantKind(t, err, fail.KindInput)
	}
}

func TestLoreBase(t *testing.T) {
	t.Setenv("PATCHEVAL_LORE", "")
	if b := mbox.LoreBase(""); b != mbox.DefaultLore {
		t.Errorf("default %q", b)
	}
	t.Setenv("PATCHEVAL_LORE", "http://127.0.0.1:8080/")
	if b := mbox.LoreBase(""); b != "http://127.0.0.1:8080" {
		t.Errorf("env %q", b)
	}
	if b := mbox.LoreBase("https://lore.example"); b != "https://lore.example" {
		t.Errorf("flag %q", b)
	}
}
