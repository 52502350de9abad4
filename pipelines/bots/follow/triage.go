package follow

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/bots/reporters"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series/maintainers"
	"github.com/patcheval/patcheval/series/recipients"
)

// Triage by reply: a reply to one of patcheval's own reports (a mail post
// of the store, found by its Message-ID in the reply's In-Reply-To or
// References) may carry commands, one per line:
//
//	#patcheval retest [--per-patch] [pipeline]   evaluate the series again (or with
//	                               another pipeline; --per-patch: after each patch too)
//	#patcheval invalid             withdraw the report
//	#patcheval bisect              bisect the regression inside the series (the result
//	                               follows in the thread when the bisection ends)
//	#patcheval test <lore URL | Message-ID>  evaluate another series
//	#patcheval test <git URL> <branch>      evaluate a branch's commits on the base
//
// A command counts only when the list's trust policy vouches for its
// sender's From: (trust.go: a DKIM signature of the From: domain by
// default), and then only the series' author, the maintainers and
// reviewers of the files it touches (the base commit's MAINTAINERS) and
// the list's triage people may command; anyone else's commands are recorded as ignored and
// logged. Each command is recorded before it is carried out (store
// triage_commands, keyed by list, reply and position): a reply read again
// does nothing more.

// Command is one `#patcheval` command of a reply.
type Command struct {
	Name string   `json:"name"`
	Args []string `json:"args,omitempty"`
}

func (c Command) String() string {
	return strings.TrimSpace("#patcheval " + c.Name + " " + strings.Join(c.Args, " "))
}

// Commands the follower knows.
var commandNames = map[string]bool{"retest": true, "invalid": true, "bisect": true, "test": true}

var commandRe = lazyre.New(`^#patcheval[ \t]+([a-z]+)\b[ \t]*(.*?)\s*$`)

// ParseCommands finds the commands of a mail body: lines starting with
// "#patcheval", not quoted. An unknown command is returned with Name
// "unknown:<word>" so that it is recorded and answered, not dropped.
func ParseCommands(body string) []Command {
	var out []Command
	for _, line := range strings.Split(body, "\n") {
		m := commandRe.FindStringSubmatch(strings.TrimRight(line, "\r"))
		if m == nil {
			continue
		}
		c := Command{Name: m[1], Args: strings.Fields(m[2])}
		if !commandNames[c.Name] {
			c.Name = "unknown:" + c.Name
		}
		out = append(out, c)
	}
	return out
}

// TriageRequest is a permitted command with what it is about.
type TriageRequest struct {
	List    List
	Command Command
	// Reply is the message that carried it, Report the Message-ID of the
	// patcheval report it answers, EvaluationID that report's
	// evaluation.
	Reply        *mbox.Message
	Report       string
	EvaluationID int64
	// Why says why the sender may command ("author", "maintainer:...",
	// "triage").
	Why string
}

// Triager carries out permitted commands (the service: re-run, withdraw,
// bisect, test). The note it returns is recorded with the command (the
// acknowledgement's text).
type Triager interface {
	Triage(ctx context.Context, r TriageRequest) (note string, err error)
}

