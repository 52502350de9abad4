// Package testinbox runs a real public-inbox server on loopback for tests,
// benchmarks and demos: the same software lore.kernel.org runs, serving the
// mail threads you give it.
//
// Start(tb, files...) builds a fresh v2 inbox in a temporary directory with
// its own PI_CONFIG and HOME (public-inbox-init -V2), imports every message
// of the mbox files with public-inbox-mda (publicinboxmda.spamcheck=none,
// ORIGINAL_RECIPIENT set to the inbox address, --no-precheck because the
// fixtures are addressed to the real lists), runs public-inbox-index and
// public-inbox-extindex --all, and starts public-inbox-httpd on
// 127.0.0.1 with a free port (the listening socket is created here and
// handed to the daemon through LISTEN_FDS, so there is no port race). The
// server is stopped on tb.Cleanup.
//
// One public-inbox-mda process per message costs about a second each on a
// loaded machine; Options.Bulk runs mda's delivery path (filter, list
// headers, v2 importer) for all messages in one Perl process instead:
// 20 messages in ~5 s instead of ~30 s, same inbox.
//
// Like lore, public-inbox threads by subject too: a reply whose parent is
// missing shows up in the t.mbox.gz of the thread whose messages share its
// subject (the arm64 follow-up fixture comes with the v4 thread).
//
// What the server answers (public-inbox 1.9, Debian bookworm/trixie):
//
//	<URL>/test/<msgid>/t.mbox.gz   the thread as gzipped mboxrd
//	<URL>/all/<msgid>/t.mbox.gz    same, through the "all" extindex (like
//	                               lore); 404 when Options.NoAll
//	<URL>/<msgid>/                 302 to <URL>/all/<msgid>/, or with NoAll
//	                               to <URL>/test/<msgid>/ (the inbox URL
//	                               written in the config); 404 if unknown
//
// # b4 against the server
//
// b4 (0.12 in Debian) reads its settings with `git config`, so they can be
// given through git's environment without touching any config file:
//
//	GIT_CONFIG_COUNT=3 \
//	GIT_CONFIG_KEY_0=b4.midmask GIT_CONFIG_VALUE_0=<URL>/all/%s \
//	GIT_CONFIG_KEY_1=user.name  GIT_CONFIG_VALUE_1='patcheval test' \
//	GIT_CONFIG_KEY_2=user.email GIT_CONFIG_VALUE_2=test@patcheval.invalid \
//	XDG_CACHE_HOME=$(mktemp -d) \
//	b4 am -o OUTDIR <msgid>
//
// (Server.B4Env returns exactly these variables, Server.B4Command a ready
// exec.Cmd; use <URL>/test/%s with NoAll.) `git -c b4.midmask=...` does
// not reach b4, which is not a git sub-command. OUTDIR must exist. b4 needs
// a git identity: without user.name/user.email (HOME without .gitconfig) b4
// am exits 1 silently after running git mailinfo. XDG_CACHE_HOME keeps
// b4's own cache out of the way; b4 am -C also disables it.
//
// A standalone server for benchmarks and the demo (docs/demo.md):
//
//	go run ./internal/testinbox/cmd/serve-inbox -listen 127.0.0.1:8080 thread.mbox...
//
// prints the base URL and serves until killed.
package testinbox

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testenv"
)

// Options configure New.
type Options struct {
	// Inbox is the inbox name (default "test"); its address is
	// <Inbox>@example.org.
	Inbox string
	// Listen is the address to listen on (default "127.0.0.1:0", a free
	// port).
	Listen string
	// NoAll skips the "all" extindex: /all/<msgid>/ is then 404, like a
	// public-inbox mirror without one.
	NoAll bool
	// Dir is where the inbox and config go (default: a new temp dir,
	// removed by Close).
	Dir string
	// Log receives the daemon's stderr (default: a file in Dir).
	Log *os.File
	// Bulk imports all messages of a call in one Perl process running
	// what public-inbox-mda runs for each message (the inbox's delivery
	// filter, list headers, the v2 importer), instead of one
	// public-inbox-mda process per message. Same inbox content, several
	// times faster on a loaded machine.
	Bulk bool
}

