package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
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
