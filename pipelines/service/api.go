package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/perpatch"
	"github.com/patcheval/patcheval/pipelines/experiments/repro"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/service/dashboard"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
	"github.com/patcheval/patcheval/series/apply"
)

// SubmitRequest is the body of POST /api/v1/evaluations.
type SubmitRequest struct {
	// MsgID names the thread on the service's lore (a Message-ID, with or
	// without <>, or a URL on that lore); Mbox is the thread itself
	// instead (patcheval submit -m FILE). Exactly one of them.
	MsgID string `json:"msgid,omitempty"`
	Mbox  string `json:"mbox,omitempty"`
	// Pipeline is a shipped pipeline's name, or "default" (base vs
	// patched, generated for the series as lore --pipeline default does;
	// Arch overrides the arches the series touches). PipelineTOML is a
	// pipeline file's text instead (lore --pipeline FILE): accepted only
	// from a service with a token, as it can name files on this machine.
	Pipeline     string `json:"pipeline,omitempty"`
	Arch         string `json:"arch,omitempty"`
	PipelineTOML string `json:"pipeline_toml,omitempty"`
	// Tree is the kernel git repository: one of the service's allowed
	// trees (or inside one). Default: the pipeline's tree.path.
	Tree string `json:"tree,omitempty"`
	// Base overrides the pipeline's tree.base.
	Base string `json:"base,omitempty"`
	// Boots overrides repeats.boots (1..100); Version picks a series
	// version (0: the newest).
	Boots   int `json:"boots,omitempty"`
	Version int `json:"version,omitempty"`
	// PerPatch also measures the series after each of its patches once
	// the whole series is reported (lore --per-patch): the report gains
	// a per-patch table. The pipeline must compare a variant without the
	// series against the same kernel with it.
	PerPatch bool `json:"per_patch,omitempty"`
	// RevertIfMerged: when the base already has the whole series,
	// measure the base with the series reverted against the base as it
	// is (lore --revert-if-merged). Without it such a series is refused
	// (400, field msgid), nothing stored.
	RevertIfMerged bool `json:"revert_if_merged,omitempty"`
}

// SubmitResponse answers a submission: 201 for a new evaluation, 200 for
// an existing one.
type SubmitResponse struct {
	Evaluation *store.Evaluation `json:"evaluation"`
	Created    bool              `json:"created"`
	URL        string            `json:"url"`
}

// APIError is every 4xx/5xx body: what is wrong, and with which field.
type APIError struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

