package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

func TestReproCommandInput(t *testing.T) {
	t.Setenv("PATCHEVAL_STATE_DIR", t.TempDir())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"repro"}, "want <evaluation-id> [DIR], got 0 arguments"},
		{[]string{"repro", "x"}, `"x" is not an evaluation id`},
		{[]string{"repro", "--compare", "a"}, "want two samples.csv files, got 1"},
		{[]string{"repro", "--compare", "--tolerance", "-1", "a", "b"}, "--tolerance -1"},
	} {
		_, errOut, code := runsCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// TestReproCommand writes the reproducer of a stored (seeded, not built)
// evaluation and compares its samples with themselves and with a rerun
// whose values moved.
func TestReproCommand(t *testing.T) {
	tree := testenv.LinuxTree(t)
	state := t.TempDir()
	db := filepath.Join(state, store.FileName)
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipelines.Find("selinux-tax")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(testenv.BackportMbox())
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := runner.Submit(context.Background(), runner.Env{Store: st}, p, runner.Options{Mbox: data, Tree: tree})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"a", "b"} {
		run, _ := st.BeginRun(id, v, 0)
		if err := st.FinishRun(run, store.RunOK, evaluate.Environment{Target: "qemu", QEMUArgs: []string{"qemu-system-x86_64"}}, nil,
			[]evaluate.Sample{{Variant: v, Benchmark: "kill", Metric: "ns/op", Value: float64(100 + i)}}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	dir := filepath.Join(t.TempDir(), "r")
	out, errOut, code := runsCLI(t, "repro", "--db", db, "1", dir)
	if code != 0 || !strings.Contains(out, "reproducer of evaluation 1: "+dir) {
		t.Fatalf("repro: exit %d\n%s%s", code, out, errOut)
	}
	for _, f := range []string{"repro.sh", "samples.csv", "series.mbox", "qemu.txt", "manifest.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	samples := filepath.Join(dir, "samples.csv")
	if out, _, code := runsCLI(t, "repro", "--compare", samples, samples); code != 0 || !strings.Contains(out, "same samples within 1%") {
		t.Errorf("compare with itself: exit %d\n%s", code, out)
	}
	csv, _ := os.ReadFile(samples)
	moved := filepath.Join(t.TempDir(), "samples.csv")
	os.WriteFile(moved, []byte(strings.Replace(string(csv), ",101,", ",105,", 1)), 0o644)
	if out, errOut, code := runsCLI(t, "repro", "--compare", samples, moved); code != 1 || !strings.Contains(out, "DIFFERS") || !strings.Contains(errOut, "differ by more than 1%") {
		t.Errorf("compare with a moved rerun: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := runsCLI(t, "repro", "--db", db, "1", dir); code != 2 || !strings.Contains(errOut, "not empty") {
		t.Errorf("over an existing reproducer: exit %d %s", code, errOut)
	}
	// lore --pipeline writes it beside its reports (replacing an earlier
	// run's); one that cannot be built is a warning, not a failure.
	st, err = store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var w strings.Builder
	os.WriteFile(filepath.Join(dir, "stale"), nil, 0o644)
	if got := writeRepro(&w, st, 1, dir); got != dir || w.Len() != 0 {
		t.Errorf("writeRepro: %q, warnings %q", got, w.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "stale")); err == nil {
		t.Error("writeRepro kept the earlier reproducer's files")
	}
	if got := writeRepro(&w, st, 99, filepath.Join(t.TempDir(), "repro")); got != "" || !strings.Contains(w.String(), "evaluation 99: the reproducer was not written") {
		t.Errorf("writeRepro of no evaluation: %q, warnings %q", got, w.String())
	}
}
