package follow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/bots/reporters"
	"github.com/patcheval/patcheval/pipelines/experiments/perpatch"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
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
//	retest --per-patch [pipeline]  the same, and measures the series after
//	                   each patch too (runner.Options.PerPatch)
//	invalid            withdraws the report: the list's Patchwork checks
//	                   become success "withdrawn"
//	bisect             queues the bisection inside the series of the
//	                   evaluation's regression (Bisect: the service's
//	                   series_bisect jobs); its result follows in the
//	                   thread (BisectResult, when it ends)
//	test <lore URL>    fetches that thread and evaluates its series as the
//	                   list evaluates a new one (its pipeline, tree, base);
//	                   a bare Message-ID is looked up in the list's inbox.
//	test <git URL> <branch>  fetches the branch into the tree and evaluates
//	                   its commits on top of the list's base (their merge
//	                   base) as a series (branch.go)
//
// and acknowledges each in the thread (a reply to the command, through
// the list's mail reporter, when the list has one).
type ServiceTriager struct {
	Service Rerunner
	Store   *store.Store
	// Reporting posts the withdrawal and the acknowledgement (nil: the
	// list has no reporters; the command is only recorded).
	Reporting *Reporting
	// Find resolves a pipeline name: the list's own (default
	// pipelines.Find) and one a #patcheval retest names (default
	// pipelines.Builtin: a mail never names a file).
	Find func(string) (*pipelines.Pipeline, error)
	// Bisect queues the bisection of evaluation id's whole-series
	// regression inside the series for requester and returns at once
	// with a note (service.Service.BisectSeries); when it ends, the
	// service gives BisectResult the requesters and the outcome. nil:
	// this service runs no bisections.
	Bisect func(ctx context.Context, id int64, requester string) (string, error)
	// Fetch is the thread fetcher of #patcheval test (default mbox.Fetch
	// without the thread cache).
	Fetch func(ctx context.Context, src mbox.Source) (*mbox.Thread, error)
	// Log receives what cannot be answered in the thread (nil: dropped).
	Log *slog.Logger
	// GitLookup resolves the host of a #patcheval test <git URL> (nil:
	// the system's resolver); tests give their own.
	GitLookup func(ctx context.Context, host string) ([]netip.Addr, error)
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
		args, perPatch := r.Command.Args, false
		if len(args) > 0 && args[0] == "--per-patch" {
			args, perPatch = args[1:], true
		}
		if len(args) > 1 {
			return "", fail.Inputf("#patcheval retest %s: want [--per-patch] [pipeline]", strings.Join(r.Command.Args, " "))
		}
		if len(args) == 0 && !perPatch {
			id, err := t.Service.Rerun(ctx, r.EvaluationID)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("evaluation %d queued again", id), nil
		}
		in, err := runner.Load(t.Store, r.EvaluationID)
		if err != nil {
			return "", err
		}
		p, o := in.Pipeline, in.Options
		if len(args) == 1 {
			find := t.Find
			if find == nil {
				// A name from a mail: shipped pipelines only, never a
				// file of the serving machine.
				find = pipelines.Builtin
			}
			if p, err = find(args[0]); err != nil {
				return "", err
			}
			o.Branch = "" // the new pipeline's own branch
		}
		if perPatch {
			if _, err := perpatch.AtCommit(p, perpatch.SeriesPairs(p)); err != nil {
				return "", fail.Inputf("#patcheval retest --per-patch: %v", err)
			}
			o.PerPatch = true
		}
		id, _, err := t.Service.Submit(ctx, p, o)
		if err != nil {
			return "", err
		}
		what := "the series with pipeline " + p.Name
		if perPatch {
			what += ", measured after each patch too"
		}
		return fmt.Sprintf("evaluation %d: %s", id, what), nil
	case "invalid":
		if t.Reporting == nil {
			return "report withdrawn (the list posts no checks)", nil
		}
		n, err := t.Reporting.Withdraw(ctx, r.EvaluationID, "withdrawn by "+r.Reply.From.Email)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("report withdrawn (%d Patchwork check(s) set to success \"withdrawn\")", n), nil
	case "bisect":
		if t.Bisect == nil {
			return "", fail.Inputf("#patcheval bisect: this service runs no bisections")
		}
		return t.Bisect(ctx, r.EvaluationID, bisectRequester(r))
	case "test":
		return t.test(ctx, r)
	}
	return "", fail.Inputf("unknown command %q", r.Command.Name)
}