func apiError(w http.ResponseWriter, code int, field, msg string) {
	writeJSON(w, code, APIError{Error: msg, Field: field})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// fieldError is a bad input naming the request field.
type fieldError struct {
	code  int
	field string
	err   error
}

func (e *fieldError) Error() string { return e.err.Error() }

func bad(field string, format string, a ...any) error {
	return &fieldError{http.StatusBadRequest, field, fmt.Errorf(format, a...)}
}

// writeErr maps an error to a status: fieldError as it says, fail.Input
// 400, anything else 500.
func writeErr(w http.ResponseWriter, err error) {
	var fe *fieldError
	switch {
	case errors.As(err, &fe):
		apiError(w, fe.code, fe.field, fe.err.Error())
	case fail.KindOf(err) == fail.KindInput:
		apiError(w, http.StatusBadRequest, "", err.Error())
	default:
		apiError(w, http.StatusInternalServerError, "", err.Error())
	}
}

func (s *Service) api() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/evaluations", s.limitSubmissions(s.apiCreate))
	mux.HandleFunc("GET /api/v1/evaluations", s.apiList)
	mux.HandleFunc("GET /api/v1/evaluations/{id}", s.apiGet)
	mux.HandleFunc("GET /api/v1/evaluations/{id}/report", s.apiReport)
	mux.HandleFunc("GET /api/v1/evaluations/{id}/events", s.apiEvents)
	mux.HandleFunc("GET /api/v1/evaluations/{id}/repro.tar.gz", s.apiRepro)
	mux.HandleFunc("POST /api/v1/evaluations/{id}/cancel", s.apiCancel)
	mux.HandleFunc("POST /api/v1/evaluations/{id}/rerun", s.apiRerun)
	mux.HandleFunc("POST /api/v1/evaluations/{id}/bisect", s.apiBisect)
	mux.HandleFunc("POST /api/v1/evaluations/{id}/log", s.apiLog)
	mux.HandleFunc("GET /api/v1/jobs", s.apiJobs)
	mux.HandleFunc("GET /api/v1/series", s.apiSeries)
	mux.HandleFunc("GET /api/v1/watches/{name}", s.apiWatch)
	mux.HandleFunc("POST /api/v1/watches/{name}/tick", s.apiWatchTick)
	mux.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "", fmt.Sprintf("no API endpoint %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// maxBody bounds a submission (an mbox of a long thread fits).
const maxBody = 32 << 20

func (s *Service) apiCreate(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		apiError(w, http.StatusUnsupportedMediaType, "Content-Type", fmt.Sprintf("want application/json, got %q", ct))
		return
	}
	var req SubmitRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "body", "not a JSON submission: "+err.Error())
		return
	}
	start := time.Now()
	p, o, err := s.checkSubmission(r.Context(), req)
	if err != nil && r.Context().Err() != nil {
		// Nobody to answer: say in the log that the work stopped.
		s.logf("submission from %s: the client left after %s; its work stopped: %v", r.RemoteAddr, time.Since(start).Round(time.Millisecond), err)
		return
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	id, created, err := s.Submit(r.Context(), p, o)
	if err != nil {
		if fail.KindOf(err) == fail.KindInput {
			err = &fieldError{http.StatusBadRequest, inputField(err), err}
		}
		writeErr(w, err)
		return
	}
	e, err := s.db.Store.Evaluation(id)
	if err != nil {
		writeErr(w, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	w.Header().Set("Location", fmt.Sprintf("/api/v1/evaluations/%d", id))
	writeJSON(w, code, SubmitResponse{Evaluation: e, Created: created, URL: pageURL(r, id)})
}

// inputField guesses which field a runner input error is about.
func inputField(err error) string {
	m := err.Error()
	switch {
	case strings.Contains(m, "tree") || strings.Contains(m, "base"):
		return "tree"
	case strings.Contains(m, "series") || strings.Contains(m, "patch"):
		return "msgid"
	}
	return ""
}

func pageURL(r *http.Request, id int64) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s/evaluations/%d", scheme, r.Host, id)
}

// checkSubmission validates a request field by field and fetches its
// thread: nothing is stored or queued unless everything holds.
func (s *Service) checkSubmission(ctx context.Context, req SubmitRequest) (*pipelines.Pipeline, runner.Options, error) {
	var o runner.Options
	p, err := s.submittedPipeline(req)
	if err != nil {
		return nil, o, err
	}
	if req.Boots < 0 || req.Boots > 100 {
		return nil, o, bad("boots", "boots %d: want 1..100 (or 0 for the pipeline's repeats.boots)", req.Boots)
	}
	if req.Version < 0 {
		return nil, o, bad("version", "version %d: want a series version >= 1 (or 0 for the newest)", req.Version)
	}
	if req.PerPatch && p != nil {
		if _, err := perpatch.AtCommit(p, perpatch.SeriesPairs(p)); err != nil {
			return nil, o, bad("per_patch", "per_patch: %v", err)
		}
	}
	// default is generated once the series is resolved (its arches and
	// base come from it); until then it stands for a pipeline that
	// applies a series and names no tree.
	needThread := p == nil || p.NeedsSeries() || req.MsgID != "" || req.Mbox != ""
	var src mbox.Source
	switch {
	case !needThread:
	case req.MsgID != "" && req.Mbox != "":
		return nil, o, bad("msgid", "give either msgid or mbox, not both")
	case req.MsgID == "" && req.Mbox == "":
		return nil, o, bad("msgid", "no thread: give msgid (a Message-ID on %s) or mbox", s.lore)
	case req.MsgID != "":
		if src, err = s.loreSource(req.MsgID); err != nil {
			return nil, o, err
		}
	}
	tree, err := s.submittedTree(req, p)
	if err != nil {
		return nil, o, err
	}
	o = runner.Options{Tree: tree, Base: req.Base, Boots: req.Boots, Version: req.Version, PerPatch: req.PerPatch, RevertIfMerged: req.RevertIfMerged}
	if !needThread {
		return p, o, nil
	}
	var t *mbox.Thread
	start := time.Now()
	switch {
	case req.Mbox != "":
		// Parsing, threading and resolving a large mbox take seconds:
		// they stop when the client leaves (the request's context).
		msgs, err := mbox.ParseBytesContext(ctx, []byte(req.Mbox), "submitted mbox")
		if ctx.Err() != nil {
			return nil, o, err
		}
		if err != nil {
			return nil, o, bad("mbox", "%v", err)
		}
		if len(msgs) == 0 {
			return nil, o, bad("mbox", "no messages in the submitted mbox")
		}
		if t, err = mbox.NewThreadContext(ctx, msgs, "submitted mbox"); err != nil {
			return nil, o, err
		}
	default:
		fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		t, err = mbox.Fetch(fctx, src, mbox.FetchOptions{Lore: s.lore, Attempts: 2, Backoff: 500 * time.Millisecond})
		if err != nil {
			if fail.KindOf(err) == fail.KindInput {
				return nil, o, bad("msgid", "%v", err)
			}
			return nil, o, &fieldError{http.StatusBadGateway, "msgid", fmt.Errorf("lore %s unreachable: %w", s.lore, err)}
		}
	}
	// Resolved once, as Submit would from the thread it stores: Check and
	// Submit take this series (Options.Resolved) instead of resolving the
	// thread again.
	o.Mbox, o.ThreadSource = runner.ThreadMbox(t), t.Source
	resolved, err := runner.Resolve(ctx, o)
	se := resolved.Series()
	if ctx.Err() != nil {
		return nil, o, err
	}
	if err != nil {
		field := "msgid"
		if req.Mbox != "" {
			field = "mbox"
		}
		if req.Version > 0 {
			field = "version"
		}
		return nil, o, bad(field, "%v", err)
	}
	if p == nil {
		var arches []string
		if req.Arch != "" {
			arches = strings.Split(req.Arch, ",")
		}
		if p, err = pipelines.Named(req.Pipeline, se, arches); err != nil {
			return nil, o, bad("arch", "%v", err)
		}
		if req.PerPatch {
			if _, err := perpatch.AtCommit(p, perpatch.SeriesPairs(p)); err != nil {
				return nil, o, bad("per_patch", "per_patch: %v", err)
			}
		}
	}
	o.Version, o.Resolved = se.Version, resolved
	o.AM = series.AMOptions{LinkMask: series.DefaultLinkMask}
	o.Fetch = time.Since(start)
	if err := runner.Check(p, o); err != nil {
		field := inputField(err)
		var ae *apply.AlreadyError
		if errors.As(err, &ae) {
			field = "msgid" // the series is fine, not as a patch on this base
		}
		return nil, o, &fieldError{http.StatusBadRequest, field, err}
	}
	return p, o, nil
}

// submittedTree is the kernel tree a submission evaluates on: its tree,
// else its pipeline's (p, nil for default), one the service allows and
// can open.
func (s *Service) submittedTree(req SubmitRequest, p *pipelines.Pipeline) (string, error) {
	tree := req.Tree
	if tree == "" && p != nil {
		tree = p.Tree.Path
	}
	if tree == "" {
		name := pipelines.DefaultName
		if p != nil {
			name = p.Name
		}
		return "", bad("tree", "pipeline %s has no tree.path: give the kernel tree (one of the service's --allow-tree paths)", name)
	}
	tree, err := s.allowedTree(tree, req.Tree != "")
	if err != nil {
		return "", err
	}
	// The same opener the run will use (internal/gittree): it accepts what
	// the run can read (a sparse checkout's worktreeConfig extension, which
	// go-git's PlainOpen refuses) and maps pack indexes without loading them.
	_, st, _, err := gittree.Open(tree, 1)
	if err != nil {
		return "", bad("tree", "%v", err) // names the tree and what is wrong
	}
	st.Close()
	return tree, nil
}

// submittedPipeline is the pipeline a submission names: a shipped one,
// nil for default (generated once the series is resolved), or the TOML
// text of pipeline_toml when the service has a token (a pipeline file
// names files on this machine: fragments, configs, a tree). A file path
// from the network is never read.
func (s *Service) submittedPipeline(req SubmitRequest) (*pipelines.Pipeline, error) {
	want := "default, one of " + strings.Join(pipelines.List(), ", ") + " or pipeline_toml"
	switch {
	case req.PipelineTOML != "" && req.Pipeline != "":
		return nil, bad("pipeline", "give either pipeline or pipeline_toml, not both")
	case req.PipelineTOML != "":
		if len(s.cfg.Token) == 0 {
			return nil, &fieldError{http.StatusForbidden, "pipeline_toml", fmt.Errorf("pipeline_toml needs a service with a token (serve --token-file): a pipeline file can name files on this machine; submit a shipped pipeline by name")}
		}
		if req.Arch != "" {
			return nil, bad("arch", "arch goes with pipeline %s; a pipeline file names its own arches", pipelines.DefaultName)
		}
		p, err := pipelines.Parse([]byte(req.PipelineTOML), "")
		if err != nil {
			return nil, bad("pipeline_toml", "%v", err)
		}
		return p, nil
	case req.Pipeline == "":
		return nil, bad("pipeline", "no pipeline: want %s", want)
	}
	if arches, ok := pipelines.SplitDefault(req.Pipeline); ok {
		if len(arches) > 0 && req.Arch == "" {
			req.Arch = strings.Join(arches, ",")
		}
		for _, a := range strings.Split(req.Arch, ",") {
			if _, err := arch.Normalize(a); a != "" && err != nil {
				return nil, bad("arch", "%v", err)
			}
		}
		return nil, nil
	}
	if req.Arch != "" {
		return nil, bad("arch", "arch goes with pipeline %s; pipeline %s names its own arches", pipelines.DefaultName, req.Pipeline)
	}
	p, err := pipelines.Builtin(req.Pipeline)
	if err != nil {
		return nil, bad("pipeline", "unknown pipeline %q: want %s", req.Pipeline, want)
	}
	return p, nil
}

// loreSource accepts a Message-ID or a URL on the service's own lore; a
// path, a file or another server is refused (no reads or requests chosen
// by the network).
func (s *Service) loreSource(msgid string) (mbox.Source, error) {
	id := strings.TrimSpace(msgid)
	if strings.HasPrefix(id, "http://") || strings.HasPrefix(id, "https://") {
		if !mbox.OnLore(s.lore, id) {
			return mbox.Source{}, bad("msgid", "URL %q is not on this service's lore (%s)", id, s.lore)
		}
	} else {
		bare := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(id, "id:"), "mid:"), "<"), ">")
		at := strings.IndexByte(bare, '@')
		if at <= 0 || at == len(bare)-1 || strings.ContainsAny(bare, " \t\r\n<>/\\") {
			return mbox.Source{}, bad("msgid", "%q is not a Message-ID (want local@domain, no spaces, '/' or '<>' inside)", msgid)
		}
		id = bare
	}
	src, err := mbox.ParseSource(id)
	if err != nil || src.Kind != mbox.SourceLore {
		return mbox.Source{}, bad("msgid", "%q is not a Message-ID or lore URL", msgid)
	}
	return src, nil
}

