package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestRunStoresAndResumes boots a real ppc64le kernel twice with
// `patcheval run`: every boot lands in the state database, and the same
// command again resumes (boots nothing) instead of redoing finished boots.
func TestRunStoresAndResumes(t *testing.T) {
	art := buildtest.PPC64(t, "patched-voluntary")
	state := t.TempDir()
	t.Setenv("PATCHEVAL_STATE_DIR", state)
	t.Setenv("PATCHEVAL_CACHE_DIR", buildtest.Options(t).CacheDir)
	args := []string{"run", "--kernel", "v=" + art.Image, "--deterministic", "--bench", "kill:20000", "--boots", "2"}
	var out, errb bytes.Buffer
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, args); code != 0 {
		t.Fatalf("first run: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if n := strings.Count(out.String(), "\tkill\t"); n != 2 {
		t.Fatalf("first run printed %d kill samples, want 2:\n%s", n, out.String())
	}
	st, err := store.Open(filepath.Join(state, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := st.ListEvaluations()
	st.Close()
	if err != nil || len(evs) != 1 || evs[0].FinishedRuns != 2 || evs[0].Samples < 2 {
		t.Fatalf("state after the first run: %+v %v", evs, err)
	}
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, args); code != 0 {
		t.Fatalf("second run: exit %d\n%s", code, errb.String())
	}
	if strings.Contains(out.String(), "\tkill\t") || !strings.Contains(errb.String(), "resuming evaluation") {
		t.Errorf("second run did not resume:\nstdout %s\nstderr %s", out.String(), errb.String())
	}
}

// TestRunKeepGoingExitsFailed boots a real ppc64le kernel told to start an
// init that does not exist, twice, with --keep-going: both boots panic
// (the kernel under test failed), both are kept in the state database, and
// run exits 1, not 3 (the failures come back as an errors.Join, which
// fail.KindOf once did not look inside).
func TestRunKeepGoingExitsFailed(t *testing.T) {
	art := buildtest.PPC64(t, "patched-voluntary")
	state := t.TempDir()
	t.Setenv("PATCHEVAL_STATE_DIR", state)
	t.Setenv("PATCHEVAL_CACHE_DIR", buildtest.Options(t).CacheDir)
	var out, errb bytes.Buffer
	code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"run", "--keep-going", "--deterministic",
		"--kernel", "a=" + art.Image + ",cmdline=rdinit=/nope", "--kernel", "b=" + art.Image + ",cmdline=rdinit=/nope",
		"--bench", "kill:1000", "--timeout", "3m"})
	if code != 1 {
		t.Errorf("exit %d, want 1 (two kernels panicked)\n%s", code, errb.String())
	}
	if n := strings.Count(errb.String(), "kernel-panic"); n != 2 || !strings.Contains(errb.String(), "2 boot(s) failed (errors above)") {
		t.Errorf("want both panics printed and counted once:\n%s", errb.String())
	}
	st, err := store.Open(filepath.Join(state, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.ListEvaluations()
	if err != nil || len(evs) != 1 || evs[0].FinishedRuns != 2 {
		t.Fatalf("state: %+v %v (want one evaluation with both failed boots finished)", evs, err)
	}
}

// TestRunFailureMarksEvaluation: a run whose boot fails (here: the kernel
// image is missing) leaves its evaluation "failed", not "running" for
// ever.
func TestRunFailureMarksEvaluation(t *testing.T) {
	state := t.TempDir()
	t.Setenv("PATCHEVAL_STATE_DIR", state)
	_, errOut, code := runsCLI(t, "run", "--kernel", "a="+filepath.Join(t.TempDir(), "missing-vmlinux")+",arch=x86_64", "--boots", "1")
	if code == 0 {
		t.Fatalf("run of a missing kernel: exit 0: %s", errOut)
	}
	st, err := store.Open(filepath.Join(state, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.ListEvaluations()
	if err != nil || len(evs) != 1 {
		t.Fatalf("%d evaluations (%v), want 1", len(evs), err)
	}
	if evs[0].Status != store.StatusFailed {
		t.Errorf("evaluation of a failed run: status %q, want %q (stderr %s)", evs[0].Status, store.StatusFailed, errOut)
	}
}
