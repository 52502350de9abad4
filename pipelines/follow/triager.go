package follow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/reporters"
	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
)

// Rerunner is the part of the service a ServiceTriager uses besides
// Service: Rerun queues an evaluation again.
type Rerunner interface {
	Service
	Rerun(ctx context.Context, id int64) (int64, error)
}

// ServiceTriager is the Triager of `patcheval serve`:
//
//	retest             queues the evaluation again (Rerun: what failed is
//	                   redone, finished boots are kept, the report is new)
//	retest <pipeline>  evaluates the series with that pipeline
//	invalid            withdraws the report: the list's Patchwork checks
//	                   become success "withdrawn"
//	bisect, test       not carried out yet: answered as such
//
// and acknowledges each in the thread (a reply to the command, through
// the list's mail reporter, when the list has one).
type ServiceTriager struct {
	Service Rerunner
	Store   *store.Store
	// Reporting posts the withdrawal and the acknowledgement (nil: the
	// list has no reporters; the command is only recorded).
	Reporting *Reporting
	// Find resolves a pipeline name (default pipelines.Find).
	Find func(string) (*pipelines.Pipeline, error)
}

// Triage implements Triager.
func (t ServiceTriager) Triage(ctx context.Context, r TriageRequest) (string, error) {
	note, err := t.do(ctx, r)
	text := note
	if err != nil {
		text = "not done: " + err.Error()
	}
	if aerr := t.ack(r, text); aerr != nil {
		if err == nil {
			err = fmt.Errorf("%s; acknowledgement: %w", note, aerr)
		}
	}
	return note, err
}

func (t ServiceTriager) do(ctx context.Context, r TriageRequest) (string, error) {
	switch r.Command.Name {
	case "retest":
		if len(r.Command.Args) == 0 {
			id, err := t.Service.Rerun(ctx, r.EvaluationID)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("evaluation %d queued again", id), nil
		}
		find := t.Find
		if find == nil {
			find = pipelines.Find
		}
		p, err := find(r.Command.Args[0])
		if err != nil {
			return "", err
		}
		in, err := runner.Load(t.Store, r.EvaluationID)
		if err != nil {
			return "", err
		}
		o := in.Options
		o.Branch = "" // the new pipeline's own branch
		id, _, err := t.Service.Submit(ctx, p, o)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("evaluation %d: the series with pipeline %s", id, p.Name), nil
	case "invalid":
		if t.Reporting == nil {
			return "report withdrawn (the list posts no checks)", nil
		}
		n, err := t.Reporting.Withdraw(ctx, r.EvaluationID, "withdrawn by "+r.Reply.From.Email)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("report withdrawn (%d Patchwork check(s) set to success \"withdrawn\")", n), nil
	case "bisect", "test":
		return "", fail.Inputf("#patcheval %s is not supported yet", r.Command.Name)
	}
	return "", fail.Inputf("unknown command %q", r.Command.Name)
}

// ack queues the acknowledgement: a reply to the command's message from
// the report's sender, to the commander, Cc the list.
func (t ServiceTriager) ack(r TriageRequest, text string) error {
	if t.Reporting == nil {
		return nil
	}
	lr := t.Reporting.lists[r.List.Name]
	if lr == nil || lr.mail == nil || lr.l.Mail == nil {
		return nil
	}
	post, err := t.Store.PostByRemoteID(reporters.MailName, r.Report)
	if err != nil || post == nil {
		return err
	}
	var rep report.Draft
	if err := json.Unmarshal([]byte(post.Payload), &rep); err != nil || rep.From.Email == "" {
		return nil // no sender known to answer as
	}
	d := AckDraft(rep.From, r.Reply, r.Command, text, time.Now())
	if addr := r.List.Policy(nil).List; addr != "" {
		d.Cc = []mbox.Address{{Email: addr}}
	}
	_, err = lr.mail.Queue(t.Store, r.EvaluationID, "ack "+r.Reply.MessageID+" "+r.Command.String(), *d, lr.l.Mail.Mode)
	return err
}

// AckDraft is the short acknowledgement of command c in reply, from
// from: To the commander, threaded under the reply.
func AckDraft(from mbox.Address, reply *mbox.Message, c Command, text string, now time.Time) *report.Draft {
	sum := sha256.Sum256([]byte(reply.MessageID + "\x00" + c.String()))
	dom := "patcheval.local"
	if _, d, ok := strings.Cut(from.Email, "@"); ok && d != "" {
		dom = d
	}
	refs := append(append([]string{}, reply.References...), reply.MessageID)
	return &report.Draft{From: from, To: []mbox.Address{reply.From}, Subject: report.ReplySubject(reply.Subject),
		Date: now.Truncate(time.Second), MessageID: "ack-" + hex.EncodeToString(sum[:8]) + "@" + dom,
		InReplyTo: reply.MessageID, References: refs,
		Body: fmt.Sprintf("%s\n\npatcheval: %s\n", "> "+c.String(), text)}
}

// Withdraw sets the Patchwork checks of evaluation evalID's patches to
// success with description why; it returns how many were queued.
func (r *Reporting) Withdraw(ctx context.Context, evalID int64, why string) (int, error) {
	fs, err := r.Store.FollowSeriesOfEvaluation(evalID)
	if err != nil || fs == nil {
		return 0, err
	}
	lr := r.lists[fs.List]
	if lr == nil || lr.pw == nil {
		return 0, nil
	}
	e, err := r.Store.Evaluation(evalID)
	if err != nil {
		return 0, err
	}
	_, msgids, err := r.seriesOf(lr, fs, evalID)
	if err != nil {
		return 0, err
	}
	ps, err := lr.pw.QueueChecks(r.Store, evalID, e.Pipeline, msgids, reporters.CheckSuccess, oneLine(why, maxDescription),
		fmt.Sprintf("%s/evaluations/%d", r.Dashboard, evalID))
	return len(ps), err
}
