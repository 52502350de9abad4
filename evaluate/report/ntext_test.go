package report

import (
	"strings"
	"testing"
)

// TestNTextBootRange: with adaptive sampling the variants of an undecided
// comparison boot more often (the layout test's aligned pair 40 times, the
// others 6); the samples line gives the range of boots, not the largest
// count as if every variant had it.
func TestNTextBootRange(t *testing.T) {
	r := &Report{Variants: []Variant{{Name: "a", Boots: 6}, {Name: "b", Boots: 40}, {Name: "c", Boots: 6}}}
	if got := nText(r); !strings.Contains(got, "from 6..40 boot(s) per variant") {
		t.Errorf("nText = %q, want the range of boots 6..40", got)
	}
	r = &Report{Variants: []Variant{{Name: "a", Boots: 5}, {Name: "b", Boots: 5}}}
	if got := nText(r); !strings.Contains(got, "from 5 boot(s) per variant") {
		t.Errorf("nText = %q, want 5 boot(s) per variant", got)
	}
}
