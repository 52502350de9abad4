package mail

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	gomail "github.com/emersion/go-message/mail"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/testsmtp"
	"github.com/patcheval/patcheval/mbox"
)

// smtpServer is a tiny SMTP server on loopback that records one session.
type smtpServer struct {
	ln       net.Listener
	mu       sync.Mutex
	from     string
	rcpts    []string
	data     string
	auth     string
	starttls bool // advertise STARTTLS (never completes it)
	done     chan struct{}
}

func newSMTPServer(t *testing.T, starttls bool) *smtpServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpServer{ln: ln, starttls: starttls, done: make(chan struct{})}
	go s.serve()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *smtpServer) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

func (s *smtpServer) serve() {
	defer close(s.done)
	c, err := s.ln.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	w := func(l string) { c.Write([]byte(l + "\r\n")) }
	w("220 test ESMTP")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		cmd := strings.ToUpper(line)
		switch {
		case strings.HasPrefix(cmd, "EHLO"):
			if s.starttls {
				w("250-test")
				w("250 STARTTLS")
			} else {
				w("250-test")
				w("250-AUTH PLAIN")
				w("250 8BITMIME")
			}
		case strings.HasPrefix(cmd, "AUTH PLAIN"):
			s.mu.Lock()
			s.auth = strings.TrimSpace(line[len("AUTH PLAIN"):])
			s.mu.Unlock()
			w("235 ok")
		case strings.HasPrefix(cmd, "MAIL FROM:"):
			s.mu.Lock()
			s.from = line[len("MAIL FROM:"):]
			s.mu.Unlock()
			w("250 ok")
		case strings.HasPrefix(cmd, "RCPT TO:"):
			s.mu.Lock()
			s.rcpts = append(s.rcpts, line[len("RCPT TO:"):])
			s.mu.Unlock()
			w("250 ok")
		case cmd == "DATA":
			w("354 go")
			var b strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				b.WriteString(l)
			}
			s.mu.Lock()
			s.data = b.String()
			s.mu.Unlock()
			w("250 queued")
		case cmd == "QUIT":
			w("221 bye")
			return
		default:
			w("502 what")
		}
	}
}

func TestSend(t *testing.T) {
	d, eml := testDraft(t)
	srv := newSMTPServer(t, false)
	err := Send(context.Background(), SMTPSettings{Host: "127.0.0.1", Port: srv.port(), Security: "none",
		Username: "jane", Password: "secret"}, *d)
	if err != nil {
		t.Fatal(err)
	}
	<-srv.done
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.from != "<jane@example.com>" && !strings.HasPrefix(srv.from, "<jane@example.com>") {
		t.Errorf("MAIL FROM %q", srv.from)
	}
	if strings.Join(srv.rcpts, ",") != "<tester@example.org>,<linuxppc-dev@lists.ozlabs.org>,<sshegde@linux.ibm.com>" {
		t.Errorf("RCPT %q", srv.rcpts)
	}
	auth, _ := base64.StdEncoding.DecodeString(srv.auth)
	if string(auth) != "\x00jane\x00secret" {
		t.Errorf("AUTH %q", auth)
	}
	// On the wire: CRLF line ends, dot-stuffing undone gives the draft.
	wire := strings.ReplaceAll(srv.data, "\r\n", "\n")
	wire = strings.ReplaceAll(wire, "\n..", "\n.")
	if wire != string(eml) {
		t.Errorf("sent message differs from the draft:\n%s", srv.data)
	}
	if strings.Contains(strings.ReplaceAll(srv.data, "\r\n", ""), "\n") {
		t.Errorf("bare LF on the wire")
	}
	if _, err := gomail.CreateReader(strings.NewReader(srv.data)); err != nil {
		t.Errorf("go-message cannot read the sent message: %v", err)
	}
}