// Server is a running public-inbox-httpd.
type Server struct {
	// URL is the base URL, "http://127.0.0.1:PORT" (no trailing slash).
	URL string
	// Inbox is the inbox name ("test"); its messages are under URL/Inbox/.
	Inbox string
	// Address is the inbox's mail address.
	Address string
	// Dir holds the inbox, the extindex and the config.
	Dir string

	opt     Options
	env     []string
	cmd     *exec.Cmd
	done    chan struct{}
	mu      sync.Mutex
	closed  bool
	ownDir  bool
	logPath string
}

// Start is New for tests: it fails tb when the server cannot be started,
// and closes the server on tb.Cleanup. Only when PATCHEVAL_SKIP_SLOW=1 and
// public-inbox is not installed is the test skipped.
func Start(tb testing.TB, mboxFiles ...string) *Server {
	tb.Helper()
	return StartWith(tb, Options{}, mboxFiles...)
}

// StartWith is Start with options.
func StartWith(tb testing.TB, opt Options, mboxFiles ...string) *Server {
	tb.Helper()
	if _, err := exec.LookPath("public-inbox-httpd"); err != nil && testenv.SkipSlow() {
		tb.Skip("public-inbox not installed and PATCHEVAL_SKIP_SLOW=1")
	}
	if opt.Dir == "" {
		opt.Dir = tb.TempDir()
	}
	s, err := New(opt, mboxFiles...)
	if err != nil {
		tb.Fatalf("testinbox: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// New builds an inbox from mboxFiles and starts public-inbox-httpd.
func New(opt Options, mboxFiles ...string) (*Server, error) {
	for _, tool := range []string{"public-inbox-init", "public-inbox-mda", "public-inbox-index", "public-inbox-httpd", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s not found: install the Debian package public-inbox (.ci/install-deps)", tool)
		}
	}
	if opt.Inbox == "" {
		opt.Inbox = "test"
	}
	if opt.Listen == "" {
		opt.Listen = "127.0.0.1:0"
	}
	s := &Server{Inbox: opt.Inbox, Address: opt.Inbox + "@example.org", opt: opt}
	if opt.Dir == "" {
		d, err := os.MkdirTemp("", "testinbox-")
		if err != nil {
			return nil, err
		}
		opt.Dir, s.ownDir = d, true
	}
	s.Dir = opt.Dir
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()

	ln, err := net.Listen("tcp", opt.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %v", opt.Listen, err)
	}
	defer ln.Close()
	s.URL = "http://" + ln.Addr().String()

	home := filepath.Join(s.Dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(s.Dir, "pi-config")
	s.env = append(cleanEnv(),
		"HOME="+home,
		"PI_CONFIG="+cfg,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_DATA_HOME="+filepath.Join(home, ".local/share"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"GIT_CONFIG_NOSYSTEM=1",
		"TZ=UTC",
	)
	inboxDir := filepath.Join(s.Dir, "inbox")
	if err := s.run(nil, "public-inbox-init", "-V2", s.Inbox, inboxDir, s.URL+"/"+s.Inbox, s.Address); err != nil {
		return nil, err
	}
	if err := s.run(nil, "git", "config", "-f", cfg, "publicinboxmda.spamcheck", "none"); err != nil {
		return nil, err
	}
	if !opt.NoAll {
		for _, kv := range [][2]string{{"extindex.all.topdir", filepath.Join(s.Dir, "all")}, {"extindex.all.url", s.URL + "/all"}} {
			if err := s.run(nil, "git", "config", "-f", cfg, kv[0], kv[1]); err != nil {
				return nil, err
			}
		}
	}
	for _, f := range mboxFiles {
		if err := s.importFile(f); err != nil {
			return nil, err
		}
	}
	if err := s.index(); err != nil {
		return nil, err
	}

	// Hand the listening socket to the daemon (systemd-style activation:
	// LISTEN_PID must be the daemon's own pid, hence the exec from sh).
	lf, err := ln.(*net.TCPListener).File()
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	logf := opt.Log
	if logf == nil {
		s.logPath = filepath.Join(s.Dir, "httpd.log")
		logf, err = os.Create(s.logPath)
		if err != nil {
			return nil, err
		}
		defer logf.Close()
	}
	s.cmd = exec.Command("sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1; export LISTEN_PID LISTEN_FDS; exec public-inbox-httpd -W0`)
	s.cmd.Env = s.env
	s.cmd.ExtraFiles = []*os.File{lf}
	s.cmd.Stdout = logf
	s.cmd.Stderr = logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start public-inbox-httpd: %v", err)
	}
	s.done = make(chan struct{})
	go func() { s.cmd.Wait(); close(s.done) }()
	ln.Close()
	lf.Close()
	if err := s.waitReady(2 * time.Minute); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// Add imports the messages of one more mbox file and re-indexes; the
// running server serves them right away.
func (s *Server) Add(tb testing.TB, mbox string) {
	tb.Helper()
	if err := s.AddFile(mbox); err != nil {
		tb.Fatalf("testinbox: %v", err)
	}
}

// AddFile is Add without testing.
func (s *Server) AddFile(mbox string) error {
	if err := s.importFile(mbox); err != nil {
		return err
	}
	return s.index()
}

// AddMessage imports one raw message (no From_ line) and re-indexes.
func (s *Server) AddMessage(raw []byte) error {
	if err := s.mda(raw, "message"); err != nil {
		return err
	}
	return s.index()
}

// B4Env returns the environment variables that point b4 at this server
// (see the package doc). cacheDir is b4's cache directory.
func (s *Server) B4Env(cacheDir string) []string {
	mask := s.URL + "/all/%s"
	if s.opt.NoAll {
		mask = s.URL + "/" + s.Inbox + "/%s"
	}
	return []string{
		"GIT_CONFIG_COUNT=3",
		"GIT_CONFIG_KEY_0=b4.midmask",
		"GIT_CONFIG_VALUE_0=" + mask,
		// b4 am fails silently (exit 1 after git mailinfo) without an
		// identity when HOME has no .gitconfig.
		"GIT_CONFIG_KEY_1=user.name",
		"GIT_CONFIG_VALUE_1=patcheval test",
		"GIT_CONFIG_KEY_2=user.email",
		"GIT_CONFIG_VALUE_2=test@patcheval.invalid",
		"XDG_CACHE_HOME=" + cacheDir,
	}
}

// B4Command returns an exec.Cmd running b4 with args against this server
// (B4Env added to the environment, b4's cache in a fresh directory under
// s.Dir). Example: s.B4Command("am", "-o", dir, msgid).Output().
func (s *Server) B4Command(args ...string) *exec.Cmd {
	cache, err := os.MkdirTemp(s.Dir, "b4-cache-")
	if err != nil {
		cache = filepath.Join(s.Dir, "b4-cache")
	}
	cmd := exec.Command("b4", args...)
	cmd.Env = append(cleanEnv(), "HOME="+filepath.Join(s.Dir, "home"))
	cmd.Env = append(cmd.Env, s.B4Env(cache)...)
	return cmd
}

// ThreadURL is the t.mbox.gz URL of msgid's thread in the inbox.
func (s *Server) ThreadURL(msgid string) string {
	return s.URL + "/" + s.Inbox + "/" + strings.ReplaceAll(msgid, "@", "%40") + "/t.mbox.gz"
}

// Close stops the daemon (SIGTERM to its process group, SIGKILL after 5s)
// and removes the directory when New created it.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.cmd != nil && s.cmd.Process != nil {
		pid := s.cmd.Process.Pid
		syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-pid, syscall.SIGKILL)
			<-s.done
		}
	}
	if s.ownDir {
		return os.RemoveAll(s.Dir)
	}
	return nil
}

