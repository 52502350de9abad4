package follow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/bots/mail"
	"github.com/patcheval/patcheval/pipelines/bots/reporters"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// Evaluation events Notify posts for (the service's notify jobs).
const (
	EventQueued = "queued"
	EventDone   = "done"
	EventFailed = "failed"
)

// Reporting posts the results of the followed lists' evaluations through
// each list's reporters ([list.patchwork], [list.github], [list.mail]):
// Notify queues the posts in the store's outbox when an evaluation is
// queued (Patchwork "pending" on every patch), done (the verdict: checks,
// the pushed branch's status, its PR comment and check run, the reply
// mail) or failed; Outbox delivers them (reporters.Outbox: retries with
// backoff, nothing posted twice across restarts). Evaluations that no
// followed list submitted are left alone.
type Reporting struct {
	Store *store.Store
	// Dashboard is the dashboard's base URL, for the posts' links.
	Dashboard string
	// OutDir is where evaluation id's reports are (report.json,
	// report.md, reply.json).
	OutDir func(id int64) string
	Outbox *reporters.Outbox
	lists  map[string]*listReporters
}

type listReporters struct {
	l    List
	pw   *reporters.Patchwork
	gh   *reporters.GitHub
	mail *reporters.Mail
}

// NewReporting makes the reporters of lists (reading their token files;
// smtp is the [smtp] table, needed by [list.mail]). It returns nil when
// no list has a reporter. Each reporter is named after its list
// (patchwork/<list>, ...), so lists may post to different instances.
func NewReporting(st *store.Store, lists []List, smtp *mail.SMTPSettings, dashboard string, outDir func(int64) string, log *slog.Logger) (*Reporting, error) {
	r := &Reporting{Store: st, Dashboard: strings.TrimRight(dashboard, "/"), OutDir: outDir, lists: map[string]*listReporters{},
		Outbox: &reporters.Outbox{Store: st, Log: log}}
	var errs []string
	for _, l := range lists {
		lr := &listReporters{l: l}
		if c := l.Patchwork; c != nil {
			pw, err := reporters.NewPatchwork(c.URL, c.Project, c.TokenFile)
			if err != nil {
				errs = append(errs, fmt.Sprintf("[[list]] %s: [list.patchwork]: %v", l.Name, err))
			} else {
				pw.Instance = l.Name
				lr.pw = pw
				r.Outbox.Reporters = append(r.Outbox.Reporters, pw)
			}
		}
		if c := l.GitHub; c != nil {
			var gh *reporters.GitHub
			var err error
			if c.AppID != "" {
				gh, err = reporters.NewGitHubApp(c.Repo, c.Mirror, reporters.GitHubApp{AppID: string(c.AppID),
					InstallationID: c.InstallationID, PrivateKeyFile: c.PrivateKeyFile}, c.APIURL, nil)
			} else {
				gh, err = reporters.NewGitHub(c.Repo, c.Mirror, c.TokenFile, c.APIURL, c.App)
			}
			if err != nil {
				errs = append(errs, fmt.Sprintf("[[list]] %s: [list.github]: %v", l.Name, err))
			} else {
				gh.Instance = l.Name
				lr.gh = gh
				r.Outbox.Reporters = append(r.Outbox.Reporters, gh)
			}
		}
		if c := l.Mail; c != nil {
			if smtp == nil {
				errs = append(errs, fmt.Sprintf("[[list]] %s: [list.mail] needs an [smtp] table (host, port, username, security, password_file)", l.Name))
			} else {
				m := &reporters.Mail{SMTP: *smtp, Archive: c.Archive, Instance: l.Name}
				lr.mail = m
				r.Outbox.Reporters = append(r.Outbox.Reporters, m)
			}
		}
		if lr.pw != nil || lr.gh != nil || lr.mail != nil {
			r.lists[l.Name] = lr
		}
	}
	if len(errs) > 0 {
		return nil, fail.Inputf("%s", strings.Join(errs, "\n"))
	}
	if len(r.lists) == 0 {
		return nil, nil
	}
	return r, nil
}

