package build

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestDistrustInterrupted: in a build directory whose make was
// interrupted, the files written since it started whose Kbuild command
// file is older (an earlier build's) are removed, to be made again; files
// it finished, files without a command file (Kbuild re-makes those),
// files older than it, and a directory without the mark are left alone.
func TestDistrustInterrupted(t *testing.T) {
	out := t.TempDir()
	start := time.Now().Add(-time.Hour)
	write := func(name string, at time.Time) {
		p := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]time.Time{
		"old.o":                  start.Add(-time.Hour), // an earlier build's, no command file
		"kernel/done.o":          start.Add(time.Minute),
		"kernel/.done.o.cmd":     start.Add(time.Minute + time.Millisecond),
		"kernel/cut.o":           start.Add(2 * time.Minute), // its command file is the earlier build's
		"kernel/.cut.o.cmd":      start.Add(-time.Hour),
		"kernel/new.o":           start.Add(2 * time.Minute), // no command file yet
		"vmlinux.o":              start.Add(3 * time.Minute),
		".vmlinux.o.cmd":         start.Add(-time.Hour),
		"kernel/built-in.a":      start.Add(3 * time.Minute),
		"kernel/.built-in.a.cmd": start.Add(-2 * time.Hour),
		"include/config/auto":    start.Add(time.Second),
	}
	for n, at := range files {
		write(n, at)
	}
	if n, err := distrustInterrupted(out); err != nil || n != 0 {
		t.Fatalf("without the mark: %d removed, %v; want none", n, err)
	}
	write(runningMark, start)
	n, err := distrustInterrupted(out)
	if err != nil {
		t.Fatal(err)
	}
	gone := map[string]bool{"kernel/cut.o": true, "vmlinux.o": true, "kernel/built-in.a": true}
	for name := range files {
		_, err := os.Stat(filepath.Join(out, name))
		if gone[name] != os.IsNotExist(err) {
			t.Errorf("%s: removed %v, want %v", name, os.IsNotExist(err), gone[name])
		}
	}
	if n != len(gone) {
		t.Errorf("%d removed, want %d", n, len(gone))
	}
}

// TestMadeItsOwnExit: only a make that exited by itself with an error, in
// a tree whose Kbuild deletes what a failed recipe wrote, leaves its
// directory trusted; a signal, a cancelled build, a make that never ran
// and an old Kbuild without .DELETE_ON_ERROR keep the mark.
func TestMadeItsOwnExit(t *testing.T) {
	kbuild := func(text string) string {
		src := t.TempDir()
		if err := os.MkdirAll(filepath.Join(src, "scripts"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, "scripts", "Kbuild.include"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return src
	}
	modern := kbuild("# SPDX\n\n# Delete partially updated (i.e. corrupted) files on error\n.DELETE_ON_ERROR:\n")
	old := kbuild("# SPDX\n# no .DELETE_ON_ERROR: here before 4.19\n")
	run := func(ctx context.Context, script string) error {
		return exec.CommandContext(ctx, "sh", "-c", script).Run()
	}
	bg := context.Background()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		src  string
		want bool
	}{
		{"compile error", bg, run(bg, "exit 2"), modern, true},
		{"old kbuild", bg, run(bg, "exit 2"), old, false},
		{"no kbuild", bg, run(bg, "exit 2"), t.TempDir(), false},
		{"killed", bg, run(bg, "kill -9 $$"), modern, false},
		{"cancelled", cancelled, run(bg, "exit 2"), modern, false},
		{"exit 127", bg, run(bg, "exec /nonexistent/make"), modern, true},
		{"not started", bg, exec.Command("/nonexistent/make").Run(), modern, false},
	} {
		if got := madeItsOwnExit(c.ctx, c.err, c.src); got != c.want {
			t.Errorf("%s (%v): %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
