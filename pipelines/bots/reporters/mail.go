package reporters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/bots/mail"
	"github.com/patcheval/patcheval/pipelines/store"
)

// MailName is the mail reporter's name.
const MailName = "mail"

// Mail modes of a list.
const (
	// MailModerated: the reply waits ("held") until someone approves it
	// (ApproveMail, from the dashboard or the API). The default.
	MailModerated = "moderated"
	// MailAuto: the reply is sent as soon as it is queued; only for lists
	// that asked for a bot.
	MailAuto = "auto"
)

// QueueMail queues the reply draft d of evaluation evalID about target
// (e.g. the series' Message-ID and the pipeline). mode is MailModerated
// (or empty) or MailAuto. A draft identical to the last one for target
// (Date and Message-ID aside) is skipped.
func QueueMail(st *store.Store, evalID int64, target string, d report.Draft, mode string) (*store.Post, error) {
	return queueMail(st, MailName, evalID, target, d, mode)
}

// Queue is QueueMail for this reporter (its Instance).
func (m *Mail) Queue(st *store.Store, evalID int64, target string, d report.Draft, mode string) (*store.Post, error) {
	return queueMail(st, m.Name(), evalID, target, d, mode)
}

func queueMail(st *store.Store, name string, evalID int64, target string, d report.Draft, mode string) (*store.Post, error) {
	switch mode {
	case "", MailModerated, MailAuto:
	default:
		return nil, fail.Inputf("mail: mode %q: want moderated or auto", mode)
	}
	if len(d.Recipients()) == 0 {
		return nil, fail.Inputf("mail: the draft for %s has no valid recipient", target)
	}
	same := d
	same.Date, same.MessageID = time.Time{}, ""
	return enqueue(st, name, target, evalID, "", d, Digest(same), mode != MailAuto)
}

// ApproveMail releases a held reply for sending.
func ApproveMail(st *store.Store, postID int64) error {
	p, err := st.Post(postID)
	if err != nil {
		return err
	}
	if !IsMail(p) {
		return fail.Inputf("mail: post %d is a %s post, not a mail", postID, p.Reporter)
	}
	return st.ApprovePost(postID)
}

// IsMail reports whether p is a mail reporter's post.
func IsMail(p *store.Post) bool {
	return p.Reporter == MailName || strings.HasPrefix(p.Reporter, MailName+"/")
}

// Mail sends reply drafts over SMTP (pipelines/bots/mail). The Message-ID is
// stored (as the post's RemoteID, status "sending") before the SMTP
// exchange starts, like syz-cluster's email reporter: a mail found
// "sending" after a crash is never sent again blindly. When Archive is
// set it is looked up there by Message-ID (found: recorded as sent);
// otherwise, or when it is not there, the post fails with an error saying
// the send is unconfirmed, for a person to check: at most once, never
// twice.
type Mail struct {
	SMTP mail.SMTPSettings
	// Archive is the list's public-inbox URL (https://lore.kernel.org/
	// linuxppc-dev); <Archive>/<Message-ID>/raw answers 200 once the
	// list has the mail.
	Archive string
	// Domain names the host part of generated Message-IDs (default
	// the sender's domain).
	Domain string
	Client *http.Client
	// Instance tells this reporter's posts from other mail reporters'
	// (the followed list's name); "" for the only one.
	Instance string
}

// Name implements Reporter.
func (m *Mail) Name() string { return instanceName(MailName, m.Instance) }

func draftOf(p *store.Post) (report.Draft, error) {
	var d report.Draft
	if err := json.Unmarshal([]byte(p.Payload), &d); err != nil {
		return d, Permanent(fmt.Errorf("mail: post %d: payload: %w", p.ID, err))
	}
	return d, nil
}

// RemoteID implements Reporter: the draft's own Message-ID, or one made
// from the post's id and content.
func (m *Mail) RemoteID(p *store.Post) string {
	d, err := draftOf(p)
	if err == nil && d.MessageID != "" {
		return strings.Trim(d.MessageID, "<>")
	}
	dom := m.Domain
	if dom == "" {
		if i := strings.LastIndexByte(d.From.Email, '@'); i >= 0 {
			dom = d.From.Email[i+1:]
		}
	}
	if dom == "" {
		dom = "patcheval.invalid"
	}
	return fmt.Sprintf("patcheval-%d-%.12s@%s", p.ID, p.Digest, dom)
}

// archived reports whether the list archive has msgid.
func (m *Mail) archived(ctx context.Context, msgid string) (bool, error) {
	u := strings.TrimRight(m.Archive, "/") + "/" + url.PathEscape(msgid) + "/raw"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	c := m.Client
	if c == nil {
		c = &http.Client{Timeout: 60 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return false, fmt.Errorf("mail: looking up <%s> in %s: %w", msgid, m.Archive, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	}
	return false, fmt.Errorf("mail: looking up <%s> in %s: %s", msgid, m.Archive, resp.Status)
}

// Deliver implements Reporter.
func (m *Mail) Deliver(ctx context.Context, p *store.Post, resumed bool) (string, error) {
	d, err := draftOf(p)
	if err != nil {
		return "", err
	}
	d.MessageID = p.RemoteID
	if resumed {
		return m.unconfirmed(ctx, d.MessageID, true, "was interrupted (crash or restart)")
	}
	if d.Date.IsZero() {
		d.Date = time.Now()
	}
	if err := mail.Send(ctx, m.SMTP, d); err != nil {
		if errors.Is(err, mail.ErrUnconfirmed) {
			// Written out, answer lost: the server may have it.
			return m.unconfirmed(ctx, d.MessageID, false, "lost the server's answer ("+err.Error()+")")
		}
		if fail.KindOf(err) == fail.KindInput {
			return "", Permanent(err)
		}
		return "", err
	}
	return d.MessageID, nil
}

// unconfirmed settles a mail that may have been sent: found in the
// list's archive it is sent (by this attempt, or by an earlier one when
// resumed: ErrAlreadyPosted), else it fails for a person to check. It is
// never sent again blindly.
func (m *Mail) unconfirmed(ctx context.Context, msgid string, resumed bool, what string) (string, error) {
	if m.Archive != "" {
		found, err := m.archived(ctx, msgid)
		if err != nil {
			return "", err
		}
		if found && resumed {
			return msgid, ErrAlreadyPosted
		}
		if found {
			return msgid, nil
		}
	}
	return "", Permanent(fmt.Errorf("mail: sending <%s> %s and is unconfirmed; not sent again: check the list, then queue it anew if it is missing", msgid, what))
}
