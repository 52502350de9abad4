package service

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/pipelines/store"
)

// recordOn stores a finished evaluation of pipeline on tree whose
// kernels were built for arch, its samples (one boot per variant) and
// report.json as the report stage writes it (report.AddResults on samples: voluntary+dyn slower than
// voluntary by shift ns on kill): the trend and the index's filters
// without booting kernels.
func recordOn(tb testing.TB, s *Service, key, pipeline, tree, arch string, shift float64) int64 {
	tb.Helper()
	st := s.Store()
	e, _, err := st.CreateOrResumeEvaluation(store.Key("trend", key), store.EvaluationMeta{Pipeline: pipeline,
		SeriesTitle: "sched: " + key, SeriesVersion: 1, Tree: tree, Base: "9f1c2d3e4b5a69788796a5b4c3d2e1f0a9b8c7d6"})
	if err != nil {
		tb.Fatal(err)
	}
	variants := []string{"voluntary", "voluntary+dyn"}
	var samples []evaluate.Sample
	for vi, v := range variants {
		if _, err := st.RecordBuild(e.ID, store.Build{Variant: v, Arch: arch, Status: "ok"}); err != nil {
			tb.Fatal(err)
		}
		var mine []evaluate.Sample
		for it := 0; it < 8; it++ {
			val := 1000 + float64(vi)*shift + math.Sin(float64(it*5+vi))*3
			mine = append(mine, evaluate.Sample{Variant: v, Iteration: it, Benchmark: "kill", Metric: "ns/op", Unit: "ns", Value: val})
		}
		runID, err := st.BeginRun(e.ID, v, 0)
		if err != nil {
			tb.Fatal(err)
		}
		if err := st.FinishRun(runID, store.RunOK, evaluate.Environment{KernelRelease: "7.2.13", Target: "qemu"}, nil, mine); err != nil {
			tb.Fatal(err)
		}
		samples = append(samples, mine...)
	}
	if err := st.SetEvaluationStatus(e.ID, "done"); err != nil {
		tb.Fatal(err)
	}
	r := &report.Report{Title: pipeline, ID: fmt.Sprintf("%s-%d", pipeline, e.ID), Generated: time.Now().UTC(), Arch: arch,
		Tree: report.TreeInfo{Path: tree, Base: "9f1c2d3e4b5a69788796a5b4c3d2e1f0a9b8c7d6", BaseName: "v7.2.13"}}
	for _, v := range variants {
		r.Variants = append(r.Variants, report.Variant{Name: v, Boots: 1})
	}
	if err := r.AddResults(samples, report.Spec{Comparisons: []report.Pair{{Base: "voluntary", Other: "voluntary+dyn"}}}); err != nil {
		tb.Fatal(err)
	}
	writeReport(tb, s, e.ID, r)
	return e.ID
}

func writeReport(tb testing.TB, s *Service, id int64, r *report.Report) {
	tb.Helper()
	dir := s.OutDir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "report.json"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := report.WriteJSON(f, r); err != nil {
		tb.Fatal(err)
	}
}

