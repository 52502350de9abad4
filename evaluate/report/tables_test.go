package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate"
)

// TestSeedTable renders seed 002's table shape (Enforcing, Permissive,
// Disabled, SELinux tax) from samples with the thread's own 7.1 values
// (bogo-ops/s), spread by ±1%: the tax is enforcing over disabled, -26.1%
// as in the thread, with its CI from the comparison.
func TestSeedTable(t *testing.T) {
	vals := map[string]float64{"enforcing": 69107, "permissive": 70248, "disabled": 93566}
	var ss []evaluate.Sample
	for boot, f := range []float64{0.99, 1, 1.01} {
		for _, v := range []string{"disabled", "enforcing", "permissive"} {
			ss = append(ss, evaluate.Sample{Variant: v, Boot: boot, Benchmark: "stress-ng --kill 1 -t 23", Metric: "bogo-ops/s (real time)",
				Unit: "bogo-ops/s", HigherIsBetter: true, Value: vals[v] * f})
			ss = append(ss, evaluate.Sample{Variant: v, Boot: boot, Benchmark: "kill", Metric: "ns/op", Unit: "ns/op", Value: 1e9 / vals[v] * f})
		}
	}
	ss = append(ss, evaluate.Sample{Variant: "other", Benchmark: "getppid", Metric: "ns/op", Unit: "ns/op", Value: 1})
	r := &Report{Variants: []Variant{{Name: "disabled"}, {Name: "enforcing"}, {Name: "permissive"}, {Name: "other"}}}
	if err := r.AddResults(ss, Spec{Comparisons: []Pair{{"disabled", "enforcing"}}}); err != nil {
		t.Fatal(err)
	}
	r.AddTable("SELinux tax", []string{"enforcing", "permissive", "disabled"}, nil, "SELinux tax", &Pair{"disabled", "enforcing"})
	tb := r.Tables[0]
	if len(tb.Rows) != 2 {
		t.Fatalf("rows %+v, want stress-ng and kill (getppid has no sample of the columns)", tb.Rows)
	}
	sng := tb.Rows[0]
	if sng.Benchmark != "stress-ng --kill 1 -t 23" || sng.Means[0] != 69107 || sng.N[2] != 3 || sng.Change == nil {
		t.Fatalf("stress-ng row %+v", sng)
	}
	if c := sng.Change.Change; c < -26.15 || c > -26.05 {
		t.Errorf("SELinux tax %.2f%%, want the thread's -26.1%%", c)
	}
	var txt, md bytes.Buffer
	if err := WriteText(&txt, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SELinux tax\n===========", "enforcing  permissive  disabled  SELinux tax  95% CI",
		"stress-ng --kill 1 -t 23  bogo-ops/s (real time), bogo-ops/s     69,107      70,248    93,566       -26.1%",
		"kill [agent loop]", "means of 3 samples per column; SELinux tax = enforcing over disabled"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, txt.String())
		}
	}
	if !strings.Contains(md.String(), "## SELinux tax") || !strings.Contains(md.String(), "| enforcing | permissive | disabled | SELinux tax | 95% CI |") {
		t.Errorf("markdown:\n%s", md.String())
	}
}
