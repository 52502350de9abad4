// Package testpg runs real PostgreSQL 15 servers for tests: initdb and the
// server from Debian's postgresql-15 (/usr/lib/postgresql/15/bin, or
// PATCHEVAL_PG_BIN) in a temporary directory, as an unprivileged user
// (the tests may run as root, which Postgres refuses: then as "nobody"),
// listening on 127.0.0.1 only, with password authentication over TCP.
//
// Most tests share one server per test binary and get a fresh database
// on it (URL); a test that stops or restarts its server gets one of its
// own (New). A package that uses the shared server runs its tests through
// Main, which stops the server when they end. The server process gets
// SIGKILL if the test binary dies first (Pdeathsig), so none outlives it.
package testpg

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/patcheval/patcheval/internal/testenv"
)

// DefaultBin is where Debian installs PostgreSQL 15's server programs.
const DefaultBin = "/usr/lib/postgresql/15/bin"

// User is the database superuser the servers are initialised with.
const User = "patcheval"

// Server is a PostgreSQL server this process started.
type Server struct {
	dir, data string
	port      int
	password  string
	cred      *syscall.Credential // nil: run as this process's user
	bin       string
	// listen are addresses besides 127.0.0.1 (NewOn).
	listen []string

	mu  sync.Mutex
	cmd *exec.Cmd
	log *os.File
}

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
	dbSeq      atomic.Int64
)

// Main runs a package's tests (m.Run) and then stops the shared server,
// if a test started it. Use it from TestMain: os.Exit(testpg.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	return code
}

// URL is a new, empty database on the test binary's shared server
// (started on first use), dropped at tb's cleanup: a postgres:// URL
// with the password.
func URL(tb testing.TB) string {
	tb.Helper()
	sharedOnce.Do(func() { shared, sharedErr = start() })
	if sharedErr != nil {
		fatal(tb, sharedErr)
	}
	return shared.Database(tb)
}

// New starts a server of tb's own (stopped at tb's cleanup), for tests
// that stop or restart it.
func New(tb testing.TB) *Server {
	tb.Helper()
	s, err := start()
	if err != nil {
		fatal(tb, err)
	}
	tb.Cleanup(s.Close)
	return s
}

func fatal(tb testing.TB, err error) {
	tb.Helper()
	if testenv.SkipSlow() && os.IsNotExist(err) {
		tb.Skipf("testpg: PostgreSQL 15 is not installed and PATCHEVAL_SKIP_SLOW=1: %v", err)
	}
	tb.Fatalf("testpg: %v", err)
}

func binDir() string {
	if d := os.Getenv("PATCHEVAL_PG_BIN"); d != "" {
		return d
	}
	return DefaultBin
}

