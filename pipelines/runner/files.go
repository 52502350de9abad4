package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/artifact"
)

// A pipeline's files (a base config given as a file, fragment files, the
// --cover fragment Apply writes) are paths on the machine that submitted
// the evaluation. With a farm's artifact store (Env.Artifacts) their
// contents are put there when they are recorded, and a build on a machine
// without the path fetches them by the key the inputs keep (inputs.Files).

// storeFiles puts p's files into env.Artifacts and records them in
// in.Files; without a store it does nothing.
func storeFiles(ctx context.Context, env Env, in *inputs, p *pipelines.Pipeline) error {
	if env.Artifacts == nil {
		return nil
	}
	var paths []string
	if filepath.IsAbs(p.BaseConfig) {
		paths = append(paths, p.BaseConfig)
	}
	for _, s := range p.Builds() {
		for _, f := range s.Fragments {
			if f.Path != "" {
				paths = append(paths, f.Path)
			}
		}
	}
	for _, path := range paths {
		if _, ok := in.Files[path]; ok {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fail.Inputf("pipeline %s: %v", p.Name, err)
		}
		key := artifact.Key(data)
		if err := env.Artifacts.Put(ctx, key, bytes.NewReader(data)); err != nil {
			return fail.Infraf("pipeline %s: %s into the artifact store: %w", p.Name, path, err)
		}
		if in.Files == nil {
			in.Files = artifact.Manifest{}
		}
		in.Files[path] = key
	}
	return nil
}

// localFile is path on this machine: path itself when it exists, else the
// content the evaluation recorded for it, fetched from env.Artifacts
// (verified) into the cache. A path with no record is returned as it is
// (the build then names it missing).
func localFile(ctx context.Context, env Env, ev *evaluation, path string) (string, error) {
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	key, ok := ev.in.Files[path]
	if !ok || env.Artifacts == nil {
		return path, nil
	}
	cache := env.CacheDir
	if cache == "" {
		cache = xdg.CacheDir()
	}
	// Named by content, with the file's own name last (a fragment's name
	// shows in the build's log and metadata).
	dst := filepath.Join(cache, "farm-files", key, filepath.Base(path))
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	rc, err := env.Artifacts.Open(ctx, key)
	if err != nil {
		return "", fail.Infraf("evaluation %d: %s from the artifact store: %w", ev.id, path, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc) // fails unless the content hashes to key
	if err != nil {
		return "", fail.Infraf("evaluation %d: %s from the artifact store: %w", ev.id, path, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fail.Infra(err)
	}
	tmp := fmt.Sprintf("%s.tmp-%d", dst, os.Getpid())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", fail.Infra(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", fail.Infra(err)
	}
	return dst, nil
}