// Wait blocks until the daemon exits (serve-inbox uses it).
func (s *Server) Wait() {
	if s.done != nil {
		<-s.done
	}
}

func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-s.done:
			return fmt.Errorf("public-inbox-httpd exited at start: %s", s.logTail())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/"+s.Inbox+"/_/text/config/raw", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			cancel()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		} else {
			cancel()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("public-inbox-httpd on %s not answering after %s (%v): %s", s.URL, limit, err, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Server) logTail() string {
	if s.logPath == "" {
		return "(log not captured)"
	}
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

func (s *Server) index() error {
	if err := s.run(nil, "public-inbox-index", filepath.Join(s.Dir, "inbox")); err != nil {
		return err
	}
	if !s.opt.NoAll {
		return s.run(nil, "public-inbox-extindex", "--all", filepath.Join(s.Dir, "all"))
	}
	return nil
}

func (s *Server) importFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	msgs := SplitMbox(data)
	if len(msgs) == 0 {
		return fmt.Errorf("%s: no messages", path)
	}
	if s.opt.Bulk {
		return s.bulk(msgs, path)
	}
	for i, m := range msgs {
		if err := s.mda(m, fmt.Sprintf("%s message %d", path, i+1)); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) mda(raw []byte, what string) error {
	env := append([]string{"ORIGINAL_RECIPIENT=" + s.Address}, s.env...)
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "public-inbox-mda", "--no-precheck")
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("public-inbox-mda (%s): %v: %s", what, err, bytes.TrimSpace(out))
	}
	return nil
}

