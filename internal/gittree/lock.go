package gittree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

// ErrWaitInterrupted wraps the context's error when Flock gave up waiting.
var ErrWaitInterrupted = errors.New("interrupted waiting for a lock")

// Flock takes the flock how (syscall.LOCK_SH or LOCK_EX) on fd, polling
// every 250 ms until ctx ends; waiting, when not nil, is called once when
// the lock is busy. A context that ends gives an error wrapping both
// ErrWaitInterrupted and ctx.Err().
func Flock(ctx context.Context, fd, how int, waiting func()) error {
	for {
		err := syscall.Flock(fd, how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("lock: %w", err)
		}
		if waiting != nil {
			waiting()
			waiting = nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrWaitInterrupted, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Unlock releases a flock taken on fd.
func Unlock(fd int) { syscall.Flock(fd, syscall.LOCK_UN) }

// LockFile opens path (creating it and its directory) and takes the flock
// how on it, waiting as Flock does; release unlocks and closes it.
// Processes sharing a directory (a checkout, a build workspace, a cache
// entry) serialise here.
func LockFile(ctx context.Context, path string, how int, waiting func()) (release func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fail.Infraf("lock %s: %v", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fail.Infraf("lock %s: %v", path, err)
	}
	if err := Flock(ctx, int(f.Fd()), how, waiting); err != nil {
		f.Close()
		return nil, err
	}
	return func() { Unlock(int(f.Fd())); f.Close() }, nil
}
