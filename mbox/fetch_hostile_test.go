package mbox_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/mbox"
)

// Every form of --lore reaches the thread on a real public-inbox: the
// base, its all index, a list, a list the message is not in, a message
// URL; with and without the all extindex. (".../all" used to build
// .../all/all/<id> and end following a mailto: link.)
func TestFetchLoreSettingForms(t *testing.T) {
	needServer(t)
	esc := strings.ReplaceAll(backport, "@", "%40")
	for _, c := range []struct{ lore, source string }{
		{loreAll.URL, loreAll.URL + "/all/" + esc},
		{loreAll.URL + "/", loreAll.URL + "/all/" + esc},
		{loreAll.URL + "/all", loreAll.URL + "/all/" + esc},
		{loreAll.URL + "/all/", loreAll.URL + "/all/" + esc},
		{loreAll.URL + "/test", loreAll.URL + "/test/" + esc},
		{loreAll.URL + "/other-list", loreAll.URL + "/all/" + esc},
		{loreAll.URL + "/test/" + v4Cover + "/T/#u", loreAll.URL + "/test/" + esc},
		{loreNoAll.URL + "/all", loreNoAll.URL + "/linuxppc-dev/" + backport},
		{loreNoAll.URL + "/linuxppc-dev", loreNoAll.URL + "/linuxppc-dev/" + esc},
		{loreNoAll.URL + "/linuxppc-dev/", loreNoAll.URL + "/linuxppc-dev/" + esc},
	} {
		var log bytes.Buffer
		src, _ := mbox.ParseSource(backport)
		o := opts(t, c.lore, &log)
		o.Attempts = 1
		th, err := mbox.Fetch(context.Background(), src, o)
		if err != nil {
			t.Errorf("--lore %s: %v\n%s", c.lore, err, log.String())
			continue
		}
		if len(th.Messages) != 2 || th.Source != c.source+"/t.mbox.gz" {
			t.Errorf("--lore %s: %d messages from %s, want %s/t.mbox.gz", c.lore, len(th.Messages), th.Source, c.source)
		}
	}
	for _, bad := range []string{"mailto:a@b", "ftp://lore.kernel.org", "lore.kernel.org"} {
		src, _ := mbox.ParseSource(backport)
		var log bytes.Buffer
		_, err := mbox.Fetch(context.Background(), src, opts(t, bad, &log))
		wantKind(t, err, fail.KindInput, bad, "want an http(s) URL")
	}
}

func TestSplitLore(t *testing.T) {
	for _, c := range []struct{ in, base, inbox string }{
		{"https://lore.kernel.org", "https://lore.kernel.org", ""},
		{"https://lore.kernel.org/", "https://lore.kernel.org", ""},
		{"https://lore.kernel.org/all", "https://lore.kernel.org", ""},
		{"https://lore.kernel.org/all/", "https://lore.kernel.org", ""},
		{"https://lore.kernel.org/linuxppc-dev", "https://lore.kernel.org", "linuxppc-dev"},
		{"https://lore.kernel.org/linuxppc-dev/20250210194500.1-0-a@b/T/#u", "https://lore.kernel.org", "linuxppc-dev"},
		{"https://lore.kernel.org/all/20250210194500.1-0-a@b/", "https://lore.kernel.org", ""},
		{"http://h:8080/lists/all", "http://h:8080/lists", ""},
		{"http://h:8080/lists/linuxppc-dev", "http://h:8080/lists", "linuxppc-dev"},
	} {
		b, i, err := mbox.SplitLore(c.in)
		if err != nil || b != c.base || i != c.inbox {
			t.Errorf("SplitLore(%q) = %q, %q, %v; want %q, %q", c.in, b, i, err, c.base, c.inbox)
		}
	}
}

