package service

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/perpatch"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestCompilerCacheReachesEveryBuild: Config.CompilerCache (serve's and
// worker's --compiler-cache) reaches every build the service starts:
// the stage jobs', the series jobs', the series bisection's steps, and
// a watch's re-tests and bisection steps.
func TestCompilerCacheReachesEveryBuild(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := New(ctx, Config{Database: filepath.Join(t.TempDir(), "patcheval.db"), CacheDir: t.TempDir(), CompilerCache: "none", Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const want = "none"
	if got := s.env(1, "build").CompilerCache; got != want {
		t.Errorf("a stage job's build: compiler cache %q, want %q", got, want)
	}
	if got := s.env(1, inProcess).CompilerCache; got != want {
		t.Errorf("a series job's evaluation: compiler cache %q, want %q", got, want)
	}
	p, err := pipelines.Find("arm64-kill")
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := s.bisectMeasurer(1, &perpatch.Series{Repo: "/tree"}, t.TempDir())(p, "", p.Benchmarks[0].Name, "ns/op").(*bisect.PipelineMeasurer); !ok {
		t.Errorf("the series bisection's measurer is not a PipelineMeasurer")
	} else if m.CompilerCache != want {
		t.Errorf("the series bisection's measurer: compiler cache %q, want %q", m.CompilerCache, want)
	}

	ev := &watch.PipelineEvaluator{OutDir: t.TempDir()}
	b := &watch.Bisection{Eval: ev}
	s.Watch(WatchConfig{Eval: ev, Bisection: b})
	if ev.CompilerCache != want {
		t.Errorf("a watch's evaluator: compiler cache %q, want %q", ev.CompilerCache, want)
	}
	plan, err := b.Plan(&store.Watch{Name: "w", Tree: "/tree", Pipeline: p.Name},
		&store.WatchEvent{Benchmark: p.Benchmarks[0].Name, Metric: "ns/op"},
		&store.WatchTag{Tag: "v1", Commit: "1111111111111111111111111111111111111111"}, &store.WatchTag{Tag: "v2", Commit: "2222222222222222222222222222222222222222"})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := plan.Options.Measurer.(*bisect.PipelineMeasurer); !ok {
		t.Errorf("a watch bisection's measurer is a %T, not a PipelineMeasurer", plan.Options.Measurer)
	} else if m.CompilerCache != want {
		t.Errorf("a watch bisection's measurer: compiler cache %q, want %q", m.CompilerCache, want)
	}
}