// Notify queues what evaluation evalID's list posts for event (EventQueued,
// EventDone, EventFailed). Queueing is idempotent (a post identical to
// the last one for its target is skipped), so a retried or repeated
// Notify posts nothing twice.
func (r *Reporting) Notify(ctx context.Context, evalID int64, event string) error {
	fs, err := r.Store.FollowSeriesOfEvaluation(evalID)
	if err != nil || fs == nil {
		return err
	}
	lr := r.lists[fs.List]
	if lr == nil {
		return nil
	}
	e, err := r.Store.Evaluation(evalID)
	if err != nil {
		return err
	}
	s, msgids, err := r.seriesOf(lr, fs, evalID)
	if err != nil {
		return err
	}
	link := fmt.Sprintf("%s/evaluations/%d", r.Dashboard, evalID)
	switch event {
	case EventQueued:
		if lr.pw != nil {
			_, err := lr.pw.QueueChecks(r.Store, evalID, e.Pipeline, msgids, reporters.CheckPending, "queued", link)
			return err
		}
		return nil
	case EventDone:
		return r.done(lr, e, s, msgids, link)
	case EventFailed:
		return r.failed(lr, e, s, msgids, link)
	}
	return fail.Inputf("notify: event %q: want queued, done or failed", event)
}

// seriesOf is the followed series fs of evaluation evalID and its
// patches' Message-IDs.
func (r *Reporting) seriesOf(lr *listReporters, fs *store.FollowSeries, evalID int64) (*series.Series, []string, error) {
	t, err := threadOf(r.Store, lr.l, fs.Root)
	if err != nil {
		return nil, nil, err
	}
	s, err := series.Resolve(t, series.Options{Version: fs.Version})
	if err != nil {
		return nil, nil, fail.Inputf("evaluation %d: %s v%d: %v", evalID, fs.MsgID, fs.Version, err)
	}
	var msgids []string
	for _, p := range s.Patches {
		if p != nil {
			msgids = append(msgids, p.MessageID)
		}
	}
	return s, msgids, nil
}

// maxDescription bounds a one-line description (Patchwork's field holds
// 255 characters).
const maxDescription = 255

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max-3] + "..."
	}
	return s
}

// verdict is the headline of a finished evaluation in one line and the
// states it maps to: a regression is a warning (the series works; it
// costs), anything else success.
func verdict(rep *report.Report) (line, check, status string) {
	regs := rep.Regressions()
	if len(regs) > 0 {
		line = regs[0]
		if len(regs) > 1 {
			line += fmt.Sprintf(" (and %d more regressions)", len(regs)-1)
		}
		return oneLine("regression: "+line, maxDescription), reporters.CheckWarning, reporters.StatusFailure
	}
	var lines []string
	for _, g := range rep.Headline() {
		lines = append(lines, g.Lines...)
	}
	switch {
	case len(lines) == 0:
		line = "no comparisons"
	case len(lines) == 1:
		line = "no regression: " + lines[0]
	default:
		line = fmt.Sprintf("no regression in %d comparisons; %s", len(lines), lines[0])
	}
	return oneLine(line, maxDescription), reporters.CheckSuccess, reporters.StatusSuccess
}