// Links and the "is this URL on our lore" test go through SplitLore: a
// list or all-index setting must not give ".../all/all/" links nor refuse
// a message URL on the same server.
func TestLoreLinkAndOnLore(t *testing.T) {
	const id = "20250210194500.1-0-a@b"
	for _, c := range []struct{ lore, link string }{
		{"", mbox.DefaultLore + "/all/"},
		{"https://lore.kernel.org", "https://lore.kernel.org/all/"},
		{"https://lore.kernel.org/all/", "https://lore.kernel.org/all/"},
		{"https://lore.kernel.org/linuxppc-dev", "https://lore.kernel.org/linuxppc-dev/"},
		{"https://lore.kernel.org/linuxppc-dev/" + id + "/T/#u", "https://lore.kernel.org/linuxppc-dev/"},
		{"http://h:8080/lists/all", "http://h:8080/lists/all/"},
		{"mailto:list@example.org", mbox.DefaultLore + "/all/"},
	} {
		t.Setenv("PATCHEVAL_LORE", "")
		if got := mbox.LoreLink(c.lore); got != c.link {
			t.Errorf("LoreLink(%q) = %q, want %q", c.lore, got, c.link)
		}
	}
	for _, c := range []struct {
		lore, u string
		on      bool
	}{
		{"https://lore.kernel.org", "https://lore.kernel.org/linuxppc-dev/" + id + "/", true},
		{"https://lore.kernel.org/all", "https://lore.kernel.org/linuxppc-dev/" + id + "/", true},
		{"https://lore.kernel.org/linuxppc-dev", "https://lore.kernel.org/all/" + id + "/T/", true},
		{"https://lore.kernel.org/linuxppc-dev/" + id + "/", "https://lore.kernel.org/r/" + id, true},
		{"http://h:8080/lists/all", "http://h:8080/lists/x/" + id + "/", true},
		{"http://h:8080/lists/all", "http://h:8080/" + id + "/", false},
		{"https://lore.kernel.org", "https://lore.kernel.org.evil.example/all/" + id + "/", false},
		{"https://lore.kernel.org", "http://127.0.0.2:9/all/" + id + "/", false},
		{"https://lore.kernel.org", "https://patch.msgid.link/" + id, false},
		{"mailto:x@y", "https://lore.kernel.org/all/" + id + "/", false},
	} {
		if got := mbox.OnLore(c.lore, c.u); got != c.on {
			t.Errorf("OnLore(%q, %q) = %v, want %v", c.lore, c.u, got, c.on)
		}
	}
}

// A hostile message page: the message's page (no all index) links a
// mailto: reply address, a page on another server and a javascript: URL.
// None is followed; the answer is "no message", once, without retries.
func TestFetchFollowsOnlyHTTPLinksOnTheSameHost(t *testing.T) {
	var other atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.Add(1)
		w.Write(gz(fixture(t, "ppc-dynamic-preempt-v6.1-backport.mbox")))
	}))
	defer elsewhere.Close()
	var n atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if strings.HasPrefix(r.URL.Path, "/all/") {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `<html><a href="mailto:list@example.org?In-Reply-To=%%3C%s%%3E">reply</a>
<a href="%s/list/%s/">elsewhere</a> <a href="javascript:alert('%s')">x</a>
<a href="/all/%s/">all</a></html>`, backport, elsewhere.URL, backport, backport, backport)
	}))
	defer ts.Close()
	src, _ := mbox.ParseSource(backport)
	var log bytes.Buffer
	_, err := mbox.Fetch(context.Background(), src, opts(t, ts.URL, &log))
	wantKind(t, err, fail.KindInput, "no message <"+backport+"> on "+ts.URL)
	if other.Load() != 0 || n.Load() != 2 {
		t.Errorf("%d requests to the other server, %d to lore (want 0 and 2)\n%s", other.Load(), n.Load(), log.String())
	}
	// The same page with a link to the list on its own server is followed.
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/all/"):
			http.NotFound(w, r)
		case strings.HasPrefix(r.URL.Path, "/list/"):
			w.Write(gz(fixture(t, "ppc-dynamic-preempt-v6.1-backport.mbox")))
		default:
			fmt.Fprintf(w, `<a href="mailto:l@x?In-Reply-To=%s">r</a> <a href="../list/%s/">list</a>`, backport, backport)
		}
	}))
	defer good.Close()
	th, err := mbox.Fetch(context.Background(), src, opts(t, good.URL, &log))
	if err != nil || th.Source != good.URL+"/list/"+backport+"/t.mbox.gz" {
		t.Errorf("same-host list link: %v", err)
	}
}

