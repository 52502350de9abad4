package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/artifact"
	"github.com/patcheval/patcheval/pipelines/store"
)

// buildMeta is what the store's build row keeps besides the artifact: the
// pipeline's key of the build and whether the artifact came from the cache.
type buildMeta struct {
	Key      string `json:"key"`
	CacheHit bool   `json:"cache_hit"`
	// Files is the artifact directory's manifest in Env.Artifacts (none
	// without a store).
	Files artifact.Manifest `json:"files,omitempty"`
	// The build's own figures (none for a cache hit, which compiled
	// nothing): the objects make built, how many of them the compiler
	// really compiled and how many the compiler cache (kcc) answered,
	// and its seconds.
	Objects  int     `json:"objects,omitempty"`
	Compiled int     `json:"compiled,omitempty"`
	Reused   int     `json:"reused,omitempty"`
	Seconds  float64 `json:"seconds,omitempty"`
}

// metaOf is the stored metadata of the build of key that gave art (nil
// when it failed before an artifact).
func metaOf(key string, art *build.Artifact) buildMeta {
	m := buildMeta{Key: key}
	if art == nil {
		return m
	}
	m.CacheHit = art.CacheHit
	if !art.CacheHit {
		res := art.Meta.Results
		m.Objects, m.Reused, m.Seconds = res.ObjectsCompiled, res.CCacheHits, res.Duration["total"]
		m.Compiled = res.ObjectsCompiled - res.CCacheHits
	}
	return m
}

// CompileStats are a stored build's own figures (BuildCompileStats).
type CompileStats struct {
	Cached   bool    `json:"cached,omitempty"` // the kernel came from the build cache: nothing compiled
	Objects  int     `json:"objects"`
	Compiled int     `json:"compiled"` // by the compiler
	Reused   int     `json:"reused"`   // answered by the compiler cache
	Seconds  float64 `json:"seconds"`
}

// BuildCompileStats are build row b's own figures.
func BuildCompileStats(b store.Build) CompileStats {
	var m buildMeta
	_ = json.Unmarshal(b.Metadata, &m)
	return CompileStats{Cached: m.CacheHit, Objects: m.Objects, Compiled: m.Compiled, Reused: m.Reused, Seconds: m.Seconds}
}

// BuildFiles is the artifact manifest build row b records (file name ->
// key in Env.Artifacts; nil when it was built without a store).
func BuildFiles(b store.Build) artifact.Manifest {
	var m buildMeta
	_ = json.Unmarshal(b.Metadata, &m)
	return m.Files
}

// BuildCacheHit reports whether build row b's kernel came from the build
// cache rather than a build.
func BuildCacheHit(b store.Build) bool {
	var m buildMeta
	_ = json.Unmarshal(b.Metadata, &m)
	return m.CacheHit
}

// Builds returns the keys of evaluation id's kernels (pipelines.BuildSpec
// keys), in the pipeline's order.
func Builds(ctx context.Context, env Env, id int64) ([]string, error) {
	specs, err := BuildSpecs(ctx, env, id)
	var keys []string
	for _, s := range specs {
		keys = append(keys, s.Key)
	}
	return keys, err
}

// BuildSpecs returns evaluation id's kernels (what Builds names), in the
// pipeline's order: a queue routes each build by its arch.
func BuildSpecs(ctx context.Context, env Env, id int64) ([]pipelines.BuildSpec, error) {
	ev, err := loadInputs(env.Store, id)
	if err != nil {
		return nil, err
	}
	return ev.p.Builds(), nil
}

