package watch

import (
	"context"
	"time"

	"github.com/patcheval/patcheval/pipelines/store"
)

// Schedule calls fire for every stored watch on the watch's schedule
// (Scheduler: robfig/cron with Recover and SkipIfStillRunning) until ctx
// ends, re-reading the watches every resync (default one minute). fire
// gets the watch as stored when it fires; a removed watch is not fired.
func Schedule(ctx context.Context, st *store.Store, logf func(string, ...any), resync time.Duration, fire func(ctx context.Context, w *store.Watch)) error {
	if resync <= 0 {
		resync = time.Minute
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s := NewScheduler(logf)
	sync := func() error {
		ws, err := st.Watches()
		if err != nil {
			return err
		}
		keep := map[int64]bool{}
		for _, w := range ws {
			w := w
			keep[w.ID] = true
			err := s.Set(w.ID, w.Schedule, func() {
				cur, err := st.FindWatch(w.Name)
				if err != nil || cur.ID != w.ID {
					return // removed since
				}
				fire(ctx, cur)
			})
			if err != nil {
				logf("watch %s: %v (not scheduled)", w.Name, err)
			}
		}
		for _, id := range s.IDs() {
			if !keep[id] {
				s.Remove(id)
			}
		}
		return nil
	}
	if err := sync(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t := time.NewTicker(resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			<-done
			return nil
		case <-t.C:
			if err := sync(); err != nil {
				logf("watch: re-reading the watches: %v", err)
			}
		}
	}
}
