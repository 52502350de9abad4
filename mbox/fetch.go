package mbox

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/xdg"
)

// FetchOptions tune Fetch. The zero value is usable.
type FetchOptions struct {
	// Lore is the public-inbox base URL for a bare Message-ID; "" means
	// LoreBase("") (PATCHEVAL_LORE, then DefaultLore). A lore URL argument
	// brings its own base.
	Lore string
	// Client is the HTTP client; nil means one with sane timeouts.
	Client *http.Client
	// Timeout bounds each HTTP attempt (default 60s).
	Timeout time.Duration
	// Attempts is how many times a request is tried on 5xx, 429,
	// connection errors and truncated downloads (default 3).
	Attempts int
	// Backoff is the wait before the first retry, doubled each time
	// (default 1s).
	Backoff time.Duration
	// NoCache skips the thread cache (neither read nor written).
	NoCache bool
	// CacheTTL is how long a fetched thread is reused (default 10 min).
	CacheTTL time.Duration
	// CacheDir holds cached threads (default <xdg.CacheDir()>/threads).
	CacheDir string
	// Stdin is read for SourceStdin (default os.Stdin).
	Stdin io.Reader
	// Progress receives "fetching <url>" lines; nil shows nothing.
	Progress *progress.Reporter
	// MaxSize bounds a fetched thread (and a gzipped -m FILE) after
	// decompression, in bytes; a larger one is a fail.Input error naming
	// the limit, and nothing is cached. 0 means MaxThreadSize("").
	MaxSize int64
	// RedirectHosts are the hosts ("host" or "host:port") a fetch may be
	// redirected to besides the one asked; nil allows only that host.
	RedirectHosts []string
}

// DefaultMaxSize bounds a thread after decompression: 256 MiB. The
// largest threads on lore are a few thousand messages (stable review
// series with their replies, long LKML discussions) and a list mail is
// rarely over 100 KB (vger refuses larger ones), so real threads stay
// well below 100 MiB; a t.mbox.gz that inflates beyond 256 MiB is a
// decompression bomb or a mistake. Raise it with PATCHEVAL_MAX_THREAD
// or lore --max-thread.
const DefaultMaxSize = 256 << 20

// MaxThreadSize picks the thread size limit: flag when set, else
// $PATCHEVAL_MAX_THREAD, else DefaultMaxSize. Sizes are bytes or a number
// with K, M or G (binary: 256M is 256 MiB).
func MaxThreadSize(flag string) (int64, error) {
	v, what := flag, "--max-thread"
	if v == "" {
		v, what = os.Getenv("PATCHEVAL_MAX_THREAD"), "PATCHEVAL_MAX_THREAD"
	}
	if v == "" {
		return DefaultMaxSize, nil
	}
	n, err := ParseSize(v)
	if err != nil {
		return 0, fail.Inputf("%s %q: %v", what, v, err)
	}
	return n, nil
}

// ParseSize reads "262144", "256K", "256M", "1G" (binary multiples, an
// optional trailing "iB" or "B") as a positive byte count.
func ParseSize(v string) (int64, error) {
	s := strings.ToUpper(strings.TrimSpace(v))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		}
		if mult > 1 {
			s = s[:n-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("want a positive size in bytes or with K, M or G (e.g. 256M)")
	}
	return n * mult, nil
}