// canonicalTree is an absolute, symlink-free path.
func canonicalTree(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// allowedTree checks a submitted tree against --allow-tree (a pipeline's
// own tree.path is allowed when the request named none).
func (s *Service) allowedTree(tree string, fromRequest bool) (string, error) {
	if fromRequest && !filepath.IsAbs(tree) {
		return "", bad("tree", "tree %q: want an absolute path", tree)
	}
	c, err := canonicalTree(tree)
	if !fromRequest {
		if err != nil {
			return "", bad("tree", "tree %s: %v", tree, err)
		}
		return c, nil
	}
	// A submitted path gets one answer whether it exists or not, so that
	// the API does not tell which host paths exist.
	notUsable := bad("tree", "tree %s is not a usable tree here: want an existing directory under an --allow-tree of this service", tree)
	if err != nil {
		return "", notUsable
	}
	for _, a := range s.cfg.AllowTrees {
		if c == a || strings.HasPrefix(c, a+string(filepath.Separator)) {
			return c, nil
		}
	}
	return "", notUsable
}

// ---- reads ----

// ListResponse is GET /api/v1/evaluations.
type ListResponse struct {
	Evaluations []*store.Evaluation `json:"evaluations"`
	Total       int                 `json:"total"`
	Limit       int                 `json:"limit"`
	Offset      int                 `json:"offset"`
}

var statuses = []string{StatusQueued, "running", "done", "failed", StatusCancelled}

func (s *Service) apiList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.ListFilter{Status: q.Get("status"), Pipeline: q.Get("pipeline"), Series: q.Get("series"), Tree: q.Get("tree"), Arch: q.Get("arch"), Limit: 50}
	if f.Status != "" && !contains(statuses, f.Status) {
		apiError(w, http.StatusBadRequest, "status", fmt.Sprintf("unknown status %q: want one of %s", f.Status, strings.Join(statuses, ", ")))
		return
	}
	for _, k := range []string{"limit", "offset"} {
		v := q.Get(k)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || (k == "limit" && (n < 1 || n > 500)) {
			apiError(w, http.StatusBadRequest, k, fmt.Sprintf("%s %q: want a number%s", k, v, map[bool]string{true: " from 1 to 500", false: " >= 0"}[k == "limit"]))
			return
		}
		if k == "limit" {
			f.Limit = n
		} else {
			f.Offset = n
		}
	}
	evs, total, err := s.db.Store.List(r.Context(), f)
	if err != nil {
		writeErr(w, err)
		return
	}
	if evs == nil {
		evs = []*store.Evaluation{}
	}
	writeJSON(w, http.StatusOK, ListResponse{Evaluations: evs, Total: total, Limit: f.Limit, Offset: f.Offset})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// EvaluationResponse is GET /api/v1/evaluations/{id}.
type EvaluationResponse struct {
	Evaluation *store.Evaluation  `json:"evaluation"`
	Builds     []store.Build      `json:"builds"`
	Runs       []store.Run        `json:"runs"`
	Samples    []evaluate.Sample  `json:"samples"`
	Benchmarks []report.Benchmark `json:"benchmarks,omitempty"`
	Confounds  []report.Confound  `json:"confounds,omitempty"`
	Verdicts   []string           `json:"verdicts,omitempty"`
	Jobs       []Job              `json:"jobs"`
	Progress   []string           `json:"progress,omitempty"`
	// PerPatch is the report's per-patch section; SeriesBisection the
	// bisection inside the series as it stands (queued, running with
	// its measurements so far, or ended).
	PerPatch        *report.PerPatch   `json:"per_patch,omitempty"`
	SeriesBisection *SeriesBisectState `json:"series_bisection,omitempty"`
	// ApplyFailure says where the series did not apply (an evaluation
	// that failed at apply).
	ApplyFailure *store.ApplyFailure `json:"apply_failure,omitempty"`
	URL          string              `json:"url"`
}

func (s *Service) evalOf(w http.ResponseWriter, r *http.Request) (*store.Evaluation, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		apiError(w, http.StatusBadRequest, "id", fmt.Sprintf("evaluation id %q: want a positive number", r.PathValue("id")))
		return nil, false
	}
	e, err := s.db.Store.Evaluation(id)
	if err != nil {
		if fail.KindOf(err) == fail.KindInput {
			apiError(w, http.StatusNotFound, "id", fmt.Sprintf("no evaluation %d", id))
		} else {
			writeErr(w, err)
		}
		return nil, false
	}
	return e, true
}

