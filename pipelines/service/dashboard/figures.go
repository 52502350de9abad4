package dashboard

import (
	"fmt"
	"html/template"
	"math"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/pipelines/store"
)

// figureKey is a (benchmark, metric) the trend's evaluations measured.
type figureKey struct{ Benchmark, Metric string }

// choice is a link offered on the trend page, Selected when it is the
// one shown.
type choice struct {
	Name, Link string
	Selected   bool
}

// figureRow is one variant's figure in one evaluation: the mean of its
// samples in the store with the mean's 95% confidence interval
// (Student's t; unbounded below two samples or with no spread).
type figureRow struct {
	E                     *store.Evaluation
	Variant               string
	N                     int
	Mean, CILow, CIHigh   string
	Bounded               bool
	mean, ciLow, ciHigh   float64
	evaluation, variantAt int
}

// figureView is one benchmark's figure across the trend's evaluations,
// per variant (or for one variant), newest first in the table and
// oldest left in the plot.
type figureView struct {
	figureKey
	Variant, Unit  string
	HigherIsBetter bool
	Variants       []choice
	Rows           []figureRow
	Plot           *plotView
	// Without is how many of the trend's evaluations have no samples of
	// it (not measured, failed or not finished).
	Without int
}

// figureLink is the trend page of f showing benchmark k for variant
// (all variants when "").
func figureLink(f store.ListFilter, k figureKey, variant string) string {
	v := url.Values{}
	for _, kv := range [][2]string{{"pipeline", f.Pipeline}, {"tree", f.Tree}, {"arch", f.Arch},
		{"benchmark", k.Benchmark}, {"metric", k.Metric}, {"variant", variant}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	return "/trend?" + v.Encode()
}

// figures reads the samples of evs (newest first) from the store, offers
// each (benchmark, metric) they measured as a link and, when q names
// one (benchmark=, metric=, optionally variant=), fills v.Figure. bad is
// one line naming a parameter whose value none of evs has.
func (d *Dashboard) figures(f store.ListFilter, q url.Values, evs []*store.Evaluation, v *trendView) (bad string, err error) {
	sets := make([][]stats.SampleSet, len(evs))
	seen := map[figureKey]bool{}
	var keys []figureKey
	for i, e := range evs {
		samples, err := d.src.Store().Samples(e.ID)
		if err != nil {
			return "", err
		}
		sets[i] = stats.Sets(stats.Primary(samples))
		for _, s := range sets[i] {
			if k := (figureKey{s.Benchmark, s.Metric}); !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].Benchmark < keys[j].Benchmark || keys[i].Benchmark == keys[j].Benchmark && keys[i].Metric < keys[j].Metric
	})
	want := figureKey{q.Get("benchmark"), q.Get("metric")}
	var names []string
	for _, k := range keys {
		name := k.Benchmark + " " + k.Metric
		names = append(names, name)
		v.Figures = append(v.Figures, choice{Name: name, Link: figureLink(f, k, ""), Selected: k == want})
	}
	if want.Benchmark == "" && want.Metric == "" {
		if q.Get("variant") != "" {
			return "variant: pick a benchmark and metric first (benchmark=, metric=)", nil
		}
		return "", nil
	}
	if !seen[want] {
		return fmt.Sprintf("benchmark %q metric %q: no evaluation listed here measured it (known: %s)",
			want.Benchmark, want.Metric, knownList(names)), nil
	}
	fv := &figureView{figureKey: want, Variant: q.Get("variant")}
	var variants []string
	for i := len(evs) - 1; i >= 0; i-- {
		for _, s := range sets[i] {
			if (figureKey{s.Benchmark, s.Metric}) == want && !slices.Contains(variants, s.Variant) {
				variants = append(variants, s.Variant)
			}
		}
	}
	if fv.Variant != "" && !slices.Contains(variants, fv.Variant) {
		return fmt.Sprintf("variant %q: no evaluation listed here measured %s %s with it (known: %s)",
			fv.Variant, want.Benchmark, want.Metric, knownList(variants)), nil
	}
	fv.Variants = append(fv.Variants, choice{Name: "all variants", Link: figureLink(f, want, ""), Selected: fv.Variant == ""})
	for _, name := range variants {
		fv.Variants = append(fv.Variants, choice{Name: name, Link: figureLink(f, want, name), Selected: name == fv.Variant})
	}
	fv.fill(evs, sets, variants)
	v.Figure = fv
	return "", fv.plot(evs, variants)
}

