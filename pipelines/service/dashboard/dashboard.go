// Package dashboard renders patcheval serve's web pages: the evaluations
// list, one evaluation (verdicts with confidence intervals, a plot per
// benchmark, the confound report, builds, boots, the reply draft, live
// progress), the job queue, the followed lists' series (their follower
// state: incomplete, filtered, superseded, evaluated) and the watches
// (history per tag with CIs, events, bisections). The index filters by
// status, pipeline, series, tree and arch (a value nothing has is a
// 400 naming the parameter); /trend is one pipeline's verdicts over time
// (each comparison's change with its CI, plotted) and, for a chosen
// benchmark, its stored figure per variant over the same evaluations.
//
// Pages are rendered on the server with html/template; the CSS is
// embedded and the plots are SVG drawn with gonum.org/v1/plot, so the
// pages need no build step and work without JavaScript (a running
// evaluation refreshes itself through <noscript> meta refresh, or follows
// server-sent events when scripts run). Colours follow the browser's
// prefers-color-scheme.
//
// New is the entry point; the data comes from a Source (pipelines/service
// implements it over the store and River).
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/store"
)

//go:embed assets
var assets embed.FS

// Source is where the pages get their data.
type Source interface {
	// Store is the evaluation store.
	Store() *store.Store
	// OutDir is the directory evaluation id's reports are written to
	// (report.json, reply.eml, ...).
	OutDir(id int64) string
	// Jobs lists queue jobs, newest first: of evaluation evalID (all when
	// 0), in the given states (all when none).
	Jobs(ctx context.Context, evalID int64, limit int, states ...rivertype.JobState) ([]*rivertype.JobRow, error)
	// JobCounts counts the queue's jobs by queue and state.
	JobCounts(ctx context.Context) (map[string]map[rivertype.JobState]int, error)
	// RetriedJobs lists completed jobs that took more than one attempt,
	// newest first.
	RetriedJobs(ctx context.Context, limit int) ([]*rivertype.JobRow, error)
	// Log is evaluation id's recent progress lines.
	Log(id int64) []string
	// Cancel and Rerun act on an evaluation (the page's buttons).
	Cancel(ctx context.Context, id int64) error
	Rerun(ctx context.Context, id int64) error
	// Waiting says why each of jobs that no live worker can take waits
	// (by job id; the others are absent): such a job is waiting, not
	// failed.
	Waiting(jobs []*rivertype.JobRow) map[int64]string
	// Live reports whether a worker's heartbeat is recent.
	Live(w store.Worker) bool
	// BuildFile opens file name (metadata.json, build.log) of build b's
	// artifact: in its recorded directory, or, for a kernel built on
	// another machine, in the farm's artifact store.
	BuildFile(ctx context.Context, b store.Build, name string) (io.ReadCloser, error)
}

// Options tune the pages.
type Options struct {
	// Where is shown in the header (the database path).
	Where string
	// Lore is the base URL for series links (default lore.kernel.org/all/).
	Lore string
	// PageSize is the evaluations per list page (default 50).
	PageSize int
	// Pipelines are offered in the list's filter.
	Pipelines []string
	// Posts, when set, gives /posts its Approve button for held mails.
	Posts Posts
}

// Dashboard serves the pages.
type Dashboard struct {
	src  Source
	opt  Options
	tmpl *template.Template
	mux  *http.ServeMux

	mu    sync.Mutex
	cache map[string]cachedReport // report.json by path
}

type cachedReport struct {
	mod  time.Time
	size int64
	r    *report.Report
}

