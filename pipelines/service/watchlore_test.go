package service

import (
	"path/filepath"
	"testing"

	"github.com/patcheval/patcheval/pipelines/experiments/watch"
)

// serve's --lore reaches the watch re-tests and bisections: an evaluator
// without a lore of its own takes the service's (a watch fetched
// lore.kernel.org and ended "infra" although serve had --lore).
func TestWatchTakesServiceLore(t *testing.T) {
	const lore = "http://127.0.0.1:1/all"
	s, err := New(t.Context(), Config{Lore: lore, Database: filepath.Join(t.TempDir(), "patcheval.db"), Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev, bev := &watch.PipelineEvaluator{}, &watch.PipelineEvaluator{}
	own := &watch.PipelineEvaluator{Lore: "http://other.example"}
	s.Watch(WatchConfig{Eval: ev, Bisection: &watch.Bisection{Eval: bev}})
	if ev.Lore != lore || bev.Lore != lore {
		t.Errorf("re-test lore %q, bisection lore %q, want %q", ev.Lore, bev.Lore, lore)
	}
	s.Watch(WatchConfig{Eval: own})
	if own.Lore != "http://other.example" {
		t.Errorf("an evaluator's own lore was replaced: %q", own.Lore)
	}
}
