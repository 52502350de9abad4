// Package testgit serves git repositories to tests over git's smart HTTP
// protocol: the real git http-backend behind net/http/cgi, on loopback.
// The server can be taken down and brought back on the same address, so
// tests can watch a remote that goes away.
package testgit

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Backend is git http-backend's path on Debian.
const Backend = "/usr/lib/git-core/git-http-backend"

// Server serves every repository under Root at URL()/<name>.
type Server struct {
	Root string
	addr string
	mu   sync.Mutex
	srv  *http.Server
	// Requests counts the HTTP requests served.
	Requests int
}

// Serve starts a server for the repositories under root and stops it at
// the end of the test.
func Serve(tb testing.TB, root string) *Server {
	tb.Helper()
	return ServeOn(tb, root, "127.0.0.1")
}

// ServeOn is Serve on another loopback address (127.0.0.2, ...): tests
// of what a client may reach tell servers apart by address.
func ServeOn(tb testing.TB, root, ip string) *Server {
	tb.Helper()
	if _, err := os.Stat(Backend); err != nil {
		tb.Skipf("git http-backend not installed (%v): apt-get install git", err)
	}
	s := &Server{Root: root}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		tb.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.start(ln)
	tb.Cleanup(func() { s.Down() })
	return s
}

// URL is the base URL; a repository dir under Root is at URL()+"/"+dir.
func (s *Server) URL() string { return "http://" + s.addr }

func (s *Server) start(ln net.Listener) {
	h := &cgi.Handler{
		Path: Backend,
		Env:  []string{"GIT_PROJECT_ROOT=" + s.Root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.Requests++
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go srv.Serve(ln)
}

// Down stops the server: connections are refused until Up.
func (s *Server) Down() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Close() // the listener and every connection, at once
	}
}

// Up serves again on the same address.
func (s *Server) Up(tb testing.TB) {
	tb.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		tb.Fatalf("testgit: listening again on %s: %v", s.addr, err)
	}
	s.start(ln)
}

// Git runs git with args (add "--git-dir=..." yourself) and env, and
// returns its trimmed output; a failure fails tb.
func Git(tb testing.TB, env []string, stdin []byte, args ...string) string {
	tb.Helper()
	out, err := Run(env, stdin, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// Run is Git returning the error.
func Run(env []string, stdin []byte, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Env = append(append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+os.TempDir()), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", errors.New("git " + strings.Join(args, " ") + ": " + err.Error() + ": " + stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// Identity is a fixed author and committer: commits made with it are the
// same in every run.
func Identity(date string) []string {
	return []string{
		"GIT_AUTHOR_NAME=Patch Author", "GIT_AUTHOR_EMAIL=author@patcheval.invalid", "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=patcheval test", "GIT_COMMITTER_EMAIL=test@patcheval.invalid", "GIT_COMMITTER_DATE=" + date,
	}
}

// InitBare creates an empty bare repository at dir.
func InitBare(tb testing.TB, dir string) string {
	tb.Helper()
	Git(tb, nil, nil, "init", "-q", "--bare", dir)
	return dir
}

// Commit writes a commit on parent ("" for a root commit) in the bare
// repository gitDir whose tree is parent's with files replaced (content)
// or removed (nil content is not possible: use Edit), at object level: no
// worktree. date fixes the identity's dates, so the commit is the same
// in every run.
func Commit(tb testing.TB, gitDir, parent, subject, date string, files map[string]string) string {
	tb.Helper()
	idx := []string{"GIT_INDEX_FILE=" + tb.TempDir() + "/index"}
	gd := "--git-dir=" + gitDir
	if parent != "" {
		Git(tb, idx, nil, gd, "read-tree", parent)
	}
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	for _, path := range keys {
		blob := Git(tb, nil, []byte(files[path]), gd, "hash-object", "-w", "--stdin")
		Git(tb, idx, nil, gd, "update-index", "--add", "--cacheinfo", "100644,"+blob+","+path)
	}
	tree := Git(tb, idx, nil, gd, "write-tree")
	args := []string{gd, "commit-tree", tree}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	return Git(tb, Identity(date), []byte(subject+"\n"), args...)
}

// Tag makes an annotated tag name on commit in gitDir.
func Tag(tb testing.TB, gitDir, name, commit string) {
	tb.Helper()
	Git(tb, Identity("2026-11-02T10:00:00Z"), nil, "--git-dir="+gitDir, "tag", "-a", "-m", name, name, commit)
}

// Blob returns the content of path at rev in gitDir.
func Blob(gitDir, rev, path string) (string, error) {
	return Run(nil, nil, "--git-dir="+gitDir, "cat-file", "blob", rev+":"+path)
}

// Tarball writes dir/name, a kernel.org-style release tarball (.tar.gz)
// whose files sit under one top directory named after it
// (linux-7.2.9.tar.gz holds linux-7.2.9/...), every entry dated date.
func Tarball(tb testing.TB, dir, name string, date time.Time, files map[string]string) string {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	top := strings.TrimSuffix(name, ".tar.gz")
	tw.WriteHeader(&tar.Header{Name: top + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: date})
	for p, body := range files {
		tw.WriteHeader(&tar.Header{Name: top + "/" + p, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), ModTime: date})
		tw.Write([]byte(body))
	}
	tw.Close()
	zw.Close()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}
