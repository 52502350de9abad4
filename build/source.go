package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/patcheval/patcheval/internal/gittree"
)

// acquireSource brings the source directory dir to j.commit and holds it
// there with a shared lock until release is called. Builds at the same
// commit share the sources concurrently; a build at another commit waits,
// then moves the sources incrementally (gittree.Checkout rewrites only the
// files that differ, so make in each O= directory recompiles only what
// changed).
func (j *job) acquireSource(ctx context.Context, dir string) (summary string, release func(), err error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", nil, classifyIO(j, err)
	}
	f, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", nil, classifyIO(j, err)
	}
	fd := int(f.Fd())
	unlock := func() { gittree.Unlock(fd) }
	summary = "already at commit"
	waited := false
	for attempt := 0; ; attempt++ {
		if err := flockWait(ctx, fd, syscall.LOCK_SH, func() {
			if !waited {
				j.opts.Progress.Status("%s: waiting for the sources (another build holds them at another commit)", j.label)
				waited = true
			}
		}); err != nil {
			f.Close()
			return "", nil, err
		}
		if gittree.CheckedOut(dir) == j.commit {
			return summary, func() { unlock(); f.Close() }, nil
		}
		unlock()
		if err := flockWait(ctx, fd, syscall.LOCK_EX, nil); err != nil {
			f.Close()
			return "", nil, err
		}
		if gittree.CheckedOut(dir) != j.commit {
			j.opts.Progress.Status("%s: checkout %s", j.label, short(j.commit))
			seeded := j.seedSources(ctx, dir)
			st, err := gittree.Checkout(ctx, j.req.Repo, j.commit, dir)
			if err != nil && ctx.Err() == nil {
				// Not a checkout of this repository (or damaged): start over.
				if rerr := os.RemoveAll(dir); rerr == nil {
					st, err = gittree.Checkout(ctx, j.req.Repo, j.commit, dir)
				}
			}
			if err != nil {
				unlock()
				f.Close()
				return "", nil, &InfraError{Arch: j.arch.Name, Variant: j.req.Variant, Reason: ioReason(err),
					Msg: "materialising the sources of " + short(j.commit) + ": " + err.Error(), Err: err}
			}
			switch {
			case seeded != nil:
				summary = fmt.Sprintf("hard-linked %d files from %s in %s, then %d files written, %d removed in %s",
					seeded.Written, j.cfgSrc, seeded.Duration.Round(time.Millisecond), st.Written, st.Removed, st.Duration.Round(time.Millisecond))
			case st.Fresh:
				summary = fmt.Sprintf("fresh checkout, %d files in %s", st.Written, st.Duration.Round(time.Millisecond))
			default:
				summary = fmt.Sprintf("incremental checkout from %s: %d files written, %d removed in %s",
					short(st.Previous), st.Written, st.Removed, st.Duration.Round(time.Millisecond))
			}
		}
		// Downgrade to shared (not atomic: re-check the checkout's commit).
		unlock()
		if attempt > 50 {
			f.Close()
			return "", nil, &InfraError{Arch: j.arch.Name, Reason: "io", Msg: "could not hold the sources at " + short(j.commit) + ": too much contention"}
		}
	}
}

// flockWait is gittree.Flock with build's error classes: an interrupted
// wait or a failing lock is an *InfraError.
func flockWait(ctx context.Context, fd, how int, waiting func()) error {
	err := gittree.Flock(ctx, fd, how, waiting)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gittree.ErrWaitInterrupted):
		return &InfraError{Reason: "interrupted", Msg: "waiting for a build lock", Err: ctx.Err()}
	}
	return &InfraError{Reason: "io", Msg: err.Error(), Err: err}
}

// seedSources fills an empty source directory by hard-linking the
// (repo, arch) config sources, which the config step has just checked out
// (usually at this very commit): about a second, where decoding 78k blobs
// takes tens. Checkout then moves it to the job's commit incrementally. It
// returns nil when it did not apply (dir not empty, the config sources
// missing or on another file system); the checkout then starts from
// scratch.
func (j *job) seedSources(ctx context.Context, dir string) *gittree.CheckoutStats {
	if dir == j.cfgSrc {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, gittree.StateFile)); err == nil {
		return nil
	}
	st, err := gittree.LinkClone(ctx, j.cfgSrc, dir)
	if err != nil {
		return nil
	}
	return st
}
