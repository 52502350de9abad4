package main

import (
	"io"
	"path/filepath"
	"time"

	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines/service"
)

// What `patcheval serve` runs, in one place. The core is the service
// (service.New: the database, the stage, series and watch jobs, the API
// and the dashboard; `patcheval worker` runs its build and boot jobs
// only, cmd_worker.go, and adds nothing). Beside it serve runs the
// features serveFeatures lists, in that order: each reads what it needs
// (config.toml, serve's flags), may add loops and hooks to the core's
// Config before the core is made, and returns what to bind to the core
// once it exists. A new feature of serve is one more entry there.

// serveOptions are what serve's features may need of its flags.
type serveOptions struct {
	Listen, PublicURL string
	Log               io.Writer
	// OutboxEvery is how often the reporters' outbox is flushed (0: 10 s).
	OutboxEvery time.Duration
}

// A serveFeature sets a feature up on cfg before serve makes its service
// and returns the function that binds it to the service (nil: none). An
// error is returned before serve listens.
type serveFeature func(cfg *service.Config, o serveOptions) (bind func(*service.Service), err error)

// serveFeatures are every feature serve wires into its service, in
// order.
func serveFeatures() []serveFeature {
	return []serveFeature{
		// The list bots (cmd_serve_follow.go): the [[list]] tables of
		// config.toml are followed (new series submitted to the queue,
		// replies' #patcheval commands triaged) and the lists' reporters
		// post the results from their outbox.
		func(cfg *service.Config, o serveOptions) (func(*service.Service), error) {
			return setupBots(cfg, o, filepath.Join(xdg.ConfigDir(), "config.toml"))
		},
		// The watches (cmd_watch.go): the [[watch]] tables of
		// config.toml and those watch add wrote into the service's
		// database, ticked by the service's scheduler, re-tested and
		// bisected as its watch jobs.
		setupWatches,
	}
}

// assembleServe sets every feature of serveFeatures up on cfg, in order;
// bind binds them to the service once it exists, in the same order.
func assembleServe(cfg *service.Config, o serveOptions) (bind func(*service.Service), err error) {
	var binds []func(*service.Service)
	for _, setup := range serveFeatures() {
		f, err := setup(cfg, o)
		if err != nil {
			return nil, err
		}
		if f != nil {
			binds = append(binds, f)
		}
	}
	return func(s *service.Service) {
		for _, f := range binds {
			f(s)
		}
	}, nil
}
