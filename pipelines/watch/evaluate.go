package watch

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/bisect"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/series"
)

// PipelineEvaluator evaluates a watch's pipeline on a tag with the
// evaluation runner: the tree alone, or the watch's series re-applied on
// the tag (a series that no longer applies is a failed result naming the
// tag and the hunk).
type PipelineEvaluator struct {
	// OutDir receives <watch>/<tag>/report.* (default <state>/watches).
	OutDir    string
	StorePath string
	CacheDir  string
	Jobs      int
	Lore      string
	Progress  *progress.Reporter
}

// Evaluate implements Evaluator.
func (e *PipelineEvaluator) Evaluate(ctx context.Context, w *store.Watch, tag, commit string) (int64, error) {
	p, err := pipelines.Find(w.Pipeline)
	if err != nil {
		return 0, err
	}
	o := runner.Options{AM: series.DefaultAMOptions(), Tree: w.Tree, Base: commit,
		Branch: "patcheval/watch/" + w.Name + "/" + tag, OutDir: filepath.Join(e.OutDir, w.Name, tag), Lore: mbox.LoreBase(e.Lore)}
	if w.SeriesID != "" {
		src, err := mbox.ParseSource(w.SeriesID)
		if err != nil {
			return 0, err
		}
		t, err := mbox.Fetch(ctx, src, mbox.FetchOptions{Lore: mbox.LoreBase(e.Lore), Progress: e.Progress})
		if err != nil {
			return 0, err
		}
		o.Mbox, o.ThreadSource = runner.ThreadMbox(t), t.Source
	}
	if p.NeedsSeries() && o.Mbox == nil {
		return 0, fail.Inputf("watch %s: pipeline %s applies a series: add one with --series MSGID", w.Name, p.Name)
	}
	st, err := store.Open(e.StorePath)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	res, err := runner.Run(ctx, runner.Env{Store: st, CacheDir: e.CacheDir, Jobs: e.Jobs, Progress: e.Progress}, p, o)
	var id int64
	if res != nil {
		id = res.EvaluationID
	}
	if err != nil && o.Mbox != nil && fail.KindOf(err) == fail.KindFailed && strings.Contains(err.Error(), "apply") {
		return id, fail.Failedf("does not apply on %s: %w", tag, err)
	}
	return id, err
}

// Deterministic says whether a watch's pipeline runs in deterministic
// QEMU (unknown pipelines: no).
func Deterministic(w *store.Watch) bool {
	p, err := pipelines.Find(w.Pipeline)
	return err == nil && p.Deterministic
}

// Bisection bisects a watch's regression events with the pipeline and
// writes the reports (report.txt/.md/.json, kcidb.json, culprit.eml)
// next to the tags' reports.
type Bisection struct {
	Eval *PipelineEvaluator
	From mbox.Address
	Logf func(format string, a ...any)
}

// Bisect implements Bisector.
func (b *Bisection) Bisect(ctx context.Context, w *store.Watch, ev *store.WatchEvent, good, bad *store.WatchTag) (any, error) {
	p, err := pipelines.Find(w.Pipeline)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(b.Eval.OutDir, w.Name, "bisect-"+good.Tag+".."+bad.Tag+"-"+ev.Benchmark+"-"+strings.ReplaceAll(ev.Metric, "/", "_"))
	m := &bisect.PipelineMeasurer{Pipeline: p, Variant: ev.Variant, Benchmark: ev.Benchmark, Metric: ev.Metric, Repo: w.Tree,
		OutDir: filepath.Join(dir, "steps"), StorePath: b.Eval.StorePath, CacheDir: b.Eval.CacheDir, Jobs: b.Eval.Jobs,
		Progress: b.Eval.Progress}
	higher, _ := stats.HigherIsBetter(ev.Metric)
	res, err := bisect.Run(ctx, bisect.Options{Repo: w.Tree, Good: good.Commit, Bad: bad.Commit, Measurer: m,
		Benchmark: ev.Benchmark, Metric: ev.Metric, HigherIsBetter: higher, Deterministic: p.Deterministic,
		Threshold: max(0.5, abs(ev.Change)/4), Logf: b.Logf})
	if err != nil {
		return nil, err
	}
	res.GoodRef, res.BadRef = good.Tag, bad.Tag
	c := bisect.Context{Tree: w.Remote, Pipeline: p.Name, Variant: ev.Variant, Arch: strings.Join(p.Arches, ",")}
	files, err := bisect.WriteReports(dir, res, c, b.From)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"status": res.Status, "confirmed": res.Confirmed, "builds": res.Builds, "bound": res.Bound,
		"wall_seconds": res.Wall.Seconds(), "report": files[0]}
	if res.Culprit != nil {
		out["culprit"], out["subject"], out["change_pct"] = res.Culprit.Hash, res.Culprit.Subject, res.Change
	}
	return out, nil
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