func (s *Service) apiGet(w http.ResponseWriter, r *http.Request) {
	e, ok := s.evalOf(w, r)
	if !ok {
		return
	}
	st := s.db.Store
	resp := EvaluationResponse{Evaluation: e, URL: pageURL(r, e.ID)}
	var err error
	if resp.Builds, err = st.BuildsOf(e.ID); err == nil {
		if resp.Runs, err = st.RunsOf(e.ID); err == nil {
			if resp.Samples, err = st.Samples(e.ID); err == nil {
				var rows []*rivertype.JobRow
				rows, err = s.engine.Jobs(r.Context(), e.ID, 200)
				resp.Jobs = jobsOf(rows)
			}
		}
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	if data, err := os.ReadFile(filepath.Join(s.OutDir(e.ID), "report.json")); err == nil {
		var rep report.Report
		if json.Unmarshal(data, &rep) == nil {
			resp.Benchmarks, resp.Confounds, resp.Verdicts = rep.Benchmarks, rep.Confounds, report.Verdicts(&rep)
			resp.PerPatch = rep.PerPatch
		}
	}
	if resp.SeriesBisection, err = s.SeriesBisection(e.ID); err != nil {
		writeErr(w, err)
		return
	}
	if resp.ApplyFailure, err = st.ApplyFailureOf(e.ID); err != nil {
		writeErr(w, err)
		return
	}
	if e.Status == StatusQueued || e.Status == "running" {
		resp.Progress = s.evalLog(e.ID).snapshot()
	}
	writeJSON(w, http.StatusOK, resp)
}

// reportFiles maps ?format= to the report file and its content type.
var reportFiles = map[string][2]string{
	"text":  {"report.txt", "text/plain; charset=utf-8"},
	"md":    {"report.md", "text/markdown; charset=utf-8"},
	"json":  {"report.json", "application/json"},
	"kcidb": {"kcidb.json", "application/json"},
	"eml":   {"reply.eml", "message/rfc822"},
}

func (s *Service) apiReport(w http.ResponseWriter, r *http.Request) {
	e, ok := s.evalOf(w, r)
	if !ok {
		return
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "text"
	}
	f, ok := reportFiles[format]
	if !ok {
		apiError(w, http.StatusBadRequest, "format", fmt.Sprintf("unknown report format %q: want text, md, json, kcidb or eml", format))
		return
	}
	data, err := os.ReadFile(filepath.Join(s.OutDir(e.ID), f[0]))
	if err != nil {
		apiError(w, http.StatusNotFound, "format", fmt.Sprintf("evaluation %d has no %s report yet (status %s)", e.ID, format, e.Status))
		return
	}
	w.Header().Set("Content-Type", f[1])
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(data)
}

// apiRepro serves the evaluation's reproducer (pipelines/experiments/repro) as a
// tar.gz whose files sit under patcheval-repro-<id>/.
func (s *Service) apiRepro(w http.ResponseWriter, r *http.Request) {
	e, ok := s.evalOf(w, r)
	if !ok {
		return
	}
	rp, err := repro.Build(s.db.Store, e.ID, repro.Options{})
	if err != nil {
		writeErr(w, err)
		return
	}
	name := fmt.Sprintf("patcheval-repro-%d", e.ID)
	var buf bytes.Buffer
	if err := rp.WriteTarGz(&buf, name, e.Updated); err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.tar.gz"`)
	w.Write(buf.Bytes())
}

// apiEvents streams an evaluation's progress as server-sent events: each
// progress line as a message, and an event "status" whenever the status
// changes (the stream ends when it is no longer queued or running).
func (s *Service) apiEvents(w http.ResponseWriter, r *http.Request) {
	e, ok := s.evalOf(w, r)
	if !ok {
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		apiError(w, http.StatusInternalServerError, "", "streaming unsupported")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	lines, unsub := s.evalLog(e.ID).subscribe()
	defer unsub()
	status := e.Status
	writeEvent(w, "status", status)
	fl.Flush()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case l := <-lines:
			writeEvent(w, "", l)
			fl.Flush()
		case <-tick.C:
			cur, err := s.db.Store.Evaluation(e.ID)
			if err != nil {
				return
			}
			if cur.Status != status {
				status = cur.Status
				writeEvent(w, "status", status)
				fl.Flush()
				if status != StatusQueued && status != "running" {
					return
				}
			}
		}
	}
}