// NewOn starts a server of tb's own (stopped at tb's cleanup) that
// listens on addrs besides 127.0.0.1 and takes password logins from nets
// (CIDRs): addresses of network namespaces the test made itself, for a
// test whose Postgres must be reached from other namespaces. Call it from
// a process that runs in the namespace holding addrs.
func NewOn(tb testing.TB, addrs, nets []string) *Server {
	tb.Helper()
	s, err := start(func(s *Server) error {
		s.listen = addrs
		f, err := os.OpenFile(filepath.Join(s.data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		for _, n := range nets {
			fmt.Fprintf(f, "host all all %s scram-sha-256\n", n)
		}
		return f.Close()
	})
	if err != nil {
		fatal(tb, err)
	}
	tb.Cleanup(s.Close)
	return s
}

// start makes a cluster in a new temporary directory, applies setup to
// it and starts it.
func start(setup ...func(*Server) error) (*Server, error) {
	bin := binDir()
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		return nil, fmt.Errorf("%w (install Debian's postgresql-15, see .ci/install-deps, or set PATCHEVAL_PG_BIN)", err)
	}
	dir, err := os.MkdirTemp("", "testpg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, data: filepath.Join(dir, "data"), bin: bin}
	if err := s.init(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for _, f := range setup {
		if err := f(s); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := s.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) init() error {
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return fmt.Errorf("running as root and no unprivileged user to run Postgres as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	var pw [12]byte
	rand.Read(pw[:])
	s.password = hex.EncodeToString(pw[:])
	pwFile := filepath.Join(s.dir, "pw")
	if err := os.WriteFile(pwFile, []byte(s.password+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Mkdir(s.data, 0o700); err != nil {
		return err
	}
	if s.cred != nil {
		// The server's user must reach and own its files.
		for _, p := range []string{s.dir, s.data, pwFile} {
			if err := os.Chown(p, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
				return err
			}
		}
	}
	cmd := s.command("initdb", "-D", s.data, "-U", User, "--pwfile="+pwFile, "--auth-local=trust",
		"--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	return os.Remove(pwFile)
}

func (s *Server) command(prog string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, prog), args...)
	cmd.Dir = s.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Start starts the (stopped) server; the first start picks a free
// loopback port that later starts keep.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("testpg: server already running")
	}
	for attempt := 0; ; attempt++ {
		fresh := s.port == 0
		if fresh {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			s.port = ln.Addr().(*net.TCPAddr).Port
			ln.Close()
		}
		err := s.startLocked()
		if err == nil {
			return nil
		}
		if !fresh || attempt >= 3 {
			return err
		}
		s.port = 0 // someone took the port: pick another
	}
}

func (s *Server) startLocked() error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// Tests want speed, not durability: no fsync. The socket directory is
	// the temporary directory (no /run/postgresql needed).
	cmd := s.command("postgres", "-D", s.data, "-p", strconv.Itoa(s.port), "-c", "listen_addresses="+strings.Join(append([]string{"127.0.0.1"}, s.listen...), ","),
		"-c", "unix_socket_directories="+s.dir, "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=32MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, s.url("postgres"))
		if err == nil {
			c.Close(ctx)
			cancel()
			break
		}
		cancel()
		select {
		case <-exited:
			logf.Close()
			return fmt.Errorf("postgres exited at start: %s", s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			logf.Close()
			return fmt.Errorf("postgres did not accept connections within 60 s: %v\n%s", err, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.cmd, s.log = cmd, logf
	go func() {
		<-exited
		s.mu.Lock()
		if s.cmd == cmd {
			s.cmd = nil
		}
		s.mu.Unlock()
	}()
	return nil
}

// Stop shuts the server down (fast: open sessions are ended, as in a
// restart or failover) and waits for it to exit.
func (s *Server) Stop() error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	out, err := s.command("pg_ctl", "stop", "-D", s.data, "-m", "fast", "-w", "-t", "60").CombinedOutput()
	if err != nil {
		cmd.Process.Kill()
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		gone := s.cmd == nil
		s.mu.Unlock()
		if gone {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testpg: postgres did not stop")
		}
	}
	if s.log != nil {
		s.log.Close()
	}
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	return nil
}

// Restart stops the server and starts it again on the same port and data:
// every session is ended, as when an administrator restarts Postgres.
func (s *Server) Restart() error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.Start()
}

// Close stops the server and removes its directory.
func (s *Server) Close() {
	s.Stop()
	os.RemoveAll(s.dir)
}

func (s *Server) url(db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(User, s.password), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// Database creates a new, empty database and returns its URL; it is
// dropped at tb's cleanup.
func (s *Server) Database(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	if err := s.exec("CREATE DATABASE " + name); err != nil {
		tb.Fatalf("testpg: %v", err)
	}
	tb.Cleanup(func() { s.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })
	return s.url(name)
}

func (s *Server) exec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}

// Port is the server's loopback port.
func (s *Server) Port() int { return s.port }

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if i := bytes.LastIndex(b[:max(0, len(b)-2000)], []byte("\n")); i >= 0 && len(b) > 2000 {
		b = b[i+1:]
	}
	return string(b)
}
