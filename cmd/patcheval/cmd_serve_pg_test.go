package main

import (
	"bytes"
	"context"
	"net"
	neturl "net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testpg"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestServeOnPostgres runs `patcheval serve --database postgres://...` on
// a real PostgreSQL 15: it says where its state is without the password,
// `runs --db` on the same URL reads the evaluations another process
// stored there while serve runs, and a Postgres that cannot be reached is
// an infrastructure error (exit 3) that does not print the password.
func TestServeOnPostgres(t *testing.T) {
	t.Setenv("PATCHEVAL_STATE_DIR", t.TempDir())
	url := testpg.URL(t)
	pw := strings.TrimPrefix(strings.SplitN(strings.TrimPrefix(url, "postgres://"), "@", 2)[0], testpg.User+":")
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
		done <- run(ctx, &Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader("")}, []string{"serve", "--listen", addr, "--database", url})
	}()
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if i > 300 {
			t.Fatalf("serve did not listen: %s", errb.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if stdout, errOut, code := runsCLI(t, "runs", "--db", url); code != 0 || !strings.Contains(stdout, "no evaluations") || strings.Contains(stdout, pw) {
		t.Errorf("runs --db while serve runs: exit %d %q %q", code, stdout, errOut)
	}
	st, err := store.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := st.CreateOrResumeEvaluation("k", store.EvaluationMeta{Pipeline: "ppc-preempt-dynamic", SeriesTitle: "powerpc: stored elsewhere"})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if stdout, errOut, code := runsCLI(t, "runs", "--db", url, "--json"); code != 0 || !strings.Contains(stdout, "stored elsewhere") {
		t.Errorf("runs --db --json: exit %d %q %q", code, stdout, errOut)
	}
	if stdout, _, code := runsCLI(t, "runs", "--db", url, "show", strconv.FormatInt(e.ID, 10)); code != 0 || !strings.Contains(stdout, "stored elsewhere") {
		t.Errorf("runs show: exit %d %q", code, stdout)
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
	if !strings.Contains(out.String(), "database: postgres://patcheval:xxxxx@127.0.0.1") || strings.Contains(out.String()+errb.String(), pw) {
		t.Errorf("serve's output (want the database without its password):\n%s\n%s", out.String(), errb.String())
	}

	// Nothing listens on port 1.
	du, _ := neturl.Parse(url)
	du.Host = "127.0.0.1:1"
	dead := du.String()
	if _, errOut, code := runsCLI(t, "runs", "--db", dead); code != 3 || strings.Contains(errOut, pw) {
		t.Errorf("runs on an unreachable Postgres: exit %d %q, want 3 without the password", code, errOut)
	}
}
