package service

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/internal/sandbox"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestLostBootsEndTheServiceEvaluation: on a machine that is gone (a
// qemu-system-ppc64 that dies at once), the service's evaluation fails
// after the target's budget of lost boots in a row (3 of the 6 planned),
// and the boot job that spent it is not retried: River's attempts are a
// job's, the budget is the evaluation's (each retry would boot again on
// the machine that is gone).
func TestLostBootsEndTheServiceEvaluation(t *testing.T) {
	repo := testenv.LinuxTree(t)
	p, err := pipelines.Builtin("ppc-preempt-dynamic")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	fake := "#!/bin/sh\necho 'fake qemu: the machine is gone' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "qemu-system-ppc64"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv(sandbox.EnvSwitch, "off") // the sandbox runs QEMU with its own PATH
	mb, err := os.ReadFile(testenv.BackportMbox())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := testService(t, Config{AllowTrees: []string{repo}, CacheDir: buildtest.Options(t).CacheDir, Jobs: 1, From: testFrom})
	ctx := t.Context()
	id, _, err := s.Submit(ctx, p, runner.Options{Mbox: mb, Tree: repo, Boots: 2, Branch: "patcheval/test-service-lost-boots"})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		e, err := s.Store().Evaluation(id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == store.StatusFailed {
			break
		}
		if e.Status == store.StatusDone || time.Now().After(deadline) {
			t.Fatalf("evaluation %d is %s, want failed after 3 lost boots", id, e.Status)
		}
	}
	runs, err := s.Store().RunsOf(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Errorf("%d boots tried, want 3 (the budget)", len(runs))
	}
	// The failure cancels the evaluation's jobs; wait for River to settle.
	ctx2, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var boots []*rivertype.JobRow
	for ctx2.Err() == nil {
		js, err := s.Engine().Jobs(ctx2, id, 100)
		if err != nil {
			t.Fatal(err)
		}
		boots = boots[:0]
		settled := true
		for _, j := range js {
			if j.Kind == "boot" {
				boots = append(boots, j)
				settled = settled && j.FinalizedAt != nil
			}
		}
		if settled {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The boot that spent the budget was recorded, and its job completed
	// in that transaction with the next boot queued: the failure then
	// cancels that one before it runs.
	ran := 0
	for _, j := range boots {
		switch {
		case j.Attempt == 1 && j.State == rivertype.JobStateCompleted:
			ran++
		case j.Attempt == 0 && j.State == rivertype.JobStateCancelled:
		default:
			t.Errorf("boot job %d: %s after %d attempts (errors %v), want completed after 1, or cancelled before running", j.ID, j.State, j.Attempt, j.Errors)
		}
	}
	if ran != 3 {
		t.Errorf("%d boot jobs ran, want 3", ran)
	}
}
