package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/bots/follow"
	"github.com/patcheval/patcheval/pipelines/bots/mail"
	"github.com/patcheval/patcheval/pipelines/experiments/perpatch"
	"github.com/patcheval/patcheval/pipelines/service"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// setupBots reads config's [[list]] tables and [smtp] settings (bad ones
// are bad input, before serve listens) and adds to cfg: the "follow"
// loop, and when a list has reporters, the notify hook that queues their
// posts, the "outbox" loop that delivers them, and the dashboard's
// Approve button for held mails. The returned function binds them to the
// service once it exists.
func setupBots(cfg *service.Config, o serveOptions, config string) (func(*service.Service), error) {
	lists, err := loadLists(config)
	if err != nil || len(lists) == 0 {
		return nil, err
	}
	smtp, err := mail.LoadSettings(config)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(o.Log, nil))
	var svc *service.Service
	var rep *follow.Reporting
	// The triager carries out #patcheval commands; #patcheval bisect is
	// the service's series_bisect jobs, whose end it answers in the
	// command's thread.
	triager := func(s *service.Service) follow.ServiceTriager {
		return follow.ServiceTriager{Service: s, Store: s.Store(), Reporting: rep, Log: log, Bisect: s.BisectSeries}
	}
	cfg.SeriesBisected = func(ctx context.Context, id int64, requesters []string, text string) error {
		return triager(svc).BisectResult(ctx, id, requesters, text)
	}
	dash := strings.TrimRight(o.PublicURL, "/")
	if dash == "" {
		dash = "http://" + o.Listen
	}
	rep, err = follow.NewReporting(nil, lists, smtp, dash, func(id int64) string { return svc.OutDir(id) }, log)
	if err != nil {
		return nil, err
	}
	cfg.Loops = append(cfg.Loops, service.Loop{Name: "follow", Run: func(ctx context.Context, s *service.Service) error {
		f := newFollower(o.Log, lists, s.Store(), s)
		if rep != nil {
			// The service's own "queued" notify job may run before the
			// follower has recorded which series the evaluation is; this
			// one runs after (posting twice is a no-op).
			f.Submitted = func(_ follow.List, _ *series.Series, id int64) error { return rep.Notify(ctx, id, follow.EventQueued) }
		}
		// Replies to the reports may command (#patcheval retest, ...).
		f.Triage = triager(s)
		return f.Run(ctx)
	}})
	if rep != nil {
		cfg.Notify = func(ctx context.Context, id int64, event string) error { return rep.Notify(ctx, id, event) }
		cfg.Posts = rep
		cfg.Loops = append(cfg.Loops, service.Loop{Name: "outbox", Run: func(ctx context.Context, s *service.Service) error {
			return rep.Outbox.Run(ctx, o.OutboxEvery)
		}})
	}
	return func(s *service.Service) {
		svc = s
		if rep != nil {
			rep.Store, rep.Outbox.Store = s.Store(), s.Store()
		}
	}, nil
}

// loadLists reads the [[list]] tables of config (none without the file).
func loadLists(config string) ([]follow.List, error) {
	lists, err := follow.LoadConfig(config, func(name string) error {
		_, err := pipelines.Named(name, nil, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, l := range lists {
		if !l.PerPatch {
			continue
		}
		p, err := pipelines.Named(l.Pipeline, nil, nil)
		if err != nil {
			return nil, err
		}
		if _, err := perpatch.AtCommit(p, perpatch.SeriesPairs(p)); err != nil {
			return nil, fail.Inputf("%s: [[list]] %s: per_patch: %v", config, l.Name, err)
		}
	}
	return lists, nil
}

// newFollower builds the list follower of `patcheval serve`: its state
// lives in st, its submissions go through svc (runner.Submit and the
// stage jobs; the service signs the drafts), and its mirrors of the
// lists' public-inbox epochs live in the cache directory.
func newFollower(log io.Writer, lists []follow.List, st *store.Store, svc follow.Service) *follow.Follower {
	return &follow.Follower{
		Store:  st,
		Lists:  lists,
		Submit: follow.ServiceSubmitter{Service: svc},
		Dir:    filepath.Join(xdg.CacheDir(), "lists"),
		Log:    slog.New(slog.NewTextHandler(log, nil)),
	}
}