// New returns the dashboard's handler: GET /, /evaluations/{id},
// /evaluations/{id}/runs/{run}/console, /evaluations/{id}/builds/{b}/log,
// /evaluations/{id}/plots/{n}.svg, /queue, /posts, /series, /watches,
// /watches/{name}, /watches/{name}/plot.svg, /trend; POST
// /evaluations/{id}/cancel, /evaluations/{id}/rerun and, with
// Options.Posts, /posts/{id}/approve (the caller wraps it in its
// authentication).
func New(src Source, opt Options) (*Dashboard, error) {
	if opt.Lore == "" {
		opt.Lore = "https://lore.kernel.org/all/"
	}
	if opt.PageSize <= 0 {
		opt.PageSize = 50
	}
	css, err := assets.ReadFile("assets/style.css")
	if err != nil {
		return nil, err
	}
	t, err := template.New("").Funcs(template.FuncMap{
		"css":   func() template.CSS { return template.CSS(css) },
		"age":   age,
		"short": func(s string) string { return shortHash(s) },
		"num":   num,
		"pct":   func(f float64) string { return fmt.Sprintf("%+.2f%%", f) },
		"inc":   func(i int) int { return i + 1 },
	}).ParseFS(assets, "assets/pages.html")
	if err != nil {
		return nil, err
	}
	d := &Dashboard{src: src, opt: opt, tmpl: t, mux: http.NewServeMux(), cache: map[string]cachedReport{}}
	d.mux.HandleFunc("GET /{$}", d.list)
	d.mux.HandleFunc("GET /evaluations/{id}", d.evaluation)
	d.mux.HandleFunc("GET /evaluations/{id}/plots/{n}", d.plotSVG)
	d.mux.HandleFunc("GET /evaluations/{id}/runs/{run}/console", d.console)
	d.mux.HandleFunc("GET /evaluations/{id}/builds/{b}/log", d.buildLog)
	d.mux.HandleFunc("POST /evaluations/{id}/cancel", d.act(src.Cancel))
	d.mux.HandleFunc("POST /evaluations/{id}/rerun", d.act(src.Rerun))
	d.mux.HandleFunc("GET /queue", d.queue)
	d.mux.HandleFunc("GET /workers", d.workers)
	d.mux.HandleFunc("GET /posts", d.posts)
	d.mux.HandleFunc("GET /series", d.series)
	d.mux.HandleFunc("GET /watches", d.watches)
	d.mux.HandleFunc("GET /watches/{name}", d.watchPage)
	d.mux.HandleFunc("GET /watches/{name}/plot.svg", d.watchPlot)
	d.mux.HandleFunc("GET /trend", d.trend)
	if opt.Posts != nil {
		d.mux.HandleFunc("POST /posts/{id}/approve", d.approve)
	}
	return d, nil
}

func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.mux.ServeHTTP(w, r) }

// page is what every template gets besides its own fields.
type page struct {
	Title   string
	Where   string
	Refresh int
}

func (d *Dashboard) render(w http.ResponseWriter, name string, data any) {
	d.renderCode(w, http.StatusOK, name, data)
}