// writeEvent writes one server-sent event. The stream's lines end in
// \r\n, \r or \n alike, so data is split on each of them into data:
// lines of its own: whatever data holds, it cannot start a field (event:,
// id:, retry:) or end the event.
func writeEvent(w io.Writer, event, data string) {
	var b strings.Builder
	if event != "" {
		b.WriteString("event: " + event + "\n")
	}
	data = strings.ReplaceAll(strings.ReplaceAll(data, "\r\n", "\n"), "\r", "\n")
	for _, l := range strings.Split(data, "\n") {
		b.WriteString("data: " + l + "\n")
	}
	b.WriteString("\n")
	io.WriteString(w, b.String())
}

func (s *Service) apiCancel(w http.ResponseWriter, r *http.Request) {
	s.apiAct(w, r, http.StatusOK, s.Cancel)
}

func (s *Service) apiRerun(w http.ResponseWriter, r *http.Request) {
	s.apiAct(w, r, http.StatusAccepted, func(ctx context.Context, id int64) error {
		_, err := s.Rerun(ctx, id)
		return err
	})
}

// BisectResponse answers POST /api/v1/evaluations/{id}/bisect (202).
type BisectResponse struct {
	Note            string             `json:"note"`
	SeriesBisection *SeriesBisectState `json:"series_bisection"`
	URL             string             `json:"url"`
}

