package runner

import (
	"strings"
	"testing"

	"github.com/patcheval/patcheval/build/kconfig"
	"github.com/patcheval/patcheval/evaluate/report"
)

// TestReleaseRules: across releases, a symbol whose own Kconfig lines
// differ between the trees is "release rule" with both trees' lines and
// file:line; a symbol whose chain starts there is too; a requested one
// stays requested.
func TestReleaseRules(t *testing.T) {
	changes := []kconfig.SymbolChange{
		{Symbol: "PREEMPT_VOLUNTARY", A: "y", B: "n", Depth: 0, Rules: []kconfig.Rule{
			{Kind: "depends on", Pos: kconfig.Pos{File: "kernel/Kconfig.preempt", Line: 40}, Text: "depends on !ARCH_NO_PREEMPT && !ARCH_HAS_PREEMPT_LAZY", Changed: "added"},
			{Kind: "depends on", Pos: kconfig.Pos{File: "kernel/Kconfig.preempt", Line: 38}, Text: "depends on !ARCH_NO_PREEMPT", Changed: "removed"},
		}},
		{Symbol: "PREEMPT_RCU", A: "n", B: "y", Depth: 3, Via: []string{"PREEMPT_VOLUNTARY", "PREEMPT_LAZY", "PREEMPTION"}, Rules: []kconfig.Rule{
			{Kind: "default", Pos: kconfig.Pos{File: "kernel/rcu/Kconfig", Line: 21}, Text: "default y if PREEMPTION", Note: "now true"},
		}},
		{Symbol: "HZ_1000", A: "n", B: "y", Requested: true},
	}
	rr := releaseRules(changes, "v6.12.117", "v7.2.13")
	want := []string{
		"v7.2.13 kernel/Kconfig.preempt:40: depends on !ARCH_NO_PREEMPT && !ARCH_HAS_PREEMPT_LAZY (line added)",
		"v6.12.117 kernel/Kconfig.preempt:38: depends on !ARCH_NO_PREEMPT (line removed)",
	}
	if strings.Join(rr["PREEMPT_VOLUNTARY"], "\n") != strings.Join(want, "\n") || len(rr) != 1 {
		t.Fatalf("release rules %q", rr)
	}
	cf := classify(changes, rr)
	kinds := map[string]string{}
	for _, d := range cf {
		kinds[d.Symbol] = d.Kind()
	}
	if kinds["PREEMPT_VOLUNTARY"] != report.KindRelease || kinds["PREEMPT_RCU"] != report.KindRelease || kinds["HZ_1000"] != report.KindRequested {
		t.Fatalf("kinds %v", kinds)
	}
	if r := cf[1].ReleaseRules; len(r) != 3 || !strings.Contains(r[0], "kernel/rcu/Kconfig:21") || !strings.Contains(r[0], "via PREEMPT_VOLUNTARY > PREEMPT_LAZY > PREEMPTION") {
		t.Errorf("PREEMPT_RCU's rules %q", r)
	}
	// On one tree (no release rules) the same changes are derived.
	for _, d := range classify(changes, nil) {
		if d.Release {
			t.Errorf("%s marked as a release change on one tree", d.Symbol)
		}
	}
}

// TestRemovedSymbolWhere: a symbol only the older release defines is
// placed at its definition there, not at B's placeless "not defined in
// this tree's Kconfig" (the report said ":0").
func TestRemovedSymbolWhere(t *testing.T) {
	ch := kconfig.SymbolChange{Symbol: "SCHED_DEBUG", A: "y", B: "n", Depth: 0, Rules: []kconfig.Rule{
		{Kind: "config", Text: "CONFIG_SCHED_DEBUG", Note: "not defined in this tree's Kconfig"},
		{Kind: "config", Pos: kconfig.Pos{File: "lib/Kconfig.debug", Line: 1303}, Text: "config SCHED_DEBUG", Changed: "removed", Note: "symbol removed in B's tree"},
	}}
	d := delta(ch)
	if d.Where != "lib/Kconfig.debug:1303" || !strings.HasPrefix(d.Rule, "config SCHED_DEBUG") {
		t.Fatalf("where %q rule %q", d.Where, d.Rule)
	}
}