// renderCode is render answering with status code.
func (d *Dashboard) renderCode(w http.ResponseWriter, code int, name string, data any) {
	var buf bytes.Buffer
	if err := d.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		http.Error(w, "rendering "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

func (d *Dashboard) fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch fail.KindOf(err) {
	case fail.KindInput:
		code = http.StatusNotFound
	}
	d.errorPage(w, code, err.Error())
}

// errorPage answers code with the page saying msg.
func (d *Dashboard) errorPage(w http.ResponseWriter, code int, msg string) {
	d.renderCode(w, code, "error", struct {
		page
		Message string
	}{page{Title: http.StatusText(code), Where: d.opt.Where}, msg})
}

// ---- list ----

type headline struct{ Text, Class string }

type listRow struct {
	*store.Evaluation
	Headline []headline
	// Why is a failed evaluation's first failing stage and reason.
	Why *why
}

func (d *Dashboard) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.ListFilter{Status: q.Get("status"), Pipeline: q.Get("pipeline"), Series: q.Get("series"),
		Tree: q.Get("tree"), Arch: q.Get("arch"), Limit: d.opt.PageSize}
	ch, err := d.src.Store().Choices(r.Context())
	if err != nil {
		d.fail(w, err)
		return
	}
	pipelines := union(d.opt.Pipelines, ch.Pipelines)
	pg, bad := pageNumber(q.Get("page"))
	if bad == "" {
		bad = badFilter(f, pipelines, ch)
	}
	if bad != "" {
		d.errorPage(w, http.StatusBadRequest, bad)
		return
	}
	f.Offset = (pg - 1) * f.Limit
	evs, total, err := d.src.Store().List(r.Context(), f)
	if err != nil {
		d.fail(w, err)
		return
	}
	rows := make([]listRow, len(evs))
	for i, e := range evs {
		rows[i] = listRow{Evaluation: e, Why: whyFailed(d.src.Store(), e)}
		if rep := d.report(e.ID); rep != nil {
			rows[i].Headline = headlines(rep, 3)
		}
	}
	link := func(p int) string {
		v := filterValues(f)
		if p > 1 {
			v.Set("page", strconv.Itoa(p))
		}
		if len(v) == 0 {
			return "/"
		}
		return "/?" + v.Encode()
	}
	data := struct {
		page
		Rows                []listRow
		Total, From, To     int
		Prev, Next          string
		Filter              store.ListFilter
		Filtered            bool
		Active              []activeFilter
		Statuses, Pipelines []string
		Trees, Arches       []string
		Trend               string
	}{page: page{Title: "evaluations", Where: d.opt.Where}, Rows: rows, Total: total, Filter: f,
		Filtered:  len(filterValues(f)) > 0,
		Active:    activeFilters(f),
		Statuses:  listStatuses,
		Pipelines: pipelines,
		Trees:     ch.Trees, Arches: ch.Arches}
	if f.Pipeline != "" {
		data.Trend = trendLink(f.Pipeline, f.Tree, f.Arch)
	}
	if len(rows) > 0 {
		data.From, data.To = f.Offset+1, f.Offset+len(rows)
	}
	if pg > 1 {
		data.Prev = link(pg - 1)
	}
	if f.Offset+len(rows) < total {
		data.Next = link(pg + 1)
	}
	d.render(w, "list", data)
}

// headlines are an evaluation's most telling verdicts: regressions and
// improvements first, then the rest, at most n.
func headlines(r *report.Report, n int) []headline {
	var out []headline
	rank := func(v stats.Verdict) int {
		switch v {
		case stats.Regression:
			return 0
		case stats.Improvement:
			return 1
		}
		return 2
	}
	type item struct {
		h headline
		r int
	}
	var items []item
	for _, b := range r.Benchmarks {
		for _, c := range b.Comparisons {
			items = append(items, item{headline{fmt.Sprintf("%s %s→%s %+.1f%% %s", b.Name, c.Base, c.Other, c.Change, c.Verdict), verdictClass(c.Verdict)}, rank(c.Verdict)})
		}
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].r < items[j].r })
	for i, it := range items {
		if i == n {
			out = append(out, headline{fmt.Sprintf("+%d more", len(items)-n), "mute"})
			break
		}
		out = append(out, it.h)
	}
	return out
}

// verdictClass is the CSS class of a verdict word: whatever words
// evaluate/stats produces are shown, the two directional ones coloured.
func verdictClass(v stats.Verdict) string {
	return strings.ReplaceAll(strings.ToLower(string(v)), " ", "-")
}

// report reads evaluation id's report.json (cached by size and mtime);
// nil when there is none.
func (d *Dashboard) report(id int64) *report.Report {
	path := filepath.Join(d.src.OutDir(id), "report.json")
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	d.mu.Lock()
	c, ok := d.cache[path]
	d.mu.Unlock()
	if ok && c.mod.Equal(fi.ModTime()) && c.size == fi.Size() {
		return c.r
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var r report.Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil
	}
	d.mu.Lock()
	if len(d.cache) > 4096 {
		d.cache = map[string]cachedReport{}
	}
	d.cache[path] = cachedReport{mod: fi.ModTime(), size: fi.Size(), r: &r}
	d.mu.Unlock()
	return &r
}

// ---- one evaluation ----

type verdictRow struct {
	Benchmark, Metric, Base, Other string
	BaseMean, OtherMean            float64
	BaseN, OtherN                  int
	Change, CILow, CIHigh          float64
	CIBounded                      bool
	P, Verdict, Class, Reason      string
}

type plotView struct {
	SVG     template.HTML
	Caption string
}

type buildView struct {
	store.Build
	Seconds       float64
	Objects, Hits int
	Cache         string
	HasLog        bool
	// HasMeta: the artifact's metadata.json was read (time and cache
	// figures are known).
	HasMeta bool
}