// requester names a #patcheval bisect command for the service, which
// keeps it with the bisection and gives it back to BisectResult.
type requester struct {
	List    string  `json:"list"`
	Reply   string  `json:"reply"`
	Report  string  `json:"report"`
	Command Command `json:"command"`
}

func bisectRequester(r TriageRequest) string {
	b, _ := json.Marshal(requester{List: r.List.Name, Reply: r.Reply.MessageID, Report: r.Report, Command: r.Command})
	return string(b)
}

// BisectResult answers each #patcheval bisect command among requesters
// (what Bisect was given) with text, the bisection's outcome, in its
// thread: a reply to the command from the report's sender, queued
// through the list's mail reporter (once per command: queuing it again
// is a no-op). Requesters that are not such commands are skipped.
func (t ServiceTriager) BisectResult(ctx context.Context, evalID int64, requesters []string, text string) error {
	for _, rs := range requesters {
		var q requester
		if err := json.Unmarshal([]byte(rs), &q); err != nil || q.List == "" || q.Reply == "" {
			continue
		}
		if t.Reporting == nil || t.Reporting.lists[q.List] == nil {
			continue
		}
		reply, err := t.storedMessage(q.List, q.Reply)
		if err != nil {
			return err
		}
		if reply == nil {
			if t.Log != nil {
				t.Log.Warn("follow: the bisect command's reply is no longer stored: result not posted", "list", q.List, "msgid", q.Reply)
			}
			continue
		}
		r := TriageRequest{List: t.Reporting.lists[q.List].l, Command: q.Command, Reply: reply, Report: q.Report, EvaluationID: evalID}
		if err := t.post(r, "bisect", "bisection: "+text); err != nil {
			return err
		}
	}
	return nil
}

// storedMessage is message msgid of list as the follower filed it (nil
// when it is not stored).
func (t ServiceTriager) storedMessage(list, msgid string) (*mbox.Message, error) {
	root, err := t.Store.FollowRootOf(list, msgid)
	if err != nil || root == "" {
		return nil, err
	}
	raws, err := t.Store.FollowMessages(list, root)
	if err != nil {
		return nil, err
	}
	for _, raw := range raws {
		if m, err := mbox.ParseMessage(raw, list); err == nil && m.MessageID == msgid {
			return m, nil
		}
	}
	return nil, nil
}

