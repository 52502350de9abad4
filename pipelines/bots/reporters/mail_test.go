package reporters

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/internal/testsmtp"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/bots/mail"
	"github.com/patcheval/patcheval/pipelines/store"
)

// startSMTP starts a real SMTP server on loopback (go-smtp) that
// delivers every message it takes into the test public-inbox with
// public-inbox-mda, as a list server would.
func startSMTP(t *testing.T, inbox *testinbox.Server, opt testsmtp.Options) (*testsmtp.Server, mail.SMTPSettings) {
	opt.Deliver = inbox.AddMessage
	s := testsmtp.Start(t, opt)
	return s, mail.SMTPSettings{Host: s.Host, Port: s.Port, Security: "none", Timeout: 2 * time.Minute}
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
	relay, smtpSet := startSMTP(t, inbox, testsmtp.Options{})
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
	if n, _ := ob.Flush(ctx); n != 0 || len(relay.MessageIDs()) != 0 {
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
	if got := relay.MessageIDs(); len(got) != 1 || got[0] != p.RemoteID || p.Status != store.PostSent {
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
	if got := relay.MessageIDs(); len(got) != 2 {
		t.Errorf("the relay got %d mails, want 2 (nothing twice): %v", len(got), got)
	}
	if p, _ := st2.Post(sentThenKilled.ID); p.Status != store.PostSent {
		t.Errorf("the mail the list has: %+v", p)
	}
	if p, _ := st2.Post(killedBefore.ID); p.Status != store.PostFailed || !strings.Contains(p.LastError, "unconfirmed") {
		t.Errorf("the mail never sent: %+v", p)
	}
}

// The SMTP server took the mail (250 after DATA) but QUIT failed: the
// post is sent, and no later flush (or restart) mails it again. When the
// server's answer to the mail itself is lost, the post fails as
// unconfirmed instead of being retried into a second copy.
func TestMailGoSMTPFailedQuitOrLostAnswerNeverMailsTwice(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		opt        testsmtp.Options
		wantStatus string
		wantErr    string
	}{
		{"QUIT fails after DATA's 250", testsmtp.Options{FailQuit: true}, store.PostSent, ""},
		{"answer to DATA lost", testsmtp.Options{DropAfterData: true}, store.PostFailed, "unconfirmed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testsmtp.Start(t, tc.opt)
			set := mail.SMTPSettings{Host: srv.Host, Port: srv.Port, Security: "none", Timeout: 10 * time.Second}
			path := filepath.Join(t.TempDir(), "db")
			st := openStore(t, path)
			id := newEval(t, st)
			p, err := QueueMail(st, id, "thread@x pipeline", replyDraft("result\n"), MailAuto)
			if err != nil {
				t.Fatal(err)
			}
			ob := &Outbox{Store: st, Reporters: []Reporter{&Mail{SMTP: set}}, Backoff: time.Nanosecond}
			ob.Flush(ctx)
			p, _ = st.Post(p.ID)
			if p.Status != tc.wantStatus || !strings.Contains(p.LastError, tc.wantErr) {
				t.Fatalf("post: %+v", p)
			}
			// Later flushes, and a restarted outbox, send nothing.
			ob.Flush(ctx)
			st.Close()
			st2 := openStore(t, path)
			(&Outbox{Store: st2, Reporters: []Reporter{&Mail{SMTP: set}}}).Flush(ctx)
			if got := srv.MessageIDs(); len(got) != 1 || got[0] != p.RemoteID {
				t.Errorf("the server got %v, want once <%s>", got, p.RemoteID)
			}
		})
	}
}