type runView struct {
	store.Run
	Took string
	Tail string
}

type jobView struct {
	ID                   int64
	Kind, State, Args    string
	Eval                 int64
	Attempt, MaxAttempts int
	Created              time.Time
	Errors               []string
	// Waiting: no live worker takes the job's queue, and what it needs.
	Waiting string
}

// seriesBisectView is a bisection inside the series as the service
// stores it (store series_bisections: pipelines/service's
// SeriesBisectState, read here by its JSON names): its status, the
// measurements so far, the one being made, and the outcome.
type seriesBisectView struct {
	Status    string  `json:"status"`
	Variant   string  `json:"variant"`
	Benchmark string  `json:"benchmark"`
	Metric    string  `json:"metric"`
	Change    float64 `json:"change_pct"`
	Records   []struct {
		Commit string    `json:"commit"`
		N      int       `json:"n"`
		Values []float64 `json:"values"`
		Note   string    `json:"note"`
		Failed string    `json:"failed"`
	} `json:"records"`
	Next *struct {
		Commit string `json:"commit"`
		Boots  int    `json:"boots"`
	} `json:"next"`
	Result *report.SeriesBisection `json:"result"`
	Note   string                  `json:"note"`
}

// Sentence is the outcome, or why there is none.
func (v *seriesBisectView) Sentence() string {
	if v.Result != nil {
		return v.Result.Sentence()
	}
	return v.Note
}

// perPatchView is a report's per-patch section (pipelines/experiments/perpatch):
// the patches, each series variant's benchmark after every patch
// against the step before it, and the bisection inside the series.
type perPatchView struct {
	Steps     []report.PatchStep
	Tables    []patchTableView
	Bisection string
	Notes     []string
}

type patchTableView struct {
	Heading string
	Rows    []verdictRow
	Movers  string
}

func perPatchOf(pp *report.PerPatch) *perPatchView {
	if pp == nil {
		return nil
	}
	v := &perPatchView{Steps: pp.Steps, Notes: pp.Notes}
	if pp.Bisection != nil {
		v.Bisection = pp.Bisection.Sentence()
	}
	for _, t := range pp.Tables {
		tv := patchTableView{Heading: fmt.Sprintf("%s %s, %s → %s", t.Name, t.Metric, t.Base, t.Variant),
			Movers: strings.Join(t.Movers(), "; ")}
		for _, c := range t.Comparisons {
			tv.Rows = append(tv.Rows, comparisonRow(t.Benchmark, c))
		}
		v.Tables = append(v.Tables, tv)
	}
	return v
}

// comparisonRow is one comparison of benchmark b as a table row.
func comparisonRow(b report.Benchmark, c report.Comparison) verdictRow {
	p := "–"
	if c.Tested {
		p = stats.FormatP(c.WelchP)
	} else if c.Exact {
		p = "exact"
	}
	return verdictRow{Benchmark: b.Name, Metric: b.Metric, Base: c.Base, Other: c.Other,
		BaseMean: c.Comparison.Base.Mean, OtherMean: c.Comparison.Other.Mean, BaseN: c.Comparison.Base.N, OtherN: c.Comparison.Other.N,
		Change: c.Change, CILow: c.CILow, CIHigh: c.CIHigh, CIBounded: c.CIBounded, P: p,
		Verdict: string(c.Verdict), Class: verdictClass(c.Verdict), Reason: c.Reason}
}

func (d *Dashboard) evalID(w http.ResponseWriter, r *http.Request) (*store.Evaluation, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		d.fail(w, fail.Inputf("evaluation %q: not an evaluation number", r.PathValue("id")))
		return nil, false
	}
	e, err := d.src.Store().Evaluation(id)
	if err != nil {
		d.fail(w, err)
		return nil, false
	}
	return e, true
}

// Active reports whether an evaluation may still change.
func Active(status string) bool { return status == "queued" || status == "running" }

