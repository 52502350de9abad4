package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines/bots/mail"
)

// sendDraft mails d after a confirmation on the terminal; sent says it
// went out. It refuses when standard input is not a terminal or no SMTP
// server is configured.
func sendDraft(ctx context.Context, env *Env, d *report.Draft) (sent bool, err error) {
	path := filepath.Join(xdg.ConfigDir(), "config.toml")
	set, err := mail.LoadSettings(path)
	if err != nil {
		return false, fail.Inputf("--send: %w", err)
	}
	if set == nil {
		return false, fail.Inputf("--send: no SMTP settings: add an [smtp] table (host, port, username, security, password_file) to %s", path)
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
	err = mail.Send(ctx, *set, *d)
	if err != nil {
		return false, fail.Infraf("sending the reply: %w", err)
	}
	fmt.Fprintf(env.Stderr, "sent <%s>\n", d.MessageID)
	return true, nil
}
