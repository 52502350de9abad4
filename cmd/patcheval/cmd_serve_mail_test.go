package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/internal/testsmtp"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/bots/reporters"
	"github.com/patcheval/patcheval/pipelines/store"
)

// serveChild is `patcheval serve` as a child process (this test binary,
// see TestMain), so that it can be killed.
type serveChild struct {
	cmd  *exec.Cmd
	base string
	done chan error
}

func startServeChild(t *testing.T, args ...string) *serveChild {
	t.Helper()
	argsJSON, _ := json.Marshal(append([]string{"serve", "--listen", "127.0.0.1:0"}, args...))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(argsJSON))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &serveChild{cmd: cmd, done: make(chan error, 1)}
	line, err := bufio.NewReader(out).ReadString('\n')
	_, addr, ok := strings.Cut(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		cmd.Process.Kill()
		t.Fatalf("serve did not start: %q %v", line, err)
	}
	c.base = strings.TrimRight(addr, "/")
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() { c.stop(syscall.SIGKILL) })
	return c
}

func (c *serveChild) stop(sig syscall.Signal) {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Signal(sig)
		<-c.done
	}
}

// TestServeApprovedMailKilledAfterSMTPTookIt: a moderated reply waits
// on the dashboard; approved there (token), serve's outbox sends it to a
// real SMTP server on loopback that delivers into the local public-inbox
// with public-inbox-mda. serve is killed (SIGKILL) after the server took
// the mail and before its 250 came back: the post stays "sending" with
// its Message-ID stored. The restarted serve finds that Message-ID on the
// list and records the mail as sent: the list has it once. b4 am of the
// thread picks up the reply's Tested-by.
func TestServeApprovedMailKilledAfterSMTPTookIt(t *testing.T) {
	inbox := testinbox.StartWith(t, testinbox.Options{Bulk: true}, testenv.BackportMbox())
	taken := make(chan string, 4)
	release := make(chan struct{})
	smtpSrv := testsmtp.Start(t, testsmtp.Options{Deliver: inbox.AddMessage, Taken: func(id string) {
		taken <- id
		<-release
	}})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	state, cfgDir := t.TempDir(), t.TempDir()
	t.Setenv("PATCHEVAL_STATE_DIR", state)
	t.Setenv("PATCHEVAL_CONFIG_DIR", cfgDir)
	t.Setenv("PATCHEVAL_CACHE_DIR", t.TempDir())
	const tok = "0123456789abcdef-serve-mail-test"
	tokFile := filepath.Join(cfgDir, "token")
	os.WriteFile(tokFile, []byte(tok+"\n"), 0o600)
	config := fmt.Sprintf(`
[smtp]
host = "127.0.0.1"
port = %d
security = "none"

[[list]]
name = "test"
url = "%s/%s"
pipeline = "ppc-preempt-dynamic"
poll = "1h"
[list.mail]
mode = "moderated"
`, smtpSrv.Port, inbox.URL, inbox.Inbox)
	if err := os.WriteFile(filepath.Join(cfgDir, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}

	// The held reply, as the list's notify job queues it.
	dbPath := filepath.Join(state, store.FileName)
	st, err := store.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	ev, _, err := st.CreateOrResumeEvaluation("mail-test", store.EvaluationMeta{Pipeline: "ppc-preempt-dynamic"})
	if err != nil {
		t.Fatal(err)
	}
	tester := mbox.Address{Name: "Jane Tester", Email: "jane@example.com"}
	d := report.Draft{From: tester, To: []mbox.Address{{Name: "Kernel Tester", Email: "tester@example.org"}},
		Cc:         []mbox.Address{{Email: "test@example.org"}},
		Subject:    "Re: [PATCH 6.1 v4 1/1] powerpc: enable dynamic preemption",
		InReplyTo:  "20261102093000.4121-1-tester@example.org",
		References: []string{"20261102093000.4121-0-tester@example.org", "20261102093000.4121-1-tester@example.org"},
		Body:       "I measured kill on ppc64le: no change beyond 1%.\n\nTested-by: " + tester.String() + "\n", TestedBy: true}
	p, err := (&reporters.Mail{Instance: "test"}).Queue(st, ev.ID, "20261102093000.4121-0-tester@example.org ppc-preempt-dynamic", d, reporters.MailModerated)
	if err != nil || p.Status != store.PostHeld {
		t.Fatalf("queue: %+v %v", p, err)
	}
	st.Close()
	post := func() *store.Post {
		t.Helper()
		st, err := store.Open(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		q, err := st.Post(p.ID)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}

	srv := startServeChild(t, "--token-file", tokFile)
	approve := func(token string) int {
		req, _ := http.NewRequest("POST", fmt.Sprintf("%s/posts/%d/approve", srv.base, p.ID), nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := approve(""); code != 401 {
		t.Fatalf("approve without the token: %d", code)
	}
	select {
	case id := <-taken:
		t.Fatalf("a held mail was sent: %s", id)
	case <-time.After(time.Second):
	}
	if code := approve(tok); code != http.StatusSeeOther {
		t.Fatalf("approve: %d", code)
	}
	var msgid string
	select {
	case msgid = <-taken:
	case <-time.After(3 * time.Minute):
		// Generous: the send is a River job in a child serve, and on a
		// loaded 2-core machine it was seen to take over a minute.
		t.Fatalf("the approved mail never reached the SMTP server within 3 minutes; post %+v", post())
	}
	srv.stop(syscall.SIGKILL)
	close(release)
	if q := post(); q.Status != store.PostSending || q.RemoteID != msgid {
		t.Fatalf("after the kill: %+v, want sending with Message-ID %s stored", q, msgid)
	}

	srv = startServeChild(t, "--token-file", tokFile)
	deadline := time.Now().Add(3 * time.Minute)
	for q := post(); q.Status != store.PostSent; q = post() {
		if time.Now().After(deadline) || q.Status == store.PostFailed {
			t.Fatalf("after the restart: %+v, want sent", q)
		}
		time.Sleep(200 * time.Millisecond)
	}
	srv.stop(syscall.SIGTERM)
	if got := smtpSrv.MessageIDs(); len(got) != 1 || got[0] != msgid {
		t.Errorf("the SMTP server got %v, want <%s> once", got, msgid)
	}

	out := t.TempDir()
	log, err := inbox.B4Command("am", "-o", out, "20261102093000.4121-0-tester@example.org").CombinedOutput()
	if err != nil {
		t.Fatalf("b4 am: %v\n%s", err, log)
	}
	mbx, _ := filepath.Glob(filepath.Join(out, "*.mbx"))
	if len(mbx) != 1 {
		t.Fatalf("b4 wrote %v:\n%s", mbx, log)
	}
	am, _ := os.ReadFile(mbx[0])
	if !strings.Contains(string(am), "\nTested-by: "+tester.String()+"\n") {
		t.Errorf("b4 am did not pick up patcheval's Tested-by:\n%s\n%s", log, am)
	}
}
