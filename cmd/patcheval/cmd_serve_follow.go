package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/follow"
	"github.com/patcheval/patcheval/pipelines/service"
)

func init() {
	// patcheval serve follows the [[list]] tables of config.toml: new
	// series on those lists are submitted to the service's own queue.
	serveLoops = append(serveLoops, service.Loop{Name: "follow", Run: func(ctx context.Context, s *service.Service) error {
		f, err := newFollower(os.Stderr, filepath.Join(xdg.ConfigDir(), "config.toml"), s.Store(), s)
		if err != nil || f == nil {
			return err
		}
		return f.Run(ctx)
	}})
}

// newFollower builds the list follower of `patcheval serve` from the
// [[list]] tables of the config file (nil, nil when it has none): its
// state lives in st, its submissions go through svc (runner.Submit and
// the stage jobs; the service signs the drafts), and its mirrors of the
// lists' public-inbox epochs live in the cache directory.
func newFollower(log io.Writer, config string, st *store.Store, svc follow.Service) (*follow.Follower, error) {
	lists, err := follow.LoadConfig(config, func(name string) error {
		_, err := pipelines.Find(name)
		return err
	})
	if err != nil || len(lists) == 0 {
		return nil, err
	}
	return &follow.Follower{
		Store:  st,
		Lists:  lists,
		Submit: follow.ServiceSubmitter{Service: svc},
		Dir:    filepath.Join(xdg.CacheDir(), "lists"),
		Log:    slog.New(slog.NewTextHandler(log, nil)),
	}, nil
}
