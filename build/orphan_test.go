package build

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/progress"
)

// makeChildEnv makes this test binary run one make through runner.run
// (see TestMain) instead of the tests.
const makeChildEnv = "PATCHEVAL_TEST_MAKE_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(makeChildEnv); dir != "" {
		os.Exit(makeChild(dir))
	}
	os.Exit(m.Run())
}

// makeChild runs `make vmlinux` in dir/src with O=dir/out the way a kernel
// build runs it (process group, scrubbed environment, isolation when it
// works), its output on stdout.
func makeChild(dir string) int {
	a, err := arch.Lookup("ppc64le")
	if err != nil {
		fmt.Println(err)
		return 2
	}
	r := &runner{arch: a, tc: &Toolchain{CC: "gcc"}, src: filepath.Join(dir, "src"), out: filepath.Join(dir, "out"),
		home: filepath.Join(dir, "home"), cacheDir: dir, ws: dir, noNetwork: true, label: "test", progress: progress.Discard(), jobs: 2}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if lines, err := r.run(ctx, os.Stdout, true, "vmlinux"); err != nil {
		fmt.Println("make:", r.makeFailure(ctx, err, lines, ""))
		return 1
	}
	return 0
}

// TestKilledBuildLeavesNoMake: when the patcheval process running a build
// dies of SIGKILL (nothing of it runs after), make and every compiler it
// started die with it; on SIGINT the build is cancelled, make's group is
// killed and the build says it was interrupted. make runs in its own process group (so that a
// cancelled build can kill the whole group); before, a SIGKILLed
// patcheval left that group running, still writing into the workspace
// whose lock had died with patcheval, where the resumed build then ran
// beside it. A real make on a small Makefile stands in for a kernel's:
// two parallel jobs that each run for minutes.
func TestKilledBuildLeavesNoMake(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is required: ", err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		t.Run(map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGINT: "SIGINT"}[sig], func(t *testing.T) { killDuringMake(t, sig) })
	}
}

func killDuringMake(t *testing.T, sig syscall.Signal) {
	dir := t.TempDir()
	for _, d := range []string{"src", "out", "home"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A duration no other process on the machine sleeps for.
	marker := fmt.Sprintf("%d.%d", 200+os.Getpid()%500, time.Now().UnixNano()%1000000)
	mk := fmt.Sprintf("vmlinux: a b\n\t@echo done\na:\n\t@echo started a; sleep %s\nb:\n\t@echo started b; sleep %s\n", marker, marker)
	if err := os.WriteFile(filepath.Join(dir, "src", "Makefile"), []byte(mk), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), makeChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sleepers := func() []int {
		var pids []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			var pid int
			if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
				continue
			}
			cl, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if strings.Contains(string(cl), "sleep\x00"+marker) {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	t.Cleanup(func() {
		for _, p := range sleepers() {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
	sc := bufio.NewScanner(out)
	started := 0
	for started < 2 && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "started ") {
			started++
		}
	}
	if started < 2 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("make did not start both jobs")
	}
	for wait := time.Now().Add(5 * time.Second); len(sleepers()) < 2 && time.Now().Before(wait); {
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(sleepers()); n != 2 {
		t.Fatalf("%d sleeping jobs before the kill, want 2", n)
	}
	cmd.Process.Signal(sig)
	var rest strings.Builder
	for sc.Scan() {
		rest.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	if sig == syscall.SIGINT {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(rest.String(), "infrastructure (interrupted): build interrupted") {
			t.Errorf("SIGINT: %v, output:\n%s", err, rest.String())
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(sleepers()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := sleepers(); len(left) > 0 {
		t.Fatalf("make's jobs still run 10 s after %v: pids %v", sig, left)
	}
}