func (d *Dashboard) evaluation(w http.ResponseWriter, r *http.Request) {
	e, ok := d.evalID(w, r)
	if !ok {
		return
	}
	st := d.src.Store()
	data := struct {
		page
		E          *store.Evaluation
		Active     bool
		Lore       string
		Log        []string
		HasReport  bool
		Verdicts   []verdictRow
		Confidence string
		Rule       string
		Plots      []plotView
		Confounds  []report.Confound
		Builds     []buildView
		Runs       []runView
		Draft      string
		Jobs       []jobView
		Waiting    []string
		Posts      []postView
		Apply      *store.ApplyFailure
		Why        *why
		PerPatch   *perPatchView
		Bisection  *seriesBisectView
	}{page: page{Title: fmt.Sprintf("#%d %s", e.ID, e.SeriesTitle), Where: d.opt.Where}, E: e, Active: Active(e.Status),
		Lore: strings.TrimRight(d.opt.Lore, "/") + "/", Confidence: "95%"}
	if ps, err := st.Posts(e.ID, "", 200); err == nil {
		data.Posts = postViews(ps)
	}
	apply, err := st.ApplyFailureOf(e.ID)
	if err != nil {
		d.fail(w, err)
		return
	}
	data.Apply = apply
	data.Why = whyFailed(st, e)
	if data.Active {
		data.Refresh = 10
		data.Log = d.src.Log(e.ID)
	}
	if rep := d.report(e.ID); rep != nil {
		data.HasReport = true
		data.Rule = rep.Rule
		data.Confounds = rep.Confounds
		data.PerPatch = perPatchOf(rep.PerPatch)
		for _, b := range rep.Benchmarks {
			for _, c := range b.Comparisons {
				if c.Confidence > 0 {
					data.Confidence = fmt.Sprintf("%g%%", math.Round(c.Confidence*1000)/10)
				}
				data.Verdicts = append(data.Verdicts, comparisonRow(b, c))
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(d.src.OutDir(e.ID), "reply.eml")); err == nil {
		data.Draft = string(b)
	}
	if b, err := st.SeriesBisection(e.ID); err != nil {
		d.fail(w, err)
		return
	} else if b != nil {
		var v seriesBisectView
		if err := json.Unmarshal(b, &v); err == nil {
			data.Bisection = &v
		}
	}
	plots, err := d.plots(e.ID)
	if err != nil {
		d.fail(w, err)
		return
	}
	data.Plots = plots
	builds, err := st.BuildsOf(e.ID)
	if err != nil {
		d.fail(w, err)
		return
	}
	for _, b := range builds {
		data.Builds = append(data.Builds, d.buildInfo(r.Context(), b))
	}
	runs, err := st.RunsOf(e.ID)
	if err != nil {
		d.fail(w, err)
		return
	}
	for _, rn := range runs {
		v := runView{Run: rn}
		if !rn.Finished.IsZero() {
			v.Took = rn.Finished.Sub(rn.Started).Round(100 * time.Millisecond).String()
		}
		if rn.ConsoleBytes > 0 {
			if c, err := st.Console(rn.ID); err == nil {
				v.Tail = tail(string(c), 12)
			}
		}
		data.Runs = append(data.Runs, v)
	}
	if jobs, err := d.src.Jobs(r.Context(), e.ID, 50); err == nil {
		data.Jobs = d.jobViews(jobs)
		for _, j := range data.Jobs {
			if j.Waiting != "" {
				data.Waiting = append(data.Waiting, fmt.Sprintf("%s job %d: %s", j.Kind, j.ID, j.Waiting))
			}
		}
	}
	d.render(w, "evaluation", data)
}

func (d *Dashboard) buildInfo(ctx context.Context, b store.Build) buildView {
	v := buildView{Build: b}
	// The store's metadata says whether the stage got the kernel from the
	// cache; the artifact's metadata.json how it was built.
	var rec struct {
		CacheHit bool `json:"cache_hit"`
	}
	_ = json.Unmarshal(b.Metadata, &rec)
	var m build.Metadata
	if f, err := d.src.BuildFile(ctx, b, "metadata.json"); err == nil {
		raw, err := io.ReadAll(io.LimitReader(f, 16<<20))
		f.Close()
		if err == nil && json.Unmarshal(raw, &m) == nil {
			v.HasMeta = true
			if !rec.CacheHit {
				v.Seconds = m.Results.Duration["total"]
			}
			v.Objects = m.Results.ObjectsCompiled
			v.Hits = m.Results.CCacheHits
			v.Cache = m.Build.CompilerCache
		}
	}
	if f, err := d.src.BuildFile(ctx, b, "build.log"); err == nil {
		f.Close()
		v.HasLog = true
	}
	return v
}

// plotSets are an evaluation's samples grouped per (benchmark, metric),
// variants in first-seen order; ops/s is left out where ns/op exists
// (the reciprocal says the same).
func (d *Dashboard) plotSets(id int64) ([][]stats.SampleSet, error) {
	samples, err := d.src.Store().Samples(id)
	if err != nil {
		return nil, err
	}
	sets := stats.Sets(samples)
	hasNs := map[string]bool{}
	for _, s := range sets {
		if s.Metric == "ns/op" {
			hasNs[s.Benchmark] = true
		}
	}
	var order []string
	groups := map[string][]stats.SampleSet{}
	for _, s := range sets {
		if s.Metric == "ops/s" && hasNs[s.Benchmark] {
			continue
		}
		k := s.Benchmark + "\x00" + s.Metric
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], s)
	}
	out := make([][]stats.SampleSet, len(order))
	for i, k := range order {
		out[i] = groups[k]
	}
	return out, nil
}