func TestSendRefusals(t *testing.T) {
	d, _ := testDraft(t)
	ctx := context.Background()
	if err := Send(ctx, SMTPSettings{Host: "mail.example.org", Security: "none"}, *d); err == nil ||
		!strings.Contains(err.Error(), "plain text") {
		t.Errorf("plain text to a remote host: %v", err)
	}
	if err := Send(ctx, SMTPSettings{}, *d); err == nil {
		t.Error("no host accepted")
	}
	// STARTTLS required (the default) but the server does not offer it.
	srv := newSMTPServer(t, false)
	if err := Send(ctx, SMTPSettings{Host: "127.0.0.1", Port: srv.port()}, *d); err == nil ||
		!strings.Contains(err.Error(), "STARTTLS") {
		t.Errorf("no STARTTLS: %v", err)
	}
	// A closed port is an infrastructure error naming the address.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if err := Send(ctx, SMTPSettings{Host: "127.0.0.1", Port: port, Security: "none"}, *d); err == nil ||
		!strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("closed port: %v", err)
	}
}

func TestConfirm(t *testing.T) {
	d, _ := testDraft(t)
	var out bytes.Buffer
	ok, err := Confirm(strings.NewReader("y\n"), &out, *d)
	if err != nil || !ok || !strings.Contains(out.String(), "tester@example.org, linuxppc-dev@lists.ozlabs.org") {
		t.Errorf("%v %v %q", ok, err, out.String())
	}
	if ok, _ := Confirm(strings.NewReader("\n"), &out, *d); ok {
		t.Error("empty answer confirmed")
	}
	if ok, _ := Confirm(strings.NewReader(""), &out, *d); ok {
		t.Error("EOF confirmed")
	}
}

// testDraft is a reply as evaluate/report renders it: one To, two Cc (and
// the To again, in capitals, which is sent once), a body line starting
// with a dot (dot-stuffed on the wire).
func testDraft(t *testing.T) (*report.Draft, []byte) {
	t.Helper()
	d := &report.Draft{
		From:       mbox.Address{Name: "Jane Tester", Email: "jane@example.com"},
		To:         []mbox.Address{{Name: "Kernel Tester", Email: "tester@example.org"}},
		Cc:         []mbox.Address{{Email: "linuxppc-dev@lists.ozlabs.org"}, {Name: "Shrikanth Hegde", Email: "sshegde@linux.ibm.com"}, {Email: "TESTER@example.org"}},
		Subject:    "Re: [PATCH 6.1 v4 1/1] powerpc: enable dynamic preemption",
		Date:       time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
		MessageID:  "patcheval-0102030405060708@example.com",
		InReplyTo:  "20261102093000.4121-1-tester@example.org",
		References: []string{"20261102093000.4121-0-tester@example.org", "20261102093000.4121-1-tester@example.org"},
		Body:       "On Mon, Kernel Tester wrote:\n> powerpc: enable dynamic preemption\n\n.config differences: none\nkill: +24.8% (regression)\n",
	}
	var b bytes.Buffer
	if err := report.WriteDraft(&b, *d); err != nil {
		t.Fatal(err)
	}
	return d, b.Bytes()
}

func settingsOf(s *testsmtp.Server) SMTPSettings {
	return SMTPSettings{Host: s.Host, Port: s.Port, Security: "none", Timeout: 10 * time.Second}
}

// A server that took the message (250 after DATA) and then fails QUIT:
// the mail is sent, and Send says so, so that nobody sends it again.
func TestSendGoSMTPFailedQuitAfterDataIsSent(t *testing.T) {
	d, _ := testDraft(t)
	s := testsmtp.Start(t, testsmtp.Options{FailQuit: true})
	if err := Send(context.Background(), settingsOf(s), *d); err != nil {
		t.Fatalf("a message the server took is sent, whatever QUIT says: %v", err)
	}
	if got := s.MessageIDs(); len(got) != 1 || got[0] != d.MessageID {
		t.Fatalf("server got %d messages: %q", len(got), got)
	}
}