// sizeName renders a limit for messages: "256 MiB", or bytes.
func sizeName(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func (o *FetchOptions) defaults() {
	if o.Lore == "" {
		o.Lore = LoreBase("")
	}
	o.Lore = strings.TrimRight(o.Lore, "/")
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = 10 * time.Minute
	}
	if o.CacheDir == "" {
		o.CacheDir = filepath.Join(xdg.CacheDir(), "threads")
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.MaxSize <= 0 {
		if n, err := MaxThreadSize(""); err == nil {
			o.MaxSize = n
		} else {
			o.MaxSize = DefaultMaxSize
		}
	}
	if o.Client == nil {
		o.Client = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 15 * time.Second}).DialContext,
			TLSHandshakeTimeout:   15 * time.Second,
			ResponseHeaderTimeout: 45 * time.Second,
			// t.mbox.gz is gzip as content, not as transfer: keep it.
			DisableCompression: true,
		}}
	}
	// Every request (the caller's client too) follows redirects only to
	// the host it asked, or one of RedirectHosts: a hostile lore must not
	// send patcheval to another server (an internal address, say).
	c := *o.Client
	inner := c.CheckRedirect
	allow := o.RedirectHosts
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := redirectAllowed(req, via, allow); err != nil {
			return err
		}
		if inner != nil {
			return inner(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	o.Client = &c
}

// redirectAllowed refuses a redirect to another scheme than http(s) or to
// another host than the first request's (or allow); http to https on the
// same host name is fine.
func redirectAllowed(req *http.Request, via []*http.Request, allow []string) error {
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return &redirectError{fmt.Sprintf("%s: refused a redirect to %q: only http and https are followed", via[0].URL.Redacted(), req.URL.Redacted())}
	}
	first := via[0].URL
	if hostPort(req.URL) == hostPort(first) {
		return nil
	}
	if strings.EqualFold(req.URL.Hostname(), first.Hostname()) && first.Scheme == "http" && req.URL.Scheme == "https" && req.URL.Port() == "" && first.Port() == "" {
		return nil
	}
	for _, h := range allow {
		if strings.EqualFold(h, req.URL.Host) || strings.EqualFold(h, req.URL.Hostname()) && req.URL.Port() == "" {
			return nil
		}
	}
	return &redirectError{fmt.Sprintf("%s: refused a redirect to another host, %s (only %s is followed)", first.Redacted(), req.URL.Host, first.Host)}
}

// hostPort is u's lower-case host with its port (the scheme's default when
// none is given).
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}

