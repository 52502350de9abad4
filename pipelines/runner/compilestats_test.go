package runner

import (
	"encoding/json"
	"testing"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestBuildCompileStats: a build row keeps the build's own figures
// (objects, compiled by the compiler, answered by kcc, seconds), read back
// by BuildCompileStats; a cache hit compiled nothing and says so.
func TestBuildCompileStats(t *testing.T) {
	art := &build.Artifact{}
	art.Meta.Results.ObjectsCompiled, art.Meta.Results.CCacheHits = 357, 345
	art.Meta.Results.Duration = map[string]float64{"total": 310.5}
	row := func(a *build.Artifact) store.Build {
		b, err := json.Marshal(metaOf("k", a))
		if err != nil {
			t.Fatal(err)
		}
		return store.Build{Metadata: b}
	}
	got := BuildCompileStats(row(art))
	if got != (CompileStats{Objects: 357, Compiled: 12, Reused: 345, Seconds: 310.5}) {
		t.Errorf("built: %+v", got)
	}
	art.CacheHit = true
	if got := BuildCompileStats(row(art)); got != (CompileStats{Cached: true}) {
		t.Errorf("cache hit: %+v, want cached and nothing compiled", got)
	}
	if got := BuildCompileStats(row(nil)); got != (CompileStats{}) {
		t.Errorf("failed build: %+v", got)
	}
}
