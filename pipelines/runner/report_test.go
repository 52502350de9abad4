package runner

import (
	"testing"

	"github.com/patcheval/patcheval/evaluate"
)

// TestPerfEventsText: one probe result is the report's line; different
// results (two arches) each name the variants that gave them, none lost.
func TestPerfEventsText(t *testing.T) {
	same := map[string]evaluate.Environment{"base": {PerfEvents: "software only: task-clock"}, "patched": {PerfEvents: "software only: task-clock"}}
	if got := perfEventsText(same); got != "software only: task-clock" {
		t.Errorf("same: %q", got)
	}
	two := map[string]evaluate.Environment{
		"base/x86_64": {PerfEvents: "software only: task-clock"}, "patched/x86_64": {PerfEvents: "software only: task-clock"},
		"base/ppc64le": {PerfEvents: "software and hardware: task-clock, cycles"}, "patched/ppc64le": {PerfEvents: "software and hardware: task-clock, cycles"},
		"old": {},
	}
	want := "base/ppc64le, patched/ppc64le: software and hardware: task-clock, cycles; base/x86_64, patched/x86_64: software only: task-clock"
	if got := perfEventsText(two); got != want {
		t.Errorf("two arches:\n got %q\nwant %q", got, want)
	}
	if got := perfEventsText(nil); got != "" {
		t.Errorf("none: %q", got)
	}
}
