// Package b4check answers b4 review's CI check protocol (b4 0.15+,
// docs/maintainer/review.rst "CI check integration") from a patcheval
// serve: b4 runs an external command with one message on stdin (the
// cover letter for b4.review-series-check-cmd, one patch for
// b4.review-perpatch-check-cmd) and reads a JSON array of
// {"tool", "status": "pass"|"warn"|"fail", "summary", "url", "details"}
// from its stdout; [] means nothing to report.
//
// Check finds the series' evaluation on the service (by the series'
// Message-ID), queues one with the configured pipeline when there is
// none (unless Config.ReportOnly), and says what is known now: it never
// waits for an evaluation, and every request shares one deadline
// (Config.Timeout), because b4 runs the command while the maintainer
// looks at the screen. Every failure (no server, a wrong token, a
// message that is neither a patch nor a cover letter, a tracking file
// that does not parse) is itself a result with a summary that names it,
// so the answer is always valid JSON.
//
// It is a client of the service's documented HTTP API only: the fields
// it reads are declared here, not imported from the service.
package b4check

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series"
)

// Result is one entry of the protocol's JSON array.
type Result struct {
	Tool    string `json:"tool"`
	Status  string `json:"status"`
	Summary string `json:"summary,omitempty"`
	URL     string `json:"url,omitempty"`
	Details string `json:"details,omitempty"`
}

// The protocol's three statuses.
const (
	Pass = "pass"
	Warn = "warn"
	Fail = "fail"
)

// DefaultTimeout bounds one answer: b4 shows nothing until the command
// exits.
const DefaultTimeout = 8 * time.Second

// Mode says which of b4's two commands is running.
type Mode string

const (
	// Auto decides from the message: a cover letter (index 0, no diff)
	// is the series, a patch is one patch.
	Auto Mode = ""
	// Series reports the whole series' evaluation.
	Series Mode = "series"
	// Patch reports one patch: the per-patch results when the
	// evaluation has them, the whole evaluation for a lone patch, else
	// nothing ([]).
	Patch Mode = "patch"
)

// Config is where the service is and what to do when it has no
// evaluation of the series.
type Config struct {
	// Server is serve's base URL ("" is refused with a warn result).
	Server string
	// Token is the service's token (from its --token-file), sent as
	// Authorization: Bearer.
	Token string
	// Pipeline is queued when the series has no evaluation, and
	// preferred among several; Tree and Arch go with it (Tree: a path
	// on the server, one of its --allow-tree).
	Pipeline, Tree, Arch string
	// ReportOnly never queues: a series without an evaluation is [].
	ReportOnly bool
	// Tool names the column in b4's matrix (default "patcheval").
	Tool string
	// Mode is Auto, Series or Patch.
	Mode Mode
	// Timeout bounds the whole answer (default DefaultTimeout).
	Timeout time.Duration
	// Client is the HTTP client (default: one with no timeout of its own;
	// the deadline comes from Timeout).
	Client *http.Client
}

// Tracking is what Check reads of b4's tracking file (B4_TRACKING_FILE).
type Tracking struct {
	Series struct {
		BaseCommit string `json:"base-commit"`
		Link       string `json:"link"`
		ChangeID   string `json:"change-id"`
		Revision   int    `json:"revision"`
	} `json:"series"`
}

// ReadTracking parses b4's tracking file.
func ReadTracking(path string) (*Tracking, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tracking file %s: %v", path, err)
	}
	var t Tracking
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("tracking file %s does not parse: %v", path, err)
	}
	return &t, nil
}