func (r *Reporting) done(lr *listReporters, e *store.Evaluation, s *series.Series, msgids []string, link string) error {
	dir := r.OutDir(e.ID)
	f, err := os.Open(filepath.Join(dir, "report.json"))
	if err != nil {
		return fail.Infraf("evaluation %d: %v", e.ID, err)
	}
	rep, err := report.ReadJSON(f)
	f.Close()
	if err != nil {
		return fail.Infraf("evaluation %d: %s: %v", e.ID, filepath.Join(dir, "report.json"), err)
	}
	line, check, status := verdict(rep)
	var errs []error
	if lr.pw != nil {
		_, err := lr.pw.QueueChecks(r.Store, e.ID, e.Pipeline, msgids, check, line, link)
		errs = append(errs, err)
	}
	if lr.gh != nil {
		md, err := os.ReadFile(filepath.Join(dir, "report.md"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail.Infraf("evaluation %d: %v", e.ID, err)
		}
		errs = append(errs, r.github(lr, e, status, line, link, string(md)))
	}
	if lr.mail != nil {
		b, err := os.ReadFile(filepath.Join(dir, "reply.json"))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// No draft (nothing to answer): no mail.
		case err != nil:
			errs = append(errs, fail.Infraf("evaluation %d: %v", e.ID, err))
		default:
			var d report.Draft
			if err := json.Unmarshal(b, &d); err != nil {
				return fail.Infraf("evaluation %d: reply.json: %v", e.ID, err)
			}
			_, err := lr.mail.Queue(r.Store, e.ID, r.mailTarget(e, s), d, lr.l.Mail.Mode)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// github queues the push, status (and comment, check run) of e's applied
// branch; an evaluation that never applied its series has none.
func (r *Reporting) github(lr *listReporters, e *store.Evaluation, status, line, link, md string) error {
	a, err := r.Store.AppliedOf(e.ID)
	if err != nil || a == nil || a.Head == "" || a.Branch == "" {
		return nil
	}
	_, err = lr.gh.Queue(r.Store, e.ID, reporters.GitHubResult{LocalRepo: a.Tree, Commit: a.Head, Branch: a.Branch,
		Pipeline: e.Pipeline, State: status, Description: line, TargetURL: link, Markdown: md})
	return err
}

func (r *Reporting) failed(lr *listReporters, e *store.Evaluation, s *series.Series, msgids []string, link string) error {
	af, err := r.Store.ApplyFailureOf(e.ID)
	if err != nil {
		return err
	}
	if af != nil {
		return r.applyFailed(lr, e, s, af, link)
	}
	// A kernel that does not build fails the series; anything else
	// (boots that all failed, the machine) is a warning for a person to
	// look at.
	line, check := "patcheval could not finish the evaluation (see the dashboard)", reporters.CheckWarning
	if bs, err := r.Store.BuildsOf(e.ID); err == nil {
		for _, b := range bs {
			if b.Status == "failed" {
				line = oneLine(fmt.Sprintf("build of %s (%s) failed: %s", b.Variant, b.Arch, b.ErrorText), maxDescription)
				check = reporters.CheckFail
				break
			}
		}
	}
	var errs []error
	if lr.pw != nil {
		_, err := lr.pw.QueueChecks(r.Store, e.ID, e.Pipeline, msgids, check, line, link)
		errs = append(errs, err)
	}
	if lr.gh != nil {
		errs = append(errs, r.github(lr, e, reporters.StatusError, line, link, ""))
	}
	return errors.Join(errs...)
}

// applyFailed posts a series that did not apply: the patch that did not
// apply fails its check with what failed where, against which base; the
// others are warned that the series was not evaluated because of it; and
// the reply the apply stage wrote (the whole hunk, the base, what to do)
// goes to the list like a report. Nothing was applied, so GitHub gets
// nothing.
func (r *Reporting) applyFailed(lr *listReporters, e *store.Evaluation, s *series.Series, af *store.ApplyFailure, link string) error {
	line := oneLine(af.Summary(), maxDescription)
	var errs []error
	if lr.pw != nil {
		var failing, others []string
		for i, p := range s.Patches {
			switch {
			case p == nil:
			case i == af.Patch-1:
				failing = append(failing, p.MessageID)
			default:
				others = append(others, p.MessageID)
			}
		}
		if len(failing) == 0 {
			// The patch is not in the series as resolved now: say it
			// on every patch.
			failing, others = others, nil
		}
		_, err := lr.pw.QueueChecks(r.Store, e.ID, e.Pipeline, failing, reporters.CheckFail, line, link)
		errs = append(errs, err)
		if len(others) > 0 {
			_, err := lr.pw.QueueChecks(r.Store, e.ID, e.Pipeline, others, reporters.CheckWarning,
				oneLine("not evaluated: "+af.Summary(), maxDescription), link)
			errs = append(errs, err)
		}
	}
	if lr.mail != nil && af.Reply != "" {
		var d report.Draft
		if err := json.Unmarshal([]byte(af.Reply), &d); err != nil {
			return fail.Infraf("evaluation %d: the stored apply failure's reply: %v", e.ID, err)
		}
		_, err := lr.mail.Queue(r.Store, e.ID, r.mailTarget(e, s), d, lr.l.Mail.Mode)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// mailTarget is what a list's reply about evaluation e of s is posted
// for: the series and the pipeline (a later reply replaces an earlier).
func (r *Reporting) mailTarget(e *store.Evaluation, s *series.Series) string {
	if first := s.First(); first != nil {
		return first.MessageID + " " + e.Pipeline
	}
	return e.Pipeline
}

// Approve releases a held reply mail and has the outbox send it now (the
// dashboard's Approve button).
func (r *Reporting) Approve(_ context.Context, postID int64) error {
	if err := reporters.ApproveMail(r.Store, postID); err != nil {
		return err
	}
	r.Outbox.Kick()
	return nil
}
