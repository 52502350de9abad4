package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/sandbox"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestLostStreak: the boots at the end that failed for infrastructure
// reasons, in the order they began; a measured or failed boot ends the
// streak and a boot a dead worker left unfinished is passed over.
func TestLostStreak(t *testing.T) {
	run := func(s store.RunStatus, text string) store.Run { return store.Run{Status: s, ErrorText: text} }
	lost := run(store.RunInfra, "machine-lost: gone")
	for _, c := range []struct {
		name string
		runs []store.Run
		want int
	}{
		{"none", nil, 0},
		{"all lost", []store.Run{lost, lost, lost}, 3},
		{"a measured boot ends it", []store.Run{lost, lost, run(store.RunOK, ""), lost}, 1},
		{"a kernel that failed ends it", []store.Run{lost, run(store.RunFailed, "panic"), lost, lost}, 2},
		{"interrupted passed over", []store.Run{lost, run(store.RunInfra, "interrupted: attempt 1 of job 7 ended"), lost}, 2},
		{"measured last", []store.Run{lost, lost, run(store.RunOK, "")}, 0},
	} {
		if n, _ := lostStreak(c.runs); n != c.want {
			t.Errorf("%s: streak %d, want %d", c.name, n, c.want)
		}
	}
	runs := []store.Run{lost, {Status: store.RunInfra, Variant: "full", Boot: 1, ErrorText: "qemu: exited\nmore"}}
	if n, last := lostStreak(runs); n != 2 || last.Variant != "full" || last.Boot != 1 {
		t.Errorf("streak %d, last %+v: want 2 ending with full's boot 1", n, last)
	}
}

// TestLostBootsStopTheEvaluation runs the shipped ppc-preempt-dynamic
// pipeline (three ppc64le kernels, 2 boots each: 6 boots, and a round
// whose boots all failed for infrastructure reasons is offered again) on
// a machine that is gone: a qemu-system-ppc64 that
// dies at once. The evaluation stops after the target's budget of lost
// boots in a row (3) with an infrastructure error naming it, instead of
// trying every boot of every round; the boots after it are never tried.
func TestLostBootsStopTheEvaluation(t *testing.T) {
	repo := buildtest.Repo(t)
	p := builtin(t, "ppc-preempt-dynamic")
	if p.Target.LostBoots() != 3 {
		t.Fatalf("default budget %d, want 3", p.Target.LostBoots())
	}
	bin := t.TempDir()
	fake := "#!/bin/sh\necho 'fake qemu: the machine is gone' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "qemu-system-ppc64"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	// The sandbox runs QEMU with its own PATH; unsandboxed, the fake is
	// the qemu-system-ppc64 found.
	t.Setenv(sandbox.EnvSwitch, "off")
	env := Env{Store: openStore(t, filepath.Join(t.TempDir(), "patcheval.db")), CacheDir: buildtest.Options(t).CacheDir,
		Progress: progress.New(os.Stderr)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	_, err := Run(ctx, env, p, Options{Mbox: backportMbox(t), Tree: repo, OutDir: t.TempDir(), Boots: 2,
		Branch: "patcheval/test-lost-boots", From: mbox.Address{Name: "Kernel Tester", Email: "tester@example.org"}})
	if err == nil || !errors.Is(err, ErrLostBoots) || fail.KindOf(err) != fail.KindInfra {
		t.Fatalf("run: %v (kind %v), want the lost-boot budget's infrastructure error", err, fail.KindOf(err))
	}
	for _, want := range []string{"3 boots in a row failed for infrastructure reasons", "target.max_lost_boots = 3", "fake qemu"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	evs, err := env.Store.ListEvaluations()
	if err != nil || len(evs) != 1 {
		t.Fatalf("evaluations %v, %v", evs, err)
	}
	runs, err := env.Store.RunsOf(evs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Errorf("%d boots tried, want 3 (the budget), not every boot of every round", len(runs))
	}
	for _, r := range runs {
		if r.Status != store.RunInfra || r.Samples != 0 {
			t.Errorf("run %s #%d: %s with %d samples, want infra with none", r.Variant, r.Boot, r.Status, r.Samples)
		}
	}
	if evs[0].Status != store.StatusFailed {
		t.Errorf("evaluation %s, want failed", evs[0].Status)
	}
}