// bulkScript is public-inbox-mda's delivery path (after the spam check,
// which is "none" here) looped over NUL-separated messages on stdin.
const bulkScript = `use strict;
use PublicInbox::Eml;
use PublicInbox::MDA;
use PublicInbox::Config;
use PublicInbox::InboxWritable;
use PublicInbox::Filter::Base;
my $cfg = PublicInbox::Config->new;
my $ibx = $cfg->lookup($ENV{ORIGINAL_RECIPIENT}) or die "no inbox for $ENV{ORIGINAL_RECIPIENT}\n";
$ibx = PublicInbox::InboxWritable->new($ibx);
$ibx->{filter} = 'PublicInbox::Filter::Base' if ($ibx->{filter} // '') eq '';
my $filter = $ibx->filter;
my $im = $ibx->importer(0);
# Slurp first: a global $/ would also change how the importer reads git.
my $all = do { local $/; <STDIN> };
close STDIN;
my $n = 0;
for my $str (split(/\0/, $all)) {
	$n++;
	my $mime = PublicInbox::Eml->new(\$str);
	my $ret = $filter->delivery($mime);
	if (ref($ret)) {
		$mime = $ret;
	} elsif ($ret == PublicInbox::Filter::Base::IGNORE) {
		next;
	} elsif ($ret == PublicInbox::Filter::Base::REJECT) {
		die "message $n rejected: " . $filter->err . "\n";
	}
	PublicInbox::MDA->set_list_headers($mime, $ibx);
	$im->add($mime);
}
$im->done;
`

func (s *Server) bulk(msgs [][]byte, what string) error {
	var in bytes.Buffer
	for _, m := range msgs {
		if bytes.IndexByte(m, 0) >= 0 {
			return fmt.Errorf("%s: a message contains a NUL byte", what)
		}
		in.Write(m)
		in.WriteByte(0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "perl", "-e", bulkScript)
	cmd.Env = append([]string{"ORIGINAL_RECIPIENT=" + s.Address}, s.env...)
	cmd.Stdin = &in
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("bulk import of %s (public-inbox-mda's delivery path): %v: %s", what, err, bytes.TrimSpace(out))
	}
	return nil
}

// toolTimeout bounds each public-inbox / git command, so that a stuck
// tool fails the test with its name instead of hanging it.
const toolTimeout = 5 * time.Minute

func (s *Server) run(stdin []byte, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = s.env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// cleanEnv is the process environment without variables that would point
// public-inbox or git at the user's own configuration.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME" || k == "PI_CONFIG" || k == "PI_DIR" || k == "TZ" || strings.HasPrefix(k, "XDG_"),
			strings.HasPrefix(k, "GIT_"), strings.HasPrefix(k, "LISTEN_"):
			continue
		}
		out = append(out, kv)
	}
	return out
}

// SplitMbox splits an mbox (mboxrd or mboxo, LF or CRLF) into raw
// messages, dropping From_ lines and undoing ">From " escaping. It is
// deliberately simpler than package mbox's parser (and independent of it):
// a From_ line is a "From " line at the start or after a blank line.
func SplitMbox(data []byte) [][]byte {
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	var out [][]byte
	var cur *bytes.Buffer
	prevBlank := true
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	flush := func() {
		if cur != nil {
			b := cur.Bytes()
			// The blank line before the next From_ line is the mbox's.
			if bytes.HasSuffix(b, []byte("\n\n")) {
				b = b[:len(b)-1]
			}
			if len(bytes.TrimSpace(b)) > 0 {
				out = append(out, b)
			}
		}
	}
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte("From ")) && prevBlank {
			flush()
			cur = new(bytes.Buffer)
			prevBlank = false
			continue
		}
		if cur == nil {
			// Not an mbox: one raw message.
			cur = new(bytes.Buffer)
		}
		if t := bytes.TrimLeft(line, ">"); len(t) < len(line) && bytes.HasPrefix(t, []byte("From ")) {
			line = line[1:]
		}
		cur.Write(line)
		cur.WriteByte('\n')
		prevBlank = len(line) == 0
	}
	flush()
	return out
}
