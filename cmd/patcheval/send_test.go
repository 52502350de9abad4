package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/testsmtp"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/runner"
)

// openPTY opens a pseudo-terminal: --send confirms only on a terminal.
// The test writes the answer into master; slave is the command's stdin.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlockpt: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("ptsname: %v", e)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// TestLoreSendSaysSent: after `lore --pipeline --send` mailed the draft
// (confirmed on a terminal, delivered to a real SMTP server on loopback),
// the printed outcome says it was sent; answering no says "not sent".
// It used to print "(not sent)" before asking, whatever happened next.
func TestLoreSendSaysSent(t *testing.T) {
	sink := testsmtp.Start(t, testsmtp.Options{}) // a real SMTP server on loopback (go-smtp)
	cfg := t.TempDir()
	t.Setenv("PATCHEVAL_CONFIG_DIR", cfg)
	toml := fmt.Sprintf("[smtp]\nhost = \"127.0.0.1\"\nport = %d\nsecurity = \"none\"\n", sink.Port)
	if err := os.WriteFile(filepath.Join(cfg, "config.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	draft := &report.Draft{
		From:      mbox.Address{Name: "Jane Tester", Email: "jane@example.com"},
		To:        []mbox.Address{{Name: "Kernel Tester", Email: "tester@example.org"}},
		Subject:   "Re: [PATCH 6.1 v4 1/1] powerpc: enable dynamic preemption",
		Date:      time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
		MessageID: "patcheval-0102030405060708@example.com",
		InReplyTo: "20261102093000.4121-1-tester@example.org",
		Body:      "kill: +24.8% (regression)\n",
	}
	res := &runner.Outcome{EvaluationID: 7, Report: &report.Report{Title: "t"}, Draft: "out/reply.eml", Mail: draft}
	for _, tc := range []struct {
		answer, want string
		mails        int
	}{
		{"n\n", "reply draft: out/reply.eml (not sent)\n", 0},
		{"y\n", "reply draft: out/reply.eml (sent as <patcheval-0102030405060708@example.com>)\n", 1},
	} {
		master, slave := openPTY(t)
		if _, err := master.WriteString(tc.answer); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		pf := pipelineFlags{send: true}
		if err := pf.deliver(context.Background(), &Env{Stdin: slave, Stdout: &out, Stderr: &errb}, res, "", false); err != nil {
			t.Fatalf("answer %q: %v\n%s", tc.answer, err, errb.String())
		}
		if !strings.HasSuffix(out.String(), tc.want) || strings.Count(out.String(), "reply draft:") != 1 {
			t.Errorf("answer %q: stdout ends\n%s\nwant the last line %q", tc.answer, lastLines(out.String(), 2), tc.want)
		}
		if n := len(sink.MessageIDs()); n != tc.mails {
			t.Errorf("answer %q: the SMTP server has %d mail(s), want %d", tc.answer, n, tc.mails)
		}
	}
	// Without --send nothing is asked and nothing is sent.
	var out bytes.Buffer
	pf := pipelineFlags{}
	if err := pf.deliver(context.Background(), &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: io.Discard}, res, "", false); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "reply draft: out/reply.eml (not sent)\n") {
		t.Errorf("without --send: %s", lastLines(out.String(), 2))
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