// A server that took the message but whose answer never came: Send says
// the delivery is unconfirmed (ErrUnconfirmed), not a plain failure to
// retry.
func TestSendGoSMTPLostAnswerIsUnconfirmed(t *testing.T) {
	d, _ := testDraft(t)
	s := testsmtp.Start(t, testsmtp.Options{DropAfterData: true})
	err := Send(context.Background(), settingsOf(s), *d)
	if !errors.Is(err, ErrUnconfirmed) || !strings.Contains(err.Error(), d.MessageID) {
		t.Fatalf("want ErrUnconfirmed naming the Message-ID, got %v", err)
	}
	if len(s.MessageIDs()) != 1 {
		t.Fatalf("server got %d messages", len(s.MessageIDs()))
	}
	// A connection refused is no such doubt: nothing was written.
	if err := Send(context.Background(), SMTPSettings{Host: "127.0.0.1", Port: 1, Security: "none"}, *d); errors.Is(err, ErrUnconfirmed) {
		t.Errorf("a refused connection is unconfirmed: %v", err)
	}
}

// The default security mode (Security ""), STARTTLS, against go-smtp
// offering it with a certificate from a test CA: the message is taken
// over TLS (1.2 or later), after AUTH PLAIN, which the server offers only
// once the connection is encrypted.
func TestSendGoSMTPStartTLSByDefault(t *testing.T) {
	d, eml := testDraft(t)
	s := testsmtp.Start(t, testsmtp.Options{TLS: "starttls", Users: map[string]string{"jane": "secret"}})
	err := Send(context.Background(), SMTPSettings{Host: s.Host, Port: s.Port, Username: "jane", Password: "secret",
		RootCAs: s.CA, Timeout: 10 * time.Second}, *d)
	if err != nil {
		t.Fatal(err)
	}
	checkTLSDelivery(t, s, d.MessageID, eml)
}

// Implicit TLS (port 465's mode): the whole exchange is encrypted.
func TestSendGoSMTPImplicitTLS(t *testing.T) {
	d, eml := testDraft(t)
	s := testsmtp.Start(t, testsmtp.Options{TLS: "tls", Users: map[string]string{"jane": "secret"}})
	err := Send(context.Background(), SMTPSettings{Host: s.Host, Port: s.Port, Security: "tls", Username: "jane", Password: "secret",
		RootCAs: s.CA, Timeout: 10 * time.Second}, *d)
	if err != nil {
		t.Fatal(err)
	}
	checkTLSDelivery(t, s, d.MessageID, eml)
}

func checkTLSDelivery(t *testing.T, s *testsmtp.Server, msgid string, eml []byte) {
	t.Helper()
	got := s.Taken()
	if len(got) != 1 || got[0].ID != msgid {
		t.Fatalf("server took %d messages: %+v", len(got), got)
	}
	m := got[0]
	if m.TLSVersion < tls.VersionTLS12 || m.User != "jane" {
		t.Errorf("message taken with TLS version %#x as user %q, want TLS 1.2+ as jane", m.TLSVersion, m.User)
	}
	if string(m.Raw) != string(eml) {
		t.Errorf("the message taken differs from the draft:\n%s", m.Raw)
	}
}

// TLS that does not hold sends nothing: a certificate from a CA Send does
// not trust (the system's roots do not hold the test CA), with STARTTLS
// (the default) and implicit TLS.
func TestSendGoSMTPUntrustedCertificate(t *testing.T) {
	d, _ := testDraft(t)
	for _, sec := range []string{"", "tls"} {
		mode := map[string]string{"": "starttls", "tls": "tls"}[sec]
		s := testsmtp.Start(t, testsmtp.Options{TLS: mode})
		err := Send(context.Background(), SMTPSettings{Host: s.Host, Port: s.Port, Security: sec, Timeout: 10 * time.Second}, *d)
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: a certificate of an unknown CA: %v", mode, err)
		}
		if n := len(s.Taken()); n != 0 {
			t.Errorf("%s: the server took %d messages over TLS that does not hold", mode, n)
		}
	}
}
