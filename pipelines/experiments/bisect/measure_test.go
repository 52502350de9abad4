package bisect

import (
	"strings"
	"testing"

	"github.com/patcheval/patcheval/pipelines"
)

// TestSingleStepPipeline: a bisection step builds and boots one variant
// (with the variant whose kernel it boots) and one benchmark, nothing
// compared, no adaptive sampling; the build recipe is the evaluation's.
func TestSingleStepPipeline(t *testing.T) {
	p, err := pipelines.Builtin("ppc-preempt-dynamic")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Single(p, "voluntary+dyn@full", "getppid")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range s.Variants {
		names = append(names, v.Name)
	}
	if strings.Join(names, ",") != "voluntary+dyn,voluntary+dyn@full" || len(s.Benchmarks) != 1 || s.Benchmarks[0].Name != "getppid" ||
		len(s.Comparisons) != 0 || len(s.Chains) != 0 || s.Repeats.MaxBoots != 0 {
		t.Fatalf("single-step pipeline: variants %v benchmarks %+v comparisons %d", names, s.Benchmarks, len(s.Comparisons))
	}
	if len(p.Variants) != 4 || len(p.Comparisons) == 0 {
		t.Fatal("Single changed the pipeline it was given")
	}
	// The step measures the commit as it is: no series to apply (the
	// runner refuses a pipeline that applies one without a series).
	if s.NeedsSeries() || s.Series.Apply {
		t.Fatalf("the step applies a series: %+v", s.Variants)
	}
	// Otherwise the step's kernel is the evaluation's: same build key as
	// the same variant with apply_series off.
	off := *p
	off.Variants = nil
	for _, v := range p.Variants {
		v.ApplySeries = false
		off.Variants = append(off.Variants, v)
	}
	full := map[string]string{}
	for _, b := range off.Builds() {
		full[b.Variant] = b.Key
	}
	for _, b := range s.Builds() {
		if full[b.Variant] != b.Key {
			t.Fatalf("build %s: key %s, the evaluation's is %s (the step would not reuse its O= directory)", b.Variant, b.Key, full[b.Variant])
		}
	}
	if !p.NeedsSeries() {
		t.Fatal("Single changed the pipeline it was given (apply_series)")
	}
	if s, err := Single(p, "", "kill"); err != nil || s.Variants[0].Name != "voluntary" {
		t.Fatalf("default variant: %v %v", s, err)
	}
	for _, bad := range [][2]string{{"nope", "kill"}, {"full", "fork"}} {
		if _, err := Single(p, bad[0], bad[1]); err == nil || !strings.Contains(err.Error(), bad[0]) && !strings.Contains(err.Error(), bad[1]) {
			t.Errorf("Single(%q, %q): %v", bad[0], bad[1], err)
		}
	}
}
