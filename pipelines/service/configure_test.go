package service

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
)

// lazyOn61 asks Debian's 6.1 for PREEMPT_LAZY, which arrived later,
// beside a variant 6.1 can give (as pipelines/runner's
// TestConfigureBeforeCompile does).
const lazyOn61 = `name = "lazy-on-6.1"
description = "a variant the tree cannot give beside one it can"
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
symbols = { PREEMPT_LAZY = "y" }
[[benchmark]]
name = "kill"
[repeats]
boots = 1
[target]
kind = "qemu"
[[comparison]]
base = "voluntary"
other = "lazy"
`

// TestServiceConfiguresBeforeCompiling: in the service, as in runner.Run,
// every kernel of an evaluation is configured and verified before any
// compiles (runner's StageConfigure, one configure job per kernel): a
// variant the tree cannot give fails the evaluation with a message that
// names it and the Kconfig reason (in the evaluation's log and on its
// page), and no build job is ever queued (the voluntary kernel, which
// configures, is not compiled either).
func TestServiceConfiguresBeforeCompiling(t *testing.T) {
	repo := testenv.LinuxTree(t)
	p, err := pipelines.Parse([]byte(lazyOn61), "lazy-on-6.1.toml")
	if err != nil {
		t.Fatal(err)
	}
	// The shared cache: the configures reuse its 6.1 config sources.
	s, base := testService(t, Config{AllowTrees: []string{repo}, CacheDir: xdg.CacheDir(), Jobs: 1})
	id, _, err := s.Submit(t.Context(), p, runner.Options{Tree: repo, Base: testenv.BaseCommit})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		e, err := s.Store().Evaluation(id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == "failed" {
			break
		}
		if e.Status == "done" || time.Now().After(deadline) {
			t.Fatalf("evaluation %d is %s, want failed before compiling", id, e.Status)
		}
	}
	// Every job has ended (a configure still running is cancelled).
	kinds := map[string]int{}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		jobs, err := s.Engine().Jobs(t.Context(), id, 100, unfinished...)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs still unfinished after the failure: %d", len(jobs))
		}
	}
	jobs, err := s.Engine().Jobs(t.Context(), id, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		kinds[j.Kind]++
	}
	if kinds["apply"] != 1 || kinds["configure"] != 2 || kinds["build"] != 0 || kinds["more"] != 0 {
		t.Errorf("jobs by kind %v, want apply, 2 configures and no build", kinds)
	}
	log := strings.Join(s.evalLog(id).snapshot(), "\n")
	t.Logf("evaluation log:\n%s", log)
	for _, want := range []string{
		"configure failed: variant lazy cannot be configured on this tree",
		"no kernel of the evaluation was compiled: build ppc64le/lazy",
		"CONFIG_PREEMPT_LAZY=y: missing",
		"CONFIG_PREEMPT_LAZY does not exist in this tree",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("evaluation log lacks %q", want)
		}
	}
	if strings.Contains(log, "variant voluntary cannot") {
		t.Errorf("the log blames voluntary, which configures")
	}
	// The refusal is recorded as the kernel's failed build (nothing
	// compiled), which the evaluation's page opens with.
	builds, err := s.Store().BuildsOf(id)
	if err != nil || len(builds) != 1 || builds[0].Variant != "lazy" || builds[0].Status != "failed" ||
		!strings.HasPrefix(builds[0].ErrorText, "variant lazy cannot be configured on this tree; no kernel of the evaluation was compiled") {
		t.Errorf("builds recorded: %+v %v; want lazy's refusal only", builds, err)
	}
	resp, err := http.Get(base + "/evaluations/" + itoa(id))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "Failed at build lazy/ppc64le:</b> variant lazy cannot be configured on this tree"; !strings.Contains(string(page), want) {
		t.Errorf("the evaluation page lacks %q:\n%s", want, page)
	}
}
