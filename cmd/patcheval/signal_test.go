package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SIGTERM and SIGINT stop `lore -m` on a large mailbox promptly, with
// exit 3 and the interrupted line, never 0: parsing and resolving check
// the context (they used to run on for 26 s and exit 0). The child is this
// test binary running the real command line (childMain) on a 100k-message
// reply chain, signalled 300 ms after its signal handling was set up.
func TestLoreSignalStopsPromptly(t *testing.T) {
	var b bytes.Buffer
	const n = 100000
	for i := 0; i < n; i++ {
		subj := "Re: [PATCH] gen: change"
		if i == 0 {
			subj = "[PATCH] gen: change"
		}
		fmt.Fprintf(&b, "From mboxrd@z Thu Jan  1 00:00:00 1970\nFrom: A <a@example.org>\nSubject: %s\nDate: Mon, 5 Jan 2026 %02d:%02d:%02d +0000\nMessage-ID: <c%d@example.org>\n", subj, (i/3600)%24, (i/60)%60, i%60, i)
		if i > 0 {
			fmt.Fprintf(&b, "In-Reply-To: <c%d@example.org>\n", i-1)
		}
		if i == 0 {
			b.WriteString("\nChange.\n\nSigned-off-by: A <a@example.org>\n---\ndiff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n@@ -1 +1 @@\n-a\n+b\n\n")
		} else {
			b.WriteString("\nFine.\n\nReviewed-by: A <a@example.org>\n\n")
		}
	}
	mbx := filepath.Join(t.TempDir(), "chain.mbox")
	if err := os.WriteFile(mbx, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			argsJSON, _ := json.Marshal([]string{"lore", "-m", mbx})
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childArgsEnv+"="+string(argsJSON), "TERM=dumb", childReadyEnv+"=1")
			var stderr syncBuffer
			ready := make(chan struct{})
			stderr.mark, stderr.ready = []byte(childReadyMarker+"\n"), ready
			cmd.Stderr, cmd.Stdout = &stderr, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitReady(t, cmd, ready)
			time.Sleep(300 * time.Millisecond)
			signalled := time.Now()
			cmd.Process.Signal(sig)
			kill := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
			defer kill.Stop()
			err := cmd.Wait()
			took := time.Since(signalled)
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			t.Logf("%v: exit %d %s after the signal", sig, code, took.Round(time.Millisecond))
			if code != 3 || !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("%v: exit %d, want 3 and the interrupted line:\n%s", sig, code, tail(stderr.String()))
			}
			if took > 10*time.Second {
				t.Errorf("%v: took %s to stop", sig, took)
			}
		})
	}
}

// waitReady waits until the child says its signal handling is set up
// (childMain prints childReadyMarker then), so that the signal meets the
// command and not the test binary's start-up: the Go runtime catches
// SIGINT and SIGTERM from its first instant, and before signal.Notify they
// kill the process (exit -1), so /proc's SigCgt cannot tell.
func waitReady(t *testing.T, cmd *exec.Cmd, ready <-chan struct{}) {
	t.Helper()
	select {
	case <-ready:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("the child never said it was ready")
	}
}

// syncBuffer is a bytes.Buffer for a child's output that closes ready
// once mark has been written.
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	mark  []byte
	ready chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	if s.ready != nil && bytes.Contains(s.b.Bytes(), s.mark) {
		close(s.ready)
		s.ready = nil
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}