// test evaluates the series of a lore thread as the list evaluates a new
// series.
func (t ServiceTriager) test(ctx context.Context, r TriageRequest) (string, error) {
	args := r.Command.Args
	if len(args) == 0 {
		return "", fail.Inputf("#patcheval test: give the lore URL of a series, or a git URL and a branch")
	}
	if len(args) == 2 {
		return t.testBranch(ctx, r, args[0], args[1])
	}
	arg := args[0]
	var src mbox.Source
	switch {
	case len(args) > 2:
		return "", fail.Inputf("#patcheval test %s: want <lore URL | Message-ID> or <git URL> <branch>", strings.Join(args, " "))
	case strings.HasPrefix(arg, "git://") || strings.HasPrefix(arg, "ssh://") || strings.HasSuffix(arg, ".git"):
		return "", fail.Inputf("#patcheval test %s: a git URL needs a branch: #patcheval test <git URL> <branch>", arg)
	case strings.HasPrefix(arg, "http://") || strings.HasPrefix(arg, "https://"):
		var err error
		if src, err = mbox.ParseSource(arg); err != nil {
			return "", err
		}
		// Only the list's own archive host: a mail does not make
		// patcheval fetch from anywhere else (an internal address).
		u, uerr := url.Parse(arg)
		home := ""
		if lu, err := url.Parse(r.List.URL); err == nil {
			home = lu.Host
		}
		if uerr != nil || home == "" || !strings.EqualFold(u.Host, home) {
			return "", fail.Inputf("#patcheval test %s: a lore URL must be on the list's archive host (%s)", arg, home)
		}
	case strings.Contains(arg, "@") && !strings.ContainsAny(arg, "/ "):
		// A bare Message-ID: the list's own inbox (never a local file).
		base, inbox, err := mbox.SplitLore(r.List.URL)
		if err != nil {
			return "", err
		}
		src = mbox.Source{Kind: mbox.SourceLore, MsgID: strings.Trim(arg, "<>"), Base: base, Inbox: inbox}
	default:
		return "", fail.Inputf("#patcheval test %s: want the lore URL (http or https) or the Message-ID of a series, or a git URL and a branch", arg)
	}
	fetch := t.Fetch
	if fetch == nil {
		fetch = func(ctx context.Context, src mbox.Source) (*mbox.Thread, error) {
			return mbox.Fetch(ctx, src, mbox.FetchOptions{NoCache: true})
		}
	}
	th, err := fetch(ctx, src)
	if err != nil {
		return "", err
	}
	s, err := series.Resolve(th, series.Options{})
	if err != nil {
		return "", err
	}
	in, err := runner.Load(t.Store, r.EvaluationID)
	if err != nil {
		return "", err
	}
	sub := ServiceSubmitter{Service: t.Service, From: in.Options.From, TestedBy: in.Options.TestedBy, Find: t.Find}
	id, err := sub.Submit(ctx, r.List, s, th)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("evaluation %d: %q v%d (%d patch(es)) with pipeline %s", id, s.Title, s.Version, len(s.Patches), r.List.Pipeline), nil
}

// testBranch evaluates the commits branch of the git remote rawURL has
// on top of the list's base (branch.go), as the list evaluates a new
// series, on their merge base.
func (t ServiceTriager) testBranch(ctx context.Context, r TriageRequest, rawURL, branch string) (string, error) {
	p := r.List.GitPolicy()
	p.Lookup = t.GitLookup
	if err := checkBranchArgs(p, rawURL, branch); err != nil {
		return "", err // before anything is loaded or fetched
	}
	in, err := runner.Load(t.Store, r.EvaluationID)
	if err != nil {
		return "", err
	}
	base := "HEAD"
	if r.List.Base == "series" {
		base = in.BaseHash
	}
	var cmdID string
	if r.Reply != nil {
		cmdID = r.Reply.MessageID
	}
	s, th, err := branchSeries(ctx, p, in.Options.Tree, base, rawURL, branch, in.Options.From, cmdID)
	if err != nil {
		return "", err
	}
	l := r.List
	l.Base = "series" // the merge base, named by the series' base-commit
	sub := ServiceSubmitter{Service: t.Service, From: in.Options.From, TestedBy: in.Options.TestedBy, Find: t.Find}
	id, err := sub.Submit(ctx, l, s, th)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("evaluation %d: branch %s of %s, %d commit(s) on %.12s, with pipeline %s", id, branch, rawURL, len(s.Patches), s.Base.Commit, l.Pipeline), nil
}

// ack queues the acknowledgement: a reply to the command's message from
// the report's sender, to the commander, Cc the list.
func (t ServiceTriager) ack(r TriageRequest, text string) error { return t.post(r, "", text) }

// post queues a reply to the command's message (what "" for the
// acknowledgement; another name for a later result of the same command).
func (t ServiceTriager) post(r TriageRequest, what, text string) error {
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
	key := "ack " + r.Reply.MessageID + " " + r.Command.String()
	if what != "" {
		sum := sha256.Sum256([]byte(d.MessageID + "\x00" + what))
		d.MessageID = what + "-" + hex.EncodeToString(sum[:8]) + d.MessageID[strings.Index(d.MessageID, "@"):]
		key = what + " " + r.Reply.MessageID + " " + r.Command.String()
	}
	if addr := r.List.Policy(nil).List; addr != "" {
		d.Cc = []mbox.Address{{Email: addr}}
	}
	_, err = lr.mail.Queue(t.Store, r.EvaluationID, key, *d, lr.l.Mail.Mode)
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
