package mbox

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
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
}

// maxMbox bounds a downloaded (decompressed) thread.
const maxMbox = 512 << 20

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
		t, err := readLocal(src, opt)
		if err != nil || src.MsgID == "" {
			return t, err
		}
		return t.ThreadOf(src.MsgID)
	}
	if src.MsgID == "" {
		return nil, fail.Inputf("no Message-ID to fetch")
	}
	base := strings.TrimRight(src.Base, "/")
	if base == "" {
		base = opt.Lore
	}
	f := &fetcher{opt: opt}

	key := cacheKey(base, src.Inbox, src.MsgID)
	if !opt.NoCache {
		if data, u, age, ok := readCache(opt.CacheDir, key, opt.CacheTTL); ok {
			opt.Progress.Printf("using cached thread %s (fetched %s ago; --no-cache to refetch)", u, age.Round(time.Second))
			t, err := threadFromMbox(data, u)
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
	if src.Inbox != "" {
		final = base + "/" + src.Inbox + "/" + esc + "/t.mbox.gz"
		data, err = f.getMbox(ctx, final)
		if errors.Is(err, errNotFound) {
			return nil, fail.Inputf("no message <%s> in %s/%s", src.MsgID, base, src.Inbox)
		}
	} else {
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
	t, err := threadFromMbox(data, final)
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

func threadFromMbox(data []byte, source string) (*Thread, error) {
	ms, err := ParseBytes(data, source)
	if err != nil {
		return nil, err
	}
	return NewThread(ms, source), nil
}

// readLocal reads a stdin, maildir or file source into one Thread.
func readLocal(src Source, opt FetchOptions) (*Thread, error) {
	switch src.Kind {
	case SourceStdin:
		ms, err := Parse(opt.Stdin, "stdin")
		if err != nil {
			return nil, err
		}
		return NewThread(ms, "stdin"), nil
	case SourceMaildir:
		ms, err := ReadMaildir(src.Path)
		if err != nil {
			return nil, err
		}
		return NewThread(ms, src.Path), nil
	}
	return readFile(src.Path)
}

func readFile(path string) (*Thread, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fail.Inputf("%s: no such file", path)
		}
		return nil, fail.Inputf("%s: %v", path, err)
	}
	if isGzip(data) {
		data, err = gunzip(data)
		if err != nil {
			return nil, fail.Inputf("%s: %v", path, err)
		}
	}
	return threadFromMbox(data, path)
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
			return retryable{fmt.Errorf("cannot reach server: %w", unwrapURLError(err))}
		}
		defer resp.Body.Close()
		if err := statusErr(resp); err != nil {
			return err
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxMbox))
		if err != nil {
			return retryable{fmt.Errorf("download cut off after %d bytes: %w", len(raw), unwrapURLError(err))}
		}
		if !isGzip(raw) {
			// Some mirrors serve the mbox uncompressed; Parse judges it.
			out = raw
			return nil
		}
		d, err := gunzip(raw)
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
			return retryable{fmt.Errorf("cannot reach server: %w", unwrapURLError(err))}
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
	// first link to "<inbox>/<msgid>/".
	for _, m := range hrefRE.FindAllSubmatch(page, -1) {
		h, err := url.PathUnescape(string(m[1]))
		if err != nil || !strings.Contains(h, msgid) {
			continue
		}
		ref, err := url.Parse(string(m[1]))
		if err != nil {
			continue
		}
		bu, _ := url.Parse(u)
		abs := bu.ResolveReference(ref).String()
		if i := strings.Index(abs, "/"+escapeMsgID(msgid)); i >= 0 || strings.Contains(abs, msgid) {
			if !strings.HasSuffix(abs, "/") {
				abs += "/"
			}
			return abs, nil
		}
	}
	return "", errNotFound
}

var hrefRE = regexp.MustCompile(`href="([^"]+)"`)

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

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("bad gzip: %v", err)
	}
	var out bytes.Buffer
	if _, err := io.Copy(&out, io.LimitReader(zr, maxMbox)); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("truncated gzip: %v", err)
		}
		return nil, fmt.Errorf("bad gzip: %v", err)
	}
	return out.Bytes(), nil
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