// apiBisect queues the bisection inside the evaluation's series
// (Service.BisectSeries): 202 with what it did, 409 when there is
// nothing to bisect.
func (s *Service) apiBisect(w http.ResponseWriter, r *http.Request) {
	e, ok := s.evalOf(w, r)
	if !ok {
		return
	}
	note, err := s.BisectSeries(r.Context(), e.ID, "")
	if err != nil {
		if fail.KindOf(err) == fail.KindInput {
			apiError(w, http.StatusConflict, "id", err.Error())
			return
		}
		writeErr(w, err)
		return
	}
	st, err := s.SeriesBisection(e.ID)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, BisectResponse{Note: note, SeriesBisection: st, URL: pageURL(r, e.ID)})
}

// apiAct runs a state change on the evaluation the path names: 409 when
// its state does not allow it.
func (s *Service) apiAct(w http.ResponseWriter, r *http.Request, code int, fn func(ctx context.Context, id int64) error) {
	e, ok := s.evalOf(w, r)
	if !ok {
		return
	}
	if err := fn(r.Context(), e.ID); err != nil {
		if fail.KindOf(err) == fail.KindInput {
			apiError(w, http.StatusConflict, "id", err.Error())
			return
		}
		writeErr(w, err)
		return
	}
	e, _ = s.db.Store.Evaluation(e.ID)
	writeJSON(w, code, SubmitResponse{Evaluation: e, URL: pageURL(r, e.ID)})
}

var jobStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStateCancelled, rivertype.JobStateCompleted,
	rivertype.JobStateDiscarded, rivertype.JobStatePending, rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}

func (s *Service) apiJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var states []rivertype.JobState
	for _, st := range q["state"] {
		ok := false
		for _, js := range jobStates {
			if string(js) == st {
				states, ok = append(states, js), true
			}
		}
		if !ok {
			apiError(w, http.StatusBadRequest, "state", fmt.Sprintf("unknown job state %q", st))
			return
		}
	}
	var id int64
	if v := q.Get("evaluation"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			apiError(w, http.StatusBadRequest, "evaluation", fmt.Sprintf("evaluation %q: want a positive number", v))
			return
		}
		id = n
	}
	jobs, err := s.engine.Jobs(r.Context(), id, 500, states...)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": jobsOf(jobs)})
}

// Job is a queue job as the API shows it.
type Job struct {
	ID           int64                    `json:"id"`
	Kind         string                   `json:"kind"`
	Queue        string                   `json:"queue"`
	State        string                   `json:"state"`
	Attempt      int                      `json:"attempt"`
	MaxAttempts  int                      `json:"max_attempts"`
	Args         json.RawMessage          `json:"args"`
	Errors       []rivertype.AttemptError `json:"errors,omitempty"`
	EvaluationID int64                    `json:"evaluation_id,omitempty"`
	Created      time.Time                `json:"created"`
	Attempted    *time.Time               `json:"attempted,omitempty"`
	Finalized    *time.Time               `json:"finalized,omitempty"`
}

