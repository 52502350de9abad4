package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The start-up of the lore path: `patcheval lore -m THREAD --am-out DIR`
// on the 19-message powerpc thread from a local mbox (no network), as a
// new process each time: package init, flag parsing, parsing, threading,
// resolving and writing the am-ready mbox. Beside it, as the reference
// from the same run, `b4 am -m THREAD -o DIR` on the same file when b4 is
// installed (its cache in a fresh XDG_CACHE_HOME, a git identity from the
// environment as b4 needs one).
//
// Reported per exec: wall time (ns/op), and the child's CPU time
// (cpu-ms/op, user+system), which a loaded machine disturbs less.
// PATCHEVAL_BENCH_BINARY=PATH measures that binary instead of building
// this tree's (to measure an older build in the same run):
//
//	go test ./cmd/patcheval -run '^$' -bench LoreStartup -benchtime 20x
func BenchmarkLoreStartup(b *testing.B) {
	thread, err := filepath.Abs("../../mbox/testdata/threads/ppc-dynamic-preempt-v4.mbox")
	if err != nil {
		b.Fatal(err)
	}
	bin := startupBinary(b)
	b.Run("patcheval", func(b *testing.B) {
		benchExec(b, func(out string) *exec.Cmd {
			return exec.Command(bin, "lore", "-m", thread, "--am-out", out)
		})
	})
	b.Run("b4", func(b *testing.B) {
		b4, err := exec.LookPath("b4")
		if err != nil {
			b.Skip("b4 not installed: no reference")
		}
		cache := b.TempDir()
		benchExec(b, func(out string) *exec.Cmd {
			c := exec.Command(b4, "am", "-m", thread, "-o", out)
			c.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "GIT_CONFIG_COUNT=2",
				"GIT_CONFIG_KEY_0=user.name", "GIT_CONFIG_VALUE_0=patcheval bench",
				"GIT_CONFIG_KEY_1=user.email", "GIT_CONFIG_VALUE_1=bench@patcheval.invalid")
			return c
		})
	})
}

var startupBin struct {
	once sync.Once
	path string
	err  error
}

// startupBinary is $PATCHEVAL_BENCH_BINARY or this tree's patcheval, built
// once per test process.
func startupBinary(b *testing.B) string {
	if p := os.Getenv("PATCHEVAL_BENCH_BINARY"); p != "" {
		return p
	}
	startupBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "patcheval-bench-")
		if err != nil {
			startupBin.err = err
			return
		}
		startupBin.path = filepath.Join(dir, "patcheval")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		out, err := exec.Command(goTool, "build", "-o", startupBin.path, ".").CombinedOutput()
		if err != nil {
			startupBin.err = &buildError{err, string(out)}
		}
	})
	if startupBin.err != nil {
		b.Fatal(startupBin.err)
	}
	return startupBin.path
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

// benchExec runs the command cmd makes b.N times, each writing into a
// fresh directory, and reports the children's CPU time.
func benchExec(b *testing.B, cmd func(out string) *exec.Cmd) {
	root := b.TempDir()
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		out, err := os.MkdirTemp(root, "am-")
		if err != nil {
			b.Fatal(err)
		}
		c := cmd(out)
		var stderr strings.Builder
		c.Stderr = &stderr
		b.StartTimer()
		if err := c.Run(); err != nil {
			b.Fatalf("%s: %v\n%s", c, err, stderr.String())
		}
		b.StopTimer()
		cpu += c.ProcessState.UserTime() + c.ProcessState.SystemTime()
		if ents, _ := os.ReadDir(out); len(ents) == 0 {
			b.Fatalf("%s wrote nothing into %s", c, out)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