// Fetch gets the thread src names and returns it linked (NewThread).
//
// For SourceLore it downloads <base>/all/<msgid>/t.mbox.gz (the msgid
// percent-escaped, '@' as %40). When that is 404 (a server without the
// "all" extindex) it asks <base>/<msgid>/, which public-inbox answers with
// a redirect to the list's inbox, and downloads t.mbox.gz there. A lore URL
// naming an inbox goes to <base>/<inbox>/<msgid>/t.mbox.gz directly.
// Fetched threads are cached in CacheDir for CacheTTL unless NoCache.
//
// For a local source (file, maildir, stdin) with MsgID set, only the
// thread of that message is returned (Thread.ThreadOf): -m FILE MSGID
// picks one thread out of an mbox holding several, like b4.
//
// Errors: an unknown Message-ID is fail.Input ("no message <id> on
// <base>"); a server that is down or keeps failing, and a truncated
// download, are fail.Infra naming the URL; a reply that is not an mbox is
// fail.Input naming the URL.
func Fetch(ctx context.Context, src Source, opt FetchOptions) (*Thread, error) {
	opt.defaults()
	if src.Kind != SourceLore {
		t, err := readLocal(ctx, src, opt)
		if err != nil || src.MsgID == "" {
			return t, err
		}
		return t.ThreadOf(src.MsgID)
	}
	if src.MsgID == "" {
		return nil, fail.Inputf("no Message-ID to fetch")
	}
	base := strings.TrimRight(src.Base, "/")
	inbox := src.Inbox
	if base == "" {
		// --lore may name the base, its all index, a list or a message.
		var err error
		if base, inbox, err = SplitLore(opt.Lore); err != nil {
			return nil, err
		}
		if src.Inbox != "" {
			inbox = src.Inbox
		}
	}
	f := &fetcher{opt: opt}

	key := cacheKey(base, inbox, src.MsgID)
	if !opt.NoCache {
		if data, u, age, ok := readCache(opt.CacheDir, key, opt.CacheTTL); ok {
			opt.Progress.Printf("using cached thread %s (fetched %s ago; --no-cache to refetch)", u, age.Round(time.Second))
			t, err := threadFromMbox(ctx, data, u)
			if err == nil {
				t.Notes = append(t.Notes, fmt.Sprintf("from the local cache, fetched %s ago", age.Round(time.Second)))
				return t, nil
			}
		}
	}

	esc := escapeMsgID(src.MsgID)
	var data []byte
	var final string
	var err error
	if inbox != "" {
		final = base + "/" + inbox + "/" + esc + "/t.mbox.gz"
		data, err = f.getMbox(ctx, final)
		if errors.Is(err, errNotFound) && src.Inbox == "" {
			// --lore named a list the message is not in: ask the
			// server as a whole (below).
			inbox = ""
		} else if errors.Is(err, errNotFound) {
			return nil, fail.Inputf("no message <%s> in %s/%s", src.MsgID, base, inbox)
		}
	}
	if inbox == "" {
		final = base + "/all/" + esc + "/t.mbox.gz"
		data, err = f.getMbox(ctx, final)
		if errors.Is(err, errNotFound) {
			var inboxURL string
			inboxURL, err = f.findInbox(ctx, base, src.MsgID)
			if err == nil {
				final = inboxURL + "t.mbox.gz"
				data, err = f.getMbox(ctx, final)
			}
			if errors.Is(err, errNotFound) {
				return nil, fail.Inputf("no message <%s> on %s", src.MsgID, base)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	t, err := threadFromMbox(ctx, data, final)
	if err != nil {
		return nil, err
	}
	if t.ByID(src.MsgID) == nil {
		t.Notes = append(t.Notes, fmt.Sprintf("the thread fetched for <%s> does not contain that message", src.MsgID))
	}
	if !opt.NoCache {
		if err := writeCache(opt.CacheDir, key, final, data); err != nil {
			opt.Progress.Printf("warning: cannot cache thread: %v", err)
		}
	}
	return t, nil
}

func threadFromMbox(ctx context.Context, data []byte, source string) (*Thread, error) {
	ms, err := ParseBytesContext(ctx, data, source)
	if err != nil {
		return nil, err
	}
	return NewThreadContext(ctx, ms, source)
}

// readLocal reads a stdin, maildir or file source into one Thread.
func readLocal(ctx context.Context, src Source, opt FetchOptions) (*Thread, error) {
	switch src.Kind {
	case SourceStdin:
		data, err := io.ReadAll(opt.Stdin)
		if err != nil {
			return nil, fail.Infra(fmt.Errorf("stdin: read: %w", err))
		}
		return threadFromMbox(ctx, data, "stdin")
	case SourceMaildir:
		ms, err := ReadMaildir(src.Path)
		if err != nil {
			return nil, err
		}
		return NewThread(ms, src.Path), nil
	}
	return readFile(ctx, src.Path, opt.MaxSize)
}

func readFile(ctx context.Context, path string, max int64) (*Thread, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fail.Inputf("%s: no such file", path)
		}
		return nil, fail.Inputf("%s: %v", path, err)
	}
	if isGzip(data) {
		data, err = gunzip(data, max)
		if errors.Is(err, errTooBig) {
			return nil, fail.Inputf("%s: larger than the %s limit on a thread once decompressed; raise it with --max-thread SIZE or PATCHEVAL_MAX_THREAD if it is real", path, sizeName(max))
		}
		if err != nil {
			return nil, fail.Inputf("%s: %v", path, err)
		}
	}
	return threadFromMbox(ctx, data, path)
}

// escapeMsgID percent-escapes a Message-ID for a URL path segment ('@'
// becomes %40, '/' %2F), as b4 does.
func escapeMsgID(id string) string {
	return strings.ReplaceAll(url.QueryEscape(id), "+", "%20")
}

var errNotFound = errors.New("not found")

type fetcher struct {
	opt FetchOptions
}

// retryable marks a failed attempt worth repeating.
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// do runs attempt up to opt.Attempts times, backing off between tries,
// while it returns a retryable error.
func (f *fetcher) do(ctx context.Context, u string, attempt func(ctx context.Context) error) error {
	wait := f.opt.Backoff
	var err error
	for i := 1; ; i++ {
		actx, cancel := context.WithTimeout(ctx, f.opt.Timeout)
		err = attempt(actx)
		cancel()
		var r retryable
		if err == nil || !errors.As(err, &r) {
			return err
		}
		if ctx.Err() != nil {
			return fail.Infra(fmt.Errorf("%s: %w", u, ctx.Err()))
		}
		if i >= f.opt.Attempts {
			return fail.Infra(fmt.Errorf("%s: %w (gave up after %d attempts)", u, r.err, i))
		}
		f.opt.Progress.Printf("%s: %v; retrying in %s", u, r.err, wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fail.Infra(fmt.Errorf("%s: %w", u, ctx.Err()))
		}
		wait *= 2
	}
}

// getMbox downloads a t.mbox.gz and returns the decompressed mbox.
func (f *fetcher) getMbox(ctx context.Context, u string) ([]byte, error) {
	f.opt.Progress.Printf("fetching %s", u)
	var out []byte
	start := time.Now()
	err := f.do(ctx, u, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return fail.Inputf("bad URL %q: %v", u, err)
		}
		req.Header.Set("User-Agent", "patcheval")
		resp, err := f.opt.Client.Do(req)
		if err != nil {
			return clientErr(err)
		}
		defer resp.Body.Close()
		if err := statusErr(resp); err != nil {
			return err
		}
		max := f.opt.MaxSize
		// gzip never makes real mail bigger by more than a few percent.
		rawMax := max + max/16 + 1<<20
		if resp.ContentLength > rawMax {
			return tooBig(u, max, "its Content-Length is "+fmt.Sprint(resp.ContentLength))
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, rawMax+1))
		if err != nil {
			return retryable{fmt.Errorf("download cut off after %d bytes: %w", len(raw), unwrapURLError(err))}
		}
		if int64(len(raw)) > rawMax {
			return tooBig(u, max, "the download alone is larger")
		}
		if !isGzip(raw) {
			// Some mirrors serve the mbox uncompressed; Parse judges it.
			if int64(len(raw)) > max {
				return tooBig(u, max, "uncompressed")
			}
			out = raw
			return nil
		}
		d, err := gunzip(raw, max)
		if errors.Is(err, errTooBig) {
			return tooBig(u, max, fmt.Sprintf("%d bytes of gzip inflate beyond it", len(raw)))
		}
		if err != nil {
			return retryable{fmt.Errorf("%v (%d bytes received)", err, len(raw))}
		}
		out = d
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.opt.Progress.Printf("fetched %s (%d KiB in %s)", u, (len(out)+1023)/1024, time.Since(start).Round(time.Millisecond))
	return out, nil
}