// fetchPage GETs path from the service: its status and body.
func fetchPage(t *testing.T, base, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

var evalLinkRE = regexp.MustCompile(`<td class="n"><a href="/evaluations/(\d+)">`)

// listedIDs are the evaluations a page's table rows link, in order.
func listedIDs(page string) []string {
	var out []string
	for _, m := range evalLinkRE.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestIndexFiltersByTreeAndArch: the index narrows to a tree and to an
// arch (an evaluation built for it), alone, together and with the
// pipeline; the pickers offer what the store holds; a value it does not
// hold is a 400 with one line naming the parameter; the active filters
// are shown with links dropping each; paging keeps the filters; the API
// narrows the same way.
func TestIndexFiltersByTreeAndArch(t *testing.T) {
	eachDatabase(t, func(t *testing.T, db string) { testIndexFilters(t, db) })
}

func testIndexFilters(t *testing.T, db string) {
	s, base := testService(t, Config{Database: db})
	ppc := recordEvaluations(t, s, 2, 1) // ppc-preempt-dynamic, /srv/linux.git, ppc64le
	x86 := recordOn(t, s, "x86", "default", "/srv/next.git", "x86_64", 40)
	for _, tc := range []struct {
		query string
		want  []int64
	}{
		{"tree=/srv/next.git", []int64{x86}},
		{"tree=/srv/linux.git", []int64{ppc[1], ppc[0]}},
		{"arch=ppc64le", []int64{ppc[1], ppc[0]}},
		{"arch=x86_64&tree=/srv/next.git", []int64{x86}},
		{"arch=x86_64&pipeline=ppc-preempt-dynamic", nil},
		{"arch=ppc64le&tree=/srv/next.git", nil},
	} {
		code, page := fetchPage(t, base, "/?"+tc.query)
		var want []string
		for _, id := range tc.want {
			want = append(want, itoa(id))
		}
		if got := listedIDs(page); code != 200 || !slices.Equal(got, want) {
			t.Errorf("/?%s: %d, evaluations %v, want %v", tc.query, code, got, want)
		}
		if len(tc.want) == 0 && !strings.Contains(page, "No evaluations match") {
			t.Errorf("/?%s: an empty list without saying nothing matches", tc.query)
		}
	}
	_, page := fetchPage(t, base, "/")
	for _, want := range []string{`<select name="tree">`, `<option>/srv/linux.git</option>`, `<option>/srv/next.git</option>`,
		`<select name="arch">`, `<option>ppc64le</option>`, `<option>x86_64</option>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the index lacks %s", want)
		}
	}
	_, page = fetchPage(t, base, "/?tree=/srv/next.git")
	if !strings.Contains(page, `<option selected>/srv/next.git</option>`) {
		t.Errorf("the tree picker does not show the chosen tree")
	}
	// A value the store does not hold is a 400 with one line naming
	// the parameter, the value and what is known.
	for q, line := range map[string]string{
		"tree=/srv/nope.git":                      `tree &#34;/srv/nope.git&#34;: no evaluation is on this tree (known: /srv/linux.git, /srv/next.git)`,
		"arch=mips&pipeline=default":              `arch &#34;mips&#34;: no evaluation has a build for this arch (known: ppc64le, x86_64)`,
		"tree=%3Cb%3E&arch=x86_64":                `tree &#34;&lt;b&gt;&#34;: no evaluation is on this tree`,
		"pipeline=nope&tree=/srv/linux.git":       `pipeline &#34;nope&#34;: no such pipeline (known: `,
		"status=odd&tree=/srv/linux.git":          `status &#34;odd&#34;: no such status (known: queued, running, done, failed, cancelled)`,
		"tree=/srv/linux.git&page=0":              `page &#34;0&#34;: want a page number from 1`,
		"tree=/srv/linux.git&arch=ppc64le&page=x": `page &#34;x&#34;: want a page number from 1`,
	} {
		code, page := fetchPage(t, base, "/?"+q)
		if code != http.StatusBadRequest || len(listedIDs(page)) != 0 || strings.Count(page, `<p class="err">`) != 1 ||
			!strings.Contains(page, `<p class="err">`+line) {
			t.Errorf("/?%s: %d; want 400 and the one line %s\n%s", q, code, line, page)
		}
	}
	// Each active filter is shown with a link dropping it.
	_, page = fetchPage(t, base, "/?tree=/srv/next.git&arch=x86_64")
	for _, want := range []string{`tree <b>/srv/next.git</b> <a href="/?arch=x86_64"`, `arch <b>x86_64</b> <a href="/?tree=%2Fsrv%2Fnext.git"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the index does not show the active filter %s", want)
		}
	}
	// The API narrows the same way.
	var lr ListResponse
	code, raw := fetchPage(t, base, "/api/v1/evaluations?tree=/srv/next.git&arch=x86_64")
	if err := json.Unmarshal([]byte(raw), &lr); code != 200 || err != nil || lr.Total != 1 ||
		len(lr.Evaluations) != 1 || lr.Evaluations[0].ID != x86 {
		t.Errorf("API ?tree=&arch=: %+v, %v; want only %d", lr, err, x86)
	}

	// Paging keeps the tree and the arch: 52 evaluations on one tree
	// built for riscv64, two pages of 50.
	var many []int64
	for i := 0; i < 52; i++ {
		e, _, err := s.Store().CreateOrResumeEvaluation(store.Key("many", itoa(int64(i))), store.EvaluationMeta{Pipeline: "default", Tree: "/srv/many.git"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Store().RecordBuild(e.ID, store.Build{Variant: "base", Arch: "riscv64", Status: "ok"}); err != nil {
			t.Fatal(err)
		}
		many = append(many, e.ID)
	}
	_, page = fetchPage(t, base, "/?tree=/srv/many.git&arch=riscv64")
	next := regexp.MustCompile(`<a href="([^"]*)">older →</a>`).FindStringSubmatch(page)
	if len(listedIDs(page)) != 50 || next == nil {
		t.Fatalf("page 1 of 52: %d rows, older link %v", len(listedIDs(page)), next)
	}
	u, err := url.Parse(html.UnescapeString(next[1]))
	if err != nil || u.Query().Get("tree") != "/srv/many.git" || u.Query().Get("arch") != "riscv64" || u.Query().Get("page") != "2" {
		t.Fatalf("the older link %q does not keep the filters", next[1])
	}
	_, page = fetchPage(t, base, u.String())
	if got, want := listedIDs(page), []string{itoa(many[1]), itoa(many[0])}; !slices.Equal(got, want) {
		t.Errorf("page 2: %v, want %v", got, want)
	}
	prev := regexp.MustCompile(`<a href="([^"]*)">← newer</a>`).FindStringSubmatch(page)
	if prev == nil || !strings.Contains(html.UnescapeString(prev[1]), "tree=%2Fsrv%2Fmany.git") {
		t.Errorf("the newer link %v does not keep the tree", prev)
	}
}

// TestTrendPage: /trend?pipeline= lists that pipeline's verdicts newest
// first, one row per comparison (date, tree and base, arch, change with
// its 95% CI as the report has them, verdict), an evaluation without
// results says why, and each benchmark is plotted; tree and arch narrow
// it; an unknown pipeline, tree or arch is a 400 naming it; the index, its
// rows and an evaluation's page link to it.
func TestTrendPage(t *testing.T) {
	s, base := testService(t, Config{})
	const p = "ppc-preempt-dynamic"
	ppc := recordEvaluations(t, s, 3, 2)
	next := recordOn(t, s, "next", p, "/srv/next.git", "x86_64", 60)
	failed, _, err := s.Store().CreateOrResumeEvaluation(store.Key("trend", "failed"), store.EvaluationMeta{Pipeline: p, SeriesTitle: "breaks", Tree: "/srv/linux.git"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Store().RecordBuild(failed.ID, store.Build{Variant: "voluntary", Arch: "ppc64le", Status: "failed", ErrorKind: "kernel",
		ErrorText: "kernel/sched/core.c:9:1: error: expected ';'"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Store().SetEvaluationStatus(failed.ID, store.StatusFailed); err != nil {
		t.Fatal(err)
	}
	other := recordOn(t, s, "other", "default", "/srv/linux.git", "ppc64le", 0)

	code, page := fetchPage(t, base, "/trend?pipeline="+p)
	if code != 200 || !strings.Contains(page, `<table id="trend">`) {
		t.Fatalf("/trend?pipeline=%s: %d\n%s", p, code, page)
	}
	ids := listedIDs(page)
	// Newest first: the failed one (one row), next (one comparison),
	// then the fixture's three newest first (two benchmarks x two
	// comparisons each); the other pipeline's evaluation is not there.
	var want []string
	want = append(want, itoa(failed.ID), itoa(next))
	for i := len(ppc) - 1; i >= 0; i-- {
		want = append(want, slices.Repeat([]string{itoa(ppc[i])}, 4)...)
	}
	if !slices.Equal(ids, want) {
		t.Errorf("trend rows' evaluations %v, want %v", ids, want)
	}
	if slices.Contains(ids, itoa(other)) {
		t.Errorf("another pipeline's evaluation is in the trend")
	}
	if !strings.Contains(page, "no results: failed: build voluntary/ppc64le: kernel/sched/core.c:9:1: error: expected &#39;;&#39;") {
		t.Errorf("the failed evaluation's row does not say why it has no results")
	}
	// Each comparison's figures are the report's, with the date, tree
	// and base.
	var rep report.Report
	raw, err := os.ReadFile(filepath.Join(s.OutDir(ppc[0]), "report.json"))
	if err != nil || json.Unmarshal(raw, &rep) != nil {
		t.Fatalf("report.json of %d: %v", ppc[0], err)
	}
	ev, err := s.Store().Evaluation(ppc[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range rep.Benchmarks {
		for _, c := range b.Comparisons {
			row := fmt.Sprintf(`<td title="%s">%s</td>
<td class="n"><a href="/evaluations/%d">%d</a></td>
<td>%s <span class="mute">v%d</span></td>
<td>/srv/linux.git <span class="mute">830b3c68c1fb</span></td>
<td>ppc64le</td>
<td>%s %s</td>
<td>%s → %s</td>
<td class="n">%+.2f%% [%+.2f%%, %+.2f%%]</td>
<td><span class="v-%s">%s</span></td>`, ev.Created.Format("2006-01-02 15:04:05 MST"), ev.Created.Format("2006-01-02 15:04"), ev.ID, ev.ID,
				ev.SeriesTitle, ev.SeriesVersion, b.Name, b.Metric, c.Base, c.Other,
				c.Change, c.CILow, c.CIHigh, strings.ReplaceAll(string(c.Verdict), " ", "-"), c.Verdict)
			if !c.CIBounded || !strings.Contains(html.UnescapeString(page), row) {
				t.Errorf("the trend lacks the row of %s %s %s→%s:\n%s", b.Name, b.Metric, c.Base, c.Other, row)
			}
		}
	}
	if n := strings.Count(page, "<svg "); n != 2 {
		t.Errorf("%d plots, want 2 (kill and getppid ns/op)", n)
	}
	if !strings.Contains(page, "kill ns/op: each comparison&#39;s change in 4 evaluation(s)") {
		t.Errorf("the kill plot's caption does not count 4 evaluations")
	}
	_, body, _ := strings.Cut(page, "</style>") // the CSS names states
	for _, word := range []string{"river", "jobcancel", "discarded", "snooze"} {
		if strings.Contains(strings.ToLower(body), word) {
			t.Errorf("the trend page says %q", word)
		}
	}

	// Narrowed to a tree or an arch.
	for _, q := range []string{"&tree=/srv/next.git", "&arch=x86_64", "&tree=/srv/next.git&arch=x86_64"} {
		_, page := fetchPage(t, base, "/trend?pipeline="+p+q)
		if got := listedIDs(page); !slices.Equal(got, []string{itoa(next)}) {
			t.Errorf("trend%s: %v, want only %d", q, got, next)
		}
	}
	for q, line := range map[string]string{
		"pipeline=nope&arch=mips":               `pipeline &#34;nope&#34;: no such pipeline`,
		"pipeline=" + p + "&arch=mips":          `arch &#34;mips&#34;: no evaluation has a build for this arch (known: ppc64le, x86_64)`,
		"pipeline=" + p + "&tree=/srv/nope.git": `tree &#34;/srv/nope.git&#34;: no evaluation is on this tree`,
	} {
		code, page := fetchPage(t, base, "/trend?"+q)
		if code != http.StatusBadRequest || len(listedIDs(page)) != 0 || !strings.Contains(page, `<p class="err">`+line) {
			t.Errorf("/trend?%s: %d; want 400 and the line %s\n%s", q, code, line, page)
		}
	}
	_, page = fetchPage(t, base, "/trend")
	if !strings.Contains(page, `<a href="/trend?pipeline=ppc-preempt-dynamic">ppc-preempt-dynamic</a>`) {
		t.Errorf("/trend does not offer the stored pipelines\n%s", page)
	}

	// Linked from the index (each row's pipeline, the pipeline filter)
	// and from an evaluation's page.
	_, page = fetchPage(t, base, "/")
	if !strings.Contains(page, `<a href="/trend?pipeline=ppc-preempt-dynamic"`) {
		t.Errorf("the index's rows do not link their pipeline's trend")
	}
	_, page = fetchPage(t, base, "/?pipeline="+p+"&tree=/srv/next.git")
	if !strings.Contains(page, `id="trend-link" href="/trend?pipeline=ppc-preempt-dynamic&amp;tree=%2Fsrv%2Fnext.git"`) {
		t.Errorf("the filtered index does not link the trend with its filters")
	}
	_, page = fetchPage(t, base, "/evaluations/"+itoa(ppc[0]))
	if !strings.Contains(page, `id="trend-link" href="/trend?pipeline=ppc-preempt-dynamic"`) ||
		!strings.Contains(page, `id="trend-tree-link" href="/trend?pipeline=ppc-preempt-dynamic&amp;tree=%2fsrv%2flinux.git"`) {
		t.Errorf("the evaluation's page does not link its pipeline's trend")
	}
}

// TestFiltersEscapeTreeNames: a tree whose name is markup is shown as
// text in the pickers, the active filter, the trend link and table, an
// evaluation's page and a 400's line, and selecting it by its
// (URL-encoded) name finds its evaluation.
func TestFiltersEscapeTreeNames(t *testing.T) {
	s, base := testService(t, Config{})
	const tree = `/srv/<script>alert(1)</script>&"x".git`
	odd := recordOn(t, s, "odd", "default", tree, "x86_64", 30)
	plain := recordOn(t, s, "plain", "default", "/srv/linux.git", "x86_64", 30)
	q := url.QueryEscape(tree)
	pages := map[string]string{}
	for _, path := range []string{"/", "/?tree=" + q, "/trend?pipeline=default&tree=" + q, "/evaluations/" + itoa(odd),
		"/?tree=" + url.QueryEscape(`<img src=x onerror=alert(2)>`)} {
		_, pages[path] = fetchPage(t, base, path)
		if strings.Contains(pages[path], "<script>alert") || strings.Contains(pages[path], "<img src=x") {
			t.Errorf("%s has the tree's name as markup", path)
		}
	}
	escaped := `/srv/&lt;script&gt;alert(1)&lt;/script&gt;&amp;&#34;x&#34;.git`
	if !strings.Contains(pages["/"], `<option>`+escaped+`</option>`) {
		t.Errorf("the tree picker lacks %s", escaped)
	}
	p := pages["/?tree="+q]
	if got := listedIDs(p); !slices.Equal(got, []string{itoa(odd)}) {
		t.Errorf("/?tree=%s lists %v, want only %d (not %d)", q, got, odd, plain)
	}
	if !strings.Contains(p, `<option selected>`+escaped+`</option>`) || !strings.Contains(p, `tree <b>`+escaped+`</b>`) {
		t.Errorf("the chosen tree is not shown as text")
	}
	tp := pages["/trend?pipeline=default&tree="+q]
	if got := listedIDs(tp); !slices.Equal(got, []string{itoa(odd)}) || !strings.Contains(tp, `<td>`+escaped+` <span class="mute">v7.2.13</span></td>`) {
		t.Errorf("the trend on the tree lists %v, want only %d with its name as text", got, odd)
	}
	ep := pages["/evaluations/"+itoa(odd)]
	m := regexp.MustCompile(`id="trend-tree-link" href="([^"]*)"`).FindStringSubmatch(ep)
	if m == nil {
		t.Fatalf("the evaluation page has no trend link on its tree")
	}
	u, err := url.Parse(html.UnescapeString(m[1]))
	if err != nil || u.Query().Get("tree") != tree {
		t.Errorf("the evaluation page's trend link %q does not carry the tree", m[1])
	}
	if bad := pages["/?tree="+url.QueryEscape(`<img src=x onerror=alert(2)>`)]; !strings.Contains(bad, `<p class="err">tree &#34;&lt;img src=x onerror=alert(2)&gt;&#34;: no evaluation is on this tree`) {
		t.Errorf("the 400 does not name the tree as text\n%s", bad)
	}
}

// figureTable is the trend page's figure table (after its verdicts).
func figureTable(page string) string {
	_, t, ok := strings.Cut(page, `<table id="figure">`)
	if !ok {
		return ""
	}
	t, _, _ = strings.Cut(t, "</table>")
	return t
}

// meanCI is the mean of xs and its 95% CI half-width for n = 10
// (Student's t, 9 degrees of freedom: 2.262157), computed here, not by
// the stats package.
func meanCI(t *testing.T, xs []float64) (mean, half float64) {
	if len(xs) != 10 {
		t.Fatalf("%d samples, want 10", len(xs))
	}
	for _, x := range xs {
		mean += x
	}
	mean /= 10
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, 2.262157 * math.Sqrt(ss/9) / math.Sqrt(10)
}

// TestTrendFigure: /trend?pipeline=&benchmark=&metric= shows that
// benchmark's stored samples per evaluation and variant (mean and the
// mean's 95% CI, as computed here from the samples), newest first in
// the table and oldest left in the plot; variant= narrows to one
// variant, tree= and arch= to the evaluations there; an evaluation
// without samples is counted; a benchmark, metric or variant none of
// the evaluations measured is a 400 naming it.
func TestTrendFigure(t *testing.T) {
	s, base := testService(t, Config{})
	const p = "ppc-preempt-dynamic"
	ppc := recordEvaluations(t, s, 3, 2) // 2 boots x 5 iterations per variant
	next := recordOn(t, s, "next", p, "/srv/next.git", "x86_64", 60)
	failed, _, err := s.Store().CreateOrResumeEvaluation(store.Key("figure", "failed"), store.EvaluationMeta{Pipeline: p, SeriesTitle: "breaks", Tree: "/srv/linux.git"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store().SetEvaluationStatus(failed.ID, store.StatusFailed); err != nil {
		t.Fatal(err)
	}

	_, page := fetchPage(t, base, "/trend?pipeline="+p)
	for _, want := range []string{`<a href="/trend?benchmark=getppid&amp;metric=ns%2Fop&amp;pipeline=ppc-preempt-dynamic#figures">getppid ns/op</a>`,
		`<a href="/trend?benchmark=kill&amp;metric=ns%2Fop&amp;pipeline=ppc-preempt-dynamic#figures">kill ns/op</a>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the trend page does not offer %s", want)
		}
	}
	if figureTable(page) != "" {
		t.Errorf("a figure table without a benchmark chosen")
	}

	code, page := fetchPage(t, base, "/trend?pipeline="+p+"&benchmark=kill&metric=ns/op")
	table := figureTable(page)
	if code != 200 || table == "" {
		t.Fatalf("/trend?...&benchmark=kill: %d, no figure table\n%s", code, page)
	}
	// Newest first, each evaluation's variants in their order; the
	// fixture's three variants, next's two.
	var want []string
	want = append(want, itoa(next), itoa(next))
	for i := len(ppc) - 1; i >= 0; i-- {
		want = append(want, itoa(ppc[i]), itoa(ppc[i]), itoa(ppc[i]))
	}
	if got := listedIDs(table); !slices.Equal(got, want) {
		t.Errorf("figure rows' evaluations %v, want %v", got, want)
	}
	if !strings.Contains(page, "1 of the evaluations above has no samples of kill ns/op") {
		t.Errorf("the failed evaluation without samples is not counted")
	}
	for _, id := range ppc {
		samples, err := s.Store().Samples(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"voluntary", "voluntary+dyn", "full"} {
			var xs []float64
			for _, sm := range samples {
				if sm.Variant == v && sm.Benchmark == "kill" && sm.Metric == "ns/op" {
					xs = append(xs, sm.Value)
				}
			}
			mean, half := meanCI(t, xs)
			row := fmt.Sprintf("<td>%s</td>\n<td class=\"n\">10</td>\n<td class=\"n\">%.2f</td>\n<td class=\"n\">[%.2f, %.2f]</td>", v, mean, mean-half, mean+half)
			if !strings.Contains(html.UnescapeString(table), fmt.Sprintf(`<a href="/evaluations/%d">`, id)) || !strings.Contains(html.UnescapeString(table), row) {
				t.Errorf("evaluation %d lacks the figure row\n%s", id, row)
			}
		}
	}
	// The plot: one, its evaluations oldest left, each variant named.
	if n := strings.Count(page, "<svg "); n != 3 { // 2 verdict plots + the figure's
		t.Errorf("%d plots, want 3", n)
	}
	_, fig, _ := strings.Cut(page, `id="figures"`)
	last := -1
	for _, id := range append(slices.Clone(ppc), next) {
		at := strings.Index(fig, ">#"+itoa(id)+"<")
		if at < 0 || at < last {
			t.Errorf("the figure plot does not name #%d after the older ones", id)
		}
		last = at
	}
	if !strings.Contains(fig, "kill ns/op: each variant&#39;s mean in 4 evaluation(s), oldest left") {
		t.Errorf("the figure plot's caption does not count 4 evaluations")
	}

	// One variant; one tree and arch.
	_, page = fetchPage(t, base, "/trend?pipeline="+p+"&benchmark=kill&metric=ns/op&variant=voluntary%2Bdyn")
	table = figureTable(page)
	if got := listedIDs(table); !slices.Equal(got, []string{itoa(next), itoa(ppc[2]), itoa(ppc[1]), itoa(ppc[0])}) ||
		strings.Contains(table, "<td>full</td>") || strings.Contains(table, "<td>voluntary</td>") || !strings.Contains(html.UnescapeString(page), "<b>voluntary+dyn</b>") {
		t.Errorf("variant=voluntary+dyn: rows %v\n%s", got, table)
	}
	_, page = fetchPage(t, base, "/trend?pipeline="+p+"&benchmark=kill&metric=ns/op&tree=/srv/next.git&arch=x86_64")
	if got := listedIDs(figureTable(page)); !slices.Equal(got, []string{itoa(next), itoa(next)}) {
		t.Errorf("tree=/srv/next.git: figure rows %v, want only %d", got, next)
	}

	for q, line := range map[string]string{
		"pipeline=" + p + "&benchmark=nope&metric=ns/op":                       `benchmark &#34;nope&#34; metric &#34;ns/op&#34;: no evaluation listed here measured it (known: getppid ns/op, kill ns/op)`,
		"pipeline=" + p + "&benchmark=kill&metric=ops/s":                       `benchmark &#34;kill&#34; metric &#34;ops/s&#34;: no evaluation listed here measured it`,
		"pipeline=" + p + "&benchmark=kill&metric=ns/op&variant=lazy":          `variant &#34;lazy&#34;: no evaluation listed here measured kill ns/op with it (known: voluntary, voluntary+dyn, full)`,
		"pipeline=" + p + "&variant=full":                                      `variant: pick a benchmark and metric first`,
		"benchmark=kill&metric=ns/op":                                          `benchmark: pick a pipeline first (pipeline=)`,
		"pipeline=" + p + "&tree=/srv/next.git&benchmark=getppid&metric=ns/op": `benchmark &#34;getppid&#34; metric &#34;ns/op&#34;: no evaluation listed here measured it (known: kill ns/op)`,
	} {
		code, page := fetchPage(t, base, "/trend?"+q)
		if code != http.StatusBadRequest || strings.Count(page, `<p class="err">`) != 1 ||
			!strings.Contains(html.UnescapeString(page), html.UnescapeString(`<p class="err">`+line)) {
			t.Errorf("/trend?%s: %d; want 400 and the line %s\n%s", q, code, line, page)
		}
	}
}

// TestFiltersAndTrendInBrowser: headless Chromium picks a tree and an
// arch in the index's form and submits it (the other pickers left at
// "any"): the list narrows and shows the active filters; a row's
// pipeline link opens the trend, whose plots are drawn with a size; a
// figure link adds the figure's table and plot. Screenshots as
// TestDashboardInBrowser saves them.
func TestFiltersAndTrendInBrowser(t *testing.T) {
	s, base := testService(t, Config{})
	const p = "ppc-preempt-dynamic"
	ppc := recordEvaluations(t, s, 2, 2)
	next := recordOn(t, s, "next", p, "/srv/next.git", "x86_64", 60)
	dir := os.Getenv("PATCHEVAL_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := browser(t)
	defer cancel()
	fatal := func(what string, err error) {
		if err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	rows := func() []string {
		ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll("#evaluations td.n > a, #figure td.n > a")).map(a => a.textContent)`))
		fatal("rows", err)
		return ids
	}
	fatal("open the index", chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(`#evaluations`)))
	if got := rows(); len(got) != 3 {
		t.Fatalf("the index lists %v, want 3 evaluations", got)
	}
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		document.querySelector('select[name="tree"]').value = "/srv/linux.git";
		document.querySelector('select[name="arch"]').value = "ppc64le";
		return true })()`))
	fatal("pick a tree and an arch", err)
	fatal("submit the filters", chromedp.Do(ctx, chromedp.Click(`form.filters button`, chromedp.NodeVisible), chromedp.WaitVisible(`#active-filters`)))
	search, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.search`))
	fatal("location", err)
	q, _ := url.ParseQuery(strings.TrimPrefix(search, "?"))
	if got, want := rows(), []string{itoa(ppc[1]), itoa(ppc[0])}; !slices.Equal(got, want) || q.Get("tree") != "/srv/linux.git" || q.Get("arch") != "ppc64le" {
		t.Errorf("after picking /srv/linux.git and ppc64le: %s lists %v, want %v", search, got, want)
	}
	active, err := chromedp.Run(ctx, chromedp.Text(`#active-filters`))
	fatal("active filters", err)
	if !strings.Contains(active, "tree /srv/linux.git") || !strings.Contains(active, "arch ppc64le") {
		t.Errorf("the active filters say %q", active)
	}
	list, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	fatal("screenshot", err)

	fatal("open the trend", chromedp.Do(ctx, chromedp.Click(`#evaluations a[href^="/trend"]`, chromedp.NodeVisible), chromedp.WaitVisible(`#trend`)))
	drawn := `Array.from(document.querySelectorAll(".plot svg")).filter(s => s.getBoundingClientRect().width > 100 && s.getBoundingClientRect().height > 100).length`
	plots, err := chromedp.Run(ctx, chromedp.Evaluate[int](drawn))
	fatal("plots", err)
	if plots != 2 {
		t.Errorf("the trend draws %d plots with a size, want 2 (kill, getppid)", plots)
	}
	fatal("open a figure", chromedp.Do(ctx, chromedp.Click(`#figure-links a`, chromedp.NodeVisible), chromedp.WaitVisible(`#figure`)))
	plots, err = chromedp.Run(ctx, chromedp.Evaluate[int](drawn))
	fatal("plots", err)
	// getppid is the first figure offered; next (x86_64) did not measure it.
	if got, want := rows(), []string{itoa(ppc[1]), itoa(ppc[1]), itoa(ppc[1]), itoa(ppc[0]), itoa(ppc[0]), itoa(ppc[0])}; plots != 3 || !slices.Equal(got, want) {
		t.Errorf("the figure: %d plots, rows %v; want 3 plots and rows %v (not %d)", plots, got, want, next)
	}
	trend, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	fatal("screenshot", err)
	for name, png := range map[string][]byte{"dashboard-filtered.png": list, "dashboard-trend.png": trend} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", p, len(png))
	}
}
