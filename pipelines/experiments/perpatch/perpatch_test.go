package perpatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/series"
	"github.com/patcheval/patcheval/series/apply"
)

// fixture is a generated 4-patch series on a small real git tree, sent
// through a real public-inbox, fetched, resolved and applied like lore
// --pipeline does. The tree's bench/<name> files stand for what a kernel
// measures.
type fixture struct {
	repo, base string
	s          *series.Series
	commits    []report.Commit
}

var (
	fixOnce sync.Once
	fixDir  string
	fixErr  error
	fixes   map[string]*fixture
	fixSrv  *testinbox.Server
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixSrv != nil {
		fixSrv.Close()
	}
	if fixDir != "" {
		os.RemoveAll(fixDir)
	}
	os.Exit(code)
}

// fixtures are two series of one tree and one inbox (made once: the
// inbox costs most): "slow", whose patch 3 of 4 slows getppid by 25%,
// and "flat", whose patches move nothing. No patch moves kill.
func fixtures(t *testing.T) map[string]*fixture {
	t.Helper()
	if _, err := exec.LookPath("public-inbox-httpd"); err != nil && testenv.SkipSlow() {
		t.Skip("public-inbox not installed and PATCHEVAL_SKIP_SLOW=1")
	}
	fixOnce.Do(func() { fixes, fixErr = makeFixtures(t) })
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return fixes
}

