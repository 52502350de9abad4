package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/pipelines"
)

// TestPrintOutcomeVerbose: the printed report counts mechanical config
// consequences unless --verbose asks for every symbol.
func TestPrintOutcomeVerbose(t *testing.T) {
	r := &report.Report{Title: "t", Confounds: []report.Confound{{Base: "a", Other: "b", Deltas: []report.ConfigDelta{
		{Symbol: "PREEMPT_DYNAMIC", From: "n", To: "y", Requested: true},
		{Symbol: "PREEMPT_RCU", From: "n", To: "y", Highlight: true, Where: "kernel/rcu/Kconfig:21", Rule: "default y if PREEMPTION"},
		{Symbol: "INLINE_SPIN_UNLOCK_IRQ", From: "y", To: "n", Where: "kernel/Kconfig.locks:100", Rule: "depends on !PREEMPTION"},
	}}}}
	res := &pipelines.Outcome{Report: r}
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
	for _, step := range loreSteps {
		step(fs)
	}
	if fs.Lookup("verbose") == nil {
		t.Errorf("lore has no --verbose flag")
	}
}