// Build builds evaluation id's kernel key (the series must be applied when
// the kernel has it) and records it. A kernel already built and recorded
// is left as it is.
func Build(ctx context.Context, env Env, id int64, key string) (err error) {
	defer failed(ctx, env, id, &err)
	if err := ctx.Err(); err != nil {
		return fail.Infra(err) // interrupted: start nothing
	}
	ev, spec, err := loadKernel(env, id, key)
	if err != nil {
		return err
	}
	if art, err := builtArtifact(env, id, spec); err != nil || art != nil {
		return err
	}
	req, err := buildRequest(ctx, env, ev, spec)
	if err != nil {
		return err
	}
	start := time.Now()
	pr := env.progress()
	pr.Status("building %s/%s", spec.Arch, spec.Variant)
	if err := ctx.Err(); err != nil {
		// Interrupted while saying so (the progress line can block):
		// still nothing started, not even a cache lookup.
		return fail.Infra(err)
	}
	art, buildErr := build.Build(ctx, req, build.Options{CacheDir: env.CacheDir, Jobs: env.Jobs, Budget: env.Budget, Progress: pr, NoNetwork: true,
		CompilerCache: env.CompilerCache})
	b := store.Build{Variant: spec.Variant, Arch: spec.Arch, Commit: req.Commit, Status: "ok"}
	m := metaOf(key, art)
	if art != nil {
		b.ConfigHash, b.ArtifactDir = art.ConfigHash(), art.Dir
	}
	if buildErr == nil && env.Artifacts != nil {
		if m.Files, err = artifact.PutDir(ctx, env.Artifacts, art.Dir); err != nil {
			return fmt.Errorf("%s/%s: %w", spec.Arch, spec.Variant, err)
		}
	}
	b.Metadata, _ = json.Marshal(m)
	if buildErr != nil {
		b.Status, b.ErrorKind, b.ErrorText = "failed", fail.KindOf(buildErr).String(), buildErr.Error()
		buildErr = fmt.Errorf("%s/%s: %w", spec.Arch, spec.Variant, buildErr)
	}
	rctx := ctx
	if buildErr == nil {
		rctx = keep(ctx)
	}
	err = env.Store.Tx(rctx, func(tx *store.Tx) error {
		if _, err := env.Store.RecordBuildTx(tx, id, b); err != nil {
			return err
		}
		if err := env.Store.AddSpanTx(tx, id, "build", start, time.Since(start), ""); err != nil {
			return err
		}
		if buildErr != nil {
			return nil // no next stage
		}
		return record(ctx, env, tx)
	})
	if buildErr != nil {
		return buildErr
	}
	if err == nil {
		// Said once the evaluation has it: a run stopped after this line
		// resumes without building this kernel again.
		pr.Printf("built %s/%s: %s%s", spec.Arch, spec.Variant, art.Image, map[bool]string{true: " (cached)"}[art.CacheHit])
	}
	return err
}

