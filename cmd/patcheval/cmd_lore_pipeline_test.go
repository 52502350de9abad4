package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// TestPrintOutcomeVerbose: the printed report counts mechanical config
// consequences unless --verbose asks for every symbol.
func TestPrintOutcomeVerbose(t *testing.T) {
	r := &report.Report{Title: "t", Confounds: []report.Confound{{Base: "a", Other: "b", Deltas: []report.ConfigDelta{
		{Symbol: "PREEMPT_DYNAMIC", From: "n", To: "y", Requested: true},
		{Symbol: "PREEMPT_RCU", From: "n", To: "y", Highlight: true, Where: "kernel/rcu/Kconfig:21", Rule: "default y if PREEMPTION"},
		{Symbol: "INLINE_SPIN_UNLOCK_IRQ", From: "y", To: "n", Where: "kernel/Kconfig.locks:100", Rule: "depends on !PREEMPTION"},
	}}}}
	res := &runner.Outcome{Report: r}
	var short, long bytes.Buffer
	printOutcome(&short, res, report.TextOptions{})
	printOutcome(&long, res, report.TextOptions{Verbose: true})
	if strings.Contains(short.String(), "INLINE_SPIN_UNLOCK_IRQ") || !strings.Contains(short.String(), "+ 1 mechanical consequence(s)") {
		t.Errorf("default output:\n%s", short.String())
	}
	if !strings.Contains(long.String(), "INLINE_SPIN_UNLOCK_IRQ") || !strings.Contains(long.String(), "PREEMPT_RCU") {
		t.Errorf("--verbose output:\n%s", long.String())
	}
	// The flag exists on lore next to --pipeline.
	fs := flag.NewFlagSet("lore", flag.ContinueOnError)
	var pf pipelineFlags
	pf.add(fs)
	if fs.Lookup("verbose") == nil {
		t.Errorf("lore has no --verbose flag")
	}
}

// TestLorePipelineOptions: lore --pipeline hands the apply flags (--fuzz
// and --3way were dropped before) and the thread's lore base to the
// runner.
func TestLorePipelineOptions(t *testing.T) {
	fs := flag.NewFlagSet("lore", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var af applyFlags
	af.add(fs, "", "")
	var pf pipelineFlags
	pf.add(fs)
	if err := fs.Parse([]string{"--pipeline", "ppc-preempt-dynamic", "--tree", "/k", "--base", "v6.1", "--branch", "b",
		"--fuzz", "2", "--3way", "--boots", "1", "--tested-by"}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(backport)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	msgs, err := mbox.Parse(f, backport)
	if err != nil {
		t.Fatal(err)
	}
	th := mbox.NewThread(msgs, backport)
	s, err := series.Resolve(th, series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipelines.Builtin("ppc-preempt-dynamic")
	if err != nil {
		t.Fatal(err)
	}
	lr := &loreResult{Thread: th, Series: s, Lore: "https://lore.example.org"}
	o := pf.options(p, lr, af, mbox.Address{Email: "me@example.org"})
	if o.Fuzz != 2 || !o.ThreeWay || o.Tree != "/k" || o.Base != "v6.1" || o.Branch != "b" || o.Boots != 1 || !o.TestedBy {
		t.Errorf("options %+v: the apply and pipeline flags did not all arrive", o)
	}
	if o.Lore != "https://lore.example.org" || o.Version != 4 || len(o.Mbox) == 0 {
		t.Errorf("options: lore %q version %d mbox %d bytes", o.Lore, o.Version, len(o.Mbox))
	}
}

// TestLorePipelineResolvesOnce: lore --pipeline has the evaluation's
// series resolved once (issue 33): the series as Submit resolves it from
// the thread it stores is resolved before Check and handed to Check and
// Submit (Options.Resolved), which used to resolve the thread each (2
// resolutions counted here; lore's own resolution of the thread as
// fetched, for its summary, is not the evaluation's and is not counted).
// The series stored is the one Submit stores from the stored inputs
// alone, byte for byte. The series does not apply to the tree (a context
// line changed): the run stops at apply, before any kernel.
func TestLorePipelineResolvesOnce(t *testing.T) {
	repo := buildtest.Repo(t)
	dir := t.TempDir()
	data, err := os.ReadFile(backport)
	if err != nil {
		t.Fatal(err)
	}
	const line = "	 * set and we are preemptible. The hack here is to schedule a\n"
	if !bytes.Contains(data, []byte(line)) {
		t.Fatal("the backport thread lost the line this test changes")
	}
	mbx := filepath.Join(dir, "series.mbox")
	if err := os.WriteFile(mbx, bytes.Replace(data, []byte(line), []byte("	 * set and we are NOT preemptible. The hack here is to schedule a\n"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "patcheval.db")
	count, restore := runner.CountResolutions()
	defer restore()
	var out, errb bytes.Buffer
	code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"lore", "-m", mbx, "--pipeline", "ppc-preempt-dynamic",
		"--tree", repo, "--branch", "patcheval/test-resolves-once", "--boots", "1", "--db", db, "--out", filepath.Join(dir, "out")})
	defer exec.Command("git", "--git-dir="+repo, "branch", "-D", "patcheval/test-resolves-once").Run()
	if code == 0 || !strings.Contains(errb.String(), "evaluation 1 stopped") {
		t.Fatalf("exit %d, want the evaluation stopped at apply:\n%s", code, errb.String())
	}
	if n := count(); n != 1 {
		t.Errorf("the evaluation's series was resolved %d times, want once", n)
	}
	restore()
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.ResolvedSeries(1)
	if err != nil {
		t.Fatal(err)
	}
	in, thread, err := st.Inputs(1)
	if err != nil {
		t.Fatal(err)
	}
	var o runner.Options
	if err := json.Unmarshal(in, &o); err != nil {
		t.Fatal(err)
	}
	o.Mbox = thread
	p, err := pipelines.Builtin("ppc-preempt-dynamic")
	if err != nil {
		t.Fatal(err)
	}
	alone, err := store.Open(filepath.Join(dir, "alone.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	id, _, err := runner.Submit(context.Background(), runner.Env{Store: alone}, p, o)
	if err != nil {
		t.Fatal(err)
	}
	want, err := alone.ResolvedSeries(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || !bytes.Equal(got, want) {
		t.Errorf("the series stored (%d bytes) is not the one Submit stores from the thread (%d bytes):\n%.400s\nvs\n%.400s", len(got), len(want), got, want)
	}
}
