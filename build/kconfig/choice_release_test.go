package kconfig

import (
	"strings"
	"testing"
)

// TestDiffTreesChoiceDefault: a release that changes which member a
// choice defaults to (6.12.117's `default PROC_MEM_ALWAYS_FORCE`, 7.2.13's
// `default PROC_MEM_FORCE_PTRACE`) changed the members' values by a line
// only one tree has, though no line of the members' own changed.
func TestDiffTreesChoiceDefault(t *testing.T) {
	tree := func(def string) *Kconfig {
		return parseFiles(t, map[string]string{"Kconfig": `choice
	prompt "Allow /proc/pid/mem access override"
	default ` + def + `

config PROC_MEM_ALWAYS_FORCE
	bool "Traditional"

config PROC_MEM_FORCE_PTRACE
	bool "Require active ptrace()"

config PROC_MEM_NO_FORCE
	bool "Never"

endchoice
`})
	}
	ka, kb := tree("PROC_MEM_ALWAYS_FORCE"), tree("PROC_MEM_FORCE_PTRACE")
	a := Config{"PROC_MEM_ALWAYS_FORCE": "y"}
	b := Config{"PROC_MEM_FORCE_PTRACE": "y"}
	ch := DiffTrees(ka, kb, a, b, nil)
	if len(ch) != 2 {
		t.Fatalf("changes %+v", ch)
	}
	for _, c := range ch {
		var added, removed []string
		for _, r := range c.Rules {
			switch r.Changed {
			case "added":
				added = append(added, r.Pos.String()+" "+r.Text)
			case "removed":
				removed = append(removed, r.Pos.String()+" "+r.Text)
			}
		}
		if strings.Join(added, ";") != "Kconfig:3 default PROC_MEM_FORCE_PTRACE" ||
			strings.Join(removed, ";") != "Kconfig:3 default PROC_MEM_ALWAYS_FORCE" || c.Depth != 0 {
			t.Errorf("%s: added %q, removed %q, depth %d; want the choice's default line changed by the tree", c.Symbol, added, removed, c.Depth)
		}
	}
	// On one tree the same change is derived from the choice alone.
	for _, c := range Diff(kb, a, b, nil) {
		if c.treeChanged() {
			t.Errorf("%s marked as changed by the tree on one tree", c.Symbol)
		}
	}
}
