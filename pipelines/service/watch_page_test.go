package service

import (
	"encoding/xml"
	"errors"
	"html"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/store"
)

// seedWatch stores a watch with three evaluated tags (the third 30%
// slower), the regression event between the last two and its finished
// bisection: what a watch leaves in the store, without kernels.
func seedWatch(t *testing.T, st *store.Store, tree string) *store.Watch {
	t.Helper()
	w, err := st.AddWatch(store.Watch{Name: "mainline", Remote: "http://127.0.0.1:9/linux.git", Tags: "v6.*-rc*",
		Pipeline: "test-getppid", Schedule: "@every 30m", Bisect: true, Tree: tree, Origin: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		tag  string
		base float64
	}{{"v6.2-rc1", 100}, {"v6.2-rc2", 100}, {"v6.2-rc10", 130}} {
		commit := strings.Repeat(string(rune('a'+i)), 40)
		tag, _, err := st.AddWatchTag(w.ID, tc.tag, commit, store.TagQueued)
		if err != nil {
			t.Fatal(err)
		}
		ev, _, err := st.CreateOrResumeEvaluation(store.Key(w.Pipeline, commit), store.EvaluationMeta{Pipeline: w.Pipeline, Tree: tree, Base: commit})
		if err != nil {
			t.Fatal(err)
		}
		for boot := 0; boot < 3; boot++ {
			id, err := st.BeginRun(ev.ID, "base", boot)
			if err != nil {
				t.Fatal(err)
			}
			smp := []evaluate.Sample{{Variant: "base", Boot: boot, Benchmark: "getppid", Metric: "ns/op", Unit: "ns", Value: tc.base + float64(boot)}}
			if err := st.FinishRun(id, store.RunOK, evaluate.Environment{}, nil, smp); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.SetEvaluationStatus(ev.ID, store.StatusDone); err != nil {
			t.Fatal(err)
		}
		if err := st.SetWatchTag(tag.ID, store.TagDone, commit, ev.ID, nil); err != nil {
			t.Fatal(err)
		}
	}
	ev, _, err := st.AddWatchEvent(store.WatchEvent{WatchID: w.ID, From: "v6.2-rc2", To: "v6.2-rc10", Variant: "base",
		Benchmark: "getppid", Metric: "ns/op", Verdict: "regression", Change: 29.7, CILow: 25.1, CIHigh: 34.3, Reason: "Welch t-test p=0.0004"})
	if err != nil {
		t.Fatal(err)
	}
	culprit := bisect.Commit{Hash: strings.Repeat("c", 40), Subject: "sched: slow down getppid", Author: "Dev Eloper"}
	res := bisect.Result{Status: "found", GoodRef: "v6.2-rc2", BadRef: "v6.2-rc10", Culprit: &culprit, Confirmed: true,
		Commits: 8, Builds: 5, Bound: 5, Benchmark: "getppid", Metric: "ns/op",
		Steps: []bisect.Step{
			{N: 1, Commit: bisect.Commit{Hash: strings.Repeat("d", 40), Subject: "mm: tidy"}, Role: "step", Values: []float64{100}, Mean: 100, Verdict: "good"},
			{N: 2, Commit: culprit, Role: "step", Values: []float64{130}, Mean: 130, Verdict: "bad"},
			{N: 3, Commit: bisect.Commit{Hash: strings.Repeat("e", 40), Subject: "x86: does not build"}, Role: "step", Verdict: "skip", Error: "build failed"},
		}}
	if err := st.SetEventBisect(ev.ID, res); err != nil {
		t.Fatal(err)
	}
	return w
}

// get fetches url; the body comes back with HTML entities unescaped
// (html/template writes + as &#43;).
func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, html.UnescapeString(string(b))
}

// section is the HTML between `<table id="id"` and the next </table>.
func section(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `<table id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no table #%s in\n%s", id, page)
	}
	j := strings.Index(page[i:], "</table>")
	return page[i : i+j]
}

// TestWatchPage: the dashboard's watch page shows the history per tag
// in version order with mean and 95% CI, the plot (well-formed SVG with
// a CI band), the regression event with its delta and CI, and the
// bisection with its steps; the navigation links to the watches.
func TestWatchPage(t *testing.T) {
	s, base := testService(t, Config{})
	seedWatch(t, s.Store(), t.TempDir())

	code, _, home := get(t, base+"/")
	if code != 200 || !strings.Contains(home, `<a href="/watches">watches</a>`) {
		t.Fatalf("GET / = %d: no link to the watches", code)
	}
	code, _, list := get(t, base+"/watches")
	if code != 200 || !strings.Contains(section(t, list, "watches"), `<a href="/watches/mainline">mainline</a>`) {
		t.Fatalf("GET /watches = %d\n%s", code, list)
	}

	code, _, page := get(t, base+"/watches/mainline")
	if code != 200 {
		t.Fatalf("GET /watches/mainline = %d\n%s", code, page)
	}
	hist := section(t, page, "history")
	rows := regexp.MustCompile(`(?s)<tr><td>(v[^<]*)</td>.*?</tr>`).FindAllStringSubmatch(hist, -1)
	var tags []string
	for _, r := range rows {
		tags = append(tags, r[1])
	}
	if strings.Join(tags, " ") != "v6.2-rc1 v6.2-rc2 v6.2-rc10" {
		t.Fatalf("history rows %v, want version order (rc10 last)\n%s", tags, hist)
	}
	// Samples 100, 101, 102: mean 101, 95% CI 101 ± 4.303/sqrt(3).
	if !strings.Contains(rows[0][0], "101.0 [98.52, 103.5]") || !strings.Contains(rows[2][0], "131.0 [128.5, 133.5]") {
		t.Fatalf("history values:\n%s", hist)
	}
	if !strings.Contains(hist, "base getppid ns/op (ns)") {
		t.Fatalf("no series column:\n%s", hist)
	}
	evs := section(t, page, "events")
	if !strings.Contains(evs, `<span class="v-regression">regression</span>`) || !strings.Contains(evs, "v6.2-rc2") ||
		!strings.Contains(evs, "+29.70%") || !strings.Contains(evs, "[+25.10%, +34.30%]") {
		t.Fatalf("event row:\n%s", evs)
	}
	for _, want := range []string{"Bisection mainline v6.2-rc2..v6.2-rc10", "culprit <code>cccccccccccc</code> sched: slow down getppid",
		"8 commits, 5 builds (bound 5), 0 skipped, confirmed", "x86: does not build", "build failed", `<img id="watch-plot" src="/watches/mainline/plot.svg"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}

	code, hdr, svg := get(t, base+"/watches/mainline/plot.svg")
	if code != 200 || hdr.Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("GET plot.svg = %d %s", code, hdr.Get("Content-Type"))
	}
	dec := xml.NewDecoder(strings.NewReader(svg))
	elems := map[string]int{}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("plot.svg is not well-formed: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			elems[se.Name.Local]++
		}
	}
	if elems["svg"] != 1 || elems["polygon"] != 1 || elems["polyline"] != 1 || elems["circle"] != 3 {
		t.Fatalf("plot elements %v, want one CI band, one line, a point per tag", elems)
	}
	if !strings.Contains(svg, "regression v6.2-rc2..v6.2-rc10 +29.7%") {
		t.Errorf("the plot does not mark the event")
	}

	if code, _, _ := get(t, base+"/watches/nosuch"); code != 404 {
		t.Errorf("GET /watches/nosuch = %d, want 404", code)
	}
}
