// Package testsmtp runs a real SMTP server (github.com/emersion/go-smtp)
// on loopback for tests: it records every message it takes and can hand
// each to a Deliver function (e.g. public-inbox-mda into the test inbox,
// as a list server would). FailQuit and DropAfterData make the two ways a
// delivery's outcome gets lost: the connection dies at QUIT after the
// server answered 250 to the message, or right after the server took the
// message, before its 250 goes out.
//
// Start is the entry point; the server stops on tb.Cleanup.
package testsmtp

import (
	"bytes"
	"io"
	"net"
	netmail "net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// Options steer the server.
type Options struct {
	// Deliver, when set, gets every message taken (LF line ends); an
	// error is the server's answer to DATA (a 4xx/5xx).
	Deliver func(raw []byte) error
	// FailQuit drops the connection when the client sends QUIT.
	FailQuit bool
	// DropAfterData drops the connection after taking a message, before
	// answering it.
	DropAfterData bool
	// Taken, when set, is called with each message's Message-ID once the
	// server took it (delivered and recorded), before it answers 250;
	// the answer waits until Taken returns (a test kills the client
	// there).
	Taken func(msgid string)
}

// Server is a running SMTP server.
type Server struct {
	// Host and Port are where it listens (127.0.0.1).
	Host string
	Port int
	opt  Options
	mu   sync.Mutex
	ids  []string
	raws [][]byte
}

// Start starts a server on 127.0.0.1 with a free port.
func Start(tb testing.TB, opt Options) *Server {
	tb.Helper()
	s := &Server{Host: "127.0.0.1", opt: opt}
	srv := smtp.NewServer(s)
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = time.Minute, time.Minute
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s.Port = l.Addr().(*net.TCPAddr).Port
	if opt.FailQuit {
		l = quitFailer{l}
	}
	go srv.Serve(l)
	tb.Cleanup(func() { srv.Close() })
	return s
}

// MessageIDs are the Message-IDs (without <>) of the messages taken, in
// order.
func (s *Server) MessageIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// Messages are the messages taken, LF line ends.
func (s *Server) Messages() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.raws...)
}

// NewSession implements smtp.Backend.
func (s *Server) NewSession(c *smtp.Conn) (smtp.Session, error) { return &session{s: s, c: c}, nil }

type session struct {
	s *Server
	c *smtp.Conn
}

func (x *session) Mail(string, *smtp.MailOptions) error { return nil }
func (x *session) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (x *session) Reset()                               {}
func (x *session) Logout() error                        { return nil }

func (x *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	raw = bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n"))
	if x.s.opt.Deliver != nil {
		if err := x.s.opt.Deliver(raw); err != nil {
			return err
		}
	}
	id := "?"
	if m, err := netmail.ReadMessage(bytes.NewReader(raw)); err == nil {
		id = strings.Trim(m.Header.Get("Message-Id"), "<> ")
	}
	x.s.mu.Lock()
	x.s.ids = append(x.s.ids, id)
	x.s.raws = append(x.s.raws, raw)
	x.s.mu.Unlock()
	if x.s.opt.Taken != nil {
		x.s.opt.Taken(id)
	}
	if x.s.opt.DropAfterData {
		x.c.Conn().Close()
	}
	return nil
}

// quitFailer closes a connection when the client's QUIT arrives.
type quitFailer struct{ net.Listener }

func (l quitFailer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return quitConn{c}, nil
}

type quitConn struct{ net.Conn }

func (c quitConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if bytes.Contains(bytes.ToUpper(p[:n]), []byte("QUIT\r\n")) {
		c.Conn.Close()
		return 0, io.EOF
	}
	return n, err
}