// triage reads the commands of the newly filed messages msgs of list l.
func (f *Follower) triage(ctx context.Context, l List, msgs []store.FollowMessage) error {
	if f.Triage == nil {
		return nil
	}
	for _, fm := range msgs {
		m, err := mbox.ParseMessage(fm.Raw, l.Name)
		if err != nil {
			continue // filed messages parsed before; not a command
		}
		cmds := ParseCommands(m.Body)
		if len(cmds) == 0 {
			continue
		}
		post, err := f.reportAnswered(m)
		if err != nil {
			return err
		}
		if post == nil {
			f.log().Info("follow: #patcheval command outside a reply to a patcheval report: ignored", "list", l.Name, "msgid", m.MessageID, "from", m.From.Email)
			continue
		}
		for i, c := range cmds {
			if err := f.command(ctx, l, m, post, i, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// reportAnswered is the mail post that m answers, or nil.
func (f *Follower) reportAnswered(m *mbox.Message) (*store.Post, error) {
	for _, id := range append([]string{m.InReplyTo}, reverse(m.References)...) {
		if id == "" {
			continue
		}
		p, err := f.Store.PostByRemoteID(reporters.MailName, strings.Trim(id, "<>"))
		if err != nil || p != nil {
			return p, err
		}
	}
	return nil, nil
}

func (f *Follower) command(ctx context.Context, l List, m *mbox.Message, post *store.Post, i int, c Command) error {
	id, claimed, err := f.Store.ClaimTriage(store.TriageCommand{List: l.Name, MsgID: m.MessageID, Index: i,
		Sender: m.From.Email, Command: c.String(), EvaluationID: post.EvaluationID})
	if err != nil || !claimed {
		return err // read before: done (or ignored) then
	}
	how, refused := f.authenticate(l, m)
	if refused != "" {
		f.log().Warn("follow: #patcheval command from a sender the list's trust policy does not vouch for: ignored", "list", l.Name,
			"msgid", m.MessageID, "from", m.From.Email, "command", c.String(), "trust", trustOf(l), "why", refused)
		return f.Store.FinishTriage(id, store.TriageIgnored,
			fmt.Sprintf("%s is not authenticated (trust = %q): %s", m.From.Email, trustOf(l), refused))
	}
	why, err := f.permitted(l, post.EvaluationID, m.From)
	if err != nil {
		return err
	}
	if why == "" {
		f.log().Warn("follow: #patcheval command from a sender who may not command: ignored", "list", l.Name,
			"msgid", m.MessageID, "from", m.From.Email, "command", c.String(), "evaluation", post.EvaluationID)
		return f.Store.FinishTriage(id, store.TriageIgnored,
			fmt.Sprintf("%s is neither the series' author, a maintainer of its files nor a triage person of %s", m.From.Email, l.Name))
	}
	if strings.HasPrefix(c.Name, "unknown:") {
		return f.Store.FinishTriage(id, store.TriageFailed, "unknown command "+strings.TrimPrefix(c.Name, "unknown:")+" (retest, invalid, bisect, test)")
	}
	note, err := f.Triage.Triage(ctx, TriageRequest{List: l, Command: c, Reply: m, Report: post.RemoteID, EvaluationID: post.EvaluationID, Why: why})
	if err != nil {
		f.log().Warn("follow: #patcheval command failed", "list", l.Name, "msgid", m.MessageID, "command", c.String(), "err", err)
		return f.Store.FinishTriage(id, store.TriageFailed, err.Error())
	}
	f.log().Info("follow: #patcheval command", "list", l.Name, "msgid", m.MessageID, "from", m.From.Email, "as", why, "authenticated", how, "command", c.String(), "note", note)
	return f.Store.FinishTriage(id, store.TriageDone, note)
}

// permitted says why from may command about evaluation evalID ("" when
// not): the series' author, a maintainer or reviewer of the touched files
// in the base commit's MAINTAINERS, or one of the list's triage globs.
func (f *Follower) permitted(l List, evalID int64, from mbox.Address) (string, error) {
	addr := strings.ToLower(from.Email)
	if addr == "" {
		return "", nil
	}
	for _, g := range l.Triage {
		if ok, _ := path.Match(strings.ToLower(g), addr); ok {
			return "triage", nil
		}
	}
	all, err := f.Store.FollowSeriesList(l.Name, "")
	if err != nil {
		return "", err
	}
	for _, s := range all {
		if s.EvaluationID == evalID && strings.EqualFold(s.Author, addr) {
			return "author", nil
		}
	}
	in, err := runner.Load(f.Store, evalID)
	if err != nil || in.Series == nil {
		return "", nil // no stored inputs (not submitted through the runner): no maintainers to ask
	}
	for _, p := range in.Series.Patches {
		if p != nil && strings.EqualFold(p.Author.Email, addr) {
			return "author", nil
		}
	}
	var patches [][]byte
	for _, p := range in.Series.Patches {
		if p != nil && p.Msg != nil {
			patches = append(patches, p.Msg.Raw)
		}
	}
	ms, err := recipients.ForSeries(in.Options.Tree, in.BaseHash, patches)
	if err != nil {
		f.log().Warn("follow: MAINTAINERS of the evaluated tree unreadable", "evaluation", evalID, "err", err)
		return "", nil
	}
	for _, r := range ms {
		if r.Kind != maintainers.List && strings.EqualFold(r.Email, addr) {
			return r.Role, nil
		}
	}
	return "", nil
}
