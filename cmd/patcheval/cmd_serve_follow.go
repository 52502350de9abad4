package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/patcheval/patcheval/evaluate/mail"
	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/bisect"
	"github.com/patcheval/patcheval/pipelines/follow"
	"github.com/patcheval/patcheval/pipelines/perpatch"
	"github.com/patcheval/patcheval/pipelines/service"
	"github.com/patcheval/patcheval/series"
)

func init() {
	// patcheval serve follows the [[list]] tables of config.toml: new
	// series on those lists are submitted to the service's own queue, and
	// the lists' reporters post the results.
	serveSetups = append(serveSetups, func(cfg *service.Config, o serveOptions) (func(*service.Service), error) {
		return setupBots(cfg, o, filepath.Join(xdg.ConfigDir(), "config.toml"))
	})
}

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
	dash := strings.TrimRight(o.PublicURL, "/")
	if dash == "" {
		dash = "http://" + o.Listen
	}
	rep, err := follow.NewReporting(nil, lists, smtp, dash, func(id int64) string { return svc.OutDir(id) }, log)
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
		f.Triage = follow.ServiceTriager{Service: s, Store: s.Store(), Reporting: rep, Log: log,
			Bisect: seriesBisector(s, cfg.CacheDir, cfg.Jobs, log)}
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
		_, err := pipelines.Find(name)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, l := range lists {
		if !l.PerPatch {
			continue
		}
		p, err := pipelines.Find(l.Pipeline)
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

// seriesBisector is #patcheval bisect in serve: the bisection inside the
// series of an evaluation's whole-series regression (pipelines/perpatch
// over the applied commits, the ends and the evaluation's kernels
// reused), run in the background in this process rather than through the
// job queue; its reports go to the evaluation's output directory
// (series-bisect/), its result to result.
func seriesBisector(s *service.Service, cacheDir string, jobs int, log *slog.Logger) func(context.Context, int64, func(string)) (string, error) {
	return func(ctx context.Context, id int64, result func(string)) (string, error) {
		ser, err := perpatch.Load(s.Store(), id)
		if err != nil {
			return "", err
		}
		if len(perpatch.SeriesPairs(ser.Pipeline)) == 0 {
			return "", fail.Inputf("pipeline %s compares no variant without the series against the same kernel with it: nothing to bisect inside the series", ser.Pipeline.Name)
		}
		if len(ser.Commits) < 2 {
			return "", fail.Inputf("the series has %d patch: nothing to bisect inside it", len(ser.Commits))
		}
		dir := filepath.Join(s.OutDir(id), "series-bisect")
		go func() {
			pp, err := perpatch.Run(ctx, ser, perpatch.Options{Bisect: true, BisectDir: dir,
				BisectMeasurer: func(at *pipelines.Pipeline, variant, benchmark, metric string) bisect.Measurer {
					return &bisect.PipelineMeasurer{Pipeline: at, Variant: variant, Benchmark: benchmark, Metric: metric, Repo: ser.Repo,
						OutDir: filepath.Join(dir, "steps"), Store: s.Store(), CacheDir: cacheDir, Jobs: jobs}
				},
				Context: bisect.Context{Tree: ser.Repo, Arch: strings.Join(ser.Pipeline.Arches, ",")},
				Logf:    func(format string, a ...any) { log.Info(fmt.Sprintf(format, a...), "evaluation", id) }})
			switch {
			case err != nil:
				result("failed: " + err.Error())
			case pp == nil || pp.Bisection == nil:
				note := "no whole-series regression of at least the pipeline's threshold to bisect"
				if pp != nil && len(pp.Notes) > 0 {
					note = strings.Join(pp.Notes, "; ")
				}
				result(note)
			default:
				result(pp.Bisection.Sentence())
			}
		}()
		return fmt.Sprintf("bisection inside the series of evaluation %d started (%d patches); the result follows in this thread", id, len(ser.Commits)), nil
	}
}
