// Package testsmtp runs a real SMTP server (github.com/emersion/go-smtp)
// on loopback for tests: it records every message it takes and can hand
// each to a Deliver function (e.g. public-inbox-mda into the test inbox,
// as a list server would). FailQuit and DropAfterData make the two ways a
// delivery's outcome gets lost: the connection dies at QUIT after the
// server answered 250 to the message, or right after the server took the
// message, before its 250 goes out.
//
// With TLS set it speaks STARTTLS or implicit TLS with a certificate for
// 127.0.0.1 signed by a CA made for the server alone (Server.CA), and
// offers AUTH PLAIN only over TLS, as a real submission server does.
//
// Start is the entry point; the server stops on tb.Cleanup.
package testsmtp

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	netmail "net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
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
	// TLS is "starttls" (offer STARTTLS), "tls" (implicit TLS from the
	// first byte, like port 465) or "" (plain text only).
	TLS string
	// Users are the accounts AUTH PLAIN accepts (user -> password);
	// offered only over TLS.
	Users map[string]string
}

// Message is one message the server took and how it came.
type Message struct {
	ID  string
	Raw []byte
	// TLSVersion is the connection's TLS version (tls.VersionTLS13...),
	// 0 for plain text; User who authenticated ("" for nobody).
	TLSVersion uint16
	User       string
}

// Server is a running SMTP server.
type Server struct {
	// Host and Port are where it listens (127.0.0.1).
	Host string
	Port int
	// CA holds the certificate of the CA that signed the server's
	// (nil without TLS): a client trusts it and nothing else.
	CA   *x509.CertPool
	opt  Options
	mu   sync.Mutex
	msgs []Message
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
	switch opt.TLS {
	case "":
	case "starttls", "tls":
		conf, pool, err := testCert()
		if err != nil {
			tb.Fatal(err)
		}
		s.CA = pool
		srv.TLSConfig = conf
		if opt.TLS == "tls" {
			l = tls.NewListener(l, conf)
		}
	default:
		tb.Fatalf("testsmtp: TLS %q: want starttls, tls or nothing", opt.TLS)
	}
	go srv.Serve(l)
	tb.Cleanup(func() { srv.Close() })
	return s
}

// MessageIDs are the Message-IDs (without <>) of the messages taken, in
// order.
func (s *Server) MessageIDs() []string {
	var ids []string
	for _, m := range s.Taken() {
		ids = append(ids, m.ID)
	}
	return ids
}

// Messages are the messages taken, LF line ends.
func (s *Server) Messages() [][]byte {
	var raws [][]byte
	for _, m := range s.Taken() {
		raws = append(raws, m.Raw)
	}
	return raws
}

// Taken are the messages taken, in order, with how each came.
func (s *Server) Taken() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// testCert makes a CA and a certificate for 127.0.0.1 and localhost
// signed by it, valid for a day: the server's TLS configuration (TLS
// 1.2 at least) and a pool holding the CA alone.
func testCert() (*tls.Config, *x509.CertPool, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "patcheval testsmtp CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	conf := &tls.Config{MinVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	return conf, pool, nil
}

// NewSession implements smtp.Backend.
func (s *Server) NewSession(c *smtp.Conn) (smtp.Session, error) { return &session{s: s, c: c}, nil }

type session struct {
	s    *Server
	c    *smtp.Conn
	user string
}

// AuthMechanisms offers PLAIN when the server has users (go-smtp offers
// AUTH only over TLS: AllowInsecureAuth is off).
var _ smtp.AuthSession = (*session)(nil)

func (x *session) AuthMechanisms() []string {
	if len(x.s.opt.Users) == 0 {
		return nil
	}
	return []string{sasl.Plain}
}

// Auth checks PLAIN credentials against Options.Users.
func (x *session) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain || len(x.s.opt.Users) == 0 {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if want, ok := x.s.opt.Users[user]; !ok || want != pass {
			return errors.New("invalid credentials")
		}
		x.user = user
		return nil
	}), nil
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
	m := Message{ID: id, Raw: raw, User: x.user}
	if st, ok := x.c.TLSConnectionState(); ok {
		m.TLSVersion = st.Version
	}
	x.s.mu.Lock()
	x.s.msgs = append(x.s.msgs, m)
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
