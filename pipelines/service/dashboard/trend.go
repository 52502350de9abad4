package dashboard

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/pipelines/store"
)

// trendLimit is how many of a pipeline's newest evaluations its trend
// page reads; maxTrendPlots how many (benchmark, metric) plots it draws.
const (
	trendLimit    = 100
	maxTrendPlots = 8
)

// trendRow is one comparison of one benchmark in one evaluation, or,
// with Missing set, an evaluation without results.
type trendRow struct {
	E                              *store.Evaluation
	Arch, BaseName                 string
	Benchmark, Metric, Base, Other string
	Change, CILow, CIHigh          float64
	CIBounded                      bool
	Verdict, Class                 string
	// Missing is why an evaluation has no verdicts: its status, and for
	// a failed one its first failing stage.
	Missing string
}

// trendView is the trend page of one pipeline (on one tree and arch
// when asked): its verdicts, newest first, and a plot per (benchmark,
// metric) of each comparison's change with its confidence interval.
type trendView struct {
	Pipeline, Tree, Arch string
	Rows                 []trendRow
	Plots                []plotView
	// Evaluations were read (Total match); Measured have a report.
	Evaluations, Total, Measured int
	// PlotsLeft are the plots not drawn beyond maxTrendPlots.
	PlotsLeft int
	// Figures are the (benchmark, metric)s the evaluations measured,
	// each a link to Figure: its value per variant over time.
	Figures []choice
	Figure  *figureView
}