// Check answers for one message (raw RFC 2822 bytes). trackingPath is
// B4_TRACKING_FILE ("" when b4 set none). It always returns a valid
// answer: nil means "nothing to report".
func Check(ctx context.Context, cfg Config, raw []byte, trackingPath string) []Result {
	if cfg.Tool == "" {
		cfg.Tool = "patcheval"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	c := &checker{cfg: cfg}
	res, err := c.check(ctx, raw, trackingPath)
	if err != nil {
		return []Result{c.problem(err)}
	}
	return res
}

// problem turns an error into a result: a warn (patcheval could not
// answer) unless the error says the series itself is at fault.
func (c *checker) problem(err error) Result {
	var se *seriesError
	if errors.As(err, &se) {
		return Result{Tool: c.cfg.Tool, Status: Fail, Summary: se.msg, URL: se.url, Details: se.details}
	}
	return Result{Tool: c.cfg.Tool, Status: Warn, Summary: oneLine(err.Error())}
}

// seriesError is a finding against the series (it does not apply, a
// kernel does not build): reported as fail.
type seriesError struct{ msg, url, details string }

func (e *seriesError) Error() string { return e.msg }

type checker struct {
	cfg Config
}

func (c *checker) check(ctx context.Context, raw []byte, trackingPath string) ([]Result, error) {
	var tr *Tracking
	if trackingPath != "" {
		t, err := ReadTracking(trackingPath)
		if err != nil {
			return nil, err
		}
		tr = t
	}
	msg, err := mbox.ParseMessage(raw, "stdin")
	if err != nil {
		return nil, fmt.Errorf("the message on stdin is not a mail: %v", err)
	}
	kind, sub := classify(msg)
	if kind == "" {
		return nil, fmt.Errorf("the message on stdin (%q) is neither a patch nor a cover letter", clip(msg.Subject, 80))
	}
	mode := c.cfg.Mode
	if mode == Auto {
		mode = Series
		if kind == "patch" {
			mode = Patch
		}
	}
	lone := kind == "patch" && sub.Total <= 1
	if c.cfg.Server == "" {
		return nil, errors.New("no patcheval server configured: give --server URL (or PATCHEVAL_SERVER)")
	}
	ids := seriesIDs(msg, mode, lone, tr)
	ev, err := c.find(ctx, ids)
	if err != nil {
		return nil, err
	}
	if ev == nil {
		if mode == Patch && !lone {
			return nil, nil // per-patch results come with the series' evaluation
		}
		if c.cfg.ReportOnly {
			return nil, nil
		}
		return c.submit(ctx, ids[0], tr)
	}
	full, err := c.evaluation(ctx, ev.ID)
	if err != nil {
		return nil, err
	}
	if mode == Patch && !lone {
		return c.patchResult(full, sub), nil
	}
	return c.seriesResult(ctx, full)
}

// classify says whether msg is a "cover" letter, a "patch" or neither
// ("").
func classify(msg *mbox.Message) (string, series.Subject) {
	sub := series.ParseSubject(msg.Subject)
	hasDiff := strings.Contains(msg.Body, "\ndiff --git ") || strings.HasPrefix(msg.Body, "diff --git ") ||
		strings.Contains(msg.Body, "\n--- a/") || len(msg.Attachments) > 0 && strings.Contains(string(msg.Raw), "diff --git ")
	switch {
	case sub.IsReply:
		return "", sub
	case hasDiff:
		return "patch", sub
	case sub.IsPatch && sub.HasCounter && sub.Index == 0:
		return "cover", sub
	}
	return "", sub
}

// seriesIDs are the Message-IDs the series' evaluation may be stored
// under, most likely first: the cover letter (or lone patch) itself in
// series mode, else the thread's root and parent; b4's tracking link.
func seriesIDs(msg *mbox.Message, mode Mode, lone bool, tr *Tracking) []string {
	var ids []string
	add := func(id string) {
		id = strings.Trim(strings.TrimSpace(id), "<>")
		if id == "" || strings.ContainsAny(id, " \t/") && !strings.Contains(id, "@") {
			return
		}
		for _, x := range ids {
			if x == id {
				return
			}
		}
		ids = append(ids, id)
	}
	if mode == Series || lone {
		add(msg.PublicID())
	}
	if len(msg.References) > 0 {
		add(msg.References[0])
	}
	add(msg.InReplyTo)
	if tr != nil && tr.Series.Link != "" {
		add(linkMsgID(tr.Series.Link))
	}
	if mode == Patch {
		add(msg.PublicID())
	}
	return ids
}

// linkMsgID takes the Message-ID out of a lore link
// (https://lore.kernel.org/r/<msgid>, .../all/<msgid>/).
func linkMsgID(link string) string {
	u, err := url.Parse(link)
	if err != nil || u.Host == "" {
		return strings.Trim(link, "<>")
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if strings.Contains(parts[i], "@") {
			id, _ := url.PathUnescape(parts[i])
			return id
		}
	}
	return ""
}

// listEntry is what Check reads of GET /api/v1/evaluations.
type listEntry struct {
	ID           int64  `json:"id"`
	Pipeline     string `json:"pipeline"`
	SeriesMsgID  string `json:"series_msgid"`
	Status       string `json:"status"`
	Builds       int    `json:"builds"`
	Runs         int    `json:"runs"`
	FinishedRuns int    `json:"finished_runs"`
}

// find returns the newest evaluation of the series (of the configured
// pipeline when there are several), or nil.
func (c *checker) find(ctx context.Context, ids []string) (*listEntry, error) {
	for _, id := range ids {
		var list struct {
			Evaluations []listEntry `json:"evaluations"`
		}
		if err := c.get(ctx, "/api/v1/evaluations?limit=20&series="+url.QueryEscape(id), &list); err != nil {
			return nil, err
		}
		var any *listEntry
		for i := range list.Evaluations {
			e := &list.Evaluations[i]
			if e.SeriesMsgID != id {
				continue // the filter also matches titles
			}
			if c.cfg.Pipeline == "" || e.Pipeline == c.cfg.Pipeline {
				return e, nil
			}
			if any == nil {
				any = e
			}
		}
		if any != nil {
			return any, nil
		}
	}
	return nil, nil
}

// evaluationView is what Check reads of GET /api/v1/evaluations/{id}.
type evaluationView struct {
	Evaluation   listEntry         `json:"evaluation"`
	Builds       []build           `json:"builds"`
	Confounds    []report.Confound `json:"confounds"`
	Progress     []string          `json:"progress"`
	PerPatch     *report.PerPatch  `json:"per_patch"`
	ApplyFailure *applyFailure     `json:"apply_failure"`
	URL          string            `json:"url"`
}

type build struct {
	Variant   string `json:"variant"`
	Arch      string `json:"arch"`
	Status    string `json:"status"`
	ErrorKind string `json:"error_kind"`
	ErrorText string `json:"error_text"`
}

type applyFailure struct {
	Label     string `json:"label"`
	File      string `json:"file"`
	Hunk      int    `json:"hunk"`
	Reason    string `json:"reason"`
	ErrorKind string `json:"error_kind"`
	Base      string `json:"base"`
}

func (c *checker) evaluation(ctx context.Context, id int64) (*evaluationView, error) {
	var v evaluationView
	if err := c.get(ctx, fmt.Sprintf("/api/v1/evaluations/%d", id), &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// seriesResult is the whole evaluation in one result.
func (c *checker) seriesResult(ctx context.Context, v *evaluationView) ([]Result, error) {
	e := v.Evaluation
	r := Result{Tool: c.cfg.Tool, URL: v.URL}
	switch e.Status {
	case "queued":
		r.Status, r.Summary = Warn, fmt.Sprintf("queued (evaluation %d, %s)", e.ID, e.Pipeline)
		return []Result{r}, nil
	case "running":
		r.Status, r.Summary = Warn, fmt.Sprintf("running: %s (evaluation %d, %s)", progress(e), e.ID, e.Pipeline)
		r.Details = strings.Join(tail(v.Progress, 10), "\n")
		return []Result{r}, nil
	case "cancelled":
		r.Status, r.Summary = Warn, fmt.Sprintf("evaluation %d was cancelled", e.ID)
		return []Result{r}, nil
	case "failed":
		return []Result{c.failedResult(v)}, nil
	case "done":
	default:
		r.Status, r.Summary = Warn, fmt.Sprintf("evaluation %d is %q", e.ID, e.Status)
		return []Result{r}, nil
	}
	var rep report.Report
	if err := c.get(ctx, fmt.Sprintf("/api/v1/evaluations/%d/report?format=json", e.ID), &rep); err != nil {
		return nil, err
	}
	r.Status, r.Summary = verdictOf(&rep)
	r.Summary += fmt.Sprintf(" (evaluation %d, %s)", e.ID, e.Pipeline)
	r.Details = details(&rep)
	return []Result{r}, nil
}

// failedResult: the series' fault (does not apply, a kernel does not
// build) is fail; anything else (infrastructure) is warn.
func (c *checker) failedResult(v *evaluationView) Result {
	r := Result{Tool: c.cfg.Tool, Status: Warn, URL: v.URL}
	if af := v.ApplyFailure; af != nil {
		r.Status = Fail
		r.Summary = fmt.Sprintf("does not apply: %s", af.Label)
		if af.File != "" {
			r.Summary += fmt.Sprintf(" (%s, hunk %d)", af.File, af.Hunk)
		}
		r.Details = af.Reason
		if af.Base != "" {
			r.Details += "\nbase: " + af.Base
		}
		return r
	}
	for _, b := range v.Builds {
		if b.Status != "failed" {
			continue
		}
		if b.ErrorKind == "failed" || b.ErrorKind == "kernel" {
			r.Status = Fail
			r.Summary = fmt.Sprintf("kernel %s (%s) does not build", b.Variant, b.Arch)
			r.Details = lastLines(b.ErrorText, 20)
			return r
		}
		r.Summary = fmt.Sprintf("evaluation %d failed on infrastructure building %s (%s)", v.Evaluation.ID, b.Variant, b.Arch)
		r.Details = lastLines(b.ErrorText, 20)
		return r
	}
	r.Summary = fmt.Sprintf("evaluation %d failed (infrastructure); see its page", v.Evaluation.ID)
	r.Details = strings.Join(tail(v.Progress, 10), "\n")
	return r
}

// verdictOf is the status and summary of a finished report: fail for a
// significant regression of at least the threshold, warn when anything
// is inconclusive, pass when every comparison is equivalent or an
// improvement (or below the threshold).
func verdictOf(rep *report.Report) (string, string) {
	var regress, improve, inconclusive, equivalent, below int
	var worst string
	worstChange := 0.0
	for _, b := range rep.Benchmarks {
		for _, cmp := range b.Comparisons {
			switch {
			case cmp.Verdict == stats.Regression && !cmp.BelowThreshold:
				regress++
				if worst == "" || abs(cmp.Change) > worstChange {
					worst = fmt.Sprintf("%s %s %s -> %s %s", b.Name, b.Metric, cmp.Base, cmp.Other, report.Pct(cmp.Change))
					worstChange = abs(cmp.Change)
				}
			case cmp.Verdict == stats.Improvement && !cmp.BelowThreshold:
				improve++
			case cmp.Verdict.Significant():
				below++
			case cmp.Verdict == stats.Equivalent:
				equivalent++
			default:
				inconclusive++
			}
		}
	}
	total := regress + improve + inconclusive + equivalent + below
	switch {
	case total == 0:
		return Warn, "no comparisons in the report"
	case regress > 0:
		return Fail, fmt.Sprintf("%d significant regression(s) of %d comparisons; worst %s", regress, total, worst)
	case inconclusive > 0:
		return Warn, fmt.Sprintf("%d of %d comparisons inconclusive", inconclusive, total)
	}
	return Pass, fmt.Sprintf("%d comparisons: %d equivalent, %d improved, %d below the threshold", total, equivalent, improve, below)
}

// details is the verdict table and the confound lines.
func details(rep *report.Report) string {
	var b strings.Builder
	for _, g := range rep.Headline() {
		b.WriteString(g.Title + ":\n")
		for _, l := range g.Lines {
			b.WriteString("  " + l + "\n")
		}
	}
	for _, cf := range rep.Confounds {
		derived := cf.Derived()
		if len(derived) == 0 {
			continue
		}
		var parts []string
		for _, d := range derived {
			p := fmt.Sprintf("%s %s -> %s", d.Symbol, d.From, d.To)
			if d.Where != "" {
				p += " (" + d.Where + ")"
			}
			parts = append(parts, p)
		}
		fmt.Fprintf(&b, "Kconfig also changed %s -> %s: %s\n", cf.Base, cf.Other, strings.Join(parts, ", "))
	}
	return strings.TrimRight(b.String(), "\n")
}

// patchResult answers for patch k/n from the per-patch tables: the
// change from k-1/n (or base) to k/n in each variant, benchmark and
// metric. Without per-patch results there is nothing to report.
func (c *checker) patchResult(v *evaluationView, sub series.Subject) []Result {
	pp := v.PerPatch
	if pp == nil || sub.Index <= 0 {
		return nil
	}
	label := fmt.Sprintf("%d/%d", sub.Index, sub.Total)
	fake := &report.Report{}
	for _, t := range pp.Tables {
		b := t.Benchmark
		b.Comparisons = nil
		for _, cmp := range t.Comparisons {
			if cmp.Other == label {
				cmp.Base, cmp.Other = t.Variant+" "+cmp.Base, t.Variant+" "+cmp.Other
				b.Comparisons = append(b.Comparisons, cmp)
			}
		}
		if len(b.Comparisons) > 0 {
			fake.Benchmarks = append(fake.Benchmarks, b)
		}
	}
	if len(fake.Benchmarks) == 0 {
		return nil
	}
	st, sum := verdictOf(fake)
	r := Result{Tool: c.cfg.Tool, Status: st, Summary: "patch " + label + ": " + sum, URL: v.URL, Details: details(fake)}
	if bis := pp.Bisection; bis != nil && bis.Patch == sub.Index && bis.Status == "found" {
		r.Status = Fail
		r.Summary = fmt.Sprintf("patch %s is the culprit of the series' %s %s regression (%+.1f%%)", label, bis.Benchmark, bis.Metric, bis.Change)
	}
	return []Result{r}
}

// submitRequest is the fields of POST /api/v1/evaluations Check sends.
type submitRequest struct {
	MsgID    string `json:"msgid"`
	Pipeline string `json:"pipeline"`
	Tree     string `json:"tree,omitempty"`
	Base     string `json:"base,omitempty"`
	Arch     string `json:"arch,omitempty"`
}

// submit queues the series with the configured pipeline.
func (c *checker) submit(ctx context.Context, msgid string, tr *Tracking) ([]Result, error) {
	if c.cfg.Pipeline == "" {
		return nil, errors.New("no evaluation of this series on the server, and no --pipeline to queue one with")
	}
	req := submitRequest{MsgID: msgid, Pipeline: c.cfg.Pipeline, Tree: c.cfg.Tree, Arch: c.cfg.Arch}
	if tr != nil {
		req.Base = tr.Series.BaseCommit
	}
	var res struct {
		Evaluation listEntry `json:"evaluation"`
		Created    bool      `json:"created"`
		URL        string    `json:"url"`
	}
	if err := c.send(ctx, http.MethodPost, "/api/v1/evaluations", req, &res); err != nil {
		return nil, err
	}
	return []Result{{Tool: c.cfg.Tool, Status: Warn, URL: res.URL,
		Summary: fmt.Sprintf("queued just now (evaluation %d, %s); press R later for the result", res.Evaluation.ID, c.cfg.Pipeline)}}, nil
}

func (c *checker) get(ctx context.Context, path string, out any) error {
	return c.send(ctx, http.MethodGet, path, nil, out)
}

// send makes one request within the shared deadline and decodes a JSON
// answer; every failure names the server and what went wrong.
func (c *checker) send(ctx context.Context, method, path string, body, out any) error {
	base := strings.TrimRight(c.cfg.Server, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return fmt.Errorf("server %q is not an http:// or https:// URL", c.cfg.Server)
	}
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return fmt.Errorf("server %s: %v", base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	client := c.cfg.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("patcheval server %s did not answer within %s", base, c.cfg.Timeout)
		}
		return fmt.Errorf("patcheval server %s unreachable: %v", base, rootCause(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("patcheval server %s: reading the answer: %v", base, err)
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return fmt.Errorf("patcheval server %s refused the token (%s): check --token-file", base, resp.Status)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
			Field string `json:"field"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = e.Error
			if e.Field != "" {
				msg = e.Field + ": " + msg
			}
		}
		return fmt.Errorf("patcheval server %s: %s %s: %s (%s)", base, method, strings.SplitN(path, "?", 2)[0], oneLine(msg), resp.Status)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("patcheval server %s: %s: not the API's JSON: %v", base, strings.SplitN(path, "?", 2)[0], err)
	}
	return nil
}

func progress(e listEntry) string {
	if e.Runs == 0 {
		return fmt.Sprintf("%d kernel(s) built, no boot yet", e.Builds)
	}
	return fmt.Sprintf("%d/%d boots", e.FinishedRuns, e.Runs)
}

func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

func tail(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

func lastLines(s string, n int) string {
	return strings.Join(tail(strings.Split(strings.TrimRight(s, "\n"), "\n"), n), "\n")
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return clip(s, 200)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