// findInbox asks <base>/<msgid>/ which inbox holds msgid and returns that
// inbox's message URL (ending in "/").
func (f *fetcher) findInbox(ctx context.Context, base, msgid string) (string, error) {
	u := base + "/" + escapeMsgID(msgid) + "/"
	f.opt.Progress.Printf("fetching %s (no /all/ index; looking for the list)", u)
	client := *f.opt.Client
	var loc string
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := redirectAllowed(req, via, f.opt.RedirectHosts); err != nil {
			return err
		}
		if len(via) >= 10 {
			return errors.New("too many redirects")
		}
		// Stop at the first redirect to an inbox's message page.
		p, _ := url.PathUnescape(req.URL.EscapedPath())
		if strings.HasSuffix(strings.TrimRight(p, "/"), "/"+msgid) {
			loc = req.URL.String()
			return http.ErrUseLastResponse
		}
		return nil
	}
	var page []byte
	err := f.do(ctx, u, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return fail.Inputf("bad URL %q: %v", u, err)
		}
		req.Header.Set("User-Agent", "patcheval")
		resp, err := client.Do(req)
		if err != nil {
			return clientErr(err)
		}
		defer resp.Body.Close()
		if loc != "" {
			return nil
		}
		if err := statusErr(resp); err != nil {
			return err
		}
		page, _ = io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		return nil
	})
	if err != nil {
		return "", err
	}
	if loc != "" {
		if !strings.HasSuffix(loc, "/") {
			loc += "/"
		}
		if strings.Contains(loc, "/all/") {
			// Redirected to an "all" index that just said 404.
			return "", errNotFound
		}
		return loc, nil
	}
	// A 200 page listing several inboxes holding the message: take the
	// first link to "<inbox>/<msgid>/" on the same server. Only http(s)
	// links on the page's host are followed: the page also links
	// mailto:...?In-Reply-To=<msgid> and may be hostile.
	bu, _ := url.Parse(u)
	for _, m := range hrefRE.FindAllSubmatch(page, -1) {
		if abs, ok := inboxLink(bu, html.UnescapeString(string(m[1])), msgid); ok {
			return abs, nil
		}
	}
	return "", errNotFound
}

