package watch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestPlanResolvesOnce: a watch's evaluation resolves its series once
// (issue 33): Plan resolves it (the default pipeline's arches) and hands
// it to Submit (Options.Resolved), which stores it instead of resolving
// the thread again (Plan's series.Resolve and Submit's: 2 before). The
// series stored is the one Submit stores from the thread alone, byte for
// byte.
func TestPlanResolvesOnce(t *testing.T) {
	f := newFixture(t)
	rc1 := f.up.commit(t, 100)
	fix := testgit.Commit(t, f.up.dir, rc1, "bench: make getppid faster", "2026-11-02T11:00:00Z",
		map[string]string{"bench/getppid": "90\n"})
	mbx := filepath.Join(t.TempDir(), "series.mbox")
	patch := testgit.Git(t, testgit.Identity("2026-11-02T11:00:00Z"), nil, "--git-dir="+f.up.dir, "format-patch", "-1", "--stdout",
		"--subject-prefix=PATCH", "--thread", fix)
	if err := os.WriteFile(mbx, []byte(patch+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := &store.Watch{Name: "series", Pipeline: "ppc-preempt-dynamic", SeriesID: mbx, Tree: f.up.dir}
	ev := &PipelineEvaluator{OutDir: t.TempDir()}
	ctx := context.Background()

	count, restore := runner.CountResolutions()
	defer restore()
	p, o, err := ev.Plan(ctx, w, "v6.2-rc1", rc1)
	if err != nil {
		t.Fatal(err)
	}
	if o.Resolved == nil || o.Resolved.Series() == nil {
		t.Fatal("Plan handed no series to Submit")
	}
	submit := func(o runner.Options) []byte {
		t.Helper()
		st, err := store.Open(filepath.Join(t.TempDir(), "patcheval.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		id, _, err := runner.Submit(ctx, runner.Env{Store: st}, p, o)
		if err != nil {
			t.Fatal(err)
		}
		data, err := st.ResolvedSeries(id)
		if err != nil || len(data) == 0 {
			t.Fatalf("stored series: %d bytes, %v", len(data), err)
		}
		return data
	}
	got := submit(o)
	if n := count(); n != 1 {
		t.Errorf("Plan and Submit resolved the series %d times, want once", n)
	}
	o.Resolved = nil
	if want := submit(o); !bytes.Equal(got, want) {
		t.Errorf("the series stored differs from the one Submit stores from the thread:\n%.400s\nvs\n%.400s", got, want)
	}
}
