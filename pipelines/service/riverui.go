package service

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"riverqueue.com/riverui"
	"riverqueue.com/riverui/uiendpoints"

	"github.com/patcheval/patcheval/internal/fail"
)

// RiverUIPath is where serve mounts riverqueue.com/riverui, River's own
// job and queue browser, beside the dashboard's /queue page.
const RiverUIPath = "/riverui"

// riverUI is the riverui handler, made and started on its first request
// (its background count queries then run; a serve nobody browses pays
// nothing for it).
type riverUI struct {
	once sync.Once
	h    *riverui.Handler
	err  error
	// ctx ends the handler's background queries (Service.Close).
	ctx    context.Context
	cancel context.CancelFunc
}

// riverUIHandler serves riverui behind the service's auth (Handler wraps
// it like every path): reads follow the dashboard's rules, and its
// mutations (cancel, retry and delete jobs; pause, resume and change
// queues) need the token, also on loopback: without --token-file riverui
// is read-only.
func (s *Service) riverUIHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && (len(s.cfg.Token) == 0 || !s.authorized(r)) {
			apiError(w, http.StatusForbidden, "Authorization",
				"riverui is read-only without --token-file: changing jobs or queues through it needs Authorization: Bearer <token>")
			return
		}
		h, err := s.startRiverUI()
		if err != nil {
			apiError(w, http.StatusInternalServerError, "", err.Error())
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Service) startRiverUI() (*riverui.Handler, error) {
	u := &s.ui
	u.once.Do(func() {
		var ep uiendpoints.Bundle
		if s.engine.pg != nil {
			ep = riverui.NewEndpoints(s.engine.pg, nil)
		} else {
			ep = riverui.NewEndpoints(s.engine.sqlite, nil)
		}
		log := slog.New(slog.NewTextHandler(s.log, &slog.HandlerOptions{Level: slog.LevelWarn}))
		u.h, u.err = riverui.NewHandler(&riverui.HandlerOpts{Endpoints: ep, Logger: log, Prefix: RiverUIPath})
		if u.err == nil {
			u.err = u.h.Start(u.ctx)
		}
		if u.err != nil {
			u.err = fail.Infraf("riverui: %w", u.err)
		}
	})
	return u.h, u.err
}
