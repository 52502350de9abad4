package watch

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/patcheval/patcheval/pipelines/store"
)

// TestRegzbotOptIn: `regzbot = true` in a [[watch]] table reaches the
// store (and back after a restart), and the bisection plan of that
// watch's events asks for regzbot's commands; a watch without it does
// not.
func TestRegzbotOptIn(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	pipeline, _ := filepath.Abs("testdata/retest-x86-getppid.toml")
	os.WriteFile(cfg, []byte(`
[[watch]]
name = "stable"
remote = "https://git.example.org/linux.git"
tags = "v7.2.*"
pipeline = "`+pipeline+`"
tree = "`+dir+`"
bisect = true
regzbot = true

[[watch]]
name = "plain"
remote = "https://git.example.org/linux.git"
tags = "v7.3.*"
pipeline = "`+pipeline+`"
tree = "`+dir+`"
`), 0o644)
	ws, err := LoadConfig(cfg, func(string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "patcheval.db")
	st, err := store.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Sync(st, ws); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err = store.Open(dbPath); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b := &Bisection{Eval: &PipelineEvaluator{OutDir: dir}}
	for name, want := range map[string]bool{"stable": true, "plain": false} {
		w, err := st.FindWatch(name)
		if err != nil {
			t.Fatal(err)
		}
		if w.Regzbot != want {
			t.Errorf("%s: stored regzbot %v, want %v", name, w.Regzbot, want)
		}
		pl, err := b.Plan(w, &store.WatchEvent{Variant: "base", Benchmark: "getppid", Metric: "ns/op", Change: 12},
			&store.WatchTag{Tag: "v7.2.11", Commit: "a"}, &store.WatchTag{Tag: "v7.2.12", Commit: "b"})
		if err != nil {
			t.Fatal(err)
		}
		if pl.Context.Regzbot != want {
			t.Errorf("%s: plan's regzbot %v, want %v", name, pl.Context.Regzbot, want)
		}
	}
	// Turning it off in the config updates the stored watch.
	ws[0].Regzbot = false
	if _, updated, err := Sync(st, ws); err != nil || len(updated) != 1 {
		t.Fatalf("sync: updated %v, %v", updated, err)
	}
	if w, _ := st.FindWatch("stable"); w.Regzbot {
		t.Errorf("regzbot still on after the config turned it off")
	}
}
