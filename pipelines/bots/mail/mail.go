// Package mail delivers a reply Draft that evaluate/report rendered: Confirm
// asks the user on the terminal, Send speaks SMTP (STARTTLS by default,
// implicit TLS, or plain text to a loopback relay only). Rendering and
// delivery are apart, like syz-cluster's pkg/report and pkg/emailclient:
// nothing in evaluate/report opens a connection.
package mail

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/smtp"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
)

// SMTPSettings say how Send reaches the mail server.
type SMTPSettings struct {
	Host string
	// Port defaults to 587 (465 with Security "tls").
	Port     int
	Username string
	Password string
	// Security is "starttls" (the default: required), "tls" (implicit
	// TLS, port 465) or "none" (plain text; only to a loopback address).
	Security string
	// HeloName is sent in EHLO (default "localhost").
	HeloName string
	// Timeout bounds the whole exchange (default 60s).
	Timeout time.Duration
	// RootCAs are the CAs whose server certificates Send trusts (nil:
	// the system's). The certificate must name Host; TLS 1.2 at least.
	RootCAs *x509.CertPool
}

// Confirm shows who d goes to and asks on out/in for a "y". The caller
// makes sure in is a terminal.
func Confirm(in io.Reader, out io.Writer, d report.Draft) (bool, error) {
	fmt.Fprint(out, d.Summary())
	fmt.Fprintf(out, "Send this mail? [y/N] ")
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		return false, err
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes", nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Send delivers d over SMTP. It never runs unless the caller asked for
// it (--send) and confirmed.
func Send(ctx context.Context, s SMTPSettings, d report.Draft) error {
	if s.Host == "" {
		return fail.Inputf("send: no SMTP host configured")
	}
	sec := strings.ToLower(s.Security)
	if sec == "" {
		sec = "starttls"
	}
	switch sec {
	case "starttls", "tls", "none":
	default:
		return fail.Inputf("send: SMTP security %q: want starttls, tls or none", s.Security)
	}
	if sec == "none" && !isLoopback(s.Host) {
		return fail.Inputf("send: refusing to send in plain text to %s (security \"none\" is only for loopback)", s.Host)
	}
	port := s.Port
	if port == 0 {
		port = 587
		if sec == "tls" {
			port = 465
		}
	}
	rcpts := d.Recipients()
	if len(rcpts) == 0 {
		return fail.Inputf("send: the draft has no valid recipient")
	}
	var msg bytes.Buffer
	if err := report.WriteDraft(&msg, d); err != nil {
		return err
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := net.JoinHostPort(s.Host, strconv.Itoa(port))
	tlsConf := &tls.Config{ServerName: s.Host, RootCAs: s.RootCAs, MinVersion: tls.VersionTLS12}
	var conn net.Conn
	var err error
	dialer := &net.Dialer{}
	if sec == "tls" {
		conn, err = (&tls.Dialer{NetDialer: dialer, Config: tlsConf}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = dialer.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return fail.Infraf("send: connecting to %s: %v", addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	c, err := smtp.NewClient(conn, s.Host)
	if err != nil {
		conn.Close()
		return fail.Infraf("send: %s: %v", addr, err)
	}
	defer c.Close()
	helo := s.HeloName
	if helo == "" {
		helo = "localhost"
	}
	if err := c.Hello(helo); err != nil {
		return fail.Infraf("send: EHLO to %s: %v", addr, err)
	}
	if sec == "starttls" {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return fail.Infraf("send: %s does not offer STARTTLS (set security to \"tls\", or \"none\" for a loopback relay)", addr)
		}
		if err := c.StartTLS(tlsConf); err != nil {
			return fail.Infraf("send: STARTTLS with %s: %v", addr, err)
		}
	}
	if s.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", s.Username, s.Password, s.Host)); err != nil {
			return fail.Inputf("send: authentication as %s at %s failed: %v", s.Username, addr, err)
		}
	}
	if err := c.Mail(d.From.Email); err != nil {
		return fail.Infraf("send: MAIL FROM:<%s>: %v", d.From.Email, err)
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r); err != nil {
			return fail.Infraf("send: RCPT TO:<%s>: %v", r, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fail.Infraf("send: DATA: %v", err)
	}
	// The DATA writer turns LF into CRLF and dot-stuffs.
	if _, err := w.Write(msg.Bytes()); err != nil {
		return fail.Infraf("send: writing the message: %v", err)
	}
	if err := w.Close(); err != nil {
		var tp *textproto.Error
		if errors.As(err, &tp) {
			return fail.Infraf("send: the server refused the message: %v", err)
		}
		// The whole message went out but its answer was lost: the server
		// may have taken it. Resending could mail it twice.
		return fail.Infraf("send: %w: <%s>: after the message was written: %v", ErrUnconfirmed, d.MessageID, err)
	}
	// The server answered 250 to the message: it is sent, whatever QUIT
	// says (a retry after a failed QUIT would mail it twice).
	_ = c.Quit()
	return nil
}

// ErrUnconfirmed says the message was written out in full but the
// server's answer to it never came (connection lost): the server may
// have taken it, so it must not be sent again blindly.
var ErrUnconfirmed = errors.New("delivery unconfirmed")