func makeFixtures(t *testing.T) (map[string]*fixture, error) {
	var err error
	if fixDir, err = os.MkdirTemp("", "perpatch-"); err != nil {
		return nil, err
	}
	repo := testgit.InitBare(t, filepath.Join(fixDir, "linux.git"))
	base := testgit.Commit(t, repo, "", "base", "2026-11-02T09:00:00Z", map[string]string{
		"bench/getppid": "1000\n", "bench/kill": "2000\n", "kernel/sys.c": "/* sys */\n", "kernel/signal.c": "/* signal */\n",
		"mm/slab.c": "/* slab */\n", "Makefile": "all:\n"})
	files := []string{"kernel/sys.c", "kernel/signal.c", "bench/getppid", "mm/slab.c"}
	env := append(testgit.Identity("2026-11-02T11:00:00Z"), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	var mboxes []string
	var covers []string
	for _, name := range []string{"slow", "flat"} {
		// The author's branch: 4 commits, then git format-patch.
		parent := base
		for i, f := range files {
			content := fmt.Sprintf("/* %s change %d */\n", name, i+1)
			if f == "bench/getppid" {
				content = map[string]string{"slow": "1250\n", "flat": "1000.0\n"}[name]
			}
			parent = testgit.Commit(t, repo, parent, fmt.Sprintf("sys: %s step %d of the series", name, i+1), fmt.Sprintf("2026-11-02T10:%02d:00Z", i),
				map[string]string{f: content})
		}
		mb := testgit.Git(t, env, nil, "--git-dir="+repo, "format-patch", "--stdout", "--thread=shallow", "--cover-letter",
			"--from=Patch Author <author@patcheval.invalid>", "--to=test@example.org", base+".."+parent)
		// format-patch names a cover letter <cover.<time(NULL)>.git.<email>>:
		// two series made within one second share it, and the inbox
		// threads both under one cover. Each series gets its own.
		mb = strings.ReplaceAll(mb, "<cover.", "<cover."+name+".")
		mb = strings.ReplaceAll(mb, "*** SUBJECT HERE ***", "sys: a "+name+" series of four")
		mb = strings.ReplaceAll(mb, "*** BLURB HERE ***", "Four patches.")
		path := filepath.Join(fixDir, name+".mbox")
		if err := os.WriteFile(path, []byte(mb+"\n"), 0o644); err != nil {
			return nil, err
		}
		msgs, err := mbox.ParseBytes([]byte(mb+"\n"), path)
		if err != nil || len(msgs) != 5 {
			return nil, fmt.Errorf("format-patch gave %d messages: %v", len(msgs), err)
		}
		mboxes, covers = append(mboxes, path), append(covers, msgs[0].MessageID)
	}
	fixSrv, err = testinbox.New(testinbox.Options{Bulk: true, Dir: filepath.Join(fixDir, "inbox")}, mboxes...)
	if err != nil {
		return nil, err
	}
	out := map[string]*fixture{}
	for i, name := range []string{"slow", "flat"} {
		src, err := mbox.ParseSource(covers[i])
		if err != nil {
			return nil, err
		}
		th, err := mbox.Fetch(context.Background(), src, mbox.FetchOptions{Lore: fixSrv.URL, NoCache: true})
		if err != nil {
			return nil, err
		}
		s, err := series.Resolve(th, series.Options{})
		if err != nil {
			return nil, err
		}
		if len(s.Patches) != 4 {
			return nil, fmt.Errorf("%s: resolved %d patches, want 4", name, len(s.Patches))
		}
		res, err := apply.Apply(context.Background(), repo, apply.FromSeries(s, series.DefaultAMOptions()),
			apply.Options{Base: base, Branch: "patcheval/" + name, CommitterDate: time.Date(2026, 11, 2, 12, 0, 0, 0, time.UTC)})
		if err != nil {
			return nil, err
		}
		f := &fixture{repo: repo, base: base, s: s}
		for _, c := range res.Commits {
			subj, _ := testgit.Run(nil, nil, "--git-dir="+repo, "log", "-1", "--format=%s", c.Hash)
			f.commits = append(f.commits, report.Commit{Hash: c.Hash, Subject: strings.TrimSpace(subj)})
		}
		out[name] = f
	}
	return out, nil
}

// kernels stands for the build cache and the boots: a commit's kernel is
// built once (Built the first time), its benchmarks read from its tree;
// the broken ones do not build.
type kernels struct {
	repo   string
	broken map[string]bool
	mu     sync.Mutex
	built  map[string]bool
	builds []string // commits compiled, in order
	boots  int
}

func (k *kernels) values(commit, bench string, boots int) ([]float64, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, err := testgit.Blob(k.repo, commit, "bench/"+bench)
	if err != nil {
		return nil, false, fail.Infraf("reading %s: %v", commit, err)
	}
	built := !k.built[commit]
	if built {
		k.built[commit] = true
		k.builds = append(k.builds, commit)
	}
	if k.broken[commit] {
		return nil, built, fail.Failedf("kernel/sys.c:1: error: expected ';' before '}' token")
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return nil, built, fail.Infraf("bench/%s at %s: %v", bench, commit, err)
	}
	var out []float64
	for i := 0; i < boots; i++ {
		k.boots++
		out = append(out, v*(1+0.0001*float64(i%3))) // deterministic QEMU: repeats within 0.02%
	}
	return out, built, nil
}

// samples measures variant at commit with every bench/ file's benchmark.
func (k *kernels) samples(commit, variant string, boots int) ([]evaluate.Sample, error) {
	var out []evaluate.Sample
	for _, b := range []string{"getppid", "kill"} {
		vs, _, err := k.values(commit, b, boots)
		if err != nil {
			return nil, err
		}
		for i, v := range vs {
			out = append(out, evaluate.Sample{Variant: variant, Benchmark: b, Metric: "ns/op", Unit: "ns", Value: v, Boot: i, Deterministic: true})
		}
	}
	return out, nil
}

// prefixMeasurer is Measurer on kernels.
type prefixMeasurer struct {
	k       *kernels
	variant string
	boots   int
	calls   []string
}

func (m *prefixMeasurer) Measure(ctx context.Context, commit string) ([]evaluate.Sample, int64, error) {
	m.calls = append(m.calls, commit)
	s, err := m.k.samples(commit, m.variant, m.boots)
	return s, int64(100 + len(m.calls)), err
}

// stepMeasurer is bisect.Measurer on kernels.
type stepMeasurer struct {
	k     *kernels
	bench string
}

func (m *stepMeasurer) Measure(ctx context.Context, commit string, boots int) (*bisect.Measurement, error) {
	vs, built, err := m.k.values(commit, m.bench, boots)
	return &bisect.Measurement{Values: vs, Unit: "ns", Built: built}, err
}

// evaluated is the whole-series evaluation of f with the default
// pipeline: base at the base commit, patched at the tip, 3 boots each;
// both kernels are built.
func evaluated(t *testing.T, f *fixture, k *kernels) *Series {
	t.Helper()
	p, err := pipelines.Default(f.s, []string{"x86_64"})
	if err != nil {
		t.Fatal(err)
	}
	head := f.commits[len(f.commits)-1].Hash
	b, err := k.samples(f.base, "base", 3)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := k.samples(head, "patched", 3)
	if err != nil {
		t.Fatal(err)
	}
	k.builds = nil // the evaluation's own kernels
	return &Series{EvaluationID: 7, Pipeline: p, Repo: f.repo, Base: f.base, Commits: f.commits, Samples: append(b, pt...), Boots: 3}
}

func newKernels(repo string) *kernels {
	return &kernels{repo: repo, built: map[string]bool{}, broken: map[string]bool{}}
}

func (k *kernels) bisectMeasurer(t *testing.T) func(*pipelines.Pipeline, string, string, string) bisect.Measurer {
	return func(at *pipelines.Pipeline, variant, benchmark, metric string) bisect.Measurer {
		if at.Name != "default.at-commit" || len(at.Variants) != 1 || at.Variants[0].Name != "patched" || at.Variants[0].ApplySeries {
			t.Errorf("bisection pipeline %s %+v: want the patched kernel without applying the series", at.Name, at.Variants)
		}
		if variant != "patched" || benchmark != "getppid" || metric != "ns/op" {
			t.Errorf("bisecting %s %s %s, want patched getppid ns/op", variant, benchmark, metric)
		}
		return &stepMeasurer{k: k, bench: benchmark}
	}
}

// TestSeriesBisection: the whole series regresses getppid by 25%; with
// no per-patch run, the regression is bisected inside the series over
// the applied commits and patch 3/4 is named, confirmed, with at most 3
// kernel builds beyond the ends (the evaluation's own two kernels).
func TestSeriesBisection(t *testing.T) {
	f := fixtures(t)["slow"]
	k := newKernels(f.repo)
	s := evaluated(t, f, k)
	dir := t.TempDir()
	pp, err := Run(context.Background(), s, Options{Bisect: true, BisectMeasurer: k.bisectMeasurer(t), BisectDir: dir, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if pp == nil || pp.Bisection == nil {
		t.Fatalf("no bisection: %+v", pp)
	}
	b := pp.Bisection
	if b.Status != bisect.Found || b.Patch != 3 || b.Patches != 4 || b.Commit != f.commits[2].Hash || !b.Confirmed {
		t.Fatalf("bisection %+v, want patch 3/4 %s confirmed", b, f.commits[2].Hash)
	}
	if b.Builds > 3 || len(k.builds) != b.Builds {
		t.Errorf("%d builds beyond the ends (%d by the kernels), want at most 3", b.Builds, len(k.builds))
	}
	if b.Change < 24.9 || b.Change > 25.1 {
		t.Errorf("change %.2f%%, want +25%%", b.Change)
	}
	if len(pp.Tables) != 0 {
		t.Errorf("tables without --per-patch: %+v", pp.Tables)
	}
	txt, err := os.ReadFile(filepath.Join(dir, "report.txt"))
	if err != nil || !bytes.Contains(txt, []byte(f.commits[2].Hash)) {
		t.Errorf("bisection report: %v\n%s", err, txt)
	}
	// The report and the reply name the patch.
	r := &report.Report{Title: "default", PerPatch: pp}
	var out bytes.Buffer
	if err := report.WriteText(&out, r); err != nil {
		t.Fatal(err)
	}
	want := "patch 3/4 (" + f.commits[2].Hash[:12] + " \"sys: slow step 3 of the series\") is the first with the getppid ns/op regression (+25.0%"
	if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), want) {
		t.Errorf("text report lacks %q:\n%s", want, out.String())
	}
	d, err := report.NewDraft(r, f.s.First(), report.DraftOptions{From: mbox.Address{Name: "Tester", Email: "tester@example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(d.Body), " "), "Bisected inside the series: patch 3/4") {
		t.Errorf("reply lacks the culprit:\n%s", d.Body)
	}

	// Nothing regressed: nothing to bisect, nothing built.
	f2 := fixtures(t)["flat"]
	k2 := newKernels(f2.repo)
	pp, err = Run(context.Background(), evaluated(t, f2, k2), Options{Bisect: true, BisectMeasurer: k2.bisectMeasurer(t)})
	if err != nil || pp != nil || len(k2.builds) != 0 {
		t.Errorf("no regression: %+v, %v, %d builds", pp, err, len(k2.builds))
	}
}

// TestPerPatch: --per-patch measures the three inner prefixes (the ends
// are the evaluation's), the getppid table names 3/4 as the one patch
// that moves it and the chain gives it the whole change, kill moves with
// no patch; the bisection then builds nothing more (every prefix is
// built) and only boots to confirm.
func TestPerPatch(t *testing.T) {
	f := fixtures(t)["slow"]
	k := newKernels(f.repo)
	s := evaluated(t, f, k)
	pm := &prefixMeasurer{k: k, variant: "patched", boots: 3}
	pp, err := Run(context.Background(), s, Options{PerPatch: true, Measurer: pm, Bisect: true, BisectMeasurer: k.bisectMeasurer(t), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(pm.calls, " ") != f.commits[0].Hash+" "+f.commits[1].Hash+" "+f.commits[2].Hash {
		t.Errorf("measured %v, want the inner prefixes 1/4, 2/4 and 3/4", pm.calls)
	}
	var labels []string
	for _, st := range pp.Steps {
		labels = append(labels, st.Label)
	}
	if strings.Join(labels, " ") != "base 1/4 2/4 3/4 4/4" {
		t.Fatalf("steps %v", labels)
	}
	if pp.Steps[0].EvaluationID != 7 || pp.Steps[4].EvaluationID != 7 || pp.Steps[2].EvaluationID == 0 {
		t.Errorf("step evaluations %+v", pp.Steps)
	}
	tables := map[string]report.PatchTable{}
	for _, tb := range pp.Tables {
		tables[tb.Name] = tb
	}
	g, kill := tables["getppid"], tables["kill"]
	if m := g.Movers(); len(m) != 1 || !strings.HasPrefix(m[0], "3/4 (+25.0%, regression") {
		t.Errorf("getppid movers %v, want 3/4 alone", m)
	}
	if len(g.Rows) != 5 || len(g.Comparisons) != 4 || g.Chain == nil || len(g.Chain.Steps) != 4 || g.Chain.Steps[2].Share < 99 {
		t.Errorf("getppid table %+v", g)
	}
	if m := kill.Movers(); len(m) != 0 || len(kill.Rows) != 5 {
		t.Errorf("kill movers %v rows %d, want none of 5", m, len(kill.Rows))
	}
	if pp.Bisection == nil || pp.Bisection.Patch != 3 || pp.Bisection.Builds != 0 || !pp.Bisection.Confirmed {
		t.Errorf("bisection after per-patch %+v, want 3/4 with no build", pp.Bisection)
	}
	if len(k.builds) != 3 {
		t.Errorf("%d kernels built, want the 3 inner prefixes", len(k.builds))
	}
	var out bytes.Buffer
	if err := report.WriteText(&out, &report.Report{PerPatch: pp}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Per patch (each step against the one before it):", "2/4 -> 3/4", "moved by: 3/4 (+25.0%, regression)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
	var md bytes.Buffer
	if err := report.WriteMarkdown(&md, &report.Report{PerPatch: pp}); err != nil || !strings.Contains(md.String(), "## Per patch") {
		t.Errorf("markdown: %v\n%s", err, md.String())
	}
}

// TestPerPatchBrokenPrefix: a prefix whose kernel does not build is left
// out of the tables with a note naming it; its neighbours are compared.
func TestPerPatchBrokenPrefix(t *testing.T) {
	f := fixtures(t)["slow"]
	k := newKernels(f.repo)
	k.broken[f.commits[1].Hash] = true
	s := evaluated(t, f, k)
	pp, err := Run(context.Background(), s, Options{PerPatch: true, Measurer: &prefixMeasurer{k: k, variant: "patched", boots: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if len(pp.Notes) == 0 || !strings.Contains(pp.Notes[0], "2/4 "+f.commits[1].Hash[:12]+" does not build or boot") {
		t.Errorf("notes %q", pp.Notes)
	}
	for _, tb := range pp.Tables {
		if len(tb.Rows) != 4 || tb.Comparisons[1].Base != "1/4" || tb.Comparisons[1].Other != "3/4" {
			t.Errorf("%s: rows %d comparisons %+v", tb.Name, len(tb.Rows), tb.Comparisons)
		}
	}
}

// TestSeriesPairs: only comparisons that the series decides are taken
// apart; the at-commit pipeline builds the evaluation's kernels.
func TestSeriesPairs(t *testing.T) {
	ppc, err := pipelines.Builtin("ppc-preempt-dynamic")
	if err != nil {
		t.Fatal(err)
	}
	if ps := SeriesPairs(ppc); len(ps) != 0 {
		t.Errorf("ppc-preempt-dynamic: %v (every variant has the series: config comparisons)", ps)
	}
	_, err = Run(context.Background(), &Series{Pipeline: ppc, Commits: []report.Commit{{Hash: "x"}}}, Options{PerPatch: true})
	if fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "--per-patch") {
		t.Errorf("--per-patch on config comparisons: %v", err)
	}
	f := fixtures(t)["flat"]
	p, err := pipelines.Default(f.s, []string{"x86_64"})
	if err != nil {
		t.Fatal(err)
	}
	ps := SeriesPairs(p)
	if len(ps) != 1 || ps[0] != (Pair{"base", "patched"}) {
		t.Fatalf("default pipeline pairs %v", ps)
	}
	at, err := AtCommit(p, ps)
	if err != nil {
		t.Fatal(err)
	}
	if at.NeedsSeries() || len(at.Variants) != 1 || len(at.Comparisons) != 0 || len(p.Variants) != 2 || !p.Variant("patched").ApplySeries {
		t.Fatalf("at-commit %+v (or the pipeline changed)", at)
	}
	whole, cut := p.Builds()[1], at.Builds()[0]
	if whole.Variant != "patched" || whole.Arch != cut.Arch || whole.BaseConfig != cut.BaseConfig ||
		fmt.Sprint(whole.Fragments) != fmt.Sprint(cut.Fragments) || fmt.Sprint(whole.Symbols) != fmt.Sprint(cut.Symbols) {
		t.Errorf("at-commit kernel %+v, the evaluation's %+v: not the same recipe", cut, whole)
	}
}

// TestWalkResume: a per-patch run made one prefix at a time, each step
// starting again from the records of the prefixes before it (Start,
// Resume, Record; what pipelines/service's jobs do), gives Run's account,
// a broken prefix's note included.
func TestWalkResume(t *testing.T) {
	f := fixtures(t)["slow"]
	k := newKernels(f.repo)
	k.broken[f.commits[1].Hash] = true
	s := evaluated(t, f, k)
	want, err := Run(context.Background(), s, Options{PerPatch: true, Measurer: &prefixMeasurer{k: k, variant: "patched", boots: 3}})
	if err != nil {
		t.Fatal(err)
	}
	pm := &prefixMeasurer{k: k, variant: "patched", boots: 3}
	byID := map[int64][]evaluate.Sample{}
	var recs []Prefix
	var got *report.PerPatch
	for step := 0; ; step++ {
		w, err := Start(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Resume(recs, func(r Prefix) ([]evaluate.Sample, error) { return byID[r.EvaluationID], nil }); err != nil {
			t.Fatal(err)
		}
		n, st, ok := w.Next()
		if !ok {
			if got, err = w.Tables(); err != nil {
				t.Fatal(err)
			}
			break
		}
		ss, id, merr := pm.Measure(context.Background(), st.Commit)
		byID[id] = ss
		rec, err := w.Record(n, ss, id, merr)
		if err != nil {
			t.Fatal(err)
		}
		if rec.K != step+1 || rec.Commit != st.Commit || rec.EvaluationID != id || (merr != nil) != (rec.Failed != "") {
			t.Fatalf("record %+v of prefix %d (%v)", rec, n, merr)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 3 {
		t.Fatalf("%d prefixes recorded, want 3", len(recs))
	}
	g, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(g) != string(wj) {
		t.Errorf("one prefix at a time:\n%s\nRun:\n%s", g, wj)
	}
	// A record of another series' prefix is refused.
	w, _ := Start(s)
	if err := w.Resume([]Prefix{{K: 1, Commit: f.commits[2].Hash}}, nil); fail.KindOf(err) != fail.KindInput {
		t.Errorf("a record of the wrong prefix: %v", err)
	}
}
