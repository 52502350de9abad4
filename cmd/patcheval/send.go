package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/BurntSushi/toml"

	"github.com/patcheval/patcheval/evaluate/mail"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/xdg"
)

// smtpConfig is the [smtp] table of <config dir>/config.toml:
//
//	[smtp]
//	host = "smtp.example.org"
//	port = 587
//	username = "me"
//	security = "starttls"   # or "tls", or "none" (loopback only)
//
// The password comes from $PATCHEVAL_SMTP_PASSWORD, never from the file.
type smtpConfig struct {
	SMTP struct {
		Host     string `toml:"host"`
		Port     int    `toml:"port"`
		Username string `toml:"username"`
		Security string `toml:"security"`
	} `toml:"smtp"`
}

// sendDraft mails d after a confirmation on the terminal; sent says it
// went out. It refuses when standard input is not a terminal or no SMTP
// server is configured.
func sendDraft(ctx context.Context, env *Env, d *report.Draft) (sent bool, err error) {
	path := filepath.Join(xdg.ConfigDir(), "config.toml")
	var cfg smtpConfig
	md, err := toml.DecodeFile(path, &cfg)
	if os.IsNotExist(err) {
		return false, fail.Inputf("--send: no SMTP settings: create %s with an [smtp] table (host, port, username, security)", path)
	}
	if err != nil {
		return false, fail.Inputf("--send: %s: %v", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return false, fail.Inputf("--send: %s: unknown key %s", path, und[0])
	}
	if cfg.SMTP.Host == "" {
		return false, fail.Inputf("--send: %s: [smtp] host is not set", path)
	}
	in, ok := env.Stdin.(*os.File)
	if !ok {
		return false, fail.Inputf("--send needs a terminal to confirm; the draft is not sent")
	}
	if fi, err := in.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false, fail.Inputf("--send needs a terminal to confirm (standard input is not one); the draft is not sent")
	}
	yes, err := mail.Confirm(in, env.Stderr, *d)
	if err != nil {
		return false, fail.Input(err)
	}
	if !yes {
		fmt.Fprintln(env.Stderr, "not sent")
		return false, nil
	}
	err = mail.Send(ctx, mail.SMTPSettings{Host: cfg.SMTP.Host, Port: cfg.SMTP.Port, Username: cfg.SMTP.Username,
		Password: os.Getenv("PATCHEVAL_SMTP_PASSWORD"), Security: cfg.SMTP.Security}, *d)
	if err != nil {
		return false, fail.Infraf("sending the reply: %w", err)
	}
	fmt.Fprintf(env.Stderr, "sent <%s>\n", d.MessageID)
	return true, nil
}
