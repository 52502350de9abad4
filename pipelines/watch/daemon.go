package watch

import (
	"context"
	"time"
)

// Loop runs every stored watch on its schedule until ctx ends. Every
// resync (default one minute) it re-reads the watches, so watches added,
// changed or removed by other processes (`patcheval watch add`) take
// effect without a restart. It is what `patcheval serve` starts as a
// background loop and what `patcheval watch daemon` runs in the
// foreground.
func Loop(ctx context.Context, wr *Watcher, resync time.Duration) error {
	if resync <= 0 {
		resync = time.Minute
	}
	s := NewScheduler(wr.logf)
	sync := func() error {
		ws, err := wr.Store.Watches()
		if err != nil {
			return err
		}
		keep := map[int64]bool{}
		for _, w := range ws {
			w := w
			keep[w.ID] = true
			err := s.Set(w.ID, w.Schedule, func() {
				cur, err := wr.Store.FindWatch(w.Name)
				if err != nil {
					return // removed since
				}
				if _, err := wr.Tick(ctx, cur); err != nil {
					wr.logf("watch %s: tick: %v", cur.Name, err)
				}
			})
			if err != nil {
				wr.logf("watch %s: %v (not scheduled)", w.Name, err)
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
				wr.logf("watch: re-reading the watches: %v", err)
			}
		}
	}
}