// Redirects go only to the same host: lore answering with a redirect to
// another host (a loopback server on another port, and "localhost" for
// 127.0.0.1) is an error naming it, and the other host is never asked.
func TestFetchRedirectOtherHostRefused(t *testing.T) {
	var other atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.Add(1)
		w.Write(gz(fixture(t, "ppc-dynamic-preempt-v6.1-backport.mbox")))
	}))
	defer elsewhere.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(elsewhere.URL, "http://"))
	for _, target := range []string{elsewhere.URL, "http://localhost:" + port} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target+r.URL.Path, http.StatusFound)
		}))
		src, _ := mbox.ParseSource(backport)
		var log bytes.Buffer
		_, err := mbox.Fetch(context.Background(), src, opts(t, ts.URL, &log))
		host := strings.TrimPrefix(target, "http://")
		wantKind(t, err, fail.KindInfra, "refused a redirect to another host, "+host)
		if strings.Contains(log.String(), "retrying") {
			t.Errorf("a refused redirect was retried:\n%s", log.String())
		}
		ts.Close()
	}
	if other.Load() != 0 {
		t.Errorf("the other host got %d requests", other.Load())
	}
	// A redirect on the same server is followed; RedirectHosts allows
	// another.
	same := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/all/") {
			http.Redirect(w, r, "/moved"+r.URL.Path, http.StatusMovedPermanently)
			return
		}
		w.Write(gz(fixture(t, "ppc-dynamic-preempt-v6.1-backport.mbox")))
	}))
	defer same.Close()
	src, _ := mbox.ParseSource(backport)
	var log bytes.Buffer
	if _, err := mbox.Fetch(context.Background(), src, opts(t, same.URL, &log)); err != nil {
		t.Errorf("same-host redirect: %v", err)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusFound)
	}))
	defer ts.Close()
	o := opts(t, ts.URL, &log)
	o.RedirectHosts = []string{strings.TrimPrefix(elsewhere.URL, "http://")}
	if _, err := mbox.Fetch(context.Background(), src, o); err != nil || other.Load() != 1 {
		t.Errorf("allowed redirect: %v, %d requests", err, other.Load())
	}
}