// trendLink is the trend page of a pipeline, narrowed to tree and arch
// when set.
func trendLink(pipeline, tree, arch string) string {
	v := url.Values{}
	for _, kv := range [][2]string{{"pipeline", pipeline}, {"tree", tree}, {"arch", arch}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	if len(v) == 0 {
		return "/trend"
	}
	return "/trend?" + v.Encode()
}

// indexLink is the index with f's filters.
func indexLink(f store.ListFilter) string {
	if v := filterValues(f); len(v) > 0 {
		return "/?" + v.Encode()
	}
	return "/"
}

// trend is the trend page: pipeline, tree and arch pickers built from
// the store (a value it does not hold is a 400 naming the parameter),
// the plots and the table.
func (d *Dashboard) trend(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.ListFilter{Pipeline: q.Get("pipeline"), Tree: q.Get("tree"), Arch: q.Get("arch"), Limit: trendLimit}
	ch, err := d.src.Store().Choices(r.Context())
	if err != nil {
		d.fail(w, err)
		return
	}
	pipelines := union(d.opt.Pipelines, ch.Pipelines)
	if bad := badFilter(f, pipelines, ch); bad != "" {
		d.errorPage(w, http.StatusBadRequest, bad)
		return
	}
	v := &trendView{Pipeline: f.Pipeline, Tree: f.Tree, Arch: f.Arch}
	if f.Pipeline == "" {
		for _, k := range []string{"benchmark", "metric", "variant"} {
			if q.Get(k) != "" {
				d.errorPage(w, http.StatusBadRequest, k+": pick a pipeline first (pipeline=)")
				return
			}
		}
	} else {
		evs, err := d.trendData(r, f, v)
		if err != nil {
			d.fail(w, err)
			return
		}
		bad, err := d.figures(f, q, evs, v)
		if err != nil {
			d.fail(w, err)
			return
		}
		if bad != "" {
			d.errorPage(w, http.StatusBadRequest, bad)
			return
		}
	}
	title := "trend"
	if f.Pipeline != "" {
		title = "trend of " + f.Pipeline
	}
	d.render(w, "trend", struct {
		page
		T             *trendView
		Pipelines     []string
		Trees, Arches []string
		Index         string
	}{page{Title: title, Where: d.opt.Where}, v, ch.Pipelines, ch.Trees, ch.Arches, indexLink(f)})
}

// trendData fills v with the newest trendLimit evaluations f selects
// and returns them.
func (d *Dashboard) trendData(r *http.Request, f store.ListFilter, v *trendView) ([]*store.Evaluation, error) {
	evs, total, err := d.src.Store().List(r.Context(), f)
	if err != nil {
		return nil, err
	}
	v.Evaluations, v.Total = len(evs), total
	reps := make([]*report.Report, len(evs))
	for i, e := range evs {
		rep := d.report(e.ID)
		reps[i] = rep
		base := shortHash(e.Base)
		if rep == nil {
			missing := e.Status
			if y := whyFailed(d.src.Store(), e); y != nil {
				missing += ": " + y.String()
			}
			v.Rows = append(v.Rows, trendRow{E: e, BaseName: base, Missing: missing})
			continue
		}
		v.Measured++
		if rep.Tree.BaseName != "" {
			base = rep.Tree.BaseName
		}
		for _, b := range rep.Benchmarks {
			for _, c := range b.Comparisons {
				if c.Aligned {
					continue // a layout control, not a verdict of its own
				}
				v.Rows = append(v.Rows, trendRow{E: e, Arch: rep.Arch, BaseName: base, Benchmark: b.Name, Metric: b.Metric,
					Base: c.Base, Other: c.Other, Change: c.Change, CILow: c.CILow, CIHigh: c.CIHigh, CIBounded: c.CIBounded,
					Verdict: string(c.Verdict), Class: verdictClass(c.Verdict)})
			}
		}
	}
	v.Plots, v.PlotsLeft, err = trendPlots(evs, reps)
	return evs, err
}

// trendPlots draws, per (benchmark, metric) in first-seen order, each
// comparison's change over the evaluations that report it, oldest left.
func trendPlots(evs []*store.Evaluation, reps []*report.Report) ([]plotView, int, error) {
	type key struct{ benchmark, metric string }
	var order []key
	higher := map[key]bool{}
	for _, rep := range reps {
		if rep == nil {
			continue
		}
		for _, b := range rep.Benchmarks {
			k := key{b.Name, b.Metric}
			if _, ok := higher[k]; !ok && len(b.Comparisons) > 0 {
				order = append(order, k)
				higher[k] = b.HigherIsBetter
			}
		}
	}
	left := max(0, len(order)-maxTrendPlots)
	order = order[:min(len(order), maxTrendPlots)]
	var out []plotView
	for _, k := range order {
		var labels []string
		var series []TrendSeries
		at := map[string]int{}
		for i := len(evs) - 1; i >= 0; i-- {
			b := findBenchmark(reps[i], k.benchmark, k.metric)
			if b == nil {
				continue
			}
			labels = append(labels, fmt.Sprintf("#%d", evs[i].ID))
			for _, c := range b.Comparisons {
				if c.Aligned {
					continue
				}
				name := c.Base + " → " + c.Other
				j, ok := at[name]
				if !ok {
					j = len(series)
					at[name] = j
					series = append(series, TrendSeries{Name: name})
				}
				for len(series[j].Points) < len(labels)-1 {
					series[j].Points = append(series[j].Points, TrendPoint{})
				}
				series[j].Points = append(series[j].Points, TrendPoint{OK: true, Value: c.Change, Bounded: c.CIBounded, Lo: c.CILow, Hi: c.CIHigh})
			}
		}
		svg, err := TrendPlot(k.benchmark+" "+k.metric, "change %", labels, series, true)
		if err != nil {
			return nil, 0, err
		}
		better := map[bool]string{true: "higher is better", false: "lower is better"}[higher[k]]
		out = append(out, plotView{SVG: template.HTML(svg), Caption: fmt.Sprintf(
			"%s %s: each comparison's change in %d evaluation(s), oldest left; whiskers = 95%% CI of the change; %s", k.benchmark, k.metric, len(labels), better)})
	}
	return out, left, nil
}

// findBenchmark is rep's (benchmark, metric), nil when it has none.
func findBenchmark(rep *report.Report, benchmark, metric string) *report.Benchmark {
	if rep == nil {
		return nil
	}
	for i := range rep.Benchmarks {
		if b := &rep.Benchmarks[i]; b.Name == benchmark && b.Metric == metric {
			return b
		}
	}
	return nil
}
