package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testenv"
)

// TestServeRefuses: serve's bad flags exit 2 before anything listens.
func TestServeRefuses(t *testing.T) {
	t.Setenv("PATCHEVAL_STATE_DIR", t.TempDir())
	short := filepath.Join(t.TempDir(), "short")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--listen", "0.0.0.0:0"}, "not a loopback address"},
		{[]string{"serve", "--listen", ":8080"}, "--token-file"},
		{[]string{"serve", "--public-read"}, "--public-read needs --token-file"},
		{[]string{"serve", "--token-file", short}, "at least 16 characters"},
		{[]string{"serve", "--token-file", filepath.Join(t.TempDir(), "missing")}, "--token-file"},
		{[]string{"serve", "--database", "mysql://u:pw@127.0.0.1/x"}, "unknown scheme"},
		{[]string{"serve", "--workers", "0"}, "at least 1"},
		{[]string{"serve", "extra"}, "unexpected arguments"},
		{[]string{"serve", "--compiler-cache", "sccache"}, "want kcc, ccache or none"},
	} {
		_, errOut, code := runsCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
		if strings.Contains(errOut, ":pw@") {
			t.Errorf("%v: the database password is printed: %q", c.args, errOut)
		}
	}
	// --compiler-cache ccache where ccache is not installed (PATH holds
	// nothing): refused, as worker does (TestWorkerRefuses).
	t.Setenv("PATH", t.TempDir())
	if _, errOut, code := runsCLI(t, "serve", "--compiler-cache", "ccache"); code != 2 || !strings.Contains(errOut, "--compiler-cache ccache: ccache is not installed here") {
		t.Errorf("serve --compiler-cache ccache without ccache: exit %d, %q; want 2 and the flag named", code, errOut)
	}
}

// TestServeAndSubmit runs `patcheval serve` and talks to it with
// `patcheval submit`: bad input comes back as exit 2 naming the field, a
// dead server is exit 3, and `runs` reads the database while serve holds
// it. SIGTERM (the context) stops serve cleanly.
func TestServeAndSubmit(t *testing.T) {
	state := t.TempDir()
	t.Setenv("PATCHEVAL_STATE_DIR", state)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader("")}, []string{"serve", "--listen", addr})
	}()
	server := "http://" + addr
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if i > 100 {
			t.Fatalf("serve did not listen: %s", errb.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	mboxFile := testenv.BackportMbox()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"submit", "--server", server, "--pipeline", "nope", "a@b"}, 2, "pipeline: unknown pipeline"},
		{[]string{"submit", "--server", server, "--pipeline", "ppc-preempt-dynamic", "--tree", t.TempDir(), "-m", mboxFile}, 2, "tree: "},
		// The flag reaches the service (its field is known there), which
		// then refuses the tree as it does without it.
		{[]string{"submit", "--server", server, "--pipeline", "ppc-preempt-dynamic", "--revert-if-merged", "--tree", t.TempDir(), "-m", mboxFile}, 2, "tree: "},
		{[]string{"submit", "--server", server, "--pipeline", "selinux-tax", "not-an-id"}, 2, "msgid: "},
		{[]string{"submit", "--server", server, "a@b"}, 2, "--pipeline NAME is required"},
		{[]string{"submit", "--server", server, "--pipeline", "x", "-m", mboxFile, "a@b"}, 2, "not both"},
		{[]string{"submit", "--server", "ftp://x", "--pipeline", "x", "a@b"}, 2, "http://"},
		{[]string{"submit", "--server", "http://127.0.0.1:1", "--pipeline", "x", "a@b"}, 3, "no patcheval service"},
	} {
		_, errOut, code := runsCLI(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
	if stdout, errOut, code := runsCLI(t, "runs"); code != 0 || !strings.Contains(stdout, "no evaluations") {
		t.Errorf("runs while serve holds the database: exit %d %q %q", code, stdout, errOut)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve exited %d after its context ended: %s", code, errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop")
	}
	if !strings.Contains(out.String(), "listening on http://"+addr) || !strings.Contains(out.String(), state) {
		t.Errorf("serve did not say where it listens and where its state is:\n%s", out.String())
	}
}

// TestDatabaseLocators: --db reads a libpq key=value string as Postgres
// (never as a SQLite file created in the working directory), refuses an
// ambiguous value with one line and exit 2, never prints a password
// (key=value, URL user info or ?password=), and --database still works
// as a deprecated alias of --db; a group-readable token file is refused.
func TestDatabaseLocators(t *testing.T) {
	t.Setenv("PATCHEVAL_STATE_DIR", t.TempDir())
	cwd := t.TempDir()
	t.Chdir(cwd)
	const pw = "Sup3rSecretPw"
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"runs", "--db", "host=127.0.0.1 port=1 user=u password=" + pw + " dbname=db connect_timeout=2"}, 2, "127.0.0.1"},
		{[]string{"runs", "--db", "postgres://u@127.0.0.1:1/db?password=" + pw + "&connect_timeout=2"}, 2, "127.0.0.1"},
		{[]string{"runs", "--db", "postgres://u:" + pw + "@127.0.0.1:1/db?connect_timeout=2"}, 2, "127.0.0.1"},
		{[]string{"runs", "--db", "my state password=" + pw}, 2, "neither a SQLite file path nor a libpq key=value string"},
		{[]string{"runs", "--db", "hots=db password=" + pw}, 2, "neither a SQLite file path"},
		{[]string{"serve", "--database", "frob=1 password=" + pw}, 2, "--database is deprecated: use --db"},
		{[]string{"watch", "list", "--db", "x=y"}, 2, "sqlite:PATH"},
	} {
		_, errOut, code := runsCLI(t, c.args...)
		if (code != c.code && code != 3) || !strings.Contains(errOut, c.want) || strings.Contains(errOut, pw) {
			t.Errorf("%q: exit %d, %q; want %d (or 3: no server) naming %q, no password", c.args, code, errOut, c.code, c.want)
		}
		if code == 2 && strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
			t.Errorf("%q: more than one line of error: %q", c.args, errOut)
		}
	}
	if ents, _ := os.ReadDir(cwd); len(ents) > 0 {
		t.Errorf("a database value became a file in the working directory: %v", ents[0].Name())
	}
	// sqlite:PATH names a file whose name holds '=' on purpose; --database
	// is accepted with a warning.
	odd := filepath.Join(t.TempDir(), "a=b.db")
	if out, errOut, code := runsCLI(t, "runs", "--database", "sqlite:"+odd); code != 0 || !strings.Contains(out, "no evaluations") || !strings.Contains(errOut, "deprecated") {
		t.Errorf("runs --database sqlite:%s: exit %d %q %q", odd, code, out, errOut)
	}
	open := filepath.Join(t.TempDir(), "token")
	os.WriteFile(open, []byte("0123456789abcdef-test-token\n"), 0o644)
	if _, errOut, code := runsCLI(t, "serve", "--token-file", open); code != 2 || !strings.Contains(errOut, "chmod 600") || strings.Contains(errOut, "0123456789abcdef") {
		t.Errorf("serve with a world-readable token file: exit %d %q; want 2 and chmod 600", code, errOut)
	}
}