func jobsOf(rows []*rivertype.JobRow) []Job {
	out := make([]Job, 0, len(rows))
	for _, j := range rows {
		out = append(out, Job{ID: j.ID, Kind: j.Kind, Queue: j.Queue, State: string(j.State), Attempt: j.Attempt,
			MaxAttempts: j.MaxAttempts, Args: json.RawMessage(j.EncodedArgs), Errors: j.Errors, EvaluationID: evalOfTags(j.Tags),
			Created: j.CreatedAt, Attempted: j.AttemptedAt, Finalized: j.FinalizedAt})
	}
	return out
}

// apiWatch is a watch's history (watch show --json).
// apiSeries lists the followed lists' series, the last changed first
// (?list= and ?status= narrow it): the follower's state of each version
// and its evaluation's status, as the /series page shows them.
func (s *Service) apiSeries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if st := q.Get("status"); st != "" && !store.FollowStatus(st) {
		apiError(w, http.StatusBadRequest, "status", fmt.Sprintf("unknown series state %q", st))
		return
	}
	rows, err := dashboard.FollowedSeries(s.db.Store, q.Get("list"), q.Get("status"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"series": rows})
}

func (s *Service) apiWatch(w http.ResponseWriter, r *http.Request) {
	x, ok := s.watchOfPath(w, r)
	if !ok {
		return
	}
	h, err := watch.Load(s.db.Store, x)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, h)
}

// apiWatchTick queues a tick of the watch now (watch run-now through the
// service): 202 with the job's id.
func (s *Service) apiWatchTick(w http.ResponseWriter, r *http.Request) {
	x, ok := s.watchOfPath(w, r)
	if !ok {
		return
	}
	id, err := s.TickWatch(r.Context(), x.ID)
	if err != nil {
		if fail.KindOf(err) == fail.KindInput {
			apiError(w, http.StatusConflict, "name", err.Error())
			return
		}
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"watch": x.Name, "job": id})
}

// watchOfPath is the watch the path names (404 if none).
func (s *Service) watchOfPath(w http.ResponseWriter, r *http.Request) (*store.Watch, bool) {
	x, err := s.db.Store.FindWatch(r.PathValue("name"))
	if err != nil {
		if fail.KindOf(err) == fail.KindInput {
			apiError(w, http.StatusNotFound, "name", err.Error())
		} else {
			writeErr(w, err)
		}
		return nil, false
	}
	return x, true
}
