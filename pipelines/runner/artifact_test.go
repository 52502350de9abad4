package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/artifact"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestBuiltArtifactFromTheStore: a kernel recorded by a build on another
// machine (its directory absent here, its manifest in the build row) is
// fetched from the artifact store into this machine's cache and loaded;
// a manifest naming a blob the store lacks is an infrastructure error
// (retried), not "not built".
func TestBuiltArtifactFromTheStore(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The builder's artifact directory, as build.Build leaves it.
	src := t.TempDir()
	meta := build.Metadata{}
	meta.Patcheval.Image = "vmlinux"
	meta.Patcheval.ConfigHash = "cafe"
	mj, _ := json.Marshal(meta)
	for n, c := range map[string]string{"metadata.json": string(mj), "vmlinux": "\x7fELF kernel", "System.map": "c0000000 T _stext\n", "config": "CONFIG_PPC64=y\n"} {
		if err := os.WriteFile(filepath.Join(src, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	coord := artifact.Dir{Path: t.TempDir()}
	files, err := artifact.PutDir(ctx, coord, src)
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := st.CreateOrResumeEvaluation("k", store.EvaluationMeta{Pipeline: "p"})
	if err != nil {
		t.Fatal(err)
	}
	md, _ := json.Marshal(buildMeta{Key: "ppc64le/base", Files: files})
	if _, err := st.RecordBuild(e.ID, store.Build{Variant: "base", Arch: "ppc64le", Status: "ok", ArtifactDir: "/nonexistent/builder/cache/builds/x", Metadata: md}); err != nil {
		t.Fatal(err)
	}
	spec := pipelines.BuildSpec{Variant: "base", Arch: "ppc64le"}

	// Without a store: not built here (the build stage builds it again).
	if art, err := builtArtifact(Env{Store: st, CacheDir: t.TempDir()}, e.ID, spec); art != nil || err != nil {
		t.Fatalf("without a store: %v %v, want nothing", art, err)
	}
	cache := t.TempDir()
	art, err := builtArtifact(Env{Store: st, CacheDir: cache, Artifacts: &artifact.Client{Cache: artifact.Dir{Path: t.TempDir()}, Base: "http://127.0.0.1:1/"}}, e.ID, spec)
	if err == nil {
		t.Fatalf("fetching from an unreachable coordinator gave %v, want an error", art)
	}
	art, err = builtArtifact(Env{Store: st, CacheDir: cache, Artifacts: coord}, e.ID, spec)
	if err != nil || art == nil {
		t.Fatalf("from the store: %v %v", art, err)
	}
	if got, _ := os.ReadFile(art.Image); string(got) != "\x7fELF kernel" || filepath.Dir(art.Image) != filepath.Join(cache, "artifacts", files.ID()) {
		t.Errorf("image %s = %q", art.Image, got)
	}
	if art.ConfigHash() != "cafe" {
		t.Errorf("config hash %q", art.ConfigHash())
	}
}