// bomb is a gzip stream of n zero bytes.
func bomb(n int64) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	io.CopyN(zw, zeros{}, n)
	zw.Close()
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// A thread over the size limit (a decompression bomb, an uncompressed
// reply, a real thread under a small limit) is one bad-input error naming
// the limit, never retried, and nothing is cached; within the limit it is
// fetched whole (it used to be cut at 512 MiB without an error, and the
// cut thread cached).
func TestFetchSizeLimit(t *testing.T) {
	real := fixture(t, "ppc-dynamic-preempt-v6.1-backport.mbox")
	// A real thread followed by 3 MiB of zeros: the cut at the limit
	// would still parse (the first messages are whole).
	padded := gz(append(append([]byte{}, real...), make([]byte, 3<<20)...))
	for _, c := range []struct {
		name string
		body []byte
		max  int64
		want string
	}{
		{"bomb", bomb(64 << 20), 1 << 20, "larger than the 1 MiB limit"},
		{"real thread cut at the limit", padded, 1 << 20, "larger than the 1 MiB limit"},
		{"uncompressed", bytes.Repeat(real, 1+(1<<20)/len(real)), 1 << 20, "larger than the 1 MiB limit"},
		{"small limit", gz(real), 4 << 10, "larger than the 4 KiB limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int32
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				w.Write(c.body)
			}))
			defer ts.Close()
			src, _ := mbox.ParseSource(backport)
			var log bytes.Buffer
			o := opts(t, ts.URL, &log)
			o.MaxSize = c.max
			_, err := mbox.Fetch(context.Background(), src, o)
			wantKind(t, err, fail.KindInput, ts.URL+"/all/", c.want, "nothing was cached", "PATCHEVAL_MAX_THREAD")
			if n.Load() != 1 {
				t.Errorf("%d requests: an over-limit thread was retried", n.Load())
			}
			assertEmptyCache(t, o.CacheDir)
		})
	}
	// Exactly the fixture's size is within the limit.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(gz(real)) }))
	defer ts.Close()
	src, _ := mbox.ParseSource(backport)
	var log bytes.Buffer
	o := opts(t, ts.URL, &log)
	o.MaxSize = int64(len(real))
	if th, err := mbox.Fetch(context.Background(), src, o); err != nil || len(th.Messages) != 2 {
		t.Errorf("thread at the limit: %v", err)
	}
	// A gzipped -m FILE over the limit.
	p := filepath.Join(t.TempDir(), "bomb.mbox.gz")
	os.WriteFile(p, bomb(8<<20), 0o644)
	_, err := mbox.Fetch(context.Background(), mbox.FileSource(p, false), mbox.FetchOptions{MaxSize: 1 << 20})
	wantKind(t, err, fail.KindInput, p, "larger than the 1 MiB limit")
}

// Streams cut short (a truncated gzip; a body shorter than its
// Content-Length, the connection closed) are retried, then an error;
// nothing is cached.
func TestFetchTruncatedNotCached(t *testing.T) {
	good := gz(fixture(t, "ppc-dynamic-preempt-v6.1-backport.mbox"))
	for name, h := range map[string]http.HandlerFunc{
		"truncated gzip": func(w http.ResponseWriter, r *http.Request) { w.Write(good[:len(good)-9]) },
		"short body": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(len(good)))
			w.Write(good[:len(good)/2])
			if hj, ok := w.(http.Hijacker); ok {
				c, _, _ := hj.Hijack()
				c.Close()
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			ts := httptest.NewServer(h)
			defer ts.Close()
			src, _ := mbox.ParseSource(backport)
			var log bytes.Buffer
			o := opts(t, ts.URL, &log)
			_, err := mbox.Fetch(context.Background(), src, o)
			wantKind(t, err, fail.KindInfra, ts.URL, "after 3 attempts")
			assertEmptyCache(t, o.CacheDir)
		})
	}
}

func assertEmptyCache(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("cache holds %s after a failed fetch", e.Name())
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"262144": 262144, "256K": 256 << 10, "256M": 256 << 20, "1G": 1 << 30, "64MiB": 64 << 20, "2gb": 2 << 30} {
		if got, err := mbox.ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1", "1T", "M", "abc", "99999999999G"} {
		if _, err := mbox.ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	t.Setenv("PATCHEVAL_MAX_THREAD", "")
	if n, err := mbox.MaxThreadSize(""); err != nil || n != mbox.DefaultMaxSize {
		t.Errorf("default %d %v", n, err)
	}
	t.Setenv("PATCHEVAL_MAX_THREAD", "1G")
	if n, _ := mbox.MaxThreadSize(""); n != 1<<30 {
		t.Errorf("env: %d", n)
	}
	if n, _ := mbox.MaxThreadSize("2M"); n != 2<<20 {
		t.Errorf("flag: %d", n)
	}
	t.Setenv("PATCHEVAL_MAX_THREAD", "lots")
	if _, err := mbox.MaxThreadSize(""); err == nil || !strings.Contains(err.Error(), "PATCHEVAL_MAX_THREAD") {
		t.Errorf("bad env: %v", err)
	}
}