// inboxLink resolves a link of the page at page and accepts it when it is
// an http(s) URL on the same host naming an inbox's page of msgid
// (".../<inbox>/<msgid>/", not the "all" index or the page itself).
func inboxLink(page *url.URL, href, msgid string) (string, bool) {
	ref, err := url.Parse(href)
	if err != nil {
		return "", false
	}
	abs := page.ResolveReference(ref)
	abs.RawQuery, abs.Fragment = "", ""
	if abs.Scheme != "http" && abs.Scheme != "https" || hostPort(abs) != hostPort(page) {
		return "", false
	}
	segs := strings.Split(strings.Trim(abs.EscapedPath(), "/"), "/")
	if len(segs) < 2 {
		return "", false
	}
	last, err := url.PathUnescape(segs[len(segs)-1])
	if err != nil || trimID(last) != msgid || segs[len(segs)-2] == "all" {
		return "", false
	}
	out := abs.String()
	if !strings.HasSuffix(out, "/") {
		out += "/"
	}
	if out == page.String() {
		return "", false
	}
	return out, true
}

var hrefRE = lazyre.New(`href="([^"]+)"`)

func statusErr(resp *http.Response) error {
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return errNotFound
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout:
		return retryable{fmt.Errorf("server answered %s", resp.Status)}
	default:
		return fail.Infraf("%s: server answered %s", resp.Request.URL, resp.Status)
	}
}

// clientErr classifies a failed request: a refused redirect is the
// server's doing and not retried; anything else may be transient.
func clientErr(err error) error {
	var re *redirectError
	if errors.As(err, &re) {
		return fail.Infra(re)
	}
	return retryable{fmt.Errorf("cannot reach server: %w", unwrapURLError(err))}
}

// redirectError is a redirect refused by redirectAllowed.
type redirectError struct{ msg string }

func (e *redirectError) Error() string { return e.msg }

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

var errTooBig = errors.New("larger than the limit")

// tooBig is the error for a thread over the size limit: bad input (a
// decompression bomb or a thread too big to evaluate), never retried and
// never cached.
func tooBig(u string, max int64, why string) error {
	return fail.Inputf("%s: the thread is larger than the %s limit on a fetched thread (%s); nothing was cached; raise the limit with --max-thread SIZE or PATCHEVAL_MAX_THREAD if it is real", u, sizeName(max), why)
}

// gunzip inflates b, refusing (errTooBig) more than max bytes. It inflates
// twice: once into nothing to count, then into a buffer of exactly that
// size, so a bomb costs no memory beyond b and a real thread is held
// once (no doubling buffer).
func gunzip(b []byte, max int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("bad gzip: %v", err)
	}
	n, err := io.Copy(io.Discard, io.LimitReader(zr, max+1))
	if n > max {
		return nil, errTooBig
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("truncated gzip: %v", err)
		}
		return nil, fmt.Errorf("bad gzip: %v", err)
	}
	if err := zr.Reset(bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("bad gzip: %v", err)
	}
	out := make([]byte, n)
	if _, err := io.ReadFull(zr, out); err != nil {
		return nil, fmt.Errorf("bad gzip: %v", err)
	}
	return out, nil
}

// Cache: <dir>/<key>.mbox holds the decompressed mbox; <key>.url the URL it
// came from. The file's modification time is its fetch time.

func cacheKey(base, inbox, msgid string) string {
	h := sha256.Sum256([]byte(base + "\x00" + inbox + "\x00" + msgid))
	return hex.EncodeToString(h[:12])
}

func readCache(dir, key string, ttl time.Duration) (data []byte, source string, age time.Duration, ok bool) {
	p := filepath.Join(dir, key+".mbox")
	fi, err := os.Stat(p)
	if err != nil {
		return nil, "", 0, false
	}
	age = time.Since(fi.ModTime())
	if age > ttl || age < -time.Minute {
		return nil, "", 0, false
	}
	data, err = os.ReadFile(p)
	if err != nil {
		return nil, "", 0, false
	}
	u, err := os.ReadFile(filepath.Join(dir, key+".url"))
	if err != nil {
		return nil, "", 0, false
	}
	return data, strings.TrimSpace(string(u)), age, true
}

func writeCache(dir, key, source string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, key+".url"), []byte(source+"\n"), 0o644); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, key+".tmp*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, key+".mbox"))
}
