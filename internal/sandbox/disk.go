package sandbox

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"time"
)

// DiskUsage is the space the files under dirs take (allocated blocks,
// hard links counted once).
func DiskUsage(dirs ...string) int64 {
	type ino struct{ dev, ino uint64 }
	seen := map[ino]bool{}
	var total int64
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			info, err := e.Info()
			if err != nil {
				return nil
			}
			st, ok := info.Sys().(*syscall.Stat_t)
			if !ok {
				total += info.Size()
				return nil
			}
			if st.Nlink > 1 {
				k := ino{uint64(st.Dev), st.Ino}
				if seen[k] {
					return nil
				}
				seen[k] = true
			}
			total += st.Blocks * 512
			return nil
		})
	}
	return total
}

// DiskError says that a sandboxed command wrote more than its limit.
type DiskError struct {
	Limit, Used int64
	Dirs        []string
}

func (e *DiskError) Error() string {
	return fmt.Sprintf("sandbox: the build wrote %d MiB into %v, over its disk limit of %d MiB (stopped)",
		e.Used>>20, e.Dirs, e.Limit>>20)
}

// DiskWatch measures dirs every interval while ctx lasts and calls kill
// once, with the error, when they hold more than limit bytes (the usage
// before the command started counts: the limit bounds the directories,
// an incremental build's earlier objects included). The returned function
// stops the watch and returns the error it raised, if any.
func DiskWatch(ctx context.Context, limit int64, interval time.Duration, kill func(), dirs ...string) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan *DiskError, 1)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				done <- nil
				return
			case <-t.C:
			}
			if used := DiskUsage(dirs...); used > limit {
				kill()
				done <- &DiskError{Limit: limit, Used: used, Dirs: dirs}
				return
			}
		}
	}()
	return func() error {
		cancel()
		if e := <-done; e != nil {
			return e
		}
		return nil
	}
}
