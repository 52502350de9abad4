package reporters

import (
	"bytes"
	"context"
	"io"
	"net"
	netmail "net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/patcheval/patcheval/evaluate/mail"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/mbox"
)

// smtpToInbox is a real SMTP server on loopback (go-smtp) that delivers
// every message it accepts into the test public-inbox with
// public-inbox-mda, as a list server would.
type smtpToInbox struct {
	inbox *testinbox.Server
	mu    sync.Mutex
	got   []string // Message-IDs delivered
}

func (b *smtpToInbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &smtpSession{b: b}, nil }

type smtpSession struct{ b *smtpToInbox }

func (s *smtpSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *smtpSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *smtpSession) Reset()                               {}
func (s *smtpSession) Logout() error                        { return nil }
func (s *smtpSession) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	raw = []byte(strings.ReplaceAll(string(raw), "\r\n", "\n"))
	if err := s.b.inbox.AddMessage(raw); err != nil {
		return err
	}
	id := "?"
	if m, err := netmail.ReadMessage(bytes.NewReader(raw)); err == nil {
		id = strings.Trim(m.Header.Get("Message-Id"), "<>")
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.got = append(s.b.got, id)
	return nil
}

func (b *smtpToInbox) delivered() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.got...)
}

func startSMTP(t *testing.T, inbox *testinbox.Server) (*smtpToInbox, mail.SMTPSettings) {
	b := &smtpToInbox{inbox: inbox}
	srv := smtp.NewServer(b)
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = time.Minute, time.Minute
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	a := l.Addr().(*net.TCPAddr)
	return b, mail.SMTPSettings{Host: "127.0.0.1", Port: a.Port, Security: "none", Timeout: 2 * time.Minute}
}

var tester = mbox.Address{Name: "Jane Tester", Email: "jane@example.com"}

func replyDraft(body string) report.Draft {
	return report.Draft{
		From:       tester,
		To:         []mbox.Address{{Name: "Kernel Tester", Email: "tester@example.org"}},
		Cc:         []mbox.Address{{Email: "test@example.org"}},
		Subject:    "Re: [PATCH 6.1 v4 1/1] powerpc: enable dynamic preemption",
		InReplyTo:  "20261102093000.4121-1-tester@example.org",
		References: []string{"20261102093000.4121-0-tester@example.org", "20261102093000.4121-1-tester@example.org"},
		Body:       body,
		TestedBy:   strings.Contains(body, "Tested-by:"),
	}
}

func TestMailModeratedReplyReachesTheListAndB4(t *testing.T) {
	inbox := testinbox.StartWith(t, testinbox.Options{Bulk: true}, testenv.BackportMbox())
	relay, smtpSet := startSMTP(t, inbox)
	path := filepath.Join(t.TempDir(), "db")
	st := openStore(t, path)
	id := newEval(t, st)
	ob := &Outbox{Store: st, Reporters: []Reporter{&Mail{SMTP: smtpSet, Archive: inbox.URL + "/" + inbox.Inbox}}}
	ctx := context.Background()

	body := "I measured kill on ppc64le: no change beyond 1%.\n\nTested-by: " + tester.String() + "\n"
	p, err := QueueMail(st, id, "20261102093000.4121-0-tester@example.org ppc-preempt-dynamic", replyDraft(body), "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != store.PostHeld {
		t.Fatalf("moderated mail queued as %s", p.Status)
	}
	if n, _ := ob.Flush(ctx); n != 0 || len(relay.delivered()) != 0 {
		t.Fatalf("a held mail was sent")
	}
	if err := ApproveMail(st, p.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := ob.Flush(ctx); n != 1 || err != nil {
		p, _ = st.Post(p.ID)
		t.Fatalf("approved mail: sent %d, %v, %+v", n, err, p)
	}
	p, _ = st.Post(p.ID)
	if got := relay.delivered(); len(got) != 1 || got[0] != p.RemoteID || p.Status != store.PostSent {
		t.Fatalf("delivered %v, post %+v", got, p)
	}
	// The same draft re-rendered (new Date and Message-ID) is a repeat.
	again := replyDraft(body)
	again.Date, again.MessageID = time.Now(), "other@x"
	if p2, _ := QueueMail(st, id, "20261102093000.4121-0-tester@example.org ppc-preempt-dynamic", again, MailAuto); p2.Status != store.PostSkipped {
		t.Errorf("re-rendered draft: %s", p2.Status)
	}

	// The reply is in the thread on the local lore, and b4 picks up the
	// Tested-by from there.
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

	// Killed between "stored" (Message-ID recorded, status sending) and
	// "sent": once after the SMTP server took the mail, once before.
	sentThenKilled, err := QueueMail(st, id, "t2", replyDraft("second result\n"), MailAuto)
	if err != nil {
		t.Fatal(err)
	}
	killedBefore, err := QueueMail(st, id, "t3", replyDraft("third result\n"), MailAuto)
	if err != nil {
		t.Fatal(err)
	}
	m := &Mail{SMTP: smtpSet}
	for _, q := range []*store.Post{sentThenKilled, killedBefore} {
		q.RemoteID = m.RemoteID(q)
		if ok, err := st.MarkPostSending(q.ID, q.RemoteID); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	d := replyDraft("second result\n")
	d.MessageID, d.Date = sentThenKilled.RemoteID, time.Now()
	if err := mail.Send(ctx, smtpSet, d); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st2 := openStore(t, path)
	ob2 := &Outbox{Store: st2, Reporters: []Reporter{&Mail{SMTP: smtpSet, Archive: inbox.URL + "/" + inbox.Inbox}}}
	if n, err := ob2.Flush(ctx); n != 0 || err != nil {
		t.Fatalf("after the restart: sent %d (%v)", n, err)
	}
	if got := relay.delivered(); len(got) != 2 {
		t.Errorf("the relay got %d mails, want 2 (nothing twice): %v", len(got), got)
	}
	if p, _ := st2.Post(sentThenKilled.ID); p.Status != store.PostSent {
		t.Errorf("the mail the list has: %+v", p)
	}
	if p, _ := st2.Post(killedBefore.ID); p.Status != store.PostFailed || !strings.Contains(p.LastError, "unconfirmed") {
		t.Errorf("the mail never sent: %+v", p)
	}
}