// fill makes fv's rows, newest evaluation first, its variants in the
// order they first appear.
func (fv *figureView) fill(evs []*store.Evaluation, sets [][]stats.SampleSet, variants []string) {
	for i, e := range evs {
		found := false
		for _, vname := range variants {
			s := stats.Find(sets[i], fv.Benchmark, fv.Metric, vname)
			if s == nil || (fv.Variant != "" && vname != fv.Variant) {
				continue
			}
			found = true
			fv.Unit, fv.HigherIsBetter = s.Unit, s.HigherIsBetter
			sum := stats.Summarize(s.Values)
			row := figureRow{E: e, Variant: vname, N: sum.N, mean: sum.Mean, ciLow: sum.Mean, ciHigh: sum.Mean,
				evaluation: i, variantAt: slices.Index(variants, vname)}
			if sum.N >= 2 && sum.StdDev > 0 {
				half := stats.TQuantile(0.975, float64(sum.N-1)) * sum.StdDev / math.Sqrt(float64(sum.N))
				row.ciLow, row.ciHigh, row.Bounded = sum.Mean-half, sum.Mean+half, true
			}
			row.Mean, row.CILow, row.CIHigh = figure(row.mean), figure(row.ciLow), figure(row.ciHigh)
			fv.Rows = append(fv.Rows, row)
		}
		if !found {
			fv.Without++
		}
	}
}

// figure formats a measured value for the table.
func figure(x float64) string { return fmt.Sprintf("%.2f", x) }

// plot draws fv's rows: per variant its mean per evaluation with the
// CI as whiskers, oldest evaluation left.
func (fv *figureView) plot(evs []*store.Evaluation, variants []string) error {
	var labels []string
	col := map[int]int{} // evaluation index -> x
	for i := len(fv.Rows) - 1; i >= 0; i-- {
		r := fv.Rows[i]
		if _, ok := col[r.evaluation]; !ok {
			col[r.evaluation] = len(labels)
			labels = append(labels, fmt.Sprintf("#%d", evs[r.evaluation].ID))
		}
	}
	if len(labels) == 0 {
		return nil
	}
	series := make([]TrendSeries, len(variants))
	for j, name := range variants {
		series[j] = TrendSeries{Name: name, Points: make([]TrendPoint, len(labels))}
	}
	for _, r := range fv.Rows {
		series[r.variantAt].Points[col[r.evaluation]] = TrendPoint{OK: true, Bounded: r.Bounded, Value: r.mean, Lo: r.ciLow, Hi: r.ciHigh}
	}
	if fv.Variant != "" {
		series = series[slices.Index(variants, fv.Variant):][:1]
	}
	unit := fv.Unit
	if unit == "" {
		unit = fv.Metric
	}
	svg, err := TrendPlot(fv.Benchmark+" "+fv.Metric, unit, labels, series, false)
	if err != nil {
		return err
	}
	better := map[bool]string{true: "higher is better", false: "lower is better"}[fv.HigherIsBetter]
	who := "each variant's"
	if fv.Variant != "" {
		who = fv.Variant + "'s"
	}
	fv.Plot = &plotView{SVG: template.HTML(svg), Caption: fmt.Sprintf("%s %s: %s mean in %d evaluation(s), oldest left; whiskers = 95%% CI of the mean; %s",
		fv.Benchmark, fv.Metric, who, len(labels), strings.TrimSpace(better))}
	return nil
}
