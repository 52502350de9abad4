package build

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// runningMark is the file in a build directory (O=) that says make runs
// there: written before make starts, removed when it succeeded. Found by
// the next build, which holds the workspace lock, it says make died there
// (SIGKILL, a lost machine, the OOM killer, or a failed make) and may
// have left files half written.
const runningMark = ".patcheval-make-running"

// distrustInterrupted removes from out the files an interrupted make may
// have left half written and make would take for finished, when out
// holds runningMark: every regular file written since the mark (newer
// than it) whose Kbuild command file (.<name>.cmd beside it) is older
// than the file. Kbuild writes a target's command file once the target is
// complete, and re-makes a target whose command file is missing, but it
// takes a target newer than its inputs whose command (from an earlier
// build) has not changed for up to date: a half-written vmlinux.o,
// vmlinux or built-in.a after an incremental change. Files without a
// command file are Kbuild's to re-make, or written whole (filechk moves
// a finished file into place), and are left alone, as is everything the
// interrupted make finished, so a resumed build compiles only what was
// cut short. It returns how many files it removed; without the mark,
// none.
func distrustInterrupted(out string) (int, error) {
	mark, err := os.Stat(filepath.Join(out, runningMark))
	if err != nil {
		return 0, nil
	}
	since := mark.ModTime()
	n := 0
	err = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		name := d.Name()
		if name == runningMark || (strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".cmd")) {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.ModTime().Before(since) {
			return nil
		}
		c, err := os.Stat(filepath.Join(filepath.Dir(p), "."+name+".cmd"))
		if err != nil || !c.ModTime().Before(fi.ModTime()) {
			return nil // Kbuild re-makes it, or it was finished
		}
		if err := os.Remove(p); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// markRunning writes runningMark into out (anew: its time is this make's
// start).
func markRunning(out string) error {
	return writeBelow(out, runningMark, []byte("make runs here; if no build holds the workspace lock, it was interrupted\n"))
}

// madeItsOwnExit says whether a failed make (err from running it) left
// its directory as trustworthy as a finished one: make exited by itself
// (a compile error, not a signal, not this build's cancellation) in a
// tree whose Kbuild declares .DELETE_ON_ERROR (Linux 4.19 and later), so
// every target whose recipe failed was deleted and every other recipe
// ran to its end. Then runningMark can go; otherwise the next build
// distrusts what this one wrote.
func madeItsOwnExit(ctx context.Context, err error, src string) bool {
	if ctx.Err() != nil {
		return false
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || ws.Signaled() || !ws.Exited() {
		return false
	}
	inc, rerr := os.ReadFile(filepath.Join(src, "scripts", "Kbuild.include"))
	return rerr == nil && bytes.Contains(inc, []byte("\n.DELETE_ON_ERROR:"))
}
