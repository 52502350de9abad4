package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/pipelines"
)

// lazyOn61 asks 6.1 for PREEMPT_LAZY, which arrived later, beside a
// variant 6.1 can give.
const lazyOn61 = `name = "lazy-on-6.1"
description = "a variant the tree cannot give beside one it can"
[tree]
base = "v6.1-debian"
[series]
apply = false
[build]
arch = ["ppc64le"]
config = "tinyconfig"
fragments = ["ppc64le-pseries"]
[[variant]]
name = "voluntary"
symbols = { PREEMPT_VOLUNTARY = "y" }
[[variant]]
name = "lazy"
symbols = { PREEMPT_LAZY = "y", PREEMPT_DYNAMIC = "y" }
[[variant]]
name = "lazy@full"
kernel = "lazy"
sched_preempt = "full"
[[benchmark]]
name = "kill"
[repeats]
boots = 1
[target]
kind = "qemu"
[[comparison]]
base = "voluntary"
other = "lazy"
[[chain]]
name = "model"
variants = ["voluntary", "lazy", "lazy@full"]
`

// TestConfigureBeforeCompile: a variant whose symbols the tree cannot
// give stops the evaluation before any kernel compiles, naming the
// variant and the Kconfig reason; with KeepGoing it is dropped (with the
// runtime variant booting its kernel, its comparison and chain steps) and
// the notes the report lists say which and why.
func TestConfigureBeforeCompile(t *testing.T) {
	repo := buildtest.Repo(t)
	p, err := pipelines.Parse([]byte(lazyOn61), "lazy-on-6.1.toml")
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Store: openStore(t, filepath.Join(t.TempDir(), "patcheval.db")), CacheDir: buildtest.Options(t).CacheDir,
		Progress: progress.New(os.Stderr)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	_, err = Run(ctx, env, p, Options{Tree: repo, OutDir: t.TempDir()})
	if err == nil || fail.KindOf(err) != fail.KindInput {
		t.Fatalf("run: %v, want bad input", err)
	}
	msg := err.Error()
	t.Logf("%s", msg)
	for _, want := range []string{"variant(s) lazy cannot be configured", "no kernel was compiled", "--keep-going",
		"CONFIG_PREEMPT_LAZY=y: missing", "CONFIG_PREEMPT_LAZY does not exist in this tree"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q", want)
		}
	}
	id, _, err := Submit(ctx, env, p, Options{Tree: repo})
	if err != nil {
		t.Fatal(err)
	}
	if builds, err := env.Store.BuildsOf(id); err != nil || len(builds) != 0 {
		t.Errorf("builds recorded before the refusal: %v %v", builds, err)
	}

	keys, err := configureFirst(ctx, env, id, nil, true)
	if err != nil {
		t.Fatalf("keep going: %v", err)
	}
	ev, err := load(env, id)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range ev.p.Variants {
		names = append(names, v.Name)
	}
	if len(keys) != 1 || strings.Join(names, " ") != "voluntary" || len(ev.p.Comparisons) != 0 || len(ev.p.Chains) != 0 {
		t.Errorf("after dropping: keys %v, variants %v, comparisons %v, chains %v", keys, names, ev.p.Comparisons, ev.p.Chains)
	}
	notes := strings.Join(ev.in.Notes, "\n")
	t.Logf("notes:\n%s", notes)
	for _, want := range []string{
		"variant lazy dropped (--keep-going): it cannot be configured: ppc64le: CONFIG_PREEMPT_DYNAMIC=y requested, final absent (PREEMPT_DYNAMIC depends on HAVE_PREEMPT_DYNAMIC (= n) [kernel/Kconfig.preempt:98]",
		"; CONFIG_PREEMPT_LAZY=y requested, final absent (CONFIG_PREEMPT_LAZY does not exist in this tree",
		"variant lazy@full dropped too: it boots variant lazy's kernel (--keep-going)",
		"comparison voluntary vs lazy dropped (--keep-going)",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q", want)
		}
	}
}