func (d *Dashboard) plots(id int64) ([]plotView, error) {
	groups, err := d.plotSets(id)
	if err != nil {
		return nil, err
	}
	var out []plotView
	for _, g := range groups {
		svg, cap, err := plotGroup(g)
		if err != nil {
			return nil, err
		}
		out = append(out, plotView{SVG: template.HTML(svg), Caption: cap})
	}
	return out, nil
}

func plotGroup(g []stats.SampleSet) ([]byte, string, error) {
	ser := make([]PlotSeries, len(g))
	n := 0
	for i, s := range g {
		ser[i] = PlotSeries{Variant: s.Variant, Values: s.Values}
		n += len(s.Values)
	}
	unit := g[0].Unit
	if unit == "" {
		unit = g[0].Metric
	}
	dir := "lower is better"
	if g[0].HigherIsBetter {
		dir = "higher is better"
	}
	svg, err := Plot(g[0].Benchmark+" "+g[0].Metric, unit, ser)
	return svg, fmt.Sprintf("%s %s: %d samples; bar = mean, whiskers = 95%% CI of the mean; %s", g[0].Benchmark, g[0].Metric, n, dir), err
}

// plotSVG serves plot n of an evaluation as a standalone SVG file.
func (d *Dashboard) plotSVG(w http.ResponseWriter, r *http.Request) {
	e, ok := d.evalID(w, r)
	if !ok {
		return
	}
	n, err := strconv.Atoi(strings.TrimSuffix(r.PathValue("n"), ".svg"))
	groups, gerr := d.plotSets(e.ID)
	if gerr != nil {
		d.fail(w, gerr)
		return
	}
	if err != nil || n < 0 || n >= len(groups) {
		d.fail(w, fail.Inputf("evaluation %d has no plot %q (it has %d)", e.ID, r.PathValue("n"), len(groups)))
		return
	}
	svg, _, err := plotGroup(groups[n])
	if err != nil {
		d.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Write([]byte(`<?xml version="1.0"?>` + "\n"))
	w.Write(bytes.Replace(svg, []byte("<svg "), []byte(`<svg style="color:#000" `), 1))
}

func (d *Dashboard) console(w http.ResponseWriter, r *http.Request) {
	e, ok := d.evalID(w, r)
	if !ok {
		return
	}
	runID, err := strconv.ParseInt(r.PathValue("run"), 10, 64)
	if err != nil {
		d.fail(w, fail.Inputf("run %q: not a run number", r.PathValue("run")))
		return
	}
	runs, err := d.src.Store().RunsOf(e.ID)
	if err != nil {
		d.fail(w, err)
		return
	}
	for _, rn := range runs {
		if rn.ID == runID {
			c, err := d.src.Store().Console(runID)
			if err != nil {
				d.fail(w, err)
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Write(c)
			return
		}
	}
	d.fail(w, fail.Inputf("evaluation %d has no run %d", e.ID, runID))
}

func (d *Dashboard) buildLog(w http.ResponseWriter, r *http.Request) {
	e, ok := d.evalID(w, r)
	if !ok {
		return
	}
	bid, _ := strconv.ParseInt(r.PathValue("b"), 10, 64)
	builds, err := d.src.Store().BuildsOf(e.ID)
	if err != nil {
		d.fail(w, err)
		return
	}
	for _, b := range builds {
		if b.ID != bid {
			continue
		}
		f, err := d.src.BuildFile(r.Context(), b, "build.log")
		if err != nil {
			break
		}
		defer f.Close()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		io.Copy(w, f)
		return
	}
	d.fail(w, fail.Inputf("evaluation %d has no build %q with a log", e.ID, r.PathValue("b")))
}

func (d *Dashboard) act(fn func(ctx context.Context, id int64) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		e, ok := d.evalID(w, r)
		if !ok {
			return
		}
		if err := fn(r.Context(), e.ID); err != nil {
			d.actionFailed(w, err)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/evaluations/%d", e.ID), http.StatusSeeOther)
	}
}

// actionFailed answers a button whose action was refused: 409 for bad
// input (not in a state to do that), else as d.fail.
func (d *Dashboard) actionFailed(w http.ResponseWriter, err error) {
	var fe *fail.Error
	if errors.As(err, &fe) && fe.Kind == fail.KindInput {
		w.WriteHeader(http.StatusConflict)
		d.render(w, "error", struct {
			page
			Message string
		}{page{Title: "Conflict", Where: d.opt.Where}, err.Error()})
		return
	}
	d.fail(w, err)
}

// ---- queue ----

func (d *Dashboard) jobViews(jobs []*rivertype.JobRow) []jobView {
	out := make([]jobView, 0, len(jobs))
	waiting := d.src.Waiting(jobs)
	for _, j := range jobs {
		v := jobView{ID: j.ID, Kind: j.Kind, State: jobState(string(j.State), len(j.Errors) > 0), Eval: evalOf(j), Attempt: j.Attempt,
			MaxAttempts: j.MaxAttempts, Created: j.CreatedAt, Args: string(j.EncodedArgs), Waiting: waiting[j.ID]}
		for _, e := range j.Errors {
			v.Errors = append(v.Errors, fmt.Sprintf("attempt %d: %s", e.Attempt, jobError(e.Error)))
		}
		out = append(out, v)
	}
	return out
}

func evalOf(j *rivertype.JobRow) int64 {
	var a struct {
		ID int64 `json:"evaluation_id"`
	}
	_ = json.Unmarshal(j.EncodedArgs, &a)
	return a.ID
}

// queue is the queue page: the jobs counted by queue and state, then a
// section per kind of job, each one bounded query (none for a state
// with no jobs) instead of reading every job kept.
func (d *Dashboard) queue(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	states := []rivertype.JobState{rivertype.JobStateRunning, rivertype.JobStateAvailable, rivertype.JobStateScheduled,
		rivertype.JobStateRetryable, rivertype.JobStatePending, rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded}
	byQueue, err := d.src.JobCounts(ctx)
	if err != nil {
		d.fail(w, err)
		return
	}
	type count struct {
		Queue string
		N     []int
	}
	var counts []count
	total := map[rivertype.JobState]int{}
	for q, byState := range byQueue {
		c := count{q, make([]int, len(states))}
		for i, st := range states {
			c.N[i] = byState[st]
			total[st] += byState[st]
		}
		counts = append(counts, c)
	}
	sort.Slice(counts, func(i, j int) bool { return counts[i].Queue < counts[j].Queue })
	pick := func(limit int, ss ...rivertype.JobState) []jobView {
		n := 0
		for _, st := range ss {
			n += total[st]
		}
		if n == 0 && err == nil {
			return nil
		}
		jobs, jerr := d.src.Jobs(ctx, 0, limit, ss...)
		if jerr != nil {
			err = jerr
		}
		return d.jobViews(jobs)
	}
	var retried []jobView
	if total[rivertype.JobStateCompleted] > 0 {
		jobs, rerr := d.src.RetriedJobs(ctx, 50)
		if rerr != nil {
			err = rerr
		}
		retried = d.jobViews(jobs)
	}
	type section struct {
		Title string
		Jobs  []jobView
	}
	data := struct {
		page
		States   []rivertype.JobState
		Counts   []count
		Sections []section
	}{page: page{Title: "queue", Where: d.opt.Where, Refresh: 15}, States: states, Counts: counts, Sections: []section{
		{"Running", pick(100, rivertype.JobStateRunning)},
		{"Queued", pick(100, rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStatePending)},
		{"Retrying (failed attempts, will run again)", pick(100, rivertype.JobStateRetryable)},
		{"Failed (discarded after their last attempt)", pick(100, rivertype.JobStateDiscarded)},
		{"Retried, then finished", retried},
		{"Cancelled", pick(50, rivertype.JobStateCancelled)},
		{"Completed (latest)", pick(30, rivertype.JobStateCompleted)},
	}}
	if err != nil {
		d.fail(w, err)
		return
	}
	d.render(w, "queue", data)
}

// ---- workers ----

// workerView is one row of the workers page.
type workerView struct {
	store.Worker
	Live    bool
	Caps    string
	Current []string
}

func (d *Dashboard) workers(w http.ResponseWriter, r *http.Request) {
	ws, err := d.src.Store().Workers()
	if err != nil {
		d.fail(w, err)
		return
	}
	var rows []workerView
	for _, x := range ws {
		v := workerView{Worker: x, Live: d.src.Live(x), Caps: capsText(x.Capabilities)}
		if x.Current != "" {
			v.Current = strings.Split(x.Current, "\n")
		}
		rows = append(rows, v)
	}
	d.render(w, "workers", struct {
		page
		Rows []workerView
	}{page{Title: "workers", Where: d.opt.Where, Refresh: 15}, rows})
}

// capsText is a worker's capabilities (JSON) as a line.
func capsText(raw string) string {
	var c struct {
		Build       []string `json:"build"`
		QEMU        []string `json:"qemu"`
		KVM         bool     `json:"kvm"`
		SSH         []string `json:"ssh"`
		Cores       int      `json:"cores"`
		Coordinator bool     `json:"coordinator"`
	}
	if json.Unmarshal([]byte(raw), &c) != nil {
		return raw
	}
	var parts []string
	if c.Coordinator {
		parts = append(parts, "coordinator stages")
	}
	if len(c.Build) > 0 {
		parts = append(parts, "builds "+strings.Join(c.Build, " "))
	}
	if len(c.QEMU) > 0 {
		parts = append(parts, "QEMU "+strings.Join(c.QEMU, " ")+map[bool]string{true: " (KVM)"}[c.KVM])
	}
	if len(c.SSH) > 0 {
		parts = append(parts, "SSH "+strings.Join(c.SSH, " "))
	}
	parts = append(parts, fmt.Sprintf("%d cores", c.Cores))
	return strings.Join(parts, "; ")
}

// ---- helpers ----

func age(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

func num(f float64) string {
	a := math.Abs(f)
	switch {
	case a >= 1e6:
		return strconv.FormatFloat(f, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(f, 'f', 1, 64)
	default:
		return strconv.FormatFloat(f, 'g', 4, 64)
	}
}

func shortHash(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func tail(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// jobState is a job's state in the evaluation's words, not River's: a
// job the service stopped because its stage failed for good is
// "cancelled" to River (JobCancel) but "failed" to the evaluation; one
// River gave up on after its attempts is "failed" too.
func jobState(state string, hasErrors bool) string {
	switch {
	case state == "cancelled" && hasErrors, state == "discarded":
		return "failed"
	}
	return state
}

// jobError is a job error's first line without River's type names
// (JobCancelError: ..., JobSnoozeError, ...).
func jobError(msg string) string {
	l := firstLine(msg)
	for _, p := range []string{"JobCancelError: ", "jobCancelError: ", "JobSnoozeError: "} {
		l = strings.TrimPrefix(l, p)
	}
	return l
}