// buildAll builds evaluation id's kernels keys at the same time within
// one -j budget (env.Budget, or one of env.Jobs), so that one kernel's
// serial steps (checkout, configuration, the link) leave no core idle
// while another compiles. Every build runs to its end, also when another
// failed (what built is cached and recorded for a rerun); the error is the
// first failed kernel's in keys' order.
func buildAll(ctx context.Context, env Env, id int64, keys []string) error {
	if len(keys) > 1 && env.Budget == nil {
		b, err := build.NewBudget(env.Jobs)
		if err != nil {
			return fail.Infra(err)
		}
		defer b.Close()
		env.Budget = b
	}
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = slotted(ctx, env, "build", func() error { return Build(ctx, env, id, k) })
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// loadKernel is loadInputs plus kernel key's build of the evaluation's
// pipeline; a key the pipeline does not have is bad input.
func loadKernel(env Env, id int64, key string) (*evaluation, pipelines.BuildSpec, error) {
	ev, err := loadInputs(env.Store, id)
	if err != nil {
		return nil, pipelines.BuildSpec{}, err
	}
	spec, ok := specByKey(ev.p, key)
	if !ok {
		return nil, pipelines.BuildSpec{}, fail.Inputf("evaluation %d: pipeline %s has no kernel %q", id, ev.p.Name, key)
	}
	return ev, spec, nil
}

func specByKey(p *pipelines.Pipeline, key string) (pipelines.BuildSpec, bool) {
	for _, s := range p.Builds() {
		if s.Key == key {
			return s, true
		}
	}
	return pipelines.BuildSpec{}, false
}

// buildRequest is the build.Request of spec: the base, or the applied
// series' head when the kernel has the series.
func buildRequest(ctx context.Context, env Env, ev *evaluation, spec pipelines.BuildSpec) (build.Request, error) {
	commit := ev.in.BaseHash
	if t, ok := ev.in.Trees[spec.Variant]; ok {
		commit = t.Head
	} else if spec.ApplySeries {
		a, err := appliedOf(env, ev.id)
		if err != nil {
			return build.Request{}, err
		}
		commit = a.Head
	}
	repo := ev.in.Tree
	if env.Sources != nil {
		var err error
		if repo, err = env.Sources(ctx, ev.id, ev.in.Tree, commit); err != nil {
			return build.Request{}, err
		}
	}
	req := build.Request{Repo: repo, Commit: commit, Arch: spec.Arch, BaseConfig: ev.p.BaseConfig,
		Symbols: spec.Symbols, Variant: spec.Variant}
	if filepath.IsAbs(req.BaseConfig) {
		var err error
		if req.BaseConfig, err = localFile(ctx, env, ev, req.BaseConfig); err != nil {
			return build.Request{}, err
		}
	}
	cache := env.CacheDir
	if cache == "" {
		cache = xdg.CacheDir()
	}
	for _, f := range spec.Fragments {
		if f.Path != "" {
			path, err := localFile(ctx, env, ev, f.Path)
			if err != nil {
				return build.Request{}, err
			}
			req.Fragments = append(req.Fragments, path)
			continue
		}
		path, err := build.WriteBootConfig(spec.Arch, filepath.Join(cache, "boot-configs"))
		if err != nil {
			return build.Request{}, fail.Infra(err)
		}
		req.Fragments = append(req.Fragments, path)
	}
	return req, nil
}

// builtArtifact is spec's recorded, still present artifact (nil when the
// kernel is not built yet).
func builtArtifact(env Env, id int64, spec pipelines.BuildSpec) (*build.Artifact, error) {
	builds, err := env.Store.BuildsOf(id)
	if err != nil {
		return nil, err
	}
	for _, b := range builds {
		if b.Variant != spec.Variant || b.Arch != spec.Arch || b.Status != "ok" || b.ArtifactDir == "" {
			continue
		}
		var m buildMeta
		_ = json.Unmarshal(b.Metadata, &m)
		art, err := build.LoadArtifact(b.ArtifactDir)
		if err != nil && len(m.Files) > 0 && env.Artifacts != nil {
			// Built on another machine: fetch it (verified) into this
			// one's cache. A failed fetch is retried, not rebuilt.
			if art, err = fetchArtifact(env, m.Files); err != nil {
				return nil, fail.Infraf("evaluation %d: kernel %s/%s from the artifact store: %w", id, b.Arch, b.Variant, err)
			}
		}
		if err != nil {
			return nil, nil // the cache was cleaned: build again
		}
		art.CacheHit = m.CacheHit
		return art, nil
	}
	return nil, nil
}

// fetchArtifact fetches the artifact directory of manifest files from
// env.Artifacts into <cache>/artifacts/<manifest id> and loads it.
func fetchArtifact(env Env, files artifact.Manifest) (*build.Artifact, error) {
	cache := env.CacheDir
	if cache == "" {
		cache = xdg.CacheDir()
	}
	dir := filepath.Join(cache, "artifacts", files.ID())
	if err := artifact.FetchDir(context.Background(), env.Artifacts, files, dir); err != nil {
		return nil, err
	}
	return build.LoadArtifact(dir)
}

// artifacts are evaluation id's built kernels by spec key; a kernel not
// built is an error naming it.
func artifacts(env Env, ev *evaluation) (map[string]*build.Artifact, error) {
	out := map[string]*build.Artifact{}
	for _, s := range ev.p.Builds() {
		art, err := builtArtifact(env, ev.id, s)
		if err != nil {
			return nil, err
		}
		if art == nil {
			return nil, fail.Inputf("evaluation %d: kernel %s/%s (%s) is not built (run the build stage first)", ev.id, s.Arch, s.Variant, s.Key)
		}
		out[s.Key] = art
	}
	return out, nil
}
